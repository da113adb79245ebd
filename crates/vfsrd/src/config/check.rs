//! The checks that turn the file as written into a [`Plan`]: every key's value and every
//! cross-reference (interfaces, addresses, gateways, cores, tables), each error naming its key.

use std::collections::HashSet;
use std::net::IpAddr;

use vfsr_lpm::poptrie::Vector;
use vfsr_lpm::prefix::{parse_addr_len, PrefixError};
use vfsr_lpm::Prefix;

use super::schema::{BackendChoice, File, NameOrNumber, XdpModeChoice};
use super::{
    ApiPlan, ConfigError, FpmPlan, Interface, KernelPlan, Plan, StaticRoute, TablePlan,
    TableSource, Target, ENGINES,
};

/// What is wrong with one value of the file: a name, a number, an address or a prefix. A
/// [`ConfigError`] puts the key in front of its text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Routing table 0.
    #[error("table 0 is not a routing table")]
    TableZero,
    /// A routing table that is neither a known name nor a number.
    #[error("unknown table {0:?} (main, local, default or a number)")]
    UnknownTable(String),
    /// A protocol number that does not fit a byte.
    #[error("protocol {0} is more than 255")]
    ProtocolTooLarge(u32),
    /// A protocol that is neither a known name nor a number.
    #[error("unknown protocol {0:?}")]
    UnknownProtocol(String),
    /// An empty interface name.
    #[error("empty interface name")]
    EmptyIfname,
    /// An interface name longer than the kernel's 15 bytes.
    #[error("{0:?} is longer than 15 bytes")]
    LongIfname(String),
    /// An interface name the kernel refuses (`.`, `..`, a slash or a blank in it).
    #[error("{0:?} is not a valid interface name")]
    BadIfname(String),
    /// Text that is not `address/length`.
    #[error("{text:?}: {err}")]
    Cidr {
        /// The text.
        text: String,
        /// What is wrong with it.
        #[source]
        err: PrefixError,
    },
    /// A prefix with host bits set beyond its length.
    #[error("{text:?} has bits set beyond /{len}")]
    HostBits {
        /// The text.
        text: String,
        /// Its length.
        len: u8,
    },
    /// A multicast or unspecified address given to an interface.
    #[error("{0} cannot be an interface address")]
    NotInterfaceAddress(IpAddr),
    /// Text that is not an IP address.
    #[error("{0:?} is not an IP address")]
    NotAnAddress(String),
    /// A gateway of the other family than its prefix.
    #[error("{addr} is not an {} address like the prefix", if *.v4 { "IPv4" } else { "IPv6" })]
    OtherFamily {
        /// The gateway.
        addr: IpAddr,
        /// Whether the prefix is IPv4.
        v4: bool,
    },
    /// A gateway listed twice.
    #[error("{0} is listed twice")]
    Twice(IpAddr),
    /// A gateway on no configured interface's subnet.
    #[error("{0} is on no configured interface's subnet")]
    OffLink(IpAddr),
}

/// Routing table names of `/etc/iproute2/rt_tables` that everyone has.
fn table_number(t: &NameOrNumber) -> Result<u32, ValueError> {
    match t {
        NameOrNumber::Number(n) if *n > 0 => Ok(*n),
        NameOrNumber::Number(_) => Err(ValueError::TableZero),
        NameOrNumber::Name(n) => match n.as_str() {
            "main" => Ok(254),
            "local" => Ok(255),
            "default" => Ok(253),
            other => other
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ValueError::UnknownTable(other.to_string())),
        },
    }
}

/// Protocol names of `/etc/iproute2/rt_protos` (and the routing daemons' own).
fn protocol_number(p: &NameOrNumber) -> Result<u8, ValueError> {
    let named = match p {
        NameOrNumber::Number(n) => {
            return u8::try_from(*n).map_err(|_| ValueError::ProtocolTooLarge(*n))
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
                .map_err(|_| ValueError::UnknownProtocol(other.to_string()))
        }
    })
}

