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
//! flow_table = true
//! batch = 32
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
//! [punt]                   # packets per second punted to the control plane, per class
//! arp_nd = 2000
//! routing = 10000
//! icmp = 1000
//! local = 10000
//! slow_path = 1000
//! ```

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Deserialize;
use vfsr_lpm::prefix::parse_addr_len;
use vfsr_lpm::Prefix;

/// A configuration error: the key and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// The file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// `[router]`.
    #[serde(default)]
    pub router: RouterSection,
    /// `[[interface]]`.
    #[serde(default, rename = "interface")]
    pub interfaces: Vec<InterfaceSection>,
    /// `[[route]]`.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteSection>,
    /// `[table]`.
    pub table: Option<TableSection>,
    /// `[punt]`.
    #[serde(default)]
    pub punt: PuntSection,
    /// `[rib]`.
    #[serde(default)]
    pub rib: RibSection,
    /// `[fpm]`: present to take routes from zebra.
    pub fpm: Option<FpmSection>,
    /// `[kernel]`: present to mirror the kernel's routing table.
    pub kernel: Option<KernelSection>,
    /// `[api]`.
    #[serde(default)]
    pub api: ApiSection,
}

/// `[api]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSection {
    /// `false` turns the control API off.
    pub enabled: bool,
    /// The Unix socket's path.
    pub socket: String,
    /// The socket's group (members may use `vfsrctl`); absent: root's.
    pub group: Option<String>,
    /// `address:port` of the Prometheus endpoint (`"off"`: none).
    pub metrics: String,
}

impl Default for ApiSection {
    fn default() -> Self {
        ApiSection {
            enabled: true,
            socket: vfsr_api::DEFAULT_SOCKET.into(),
            group: None,
            metrics: DEFAULT_METRICS.into(),
        }
    }
}

/// `[rib]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RibSection {
    /// Administrative distance per source name.
    pub distance: std::collections::BTreeMap<String, u32>,
    /// Longest delay of a route change before the workers see it, microseconds.
    pub max_delay_us: Option<u64>,
}

/// `[fpm]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FpmSection {
    /// `false` turns the source off while keeping the section.
    pub enabled: bool,
    /// `address:port` to listen on.
    pub listen: String,
    /// The routing table taken.
    pub table: u32,
    /// Seconds routes are kept after zebra went away.
    pub stale_time_s: u64,
    /// Milliseconds of quiet that end a reconnection's replay.
    pub resync_quiet_ms: u64,
}

impl Default for FpmSection {
    fn default() -> Self {
        FpmSection {
            enabled: true,
            listen: "127.0.0.1:2620".into(),
            table: 254,
            stale_time_s: 60,
            resync_quiet_ms: 2000,
        }
    }
}

/// A routing table or protocol given by name or number.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum NameOrNumber {
    /// `254`.
    Number(u32),
    /// `"main"`.
    Name(String),
}

/// `[kernel]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelSection {
    /// `false` turns the source off while keeping the section.
    pub enabled: bool,
    /// The routing table mirrored.
    pub table: NameOrNumber,
    /// Protocols not mirrored.
    pub exclude_protocols: Vec<NameOrNumber>,
    /// Netlink receive buffer, bytes.
    pub rcvbuf: u64,
}

impl Default for KernelSection {
    fn default() -> Self {
        KernelSection {
            enabled: true,
            table: NameOrNumber::Name("main".into()),
            exclude_protocols: vec![NameOrNumber::Name("kernel".into())],
            rcvbuf: 32 << 20,
        }
    }
}

/// `[router]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterSection {
    /// The core of the control plane.
    pub control_core: usize,
    /// One forwarding worker per listed core.
    pub workers: Vec<usize>,
    /// IPv4 lookup engine.
    pub fib4: String,
    /// IPv6 lookup engine.
    pub fib6: String,
    /// Whether workers keep a flow table.
    pub flow_table: bool,
    /// Flow-table entries per worker.
    pub flow_entries: usize,
    /// Flow idle timeout, milliseconds.
    pub flow_idle_ms: u32,
    /// Packets per receive batch.
    pub batch: usize,
    /// Microseconds a worker keeps polling an empty queue before it sleeps in `poll`.
    pub busy_poll_us: u64,
    /// Real-time priority of the forwarding workers (`SCHED_FIFO` 1..=99; 0 keeps the
    /// ordinary scheduler).
    pub worker_priority: u32,
    /// Real-time priority of the control plane's thread (`SCHED_FIFO` 1..=99; 0 keeps the
    /// ordinary scheduler).
    pub control_priority: u32,
    /// Let the XDP programs forward frames to destinations the workers already decided
    /// (see `vfsr_io::xdp::FastPath`); needs egress drivers that take XDP redirects.
    pub fast_path: bool,
    /// Software RSS hashes both directions of a flow alike.
    pub rss_symmetric: bool,
}

