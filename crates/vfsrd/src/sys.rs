//! Opening the configured interfaces on a real system: the forwarding queues (AF_XDP, or
//! AF_PACKET as the fallback), the control plane's raw socket, the TAP, and the kernel
//! settings that keep the host stack from answering on the port itself.
//!
//! The port stays a kernel interface, but without addresses: the router owns them, and the
//! TAP carries them for the host stack. Frames the XDP program passes up (control traffic)
//! would still reach the kernel's IP stack on the port, and with AF_PACKET every frame
//! does, so the port is told to stay quiet: `arp_ignore = 8` (never answer ARP there),
//! `rp_filter = 1` (the port is not the way back to any source: the kernel's routes go
//! through the TAPs, so it drops what arrives on the port) and `disable_ipv6 = 1`.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::RawFd;
use std::path::PathBuf;

use vfsr_io::packet::{PacketConfig, PacketPort};
use vfsr_io::raw::RawSocket;
use vfsr_io::{Backend, IoError};
use vfsr_wire::MacAddr;

use crate::config::{BackendChoice, Interface, Plan};
use crate::error::{Error, Result};
use crate::link::Link;
use crate::runtime::PortIo;
use crate::sources::KernelIds;
use crate::tap::Tap;

/// The control plane's socket on a port. On an XDP port it receives what the XDP program
/// passed to the kernel; on an AF_PACKET port the workers see every frame already, so its
/// socket only sends (a filter that accepts nothing keeps the kernel from queueing copies).
pub struct Wire {
    sock: RawSocket,
    receives: bool,
    errors: u64,
}

impl Wire {
    /// Opens the socket; `receives` says whether it reads frames.
    pub fn open(ifname: &str, receives: bool) -> Result<Wire, IoError> {
        let sock = RawSocket::open(ifname, true)?;
        if !receives {
            drop_all_filter(sock.fd()).map_err(|err| IoError::Os {
                what: format!("SO_ATTACH_FILTER on {ifname}"),
                err,
            })?;
        }
        Ok(Wire {
            sock,
            receives,
            errors: 0,
        })
    }
}

fn drop_all_filter(fd: RawFd) -> std::io::Result<()> {
    // One classic BPF instruction: return 0 (accept no bytes).
    let mut insn = libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    };
    let prog = libc::sock_fprog {
        len: 1,
        filter: &mut insn,
    };
    // SAFETY: `prog` points at one valid instruction that outlives the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Frames queued before the filter went on are read and thrown away.
    let mut buf = [0u8; 64];
    // SAFETY: reads into a live local buffer, nonblocking.
    while unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) } >= 0 {}
    Ok(())
}

impl Link for Wire {
    fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        if !self.receives {
            return None;
        }
        match self.sock.recv_frame(buf) {
            Ok(n) => n,
            Err(_) => {
                self.errors += 1;
                None
            }
        }
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        self.sock.send_frame(frame).unwrap_or(false)
    }

    fn fd(&self) -> Option<RawFd> {
        self.receives.then(|| self.sock.fd())
    }
}

/// The interface's MAC, from sysfs.
pub fn mac_of(name: &str) -> Result<MacAddr> {
    let path = format!("/sys/class/net/{name}/address");
    let s = std::fs::read_to_string(&path).map_err(|_| {
        Error::invalid(
            format!("interface {name:?}"),
            format!("does not exist (no {path})"),
        )
    })?;
    let unreadable = || Error::invalid(name, format!("unreadable MAC {:?}", s.trim()));
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(unreadable());
    }
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| unreadable())?;
    }
    Ok(MacAddr(m))
}

fn sysctl(path: &str, value: &str) -> Result<()> {
    std::fs::write(path, value).map_err(|e| Error::os(path, e))
}

/// Where the values a running router changed are kept until it puts them back: a router
/// killed with SIGKILL cannot restore them, and the next one must not take the changed
/// values for the interface's own (it would "restore" them on its clean stop). `/run` is
/// emptied at boot, as the sysctls are.
pub const SYSCTL_RECORDS: &str = "/run/vfsrd/sysctl";

/// Keeps the kernel's own stack quiet on a port the router drives (see the module doc).
/// The returned guard puts every value back as it was before the first router touched the
/// port when dropped, so a stopped router leaves the interface as it found it, also after
/// an earlier router was killed without its clean-up (the original values are recorded in
/// [`SYSCTL_RECORDS`] while the port is driven).
pub fn quiet_port(name: &str) -> Result<SysctlGuard> {
    let record = record_path(std::path::Path::new(SYSCTL_RECORDS), name);
    let earlier = record.as_ref().and_then(|p| read_record(p));
    if earlier.is_some() {
        tracing::warn!(
            port = %name,
            "a router that was not stopped cleanly left this port's sysctls changed;              the values recorded before it are restored on stop"
        );
    }
    let mut g = SysctlGuard {
        old: Vec::new(),
        record: None,
    };
    let mut wanted = vec![
        (format!("/proc/sys/net/ipv4/conf/{name}/arp_ignore"), "8"),
        (format!("/proc/sys/net/ipv4/conf/{name}/rp_filter"), "1"),
    ];
    // IPv6 may be absent from the kernel: then there is nothing to quiet.
    let v6 = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    if std::path::Path::new(&v6).exists() {
        wanted.push((v6, "1"));
    }
    for (path, value) in &wanted {
        let recorded = earlier
            .as_ref()
            .and_then(|e| e.iter().find(|(p, _)| p == path))
            .map(|(_, v)| v.clone());
        g.set(path, value, recorded)?;
    }
    if let Some(p) = record {
        if earlier.is_none() {
            if let Err(e) = write_record(&p, &g.old) {
                tracing::warn!(port = %name, error = %e,
                    "cannot record the port's sysctls; a killed router would leave them changed");
            }
        }
        g.record = Some(p);
    }
    Ok(g)
}

