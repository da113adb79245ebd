//! The configuration file as written: the TOML sections and their defaults, read by serde
//! (unknown keys refused).

use serde::Deserialize;

use super::DEFAULT_METRICS;

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
    /// `[neighbor]`.
    #[serde(default)]
    pub neighbor: NeighborSection,
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
    /// Poptrie's bulk lookup: `auto` (AVX-512 where the CPU has it, else portable; IPv4 on
    /// an AMD Zen 5 runs the portable lookup, measured faster there), or `avx512`, `avx2`,
    /// `portable`.
    pub lookup: String,
    /// Whether workers keep a flow table.
    pub flow_table: bool,
    /// Flow-table entries per worker.
    pub flow_entries: usize,
    /// Flow idle timeout, milliseconds.
    pub flow_idle_ms: u32,
    /// Milliseconds a flow entry is kept from eviction after its last use (0: plain least
    /// recently used eviction).
    pub flow_protect_ms: u32,
    /// Packets per receive batch ([`vfsr_fwd::DEFAULT_BATCH`] by default).
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
            lookup: "auto".into(),
            flow_table: true,
            flow_entries: 1 << 16,
            flow_idle_ms: 30_000,
            flow_protect_ms: vfsr_flow::DEFAULT_PROTECT,
            batch: vfsr_fwd::DEFAULT_BATCH,
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
    /// The most ARP entries, and the most ND entries, the port keeps.
    #[serde(default = "default_neighbors")]
    pub neighbors: u32,
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
fn default_neighbors() -> u32 {
    vfsr_neigh::DEFAULT_CAPACITY as u32
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
    pub(super) fn list(&self) -> Vec<String> {
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
    /// TCP connection attempts (SYN without ACK) to the router, routing or local: on AF_XDP
    /// ports a bucket of their own in the XDP program, so that a SYN flood cannot take the
    /// tokens of established sessions' segments. Counted under their class.
    pub tcp_syn: u32,
}

impl Default for PuntSection {
    fn default() -> Self {
        PuntSection {
            arp_nd: 2_000,
            routing: 10_000,
            icmp: 1_000,
            local: 10_000,
            slow_path: 2_000,
            tcp_syn: 1_000,
        }
    }
}

/// `[neighbor]`: the traffic the neighbor tables make.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct NeighborSection {
    /// ARP requests and Neighbor Solicitations sent per second on each port, at most.
    pub solicit_rate: u32,
}

impl Default for NeighborSection {
    fn default() -> Self {
        NeighborSection {
            solicit_rate: 1_000,
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