impl Default for RouterSection {
    fn default() -> Self {
        RouterSection {
            control_core: 0,
            workers: vec![1],
            fib4: "poptrie".into(),
            fib6: "poptrie".into(),
            flow_table: true,
            flow_entries: 1 << 16,
            flow_idle_ms: 30_000,
            batch: 32,
            busy_poll_us: 0,
            worker_priority: 10,
            control_priority: 20,
            fast_path: false,
            rss_symmetric: true,
        }
    }
}

/// `[[interface]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceSection {
    /// The kernel's name of the interface.
    pub name: String,
    /// `xdp`, `packet` or `auto`.
    #[serde(default = "default_backend")]
    pub backend: String,
    /// Receive queues to open (one per worker at most).
    #[serde(default = "one")]
    pub queues: u32,
    /// IP MTU.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// The router's addresses on this link, `addr/len`.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// The TAP device's name.
    pub tap: Option<String>,
    /// XDP attach mode: `auto`, `native` or `generic`.
    #[serde(default = "default_xdp_mode")]
    pub xdp_mode: String,
    /// Ask for zero-copy AF_XDP (falls back to copy mode when the driver has none).
    #[serde(default)]
    pub zero_copy: bool,
    /// AF_XDP: the workers run the interface's receive work themselves (preferred busy
    /// polling) instead of leaving it to the kernel's NAPI context.
    #[serde(default = "yes")]
    pub busy_poll: bool,
}

fn yes() -> bool {
    true
}

fn default_backend() -> String {
    "auto".into()
}
fn default_xdp_mode() -> String {
    "auto".into()
}
fn one() -> u32 {
    1
}
fn default_mtu() -> u32 {
    1500
}

/// `[[route]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSection {
    /// `addr/len`.
    pub prefix: String,
    /// Gateways (one string or a list); several make an ECMP group.
    #[serde(default)]
    pub via: Via,
    /// The outgoing interface (needed for a directly connected route without `via`).
    pub interface: Option<String>,
    /// `true` drops matching packets silently.
    #[serde(default)]
    pub blackhole: bool,
}

/// One gateway or a list of them.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum Via {
    /// None given.
    #[default]
    None,
    /// `via = "addr"`.
    One(String),
    /// `via = ["addr", ...]`.
    Many(Vec<String>),
}

impl Via {
    fn list(&self) -> Vec<String> {
        match self {
            Via::None => Vec::new(),
            Via::One(s) => vec![s.clone()],
            Via::Many(v) => v.clone(),
        }
    }
}

/// `[table]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSection {
    /// The embedded synthetic full table.
    #[serde(default)]
    pub synthetic: bool,
    /// Its seed.
    #[serde(default)]
    pub seed: u64,
    /// A table file (text or MRT, gzip or not).
    pub file: Option<String>,
    /// IPv4 gateways the table's IPv4 routes are spread over.
    #[serde(default)]
    pub via4: Vec<String>,
    /// IPv6 gateways for its IPv6 routes.
    #[serde(default)]
    pub via6: Vec<String>,
}

/// `[punt]`: packets per second per class handed to the control plane.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct PuntSection {
    /// ARP and neighbor discovery.
    pub arp_nd: u32,
    /// Routing protocols (BGP, OSPF, link-local multicast).
    pub routing: u32,
    /// ICMP to the router.
    pub icmp: u32,
    /// Other traffic to the router (ssh, ...).
    pub local: u32,
    /// Packets the pipeline cannot forward itself (IP options, unresolved next hops).
    pub slow_path: u32,
}

