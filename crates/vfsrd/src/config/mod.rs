//! The daemon's configuration: a TOML file, parsed into plain sections and then checked
//! into a [`Plan`] in which every address, prefix, core and name is known to be usable.
//!
//! Every error names the key it is about (`interface[1].addresses[0]`, `route[3].via`) and
//! what is wrong with it, so `vfsrd --check-config` is enough to fix a file.
//!
//! ```toml
//! [router]
//! control_core = 0
//! workers = [1]            # one forwarding worker per listed core
//! fib4 = "poptrie"         # poptrie | lctrie | radix
//! fib6 = "poptrie"
//! lookup = "auto"          # Poptrie's bulk lookup: auto | avx512 | avx2 | portable (a
//!                          # path this CPU lacks falls back to auto's choice, logged)
//! flow_table = true
//! flow_protect_ms = 1000   # a flow used this recently is never evicted for a new one (the
//!                          # new flow goes uncached: counted as flow_refused); 0: plain LRU
//! batch = 64               # frames per receive batch, 1..=256
//! busy_poll_us = 0         # keep polling empty queues this long before sleeping
//! worker_priority = 10     # SCHED_FIFO priority of the workers (0: ordinary scheduling)
//! control_priority = 20    # and of the control plane, whose punts are rate-limited
//! fast_path = false        # AF_XDP ports forward established destinations in XDP; the
//!                          # egress drivers must take XDP redirects (a veth: its peer
//!                          # needs GRO on or an XDP program)
//!
//! [[interface]]
//! name = "eth1"
//! backend = "auto"         # xdp | packet | auto (AF_XDP, else AF_PACKET, logged)
//! queues = 1
//! mtu = 1500
//! addresses = ["192.0.2.1/24", "2001:db8:1::1/64"]
//! tap = "veth1"            # the host stack's view of the port (default "v" + name)
//! busy_poll = true         # AF_XDP: workers run the port's receive work (preferred busy
//!                          # polling), so a flood cannot starve them of their core
//! neighbors = 4096         # the most ARP entries and the most ND entries (each) on the
//!                          # port; a full table evicts failed, then stale ones
//!
//! [[route]]
//! prefix = "203.0.113.0/24"
//! via = ["192.0.2.2"]      # several gateways make an ECMP group
//!
//! [table]                  # a whole table: synthetic = true, or file = "path"
//! synthetic = true
//! via4 = ["192.0.2.2"]     # the gateways its routes are spread over
//!
//! [rib]                    # administrative distances (lower wins) and publication delay
//! distance = { connected = 0, static = 1, api = 5, kernel = 10, table = 15, fpm = 20 }
//! max_delay_us = 1000      # a route change reaches the workers within this
//!
//! [fpm]                    # FRR's zebra (dplane_fpm_nl) streams its routes here
//! listen = "127.0.0.1:2620"
//! table = 254              # the routing table taken (main)
//! stale_time_s = 60        # routes kept after zebra went away
//! resync_quiet_ms = 2000   # a reconnection's replay is complete after this much quiet
//!
//! [kernel]                 # mirror the kernel's routing table (BIRD, FRR without FPM,
//! table = "main"           # ip route): table name or number
//! exclude_protocols = ["kernel"]  # rtm_protocol names or numbers not mirrored
//! rcvbuf = 33554432        # netlink receive buffer (bytes), sized for a full table
//!
//! [api]                    # the control API (vfsrctl): a Unix socket, mode 0660
//! socket = "/run/vfsrd.sock"
//! group = "vfsr"           # the socket's group (default: root's)
//! metrics = "127.0.0.1:9108"  # Prometheus endpoint at /metrics ("off": none)
//!
//! [neighbor]
//! solicit_rate = 1000      # ARP requests and NS sent per second on each port, at most: a
//!                          # scan of a connected subnet would otherwise make the router
//!                          # send three for every address it tries
//!
//! [punt]                   # packets per second punted to the control plane, per class
//! arp_nd = 2000            # all but slow_path are also policed in AF_XDP ports' XDP program
//! routing = 10000          # (per receiving CPU), before the kernel sees the frames
//! icmp = 1000
//! local = 10000
//! slow_path = 2000
//! tcp_syn = 1000           # TCP SYNs to the router: their own bucket in the XDP program
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A configuration error: the key and what is wrong (`key: message`, or the message alone
/// when it is about the whole file).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{message}", .key, if .key.is_empty() { "" } else { ": " })]
pub struct ConfigError {
    /// The key, as a path (`router.workers`, `interface[0].name`); empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The error of a value that did not parse or check ([`ValueError`]), at `key`.
    fn value(key: impl Into<String>, e: &ValueError) -> ConfigError {
        ConfigError::new(key, e.to_string())
    }
}

mod check;
mod schema;

pub use check::*;
pub use schema::*;

/// Lookup engines the daemon can run live.
pub const ENGINES: &[&str] = &["poptrie", "lctrie", "radix"];

/// A checked interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Kernel name.
    pub name: String,
    /// Backend.
    pub backend: BackendChoice,
    /// Queues.
    pub queues: u32,
    /// IP MTU.
    pub mtu: u16,
    /// IPv4 addresses.
    pub addrs4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses.
    pub addrs6: Vec<(Ipv6Addr, u8)>,
    /// TAP name.
    pub tap: String,
    /// XDP attach mode.
    pub xdp_mode: XdpModeChoice,
    /// Ask for zero-copy.
    pub zero_copy: bool,
    /// AF_XDP preferred busy polling.
    pub busy_poll: bool,
    /// Neighbor table capacity (per family).
    pub neighbors: usize,
}

