//! The control API's answering, without a socket: request lines in, answer lines out, through
//! `vfsrd::api::Answers` on a control plane in memory. What a client sends decides what the
//! RIB and FIB hold; every line gets one answer, in order; a line that is not a request is
//! answered with an error and changes nothing; a rest too long to be a request closes the
//! connection.

mod api_fixture;

use std::net::IpAddr;

use api_fixture::{Api, C};
use serde_json::Value;
use vfsr_api::{Answer, MAX_REQUEST};
use vfsr_lpm::Lpm;
use vfsr_rib::IpPrefix;

/// Sends `bytes` as the client's input: the answers, the input left over, and whether the
/// connection is to be closed.
fn send(api: &mut Api, bytes: &[u8]) -> (Vec<Answer>, usize, bool) {
    let (mut inbuf, mut out) = (bytes.to_vec(), Vec::new());
    let close = api.take_lines(&mut inbuf, &mut out);
    let text = String::from_utf8(out).expect("answers are UTF-8");
    let answers = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each answer is a JSON line"))
        .collect();
    (answers, inbuf.len(), close)
}

/// The API's routes for `prefix` in the RIB.
fn api_routes(c: &C, prefix: &str) -> usize {
    api_fixture::api_routes(c, &prefix.parse::<IpPrefix>().expect("a prefix"))
}

/// What the published FIB answers for `addr`: the next-hop index.
fn fib(c: &C, addr: &str) -> u32 {
    let (r4, r6, _) = c.router.route_table().readers();
    match addr.parse::<IpAddr>().expect("an address") {
        IpAddr::V4(a) => r4.load().engine.lookup(u32::from(a)),
        IpAddr::V6(a) => r6.load().engine.lookup(u128::from(a)),
    }
}

fn field<'a>(a: &'a Answer, key: &str) -> &'a Value {
    a.data
        .as_ref()
        .and_then(|d| d.get(key))
        .unwrap_or(&Value::Null)
}

#[test]
fn routes_added_and_removed_through_the_api_reach_the_fib() {
    let mut api = Api::new();
    assert_eq!(fib(&api.c, "203.0.113.9"), 0, "no route before the request");
    let (ans, rest, close) = send(
        &mut api,
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\",\"via\":[\"192.0.2.7\"]}\n\
          {\"cmd\":\"route-add\",\"prefix\":\"2001:db8:100::/48\",\"via\":[\"2001:db8::9\",\"2001:db8::a\"]}\n\
          {\"cmd\":\"route-get\",\"addr\":\"203.0.113.9\"}\n",
    );
    assert_eq!((ans.len(), rest, close), (3, 0, false));
    assert!(ans.iter().all(|x| x.ok), "{ans:?}");
    assert_eq!(field(&ans[1], "routes"), 2);
    assert_eq!(field(&ans[2], "prefix"), "203.0.113.0/24");
    assert_eq!(field(&ans[2], "source"), "api");
    assert_eq!(api_routes(&api.c, "203.0.113.0/24"), 1);
    assert_eq!(api_routes(&api.c, "2001:db8:100::/48"), 2);
    assert_ne!(fib(&api.c, "203.0.113.9"), 0);
    assert_ne!(fib(&api.c, "2001:db8:100::1"), 0);

    let (ans, _, _) = send(
        &mut api,
        b"{\"cmd\":\"route-del\",\"prefix\":\"203.0.113.0/24\"}\n\
          {\"cmd\":\"route-del\",\"prefix\":\"203.0.113.0/24\"}\n",
    );
    assert!(ans[0].ok, "{ans:?}");
    assert!(!ans[1].ok, "a second withdrawal finds nothing: {ans:?}");
    assert_eq!(api_routes(&api.c, "203.0.113.0/24"), 0);
    assert_eq!(fib(&api.c, "203.0.113.9"), 0);
    assert_eq!(
        api_routes(&api.c, "2001:db8:100::/48"),
        2,
        "the other route stays"
    );
}

#[test]
fn lines_that_are_not_requests_get_an_error_each_and_change_nothing() {
    let mut api = Api::new();
    let before = api.c.router.rib().v4().route_count() + api.c.router.rib().v6().route_count();
    let lines: [&[u8]; 9] = [
        b"not json\n",
        b"{\"cmd\":\"bogus\"}\n",
        b"\xff\xfe\n",
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\"}\n",
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\",\"via\":[\"2001:db8::1\"]}\n",
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/33\",\"via\":[\"192.0.2.7\"]}\n",
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\",\"via\":[\"192.0.2.7\"],\"blackhole\":true}\n",
        b"{\"cmd\":\"route-del\",\"prefix\":\"198.51.100.0/24\"}\n",
        b"{\"cmd\":\"route-get\",\"addr\":\"192.0.2\"}\n",
    ];
    let input: Vec<u8> = lines.concat();
    let (ans, rest, close) = send(&mut api, &input);
    assert_eq!((ans.len(), rest, close), (lines.len(), 0, false));
    for (x, line) in ans.iter().zip(lines) {
        assert!(!x.ok && x.error.is_some(), "{:?}: {x:?}", line);
    }
    let after = api.c.router.rib().v4().route_count() + api.c.router.rib().v6().route_count();
    assert_eq!(after, before);
    assert_ne!(
        fib(&api.c, "198.51.100.1"),
        0,
        "the configured route is not the API's to remove"
    );
}