impl Default for PuntSection {
    fn default() -> Self {
        PuntSection {
            arp_nd: 2_000,
            routing: 10_000,
            icmp: 1_000,
            local: 10_000,
            slow_path: 2_000,
        }
    }
}

/// The I/O backend of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// AF_XDP only: failing to attach is an error.
    Xdp,
    /// AF_PACKET only.
    Packet,
    /// AF_XDP, falling back to AF_PACKET (logged).
    Auto,
}

/// XDP attach mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpModeChoice {
    /// Native, else generic.
    Auto,
    /// In the driver.
    Native,
    /// On socket buffers (any interface, slower).
    Generic,
}

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
    /// Flow table entries per worker (0: none).
    pub flow_entries: usize,
    /// Flow idle timeout.
    pub flow_idle_ms: u32,
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

/// Routing table names of `/etc/iproute2/rt_tables` that everyone has.
fn table_number(t: &NameOrNumber) -> Result<u32, String> {
    match t {
        NameOrNumber::Number(n) if *n > 0 => Ok(*n),
        NameOrNumber::Number(_) => Err("table 0 is not a routing table".into()),
        NameOrNumber::Name(n) => match n.as_str() {
            "main" => Ok(254),
            "local" => Ok(255),
            "default" => Ok(253),
            other => other.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("unknown table {other:?} (main, local, default or a number)")
            }),
        },
    }
}

/// Protocol names of `/etc/iproute2/rt_protos` (and the routing daemons' own).
fn protocol_number(p: &NameOrNumber) -> Result<u8, String> {
    let named = match p {
        NameOrNumber::Number(n) => {
            return u8::try_from(*n).map_err(|_| format!("protocol {n} is more than 255"))
        }
        NameOrNumber::Name(n) => n.as_str(),
    };
    Ok(match named {
        "redirect" => 1,
        "kernel" => 2,
        "boot" => 3,
        "static" => 4,
        "ra" => 9,
        "dhcp" => 16,
        "keepalived" => 18,
        "babel" => 42,
        "bird" => 12,
        "zebra" => 11,
        "bgp" => 186,
        "isis" => 187,
        "ospf" => 188,
        "rip" => 189,
        "eigrp" => 192,
        other => {
            return other
                .parse::<u8>()
                .map_err(|_| format!("unknown protocol {other:?}"))
        }
    })
}

/// Parses and checks a configuration text. `cores` is the number of CPUs the machine has
/// (`None` skips the core checks).
pub fn parse(text: &str, cores: Option<usize>) -> Result<Plan, Vec<ConfigError>> {
    let file: File = toml::from_str(text).map_err(|e| vec![toml_error(text, &e)])?;
    check(&file, cores)
}

/// A TOML error with the line it is on (the message names the key for unknown or mistyped
/// fields).
fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let msg = e.message().trim().to_string();
    match e.span().and_then(|s| text.get(..s.start)) {
        Some(before) => ConfigError::new(format!("line {}", before.matches('\n').count() + 1), msg),
        None => ConfigError::new("", msg),
    }
}