/// The record of interface `name` under `dir`: named by the network namespace (its inode)
/// and the interface's index, so an interface of the same name made anew, or in another
/// namespace, is not mistaken for it.
fn record_path(dir: &std::path::Path, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/thread-self/ns/net").ok()?.ino();
    let index = ifindex_of(name).ok()?;
    Some(dir.join(format!("{ns}-{index}-{name}")))
}

/// `path value` lines.
fn read_record(p: &std::path::Path) -> Option<Vec<(String, String)>> {
    let text = std::fs::read_to_string(p).ok()?;
    let v: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.trim().to_string()))
        .collect();
    (!v.is_empty()).then_some(v)
}

fn write_record(p: &std::path::Path, values: &[(String, String)]) -> std::io::Result<()> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    let text: String = values.iter().map(|(a, b)| format!("{a} {b}\n")).collect();
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, p)
}

/// Sysctl values changed by the router, restored (last change first) when dropped.
pub struct SysctlGuard {
    old: Vec<(String, String)>,
    /// The record of the original values, removed once they are back.
    record: Option<PathBuf>,
}

impl SysctlGuard {
    /// Sets `path` to `value`, remembering `original` (when a killed router's record gives
    /// it) or else the value found.
    fn set(&mut self, path: &str, value: &str, original: Option<String>) -> Result<()> {
        let found = std::fs::read_to_string(path).map_err(|e| Error::os(path, e))?;
        sysctl(path, value)?;
        let old = original.unwrap_or_else(|| found.trim().to_string());
        self.old.push((path.to_string(), old));
        Ok(())
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        let mut all = true;
        for (path, value) in self.old.drain(..).rev() {
            all &= std::fs::write(&path, value).is_ok();
        }
        if let (true, Some(p)) = (all, self.record.take()) {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn open_xdp(itf: &Interface, mac: MacAddr, batch: usize) -> Result<PortIo> {
    let mut cfg = vfsr_io::xdp::XdpConfig::new(&itf.name);
    cfg.queues = itf.queues;
    cfg.mode = match itf.xdp_mode {
        crate::config::XdpModeChoice::Auto => vfsr_io::xdp::AttachMode::Auto,
        crate::config::XdpModeChoice::Native => vfsr_io::xdp::AttachMode::Native,
        crate::config::XdpModeChoice::Generic => vfsr_io::xdp::AttachMode::Generic,
    };
    cfg.zero_copy = itf.zero_copy;
    if itf.busy_poll {
        cfg.busy_poll = Some(vfsr_io::xdp::BusyPoll {
            budget: u16::try_from(batch).unwrap_or(u16::MAX),
            ..vfsr_io::xdp::BusyPoll::default()
        });
    }
    cfg.local4 = itf
        .addrs4
        .iter()
        .map(|(a, _)| *a)
        .collect::<Vec<Ipv4Addr>>();
    cfg.local6 = itf
        .addrs6
        .iter()
        .map(|(a, _)| *a)
        .collect::<Vec<Ipv6Addr>>();
    let (iface, ports) = vfsr_io::xdp::open(&cfg)?;
    let police = iface.policer()?;
    let wire = Wire::open(&itf.name, true)?;
    Ok(PortIo {
        mac,
        queues: ports
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn Backend>)
            .collect(),
        wire: Box::new(wire),
        tap: None,
        keep: vec![Box::new(iface)],
        fast: None,
        police: Some(police),
        kernel: None,
    })
}

fn open_packet(itf: &Interface, mac: MacAddr, fanout: u16) -> Result<PortIo> {
    // Several queues are sockets of one fanout group: the kernel hashes each flow to one.
    let mut queues: Vec<Box<dyn Backend>> = Vec::new();
    for _ in 0..itf.queues {
        let cfg = PacketConfig {
            fanout: (itf.queues > 1).then_some(fanout),
            ..PacketConfig::default()
        };
        let port = PacketPort::with_config(&itf.name, &cfg)?;
        queues.push(Box::new(port));
    }
    let wire = Wire::open(&itf.name, false)?;
    Ok(PortIo {
        mac,
        queues,
        wire: Box::new(wire),
        tap: None,
        keep: Vec::new(),
        fast: None,
        police: None,
        kernel: None,
    })
}

/// Opens every interface of `plan`, with its TAP. Errors name the interface and what to do.
pub fn open_ports(plan: &Plan) -> Result<Vec<PortIo>> {
    let mut out = Vec::new();
    // Fanout group ids are per network namespace; derive them from the process id.
    let base = (std::process::id() as u16).wrapping_mul(64);
    for (i, itf) in plan.interfaces.iter().enumerate() {
        let fanout = base.wrapping_add(i as u16);
        let mac = mac_of(&itf.name)?;
        let quiet = quiet_port(&itf.name).map_err(|e| e.context(&itf.name))?;
        let mut io = match itf.backend {
            BackendChoice::Packet => open_packet(itf, mac, fanout)?,
            BackendChoice::Xdp => open_xdp(itf, mac, plan.batch)
                .map_err(|e| e.context(format!("{}: AF_XDP", itf.name)))?,
            BackendChoice::Auto => match open_xdp(itf, mac, plan.batch) {
                Ok(io) => io,
                Err(e) => {
                    tracing::warn!(
                        port = %itf.name,
                        error = %e,
                        "AF_XDP unavailable; falling back to AF_PACKET"
                    );
                    open_packet(itf, mac, fanout)?
                }
            },
        };
        let (tap, tap_ifindex) = open_tap(itf, mac)?;
        io.tap = tap;
        io.kernel = Some(KernelIds {
            port: i as u32 + 1,
            iface: ifindex_of(&itf.name)?,
            tap: Some(tap_ifindex),
        });
        io.keep.push(Box::new(quiet));
        out.push(io);
    }
    if plan.fast_path {
        enable_fast_paths(&mut out)?;
    }
    Ok(out)
}

/// Turns the XDP fast path on for every AF_XDP port, each able to send by every other
/// AF_XDP port (pipeline index, kernel interface index).
fn enable_fast_paths(ports: &mut [PortIo]) -> Result<()> {
    let xdp_of = |p: &PortIo| -> Option<(u32, String)> {
        p.keep
            .iter()
            .find_map(|k| k.downcast_ref::<vfsr_io::xdp::XdpInterface>())
            .map(|x| (x.ifindex(), x.name().to_string()))
    };
    let egress: Vec<(u32, u32)> = (1u32..)
        .zip(ports.iter())
        .filter_map(|(i, p)| xdp_of(p).map(|(ifindex, _)| (i, ifindex)))
        .collect();
    for p in ports.iter_mut() {
        let fast = match p
            .keep
            .iter()
            .find_map(|k| k.downcast_ref::<vfsr_io::xdp::XdpInterface>())
        {
            Some(x) => {
                if vfsr_io::xdp::driver_name(x.name()).as_deref() == Some("veth") {
                    tracing::warn!(
                        port = %x.name(),
                        "fast path on a veth: frames it sends out of this port reach the peer \
                         only if the peer has GRO on or an XDP program"
                    );
                }
                Some(
                    x.fast_path(p.mac.0, &egress)
                        .map_err(|e| Error::Io(e).context(format!("{}: fast path", x.name())))?,
                )
            }
            None => None,
        };
        p.fast = fast;
    }
    Ok(())
}

fn open_tap(itf: &Interface, mac: MacAddr) -> Result<(Option<Box<dyn Link>>, u32)> {
    let tap = Tap::create(&itf.tap, mac, itf.mtu, &itf.addrs4, &itf.addrs6)?;
    let ifindex = tap.ifindex();
    Ok((Some(Box::new(tap)), ifindex))
}

/// The kernel's index of interface `name`.
pub fn ifindex_of(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| Error::invalid(format!("{name:?}"), "bad interface name"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Error::last_os(format!("{name}: no such interface")));
    }
    Ok(i)
}

impl Link for Tap {
    fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.read_frame(buf)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        self.write_frame(frame)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(Tap::fd(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_an_empty_one_is_none() {
        let dir = std::env::temp_dir().join(format!("vfsrd-sysctl-test-{}", std::process::id()));
        let p = dir.join("1-2-eth9");
        let values = vec![
            (
                "/proc/sys/net/ipv4/conf/eth9/arp_ignore".to_string(),
                "0".to_string(),
            ),
            (
                "/proc/sys/net/ipv4/conf/eth9/rp_filter".to_string(),
                "2".to_string(),
            ),
        ];
        write_record(&p, &values).expect("write");
        assert_eq!(read_record(&p), Some(values));
        std::fs::write(&p, "").expect("empty");
        assert_eq!(read_record(&p), None);
        assert_eq!(read_record(&dir.join("absent")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_are_named_by_namespace_and_index() {
        // The loopback exists everywhere, with index 1.
        let p = record_path(std::path::Path::new("/x"), "lo").expect("lo");
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        assert!(name.ends_with("-1-lo"), "{name}");
        assert!(record_path(std::path::Path::new("/x"), "no-such-if0").is_none());
    }
}