/// Where a checked route goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Gateways with the interface each is reached by (index into [`Plan::interfaces`]),
    /// when the route names one; without, the RIB finds the port whose subnet holds the
    /// gateway (and keeps the route unresolved while none does).
    Gateways(Vec<(IpAddr, Option<usize>)>),
    /// Directly connected on an interface.
    Connected(usize),
    /// Dropped silently.
    Blackhole,
}

/// A checked route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticRoute {
    /// The prefix (address, length); the address has no bits beyond the length.
    pub prefix: (IpAddr, u8),
    /// Where it goes.
    pub target: Target,
}

/// Where a whole table comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableSource {
    /// The synthetic full table of this seed.
    Synthetic(u64),
    /// A file.
    File(String),
}

/// A checked `[table]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablePlan {
    /// Where the routes come from.
    pub source: TableSource,
    /// IPv4 gateways (with their interfaces).
    pub via4: Vec<(IpAddr, usize)>,
    /// IPv6 gateways.
    pub via6: Vec<(IpAddr, usize)>,
}

/// A configuration known to be usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Control-plane core.
    pub control_core: usize,
    /// Worker cores.
    pub workers: Vec<usize>,
    /// IPv4 engine.
    pub fib4: String,
    /// IPv6 engine.
    pub fib6: String,
    /// Poptrie's bulk lookup, if one is chosen (else the best this CPU has).
    pub lookup: Option<vfsr_lpm::poptrie::Vector>,
    /// Flow table entries per worker (0: none).
    pub flow_entries: usize,
    /// Flow idle timeout.
    pub flow_idle_ms: u32,
    /// Flow eviction protection window.
    pub flow_protect_ms: u32,
    /// Batch size.
    pub batch: usize,
    /// Busy-poll time before sleeping.
    pub busy_poll_us: u64,
    /// Workers' `SCHED_FIFO` priority (0: ordinary scheduling).
    pub worker_priority: u8,
    /// The control plane's `SCHED_FIFO` priority (0: ordinary scheduling).
    pub control_priority: u8,
    /// XDP fast path.
    pub fast_path: bool,
    /// Symmetric RSS.
    pub rss_symmetric: bool,
    /// Interfaces; a port's index in the pipeline is its position plus one.
    pub interfaces: Vec<Interface>,
    /// Static routes.
    pub routes: Vec<StaticRoute>,
    /// A whole table.
    pub table: Option<TablePlan>,
    /// Punt rates.
    pub punt: PuntSection,
    /// `[neighbor]`.
    pub neighbor: NeighborSection,
    /// Administrative distance of each source, indexed by `vfsr_rib::Source::index`.
    pub distances: [u8; vfsr_rib::Source::COUNT],
    /// Longest delay of a route change before the workers see it.
    pub max_delay: std::time::Duration,
    /// The FPM source, if on.
    pub fpm: Option<FpmPlan>,
    /// The kernel source, if on.
    pub kernel: Option<KernelPlan>,
    /// The control API, if on.
    pub api: Option<ApiPlan>,
}

/// Where the Prometheus endpoint listens unless `[api] metrics` says otherwise.
pub const DEFAULT_METRICS: &str = "127.0.0.1:9108";