/// Checks a parsed file; returns every error found, not only the first.
pub fn check(file: &File, cores: Option<usize>) -> Result<Plan, Vec<ConfigError>> {
    let mut errs = Vec::new();
    let r = &file.router;
    if r.workers.is_empty() {
        errs.push(ConfigError::new(
            "router.workers",
            "no worker core listed (give at least one, e.g. [1])",
        ));
    }
    if let Some(n) = cores {
        if r.control_core >= n {
            errs.push(ConfigError::new(
                "router.control_core",
                format!(
                    "core {} does not exist (this machine has {n})",
                    r.control_core
                ),
            ));
        }
        for (i, c) in r.workers.iter().enumerate() {
            if *c >= n {
                errs.push(ConfigError::new(
                    format!("router.workers[{i}]"),
                    format!("core {c} does not exist (this machine has {n})"),
                ));
            }
        }
    }
    for (key, name) in [("router.fib4", &r.fib4), ("router.fib6", &r.fib6)] {
        if !ENGINES.contains(&name.as_str()) {
            errs.push(ConfigError::new(
                key,
                format!(
                    "unknown engine {name:?} (expected one of: {})",
                    ENGINES.join(", ")
                ),
            ));
        }
    }
    if !(1..=256).contains(&r.batch) {
        errs.push(ConfigError::new(
            "router.batch",
            format!("{} is outside 1..=256", r.batch),
        ));
    }
    if r.flow_table && !(1..=1 << 26).contains(&r.flow_entries) {
        errs.push(ConfigError::new(
            "router.flow_entries",
            format!("{} is outside 1..=67108864", r.flow_entries),
        ));
    }
    for (key, p) in [
        ("router.worker_priority", r.worker_priority),
        ("router.control_priority", r.control_priority),
    ] {
        if p > 99 {
            errs.push(ConfigError::new(key, format!("{p} is outside 0..=99")));
        }
    }
    if r.busy_poll_us > 1_000_000 {
        errs.push(ConfigError::new(
            "router.busy_poll_us",
            "more than one second of busy polling",
        ));
    }

    let mut interfaces = Vec::new();
    let mut names = HashSet::new();
    if file.interfaces.is_empty() {
        errs.push(ConfigError::new(
            "interface",
            "no [[interface]] given: a router needs at least one port",
        ));
    }
    for (i, s) in file.interfaces.iter().enumerate() {
        let key = |k: &str| format!("interface[{i}].{k}");
        if let Err(m) = check_ifname(&s.name) {
            errs.push(ConfigError::new(key("name"), m));
        } else if !names.insert(s.name.clone()) {
            errs.push(ConfigError::new(
                key("name"),
                format!("{:?} is listed twice", s.name),
            ));
        }
        let tap = s.tap.clone().unwrap_or_else(|| default_tap(&s.name));
        if let Err(m) = check_ifname(&tap) {
            errs.push(ConfigError::new(key("tap"), m));
        } else if tap == s.name {
            errs.push(ConfigError::new(
                key("tap"),
                "the TAP cannot have the interface's own name",
            ));
        } else if !names.insert(tap.clone()) {
            errs.push(ConfigError::new(
                key("tap"),
                format!("{tap:?} is already used by another interface or TAP"),
            ));
        }
        let backend = match s.backend.as_str() {
            "xdp" => BackendChoice::Xdp,
            "packet" => BackendChoice::Packet,
            "auto" => BackendChoice::Auto,
            other => {
                errs.push(ConfigError::new(
                    key("backend"),
                    format!("unknown backend {other:?} (expected xdp, packet or auto)"),
                ));
                BackendChoice::Auto
            }
        };
        let xdp_mode = match s.xdp_mode.as_str() {
            "auto" => XdpModeChoice::Auto,
            "native" => XdpModeChoice::Native,
            "generic" => XdpModeChoice::Generic,
            other => {
                errs.push(ConfigError::new(
                    key("xdp_mode"),
                    format!("unknown mode {other:?} (expected auto, native or generic)"),
                ));
                XdpModeChoice::Auto
            }
        };
        if s.queues == 0 || s.queues > 64 {
            errs.push(ConfigError::new(
                key("queues"),
                format!("{} is outside 1..=64", s.queues),
            ));
        } else if s.queues as usize > r.workers.len().max(1) {
            errs.push(ConfigError::new(
                key("queues"),
                format!(
                    "{} queues but {} worker(s): each queue needs a worker (fewer queues than \
                     workers are spread by software RSS)",
                    s.queues,
                    r.workers.len()
                ),
            ));
        }
        if !(1280..=9000).contains(&s.mtu) {
            errs.push(ConfigError::new(
                key("mtu"),
                format!("{} is outside 1280..=9000", s.mtu),
            ));
        }
        let mut addrs4 = Vec::new();
        let mut addrs6 = Vec::new();
        for (j, a) in s.addresses.iter().enumerate() {
            match parse_cidr(a, false) {
                Ok((IpAddr::V4(v), l)) => addrs4.push((v, l)),
                Ok((IpAddr::V6(v), l)) => addrs6.push((v, l)),
                Err(m) => errs.push(ConfigError::new(key(&format!("addresses[{j}]")), m)),
            }
        }
        interfaces.push(Interface {
            name: s.name.clone(),
            backend,
            queues: s.queues,
            mtu: u16::try_from(s.mtu).unwrap_or(1500),
            addrs4,
            addrs6,
            tap,
            xdp_mode,
            zero_copy: s.zero_copy,
            busy_poll: s.busy_poll,
        });
    }
    // One address belongs to one interface.
    let mut seen = HashSet::new();
    for (i, itf) in interfaces.iter().enumerate() {
        let all = itf
            .addrs4
            .iter()
            .map(|(a, _)| IpAddr::V4(*a))
            .chain(itf.addrs6.iter().map(|(a, _)| IpAddr::V6(*a)));
        for a in all {
            if !seen.insert(a) {
                errs.push(ConfigError::new(
                    format!("interface[{i}].addresses"),
                    format!("{a} is used twice"),
                ));
            }
        }
    }

    let mut routes = Vec::new();
    for (i, s) in file.routes.iter().enumerate() {
        let key = |k: &str| format!("route[{i}].{k}");
        let prefix = match parse_cidr(&s.prefix, true) {
            Ok(p) => p,
            Err(m) => {
                errs.push(ConfigError::new(key("prefix"), m));
                continue;
            }
        };
        let iface = match &s.interface {
            None => None,
            Some(n) => match interfaces.iter().position(|x| &x.name == n) {
                Some(p) => Some(p),
                None => {
                    errs.push(ConfigError::new(
                        key("interface"),
                        format!("{n:?} is not a configured interface"),
                    ));
                    continue;
                }
            },
        };
        let via = s.via.list();
        let target = if s.blackhole {
            if !via.is_empty() {
                errs.push(ConfigError::new(
                    key("via"),
                    "a blackhole route has no gateway",
                ));
                continue;
            }
            Target::Blackhole
        } else if via.is_empty() {
            match iface {
                Some(p) => Target::Connected(p),
                None => {
                    errs.push(ConfigError::new(
                        key("via"),
                        "give a gateway (via), an interface, or blackhole = true",
                    ));
                    continue;
                }
            }
        } else {
            match route_gateways(&via, prefix.0.is_ipv4(), iface) {
                Ok(g) => Target::Gateways(g),
                Err(m) => {
                    errs.push(ConfigError::new(key("via"), m));
                    continue;
                }
            }
        };
        routes.push(StaticRoute { prefix, target });
    }

    let table = match &file.table {
        None => None,
        Some(t) => {
            let source = match (t.synthetic, &t.file) {
                (true, None) => Some(TableSource::Synthetic(t.seed)),
                (false, Some(f)) => Some(TableSource::File(f.clone())),
                (true, Some(_)) => {
                    errs.push(ConfigError::new(
                        "table",
                        "give either synthetic = true or file, not both",
                    ));
                    None
                }
                (false, None) => {
                    errs.push(ConfigError::new(
                        "table",
                        "give synthetic = true or file = \"path\"",
                    ));
                    None
                }
            };
            let via4 = gateways(&t.via4, true, None, &interfaces)
                .map_err(|m| errs.push(ConfigError::new("table.via4", m)))
                .unwrap_or_default();
            let via6 = gateways(&t.via6, false, None, &interfaces)
                .map_err(|m| errs.push(ConfigError::new("table.via6", m)))
                .unwrap_or_default();
            if via4.is_empty() && via6.is_empty() {
                errs.push(ConfigError::new(
                    "table",
                    "no gateway for its routes: give via4 and/or via6",
                ));
            }
            source.map(|source| TablePlan { source, via4, via6 })
        }
    };
    let p = &file.punt;
    for (k, v) in [
        ("punt.arp_nd", p.arp_nd),
        ("punt.routing", p.routing),
        ("punt.icmp", p.icmp),
        ("punt.local", p.local),
        ("punt.slow_path", p.slow_path),
    ] {
        if v > 10_000_000 {
            errs.push(ConfigError::new(k, format!("{v} packets/s is not a limit")));
        }
    }
    let mut distances = [0u8; vfsr_rib::Source::COUNT];
    for src in vfsr_rib::Source::ALL {
        if let Some(d) = distances.get_mut(src.index()) {
            *d = src.default_distance();
        }
    }
    for (name, d) in &file.rib.distance {
        let key = format!("rib.distance.{name}");
        match name.parse::<vfsr_rib::Source>() {
            Err(_) => errs.push(ConfigError::new(
                key,
                "unknown source (connected, static, api, kernel, table, fpm)",
            )),
            Ok(src) => match u8::try_from(*d) {
                Ok(v) => {
                    if let Some(x) = distances.get_mut(src.index()) {
                        *x = v;
                    }
                }
                Err(_) => errs.push(ConfigError::new(key, format!("{d} is outside 0..=255"))),
            },
        }
    }
    let max_delay_us = file.rib.max_delay_us.unwrap_or(1000);
    if max_delay_us > 1_000_000 {
        errs.push(ConfigError::new(
            "rib.max_delay_us",
            "more than a second between a route change and its publication",
        ));
    }
    let fpm = match &file.fpm {
        Some(f) if f.enabled => {
            let listen = f.listen.parse::<std::net::SocketAddr>().map_err(|_| {
                errs.push(ConfigError::new(
                    "fpm.listen",
                    format!("{:?} is not address:port", f.listen),
                ))
            });
            if f.table == 0 {
                errs.push(ConfigError::new(
                    "fpm.table",
                    "table 0 is not a routing table",
                ));
            }
            if f.resync_quiet_ms == 0 || f.resync_quiet_ms > 600_000 {
                errs.push(ConfigError::new(
                    "fpm.resync_quiet_ms",
                    format!("{} is outside 1..=600000", f.resync_quiet_ms),
                ));
            }
            if f.stale_time_s > 86_400 {
                errs.push(ConfigError::new(
                    "fpm.stale_time_s",
                    format!("{} is more than a day", f.stale_time_s),
                ));
            }
            listen.ok().map(|listen| FpmPlan {
                listen,
                session: vfsr_router::fpm::FpmConfig {
                    table: f.table,
                    stale_time: std::time::Duration::from_secs(f.stale_time_s),
                    resync_quiet: std::time::Duration::from_millis(f.resync_quiet_ms),
                },
            })
        }
        _ => None,
    };
    let kernel = match &file.kernel {
        Some(k) if k.enabled => {
            let table = table_number(&k.table)
                .map_err(|m| errs.push(ConfigError::new("kernel.table", m)))
                .unwrap_or(254);
            let mut exclude = Vec::new();
            for (i, p) in k.exclude_protocols.iter().enumerate() {
                match protocol_number(p) {
                    Ok(n) => exclude.push(n),
                    Err(m) => errs.push(ConfigError::new(
                        format!("kernel.exclude_protocols[{i}]"),
                        m,
                    )),
                }
            }
            if !(64 << 10..=1 << 30).contains(&k.rcvbuf) {
                errs.push(ConfigError::new(
                    "kernel.rcvbuf",
                    format!("{} bytes is outside 64 KiB..=1 GiB", k.rcvbuf),
                ));
            }
            Some(KernelPlan {
                mirror: vfsr_router::kernel::KernelConfig {
                    table,
                    exclude_protocols: exclude,
                },
                rcvbuf: usize::try_from(k.rcvbuf).unwrap_or(32 << 20),
            })
        }
        _ => None,
    };
    let api = if file.api.enabled {
        if file.api.socket.is_empty() || !file.api.socket.starts_with('/') {
            errs.push(ConfigError::new(
                "api.socket",
                format!("{:?} is not an absolute path", file.api.socket),
            ));
        }
        if let Some(g) = &file.api.group {
            if g.is_empty() || g.contains(|c: char| c.is_whitespace() || c == ':') {
                errs.push(ConfigError::new(
                    "api.group",
                    format!("{g:?} is not a group name"),
                ));
            }
        }
        let metrics = match file.api.metrics.as_str() {
            "off" => None,
            m => match m.parse::<std::net::SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    errs.push(ConfigError::new(
                        "api.metrics",
                        format!("{m:?} is not address:port (or \"off\")"),
                    ));
                    None
                }
            },
        };
        Some(ApiPlan {
            socket: file.api.socket.clone().into(),
            group: file.api.group.clone(),
            metrics,
        })
    } else {
        None
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Plan {
        api,
        distances,
        max_delay: std::time::Duration::from_micros(max_delay_us),
        fpm,
        kernel,
        control_core: r.control_core,
        workers: r.workers.clone(),
        fib4: r.fib4.clone(),
        fib6: r.fib6.clone(),
        flow_entries: if r.flow_table { r.flow_entries } else { 0 },
        flow_idle_ms: r.flow_idle_ms,
        batch: r.batch,
        busy_poll_us: r.busy_poll_us,
        worker_priority: u8::try_from(r.worker_priority).unwrap_or(0),
        control_priority: u8::try_from(r.control_priority).unwrap_or(0),
        fast_path: r.fast_path,
        rss_symmetric: r.rss_symmetric,
        interfaces,
        routes,
        table,
        punt: file.punt,
    })
}

