//! vfsrd's control API (`vfsrd::api::Answers`) on arbitrary client bytes, against a small
//! router in memory (two ports, a configured route). The input is what one client sends, cut
//! into reads at each zero byte (a request cannot hold one); each read is appended to the
//! client's buffer and every complete line in it answered, as the server does.
//!
//! Nothing may panic. Every line gets exactly one answer, in order, and every answer is a JSON
//! line (`ok` with data, or an error); a rest too long to be a request gets one more answer and
//! ends the connection. The routes added and removed through the API are modelled from the
//! answers: at the end the RIB holds exactly the model's API routes, a withdrawal of a route
//! the model holds never fails, and the published FIB answers what the RIB says. A listing of
//! the RIB or the FIB lists every row it counts (this router's are never cut).

#![no_main]

/// The router in memory that the API's own tests use.
#[path = "../../crates/vfsrd/tests/api_fixture/mod.rs"]
mod api_fixture;
/// The FIB-against-RIB check the targets that change a RIB end with.
#[path = "shared/fib_agrees.rs"]
mod fib_agrees;

use std::collections::BTreeMap;

use api_fixture::{api_routes, Api};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use vfsr_api::{parse_request, Answer, Request};
use vfsr_rib::{IpPrefix, Source};

/// Applies what the request on `line` did, by its answer, to the model of API routes.
fn model_step(model: &mut BTreeMap<IpPrefix, usize>, line: &[u8], a: &Answer) {
    let Ok(req) = parse_request(line) else {
        assert!(!a.ok, "a line that is not a request was answered ok: {a:?}");
        return;
    };
    let data = a.data.as_ref();
    match req {
        Request::RouteAdd { .. } if a.ok => {
            let prefix = data
                .and_then(|d| d.get("prefix"))
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<IpPrefix>().ok())
                .expect("an added route's answer names its prefix");
            let n = data
                .and_then(|d| d.get("routes"))
                .and_then(Value::as_u64)
                .expect("an added route's answer counts its routes");
            model.insert(prefix, n as usize);
        }
        Request::RouteDel { prefix } => match prefix.parse::<IpPrefix>() {
            Ok(p) => {
                let held = model.remove(&p).is_some();
                assert_eq!(
                    a.ok, held,
                    "withdrawal of {p}, the model holding it: {held}, {a:?}"
                );
            }
            Err(_) => assert!(!a.ok),
        },
        // A listing of this small router is never cut: it lists every row it counts, and the
        // whole RIB's unresolved rows are as many as it says.
        Request::ShowRib { .. } | Request::ShowRoute { .. } if a.ok => {
            let rows = data
                .and_then(|d| d.get("routes"))
                .and_then(Value::as_array)
                .expect("a listing has rows");
            let total = data.and_then(|d| d.get("total")).and_then(Value::as_u64);
            assert_eq!(Some(rows.len() as u64), total, "{a:?}");
            if let Request::ShowRib { prefix: None } = req {
                let unresolved = rows.iter().filter(|r| r["unresolved"] == true).count();
                let said = data
                    .and_then(|d| d.get("unresolved"))
                    .and_then(Value::as_u64);
                assert_eq!(Some(unresolved as u64), said, "{a:?}");
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut api = Api::new();
    let mut model: BTreeMap<IpPrefix, usize> = BTreeMap::new();
    let (mut inbuf, mut out) = (Vec::new(), Vec::new());
    for read in data.split(|b| *b == 0) {
        // The lines this read completes, as the server will take them.
        inbuf.extend_from_slice(read);
        let mut lines = Vec::new();
        let mut rest = inbuf.as_slice();
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            lines.push(rest[..=nl].to_vec());
            rest = &rest[nl + 1..];
        }
        let rest_len = rest.len();
        out.clear();
        let close = api.take_lines(&mut inbuf, &mut out);
        let text = std::str::from_utf8(&out).expect("answers are UTF-8");
        let got: Vec<Answer> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("an answer is one JSON line"))
            .collect();
        for a in &got {
            assert_eq!(a.ok, a.data.is_some(), "{a:?}");
            assert_eq!(a.ok, a.error.is_none(), "{a:?}");
        }
        assert_eq!(got.len(), lines.len() + usize::from(close), "{lines:?}");
        for (line, a) in lines.iter().zip(&got) {
            model_step(&mut model, line, a);
        }
        if close {
            assert!(rest_len > vfsr_api::MAX_REQUEST && inbuf.is_empty());
            assert!(!got.last().is_some_and(|a| a.ok));
            break;
        }
        assert_eq!(inbuf.len(), rest_len);
    }

    // The RIB holds the model's API routes, and no others.
    for (p, n) in &model {
        assert_eq!(api_routes(&api.c, p), *n, "API routes of {p}");
    }
    let c = &mut api.c;
    let rib = c.router.rib();
    let held = rib.v4().routes_by_source()[Source::Api.index()]
        + rib.v6().routes_by_source()[Source::Api.index()];
    assert_eq!(held, model.values().sum::<usize>());

    // What the RIB says is what the published FIB answers.
    c.router.publish().expect("a small table publishes");
    fib_agrees::assert_fib_agrees(c.router.route_table());
});