/// Parses and checks a configuration text. `cores` are the cores vfsrd may run on, the only
/// ones the file may name (`None` skips the core checks).
pub fn parse(text: &str, cores: Option<&[usize]>) -> Result<Plan, Vec<ConfigError>> {
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
pub fn check(file: &File, cores: Option<&[usize]>) -> Result<Plan, Vec<ConfigError>> {
    let mut errs = Vec::new();
    let r = &file.router;
    if r.workers.is_empty() {
        errs.push(ConfigError::new(
            "router.workers",
            "no worker core listed (give at least one, e.g. [1])",
        ));
    }
    if let Some(usable) = cores {
        let list = usable
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let named = std::iter::once(("router.control_core".to_string(), r.control_core)).chain(
            r.workers
                .iter()
                .enumerate()
                .map(|(i, &c)| (format!("router.workers[{i}]"), c)),
        );
        for (key, c) in named {
            if !usable.contains(&c) {
                errs.push(ConfigError::new(
                    key,
                    format!("core {c} is not one vfsrd may run on ({list})"),
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
    let lookup = Vector::choice(&r.lookup).unwrap_or_else(|e| {
        errs.push(ConfigError::new("router.lookup", e.to_string()));
        None
    });
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
            errs.push(ConfigError::value(key("name"), &m));
        } else if !names.insert(s.name.clone()) {
            errs.push(ConfigError::new(
                key("name"),
                format!("{:?} is listed twice", s.name),
            ));
        }
        let tap = s.tap.clone().unwrap_or_else(|| default_tap(&s.name));
        if let Err(m) = check_ifname(&tap) {
            errs.push(ConfigError::value(key("tap"), &m));
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
        if !(16..=1 << 20).contains(&s.neighbors) {
            errs.push(ConfigError::new(
                key("neighbors"),
                format!("{} is outside 16..=1048576", s.neighbors),
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
                Err(m) => errs.push(ConfigError::value(key(&format!("addresses[{j}]")), &m)),
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
            neighbors: s.neighbors as usize,
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
                errs.push(ConfigError::value(key("prefix"), &m));
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
                    errs.push(ConfigError::value(key("via"), &m));
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
                .map_err(|m| errs.push(ConfigError::value("table.via4", &m)))
                .unwrap_or_default();
            let via6 = gateways(&t.via6, false, None, &interfaces)
                .map_err(|m| errs.push(ConfigError::value("table.via6", &m)))
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
        ("punt.tcp_syn", p.tcp_syn),
    ] {
        if v > 10_000_000 {
            errs.push(ConfigError::new(k, format!("{v} packets/s is not a limit")));
        }
    }
    if !(1..=1_000_000).contains(&file.neighbor.solicit_rate) {
        errs.push(ConfigError::new(
            "neighbor.solicit_rate",
            format!("{} is outside 1..=1000000", file.neighbor.solicit_rate),
        ));
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
                .map_err(|m| errs.push(ConfigError::value("kernel.table", &m)))
                .unwrap_or(254);
            let mut exclude = Vec::new();
            for (i, p) in k.exclude_protocols.iter().enumerate() {
                match protocol_number(p) {
                    Ok(n) => exclude.push(n),
                    Err(m) => errs.push(ConfigError::value(
                        format!("kernel.exclude_protocols[{i}]"),
                        &m,
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
        lookup,
        flow_entries: if r.flow_table { r.flow_entries } else { 0 },
        flow_idle_ms: r.flow_idle_ms,
        flow_protect_ms: r.flow_protect_ms,
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
        neighbor: file.neighbor,
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

fn check_ifname(name: &str) -> Result<(), ValueError> {
    if name.is_empty() {
        return Err(ValueError::EmptyIfname);
    }
    if name.len() > 15 {
        return Err(ValueError::LongIfname(name.to_string()));
    }
    if name == "." || name == ".." || name.chars().any(|c| c == '/' || c.is_whitespace()) {
        return Err(ValueError::BadIfname(name.to_string()));
    }
    Ok(())
}

/// Parses `addr/len` (the one reader of prefix text, `vfsr_lpm::prefix::parse_addr_len`).
/// With `prefix`, host bits beyond the length are an error; without, the address is an
/// interface address (and may not be the network or multicast address).
pub fn parse_cidr(s: &str, prefix: bool) -> Result<(IpAddr, u8), ValueError> {
    let (addr, len) = parse_addr_len(s.trim()).map_err(|err| ValueError::Cidr {
        text: s.to_string(),
        err,
    })?;
    if prefix {
        let clear = match addr {
            IpAddr::V4(v) => Prefix::new(u32::from(v), len).is_ok(),
            IpAddr::V6(v) => Prefix::new(u128::from(v), len).is_ok(),
        };
        if !clear {
            return Err(ValueError::HostBits {
                text: s.to_string(),
                len,
            });
        }
    } else if addr.is_multicast() || addr.is_unspecified() {
        return Err(ValueError::NotInterfaceAddress(addr));
    }
    Ok((addr, len))
}

/// Parses a list of gateway addresses of one family (`v4`), each listed once.
fn gateway_addrs(list: &[String], v4: bool) -> Result<Vec<IpAddr>, ValueError> {
    let mut out: Vec<IpAddr> = Vec::new();
    for s in list {
        let a: IpAddr = s
            .trim()
            .parse()
            .map_err(|_| ValueError::NotAnAddress(s.clone()))?;
        if a.is_ipv4() != v4 {
            return Err(ValueError::OtherFamily { addr: a, v4 });
        }
        if out.contains(&a) {
            return Err(ValueError::Twice(a));
        }
        out.push(a);
    }
    Ok(out)
}

/// Parses gateways of one family and finds the interface each is reached by: `iface` if
/// given, else the interface whose subnet holds it.
fn gateways(
    list: &[String],
    v4: bool,
    iface: Option<usize>,
    interfaces: &[Interface],
) -> Result<Vec<(IpAddr, usize)>, ValueError> {
    gateway_addrs(list, v4)?
        .into_iter()
        .map(|a| match iface {
            Some(p) => Ok((a, p)),
            None => interfaces
                .iter()
                .position(|i| on_link(i, a))
                .map(|p| (a, p))
                .ok_or(ValueError::OffLink(a)),
        })
        .collect()
}

/// Parses the gateways of a static route: each with `iface` when the route names one, else
/// none (the RIB resolves it through the ports' subnets).
fn route_gateways(
    list: &[String],
    v4: bool,
    iface: Option<usize>,
) -> Result<Vec<(IpAddr, Option<usize>)>, ValueError> {
    Ok(gateway_addrs(list, v4)?
        .into_iter()
        .map(|a| (a, iface))
        .collect())
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