/// The default TAP name of interface `name`: `v` + name, cut to 15 bytes.
pub fn default_tap(name: &str) -> String {
    let mut t = format!("v{name}");
    while t.len() > 15 {
        t.pop();
    }
    t
}

fn check_ifname(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty interface name".into());
    }
    if name.len() > 15 {
        return Err(format!("{name:?} is longer than 15 bytes"));
    }
    if name == "." || name == ".." || name.chars().any(|c| c == '/' || c.is_whitespace()) {
        return Err(format!("{name:?} is not a valid interface name"));
    }
    Ok(())
}

/// Parses `addr/len` (the one reader of prefix text, `vfsr_lpm::prefix::parse_addr_len`).
/// With `prefix`, host bits beyond the length are an error; without, the address is an
/// interface address (and may not be the network or multicast address).
pub fn parse_cidr(s: &str, prefix: bool) -> Result<(IpAddr, u8), String> {
    let (addr, len) = parse_addr_len(s.trim()).map_err(|e| format!("{s:?}: {e}"))?;
    if prefix {
        let clear = match addr {
            IpAddr::V4(v) => Prefix::new(u32::from(v), len).is_ok(),
            IpAddr::V6(v) => Prefix::new(u128::from(v), len).is_ok(),
        };
        if !clear {
            return Err(format!("{s:?} has bits set beyond /{len}"));
        }
    } else if addr.is_multicast() || addr.is_unspecified() {
        return Err(format!("{addr} cannot be an interface address"));
    }
    Ok((addr, len))
}