/// A checked `[api]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiPlan {
    /// The socket's path.
    pub socket: std::path::PathBuf,
    /// The socket's group.
    pub group: Option<String>,
    /// The Prometheus endpoint's address.
    pub metrics: Option<std::net::SocketAddr>,
}

/// A checked `[fpm]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FpmPlan {
    /// Where to listen.
    pub listen: std::net::SocketAddr,
    /// The session's settings.
    pub session: vfsr_router::fpm::FpmConfig,
}

/// A checked `[kernel]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// What is mirrored.
    pub mirror: vfsr_router::kernel::KernelConfig,
    /// Netlink receive buffer, bytes.
    pub rcvbuf: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[router]
workers = [1]
fib4 = "lctrie"

[[interface]]
name = "a0"
addresses = ["10.1.0.1/24", "fd00:1::1/64"]

[[interface]]
name = "b0"
backend = "packet"
addresses = ["10.2.0.1/24", "fd00:2::1/64"]
tap = "tap-b"

[[route]]
prefix = "10.9.0.0/16"
via = ["10.2.0.2", "10.2.0.3"]

[[route]]
prefix = "fd00:9::/48"
via = "fd00:2::2"

[[route]]
prefix = "192.0.2.0/24"
blackhole = true

[table]
synthetic = true
via4 = ["10.2.0.2"]
"#;

    #[test]
    fn a_good_file_becomes_a_plan() {
        let p = parse(GOOD, Some(&[0, 1])).unwrap();
        assert_eq!(p.fib4, "lctrie");
        assert_eq!(p.interfaces.len(), 2);
        assert_eq!(p.interfaces[0].tap, "va0");
        assert_eq!(p.interfaces[1].tap, "tap-b");
        assert_eq!(p.interfaces[1].backend, BackendChoice::Packet);
        assert_eq!(
            p.routes[0].target,
            Target::Gateways(vec![
                ("10.2.0.2".parse().unwrap(), None),
                ("10.2.0.3".parse().unwrap(), None)
            ])
        );
        assert_eq!(p.routes[2].target, Target::Blackhole);
        assert_eq!(p.table.as_ref().unwrap().source, TableSource::Synthetic(0));
    }

    #[test]
    fn cores_are_checked_against_those_vfsrd_may_run_on() {
        // As under a CPU affinity of cores 2 and 3 on a larger machine: cores 2 and 3 may be
        // named (a count of two would refuse them), core 0 may not (a count would take it).
        let text = GOOD.replace("workers = [1]", "workers = [2, 3]\ncontrol_core = 2");
        let p = parse(&text, Some(&[2, 3])).unwrap();
        assert_eq!(p.workers, vec![2, 3]);
        let errs: Vec<String> = parse(GOOD, Some(&[2, 3]))
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errs,
            vec![
                "router.control_core: core 0 is not one vfsrd may run on (2, 3)",
                "router.workers[0]: core 1 is not one vfsrd may run on (2, 3)",
            ]
        );
    }

    fn errors(text: &str) -> Vec<String> {
        parse(text, Some(&[0, 1]))
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn every_error_names_its_key() {
        let e = errors(
            r#"
[router]
workers = [7]
fib6 = "nope"
lookup = "sse"
batch = 0
[[interface]]
name = "this-name-is-far-too-long"
addresses = ["10.0.0.1/33", "x/24"]
mtu = 100
neighbors = 8
[[interface]]
name = "b"
backend = "dpdk"
queues = 2
[[route]]
prefix = "10.0.0.1/8"
via = "10.2.0.2"
[[route]]
prefix = "10.3.0.0/16"
via = "172.16.0.1"
interface = "nope"
[rib]
distance = { bgp = 20, static = 300 }
max_delay_us = 5000000
[fpm]
listen = "localhost"
resync_quiet_ms = 0
[neighbor]
solicit_rate = 0
[punt]
local = 20000000
tcp_syn = 20000001
[kernel]
table = "mine"
exclude_protocols = ["kernel", "gated?", 300]
rcvbuf = 100
"#,
        );
        let want = [
            "router.workers[0]: core 7 is not one vfsrd may run on (0, 1)",
            "router.fib6: unknown engine \"nope\"",
            "router.lookup: unknown lookup \"sse\"",
            "router.batch: 0 is outside",
            "interface[0].name: \"this-name-is-far-too-long\" is longer than 15 bytes",
            "interface[0].addresses[0]: \"10.0.0.1/33\": prefix length /33 is longer than /32",
            "interface[0].addresses[1]: \"x/24\": not an IPv4 or IPv6 address before the /",
            "interface[0].mtu: 100 is outside",
            "interface[0].neighbors: 8 is outside 16..=1048576",
            "interface[1].backend: unknown backend \"dpdk\"",
            "interface[1].queues: 2 queues but 1 worker(s)",
            "route[0].prefix: \"10.0.0.1/8\" has bits set beyond /8",
            "route[1].interface: \"nope\" is not a configured interface",
            "rib.distance.bgp: unknown source",
            "rib.distance.static: 300 is outside 0..=255",
            "rib.max_delay_us: more than a second",
            "fpm.listen: \"localhost\" is not address:port",
            "fpm.resync_quiet_ms: 0 is outside",
            "neighbor.solicit_rate: 0 is outside 1..=1000000",
            "punt.local: 20000000 packets/s is not a limit",
            "punt.tcp_syn: 20000001 packets/s is not a limit",
            "kernel.table: unknown table \"mine\"",
            "kernel.exclude_protocols[1]: unknown protocol \"gated?\"",
            "kernel.exclude_protocols[2]: protocol 300 is more than 255",
            "kernel.rcvbuf: 100 bytes is outside",
        ];
        for w in want {
            assert!(
                e.iter().any(|x| x.starts_with(w)),
                "missing {w:?} in {e:#?}"
            );
        }
    }

    #[test]
    fn route_sources_and_distances() {
        let p = parse(GOOD, Some(&[0, 1])).unwrap();
        assert!(p.fpm.is_none() && p.kernel.is_none());
        assert_eq!(p.distances[vfsr_rib::Source::Fpm.index()], 20);
        assert_eq!(p.max_delay, std::time::Duration::from_millis(1));
        let text = format!(
            "{GOOD}\n[rib]\ndistance = {{ fpm = 5, kernel = 30 }}\nmax_delay_us = 200\n\
             [fpm]\nlisten = \"127.0.0.1:2621\"\nstale_time_s = 10\n\
             [kernel]\ntable = 100\nexclude_protocols = [\"kernel\", \"bird\", 4]\n"
        );
        let p = parse(&text, Some(&[0, 1])).unwrap();
        assert_eq!(p.distances[vfsr_rib::Source::Fpm.index()], 5);
        assert_eq!(p.distances[vfsr_rib::Source::Kernel.index()], 30);
        assert_eq!(p.distances[vfsr_rib::Source::Static.index()], 1);
        assert_eq!(p.max_delay, std::time::Duration::from_micros(200));
        let f = p.fpm.unwrap();
        assert_eq!(f.listen.to_string(), "127.0.0.1:2621");
        assert_eq!(f.session.stale_time, std::time::Duration::from_secs(10));
        assert_eq!(f.session.resync_quiet, std::time::Duration::from_secs(2));
        assert_eq!(f.session.table, 254);
        let k = p.kernel.unwrap();
        assert_eq!(k.mirror.table, 100);
        assert_eq!(k.mirror.exclude_protocols, vec![2, 12, 4]);
        assert_eq!(k.rcvbuf, 32 << 20);
        let off = parse(&format!("{GOOD}\n[fpm]\nenabled = false\n"), Some(&[0, 1])).unwrap();
        assert!(off.fpm.is_none());
        // A gateway on no interface's subnet is accepted: the RIB keeps it unresolved.
        let far = parse(
            &format!("{GOOD}\n[[route]]\nprefix = \"10.7.0.0/16\"\nvia = \"172.16.0.1\"\n"),
            Some(&[0, 1]),
        )
        .unwrap();
        assert_eq!(
            far.routes.last().unwrap().target,
            Target::Gateways(vec![("172.16.0.1".parse().unwrap(), None)])
        );
    }

    #[test]
    fn scheduling_and_fast_path_keys() {
        let p = parse(GOOD, Some(&[0, 1])).unwrap();
        assert_eq!((p.worker_priority, p.control_priority), (10, 20));
        assert_eq!(p.busy_poll_us, 0);
        assert_eq!((p.flow_idle_ms, p.flow_protect_ms), (30_000, 1_000));
        assert!(!p.fast_path);
        assert!(p.interfaces.iter().all(|i| i.busy_poll));
        let text = GOOD.replacen(
            "[router]",
            "[router]\nworker_priority = 0\ncontrol_priority = 99\nfast_path = true\nflow_protect_ms = 0",
            1,
        );
        let p = parse(&text, Some(&[0, 1])).unwrap();
        assert_eq!(p.flow_protect_ms, 0);
        assert_eq!((p.worker_priority, p.control_priority), (0, 99));
        assert!(p.fast_path);
        let e = errors("[router]\nworker_priority = 100\ncontrol_priority = 250\n[[interface]]\nname = \"a\"\n");
        assert!(
            e.iter()
                .any(|x| x.starts_with("router.worker_priority: 100 is outside 0..=99")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|x| x.starts_with("router.control_priority: 250 is outside")),
            "{e:?}"
        );
        let e = errors("[router]\nworker_priority = 300\n");
        assert!(
            e[0].starts_with("router.worker_priority: 300 is outside"),
            "{e:?}"
        );
    }

    #[test]
    fn the_api_section_is_checked() {
        let p = parse(GOOD, Some(&[0, 1])).unwrap();
        let api = p.api.unwrap();
        assert_eq!(api.socket, std::path::Path::new(vfsr_api::DEFAULT_SOCKET));
        assert_eq!(api.metrics, Some(DEFAULT_METRICS.parse().unwrap()));
        let p = parse(
            &format!("{GOOD}\n[api]\nmetrics = \"off\"\n"),
            Some(&[0, 1]),
        )
        .unwrap();
        assert_eq!(p.api.unwrap().metrics, None);
        let p = parse(&format!("{GOOD}\n[api]\nenabled = false\n"), Some(&[0, 1])).unwrap();
        assert!(p.api.is_none());
        let p = parse(
            &format!("{GOOD}\n[api]\nsocket = \"/tmp/x.sock\"\ngroup = \"vfsr\"\nmetrics = \"127.0.0.1:9108\"\n"),
            Some(&[0, 1]),
        )
        .unwrap();
        let api = p.api.unwrap();
        assert_eq!(api.group.as_deref(), Some("vfsr"));
        assert_eq!(api.metrics, Some("127.0.0.1:9108".parse().unwrap()));
        let e = errors(&format!(
            "{GOOD}\n[api]\nsocket = \"rel.sock\"\ngroup = \"a b\"\nmetrics = \"nowhere\"\n"
        ));
        for key in ["api.socket", "api.group", "api.metrics"] {
            assert!(e.iter().any(|x| x.starts_with(key)), "{key}: {e:?}");
        }
    }

    #[test]
    fn syntax_and_unknown_keys_are_errors() {
        let e = errors("[router]\nworkres = [1]\n");
        assert!(
            e[0].starts_with("line 2: ") && e[0].contains("workres"),
            "{e:?}"
        );
        let e = errors("[[interface]]\nname = \"a\"\naddresses = [\"10.0.0.1/24\"\n");
        assert_eq!(e.len(), 1, "{e:?}");
        let e = errors("");
        assert!(e[0].starts_with("interface: no [[interface]]"), "{e:?}");
    }

    #[test]
    fn duplicates_and_family_mismatches_are_caught() {
        let e = errors(
            r#"
[[interface]]
name = "a"
addresses = ["10.0.0.1/24"]
tap = "b"
[[interface]]
name = "b"
addresses = ["10.0.0.1/24"]
[[route]]
prefix = "fd00::/16"
via = "10.0.0.2"
[table]
synthetic = true
file = "x"
"#,
        );
        for w in [
            "interface[1].name: \"b\" is listed twice",
            "interface[1].addresses: 10.0.0.1 is used twice",
            "route[0].via: 10.0.0.2 is not an IPv6 address",
            "table: give either synthetic = true or file",
        ] {
            assert!(
                e.iter().any(|x| x.starts_with(w)),
                "missing {w:?} in {e:#?}"
            );
        }
    }

    #[test]
    fn cidr_parsing() {
        assert_eq!(
            parse_cidr("10.0.0.0/8", true).unwrap(),
            ("10.0.0.0".parse().unwrap(), 8)
        );
        assert!(parse_cidr("10.0.0.1/32", true).is_ok());
        assert!(parse_cidr("0.0.0.0/0", true).is_ok());
        assert!(parse_cidr("::/0", true).is_ok());
        assert!(parse_cidr("fd00::1/128", true).is_ok());
        assert!(parse_cidr("fd00::1/127", true).is_err());
        assert!(parse_cidr("224.0.0.1/24", false).is_err());
        assert!(parse_cidr("10.0.0.1", false).is_err());
        assert_eq!(default_tap("a-very-long-nam"), "va-very-long-na");
    }
}