#[test]
fn a_partial_line_waits_and_an_oversized_one_closes() {
    let mut api = Api::new();
    let (ans, rest, close) = send(&mut api, b"{\"cmd\":\"show-nexthops\"}\n{\"cmd\":");
    assert_eq!((ans.len(), rest, close), (1, 7, false));
    assert!(ans[0].ok);

    let long = vec![b' '; MAX_REQUEST + 1];
    let (ans, rest, close) = send(&mut api, &long);
    assert_eq!((ans.len(), rest, close), (1, 0, true));
    assert!(!ans[0].ok);

    // The same length with its newline is one request too long: an error, not a close.
    let mut line = long.clone();
    line.push(b'\n');
    let (ans, rest, close) = send(&mut api, &line);
    assert_eq!((ans.len(), rest, close), (1, 0, false));
    assert!(!ans[0].ok);
}

#[test]
fn a_route_through_a_gateway_no_port_reaches_is_kept_and_shown_unresolved() {
    let mut api = Api::new();
    let (ans, _, _) = send(
        &mut api,
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\",\"via\":[\"192.0.2.7\",\"172.16.0.1\"]}\n\
          {\"cmd\":\"show-rib\",\"prefix\":\"203.0.113.0/24\"}\n\
          {\"cmd\":\"show-rib\"}\n",
    );
    assert!(ans.iter().all(|x| x.ok), "{ans:?}");
    assert_eq!(field(&ans[0], "routes"), 2);
    assert_eq!(field(&ans[0], "unresolved"), 1);
    let rows = field(&ans[1], "routes").as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let unresolved: Vec<&Value> = rows.iter().filter(|r| r["unresolved"] == true).collect();
    assert_eq!(unresolved.len(), 1, "{rows:?}");
    assert_eq!(unresolved[0]["nexthop"], "via 172.16.0.1");
    // The whole RIB lists as many rows as it counts.
    let all = field(&ans[2], "routes").as_array().expect("rows").len();
    assert_eq!(serde_json::json!(all), *field(&ans[2], "total"));
    assert_ne!(
        fib(&api.c, "203.0.113.9"),
        0,
        "the resolved gateway carries the prefix"
    );
}

/// The prefixes of a listing's rows.
fn prefixes(a: &Answer) -> Vec<String> {
    field(a, "routes")
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| r["prefix"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn listings_filter_by_source_and_prefix_and_show_every_ecmp_member() {
    let mut api = Api::new();
    let (ans, _, _) = send(
        &mut api,
        b"{\"cmd\":\"route-add\",\"prefix\":\"203.0.113.0/24\",\"via\":[\"192.0.2.7\"]}\n\
          {\"cmd\":\"route-add\",\"prefix\":\"2001:db8:100::/48\",\"via\":[\"2001:db8::9\",\"2001:db8::a\"]}\n\
          {\"cmd\":\"show-route\",\"source\":\"api\"}\n\
          {\"cmd\":\"show-route\",\"source\":\"static\"}\n\
          {\"cmd\":\"show-route\",\"prefix\":\"203.0.0.0/8\"}\n\
          {\"cmd\":\"route-get\",\"addr\":\"2001:db8:100::1\"}\n\
          {\"cmd\":\"show-route\",\"source\":\"bgp\"}\n",
    );
    assert_eq!(ans.len(), 7);
    assert!(ans[..6].iter().all(|x| x.ok), "{ans:?}");
    assert_eq!(
        prefixes(&ans[2]),
        ["203.0.113.0/24", "2001:db8:100::/48"],
        "{:?}",
        ans[2]
    );
    assert_eq!(prefixes(&ans[3]), ["198.51.100.0/24"], "{:?}", ans[3]);
    assert_eq!(prefixes(&ans[4]), ["203.0.113.0/24"], "{:?}", ans[4]);
    assert_eq!(field(&ans[4], "total"), 1);
    let hops = field(&ans[5], "nexthops").as_array().expect("next hops");
    let mut gws: Vec<&str> = hops.iter().filter_map(|h| h["gateway"].as_str()).collect();
    gws.sort_unstable();
    assert_eq!(gws, ["2001:db8::9", "2001:db8::a"], "{:?}", ans[5]);
    assert!(hops.iter().all(|h| h["port"] == "p1"), "{hops:?}");
    assert!(!ans[6].ok, "an unknown source is refused: {:?}", ans[6]);
}