/// Parses gateways of one family and finds the interface each is reached by: `iface` if
/// given, else the interface whose subnet holds it.
fn gateways(
    list: &[String],
    v4: bool,
    iface: Option<usize>,
    interfaces: &[Interface],
) -> Result<Vec<(IpAddr, usize)>, String> {
    let mut out = Vec::new();
    for s in list {
        let a: IpAddr = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address"))?;
        if a.is_ipv4() != v4 {
            return Err(format!(
                "{a} is not an {} address like the prefix",
                if v4 { "IPv4" } else { "IPv6" }
            ));
        }
        let p = match iface {
            Some(p) => p,
            None => interfaces
                .iter()
                .position(|i| on_link(i, a))
                .ok_or_else(|| format!("{a} is on no configured interface's subnet"))?,
        };
        if out.iter().any(|(g, _)| *g == a) {
            return Err(format!("{a} is listed twice"));
        }
        out.push((a, p));
    }
    Ok(out)
}

/// Parses the gateways of a static route: each with `iface` when the route names one, else
/// none (the RIB resolves it through the ports' subnets).
fn route_gateways(
    list: &[String],
    v4: bool,
    iface: Option<usize>,
) -> Result<Vec<(IpAddr, Option<usize>)>, String> {
    let mut out: Vec<(IpAddr, Option<usize>)> = Vec::new();
    for s in list {
        let a: IpAddr = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address"))?;
        if a.is_ipv4() != v4 {
            return Err(format!(
                "{a} is not an {} address like the prefix",
                if v4 { "IPv4" } else { "IPv6" }
            ));
        }
        if out.iter().any(|(g, _)| *g == a) {
            return Err(format!("{a} is listed twice"));
        }
        out.push((a, iface));
    }
    Ok(out)
}

fn on_link(i: &Interface, a: IpAddr) -> bool {
    match a {
        IpAddr::V4(a) => i.addrs4.iter().any(|(n, l)| {
            let m = if *l == 0 { 0 } else { u32::MAX << (32 - l) };
            u32::from(*n) & m == u32::from(a) & m && *n != a
        }),
        IpAddr::V6(a) => i.addrs6.iter().any(|(n, l)| {
            let m = if *l == 0 { 0 } else { u128::MAX << (128 - l) };
            u128::from(*n) & m == u128::from(a) & m && *n != a
        }),
    }
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
        let p = parse(GOOD, Some(2)).unwrap();
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

    fn errors(text: &str) -> Vec<String> {
        parse(text, Some(2))
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
batch = 0
[[interface]]
name = "this-name-is-far-too-long"
addresses = ["10.0.0.1/33", "x/24"]
mtu = 100
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
[kernel]
table = "mine"
exclude_protocols = ["kernel", "gated?", 300]
rcvbuf = 100
"#,
        );
        let want = [
            "router.workers[0]: core 7 does not exist",
            "router.fib6: unknown engine \"nope\"",
            "router.batch: 0 is outside",
            "interface[0].name: \"this-name-is-far-too-long\" is longer than 15 bytes",
            "interface[0].addresses[0]: \"10.0.0.1/33\": prefix length /33 is longer than /32",
            "interface[0].addresses[1]: \"x/24\": not an IPv4 or IPv6 address before the /",
            "interface[0].mtu: 100 is outside",
            "interface[1].backend: unknown backend \"dpdk\"",
            "interface[1].queues: 2 queues but 1 worker(s)",
            "route[0].prefix: \"10.0.0.1/8\" has bits set beyond /8",
            "route[1].interface: \"nope\" is not a configured interface",
            "rib.distance.bgp: unknown source",
            "rib.distance.static: 300 is outside 0..=255",
            "rib.max_delay_us: more than a second",
            "fpm.listen: \"localhost\" is not address:port",
            "fpm.resync_quiet_ms: 0 is outside",
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
        let p = parse(GOOD, Some(2)).unwrap();
        assert!(p.fpm.is_none() && p.kernel.is_none());
        assert_eq!(p.distances[vfsr_rib::Source::Fpm.index()], 20);
        assert_eq!(p.max_delay, std::time::Duration::from_millis(1));
        let text = format!(
            "{GOOD}\n[rib]\ndistance = {{ fpm = 5, kernel = 30 }}\nmax_delay_us = 200\n\
             [fpm]\nlisten = \"127.0.0.1:2621\"\nstale_time_s = 10\n\
             [kernel]\ntable = 100\nexclude_protocols = [\"kernel\", \"bird\", 4]\n"
        );
        let p = parse(&text, Some(2)).unwrap();
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
        let off = parse(&format!("{GOOD}\n[fpm]\nenabled = false\n"), Some(2)).unwrap();
        assert!(off.fpm.is_none());
        // A gateway on no interface's subnet is accepted: the RIB keeps it unresolved.
        let far = parse(
            &format!("{GOOD}\n[[route]]\nprefix = \"10.7.0.0/16\"\nvia = \"172.16.0.1\"\n"),
            Some(2),
        )
        .unwrap();
        assert_eq!(
            far.routes.last().unwrap().target,
            Target::Gateways(vec![("172.16.0.1".parse().unwrap(), None)])
        );
    }

    #[test]
    fn scheduling_and_fast_path_keys() {
        let p = parse(GOOD, Some(2)).unwrap();
        assert_eq!((p.worker_priority, p.control_priority), (10, 20));
        assert_eq!(p.busy_poll_us, 0);
        assert!(!p.fast_path);
        assert!(p.interfaces.iter().all(|i| i.busy_poll));
        let text = GOOD.replacen(
            "[router]",
            "[router]\nworker_priority = 0\ncontrol_priority = 99\nfast_path = true",
            1,
        );
        let p = parse(&text, Some(2)).unwrap();
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
        let p = parse(GOOD, Some(2)).unwrap();
        let api = p.api.unwrap();
        assert_eq!(api.socket, std::path::Path::new(vfsr_api::DEFAULT_SOCKET));
        assert_eq!(api.metrics, Some(DEFAULT_METRICS.parse().unwrap()));
        let p = parse(&format!("{GOOD}\n[api]\nmetrics = \"off\"\n"), Some(2)).unwrap();
        assert_eq!(p.api.unwrap().metrics, None);
        let p = parse(&format!("{GOOD}\n[api]\nenabled = false\n"), Some(2)).unwrap();
        assert!(p.api.is_none());
        let p = parse(
            &format!("{GOOD}\n[api]\nsocket = \"/tmp/x.sock\"\ngroup = \"vfsr\"\nmetrics = \"127.0.0.1:9108\"\n"),
            Some(2),
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
