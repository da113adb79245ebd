//! AF_XDP: frames steered by an XDP program straight into a worker's ring.
//!
//! [`open`] sets up one interface: it loads `bpf/xsk_steer.c` (see [`crate::bpf`]), fills
//! its `local4`/`local6` maps with the router's own addresses, opens one [`XdpPort`] (an
//! AF_XDP socket) per queue, registers each socket in the program's `xsks` map under its
//! queue number and attaches the program. The [`XdpInterface`] it returns owns the program;
//! dropping it detaches the program, so a clean shutdown leaves nothing on the interface.
//! Transit frames go to the socket of the queue they arrived on; control traffic (ARP, ND,
//! link-local and multicast, frames to our own addresses) is passed to the kernel, where
//! the control plane reads it on its own core.
//!
//! One [`XdpPort`] is one socket bound to (interface, queue), with its own UMEM:
//!
//! ```text
//!  UMEM (frames × frame_size bytes, page-aligned, pinned by the kernel)
//!  [ rx frame 0 | rx frame 1 | ... | rx frame n/2-1 ][ tx frame n/2 | ... | tx frame n-1 ]
//!        │ addresses cycle through                        │ addresses cycle through
//!        ▼                                                ▼
//!   fill ring ──▶ kernel writes a frame ──▶ rx ring      free list ──▶ tx ring ──▶ kernel sends
//!        ▲                                    │              ▲                          │
//!        └──── recv copies it, gives it back ─┘              └──── completion ring ◀────┘
//! ```
//!
//! The receive half of the frames always belongs to the fill ring (or to the kernel, or sits in the
//! rx ring): [`XdpPort::recv`](port::XdpPort) takes up to `max` descriptors from the rx ring,
//! copies each frame into a [`Packet`](vfsr_packet::Packet) from the pool, and hands all those
//! frames back to the fill ring in one batch. The transmit half is a free list:
//! [`XdpPort::send`](port::XdpPort) reclaims what the completion ring returned, copies each frame
//! into a free one and submits the batch with one producer update. No frame, no ring slot: the
//! frame is counted in [`IoStats::tx_dropped`](crate::IoStats::tx_dropped), never waited for.
//!
//! System calls are made only when the kernel asks for them (`XDP_USE_NEED_WAKEUP`): a
//! `recvfrom` when the fill ring's need-wakeup flag is set, a `sendto(MSG_DONTWAIT)` when
//! the transmit ring's is. In copy mode the transmit flag is always set (the kernel sends
//! copy-mode frames from inside `sendto`, at most 32 per call, so a longer batch takes
//! several calls); in zero-copy mode the driver's interrupt path usually sends without one.
//! Every call is counted in [`IoStats::kicks`](crate::IoStats::kicks).
//!
//! The copy into a [`Packet`](vfsr_packet::Packet) is deliberate: the forwarding pipeline owns its buffers
//! (they cross stages, get rewritten, may be queued for a neighbour), and for the 64-byte
//! frames that set the packet rate a 64-byte copy is a small part of the per-packet cost,
//! while it keeps the UMEM frames cycling through the fill ring without waiting for the
//! pipeline. Zero-copy binding (`XDP_ZEROCOPY`, tried first when asked, falling back to
//! copy mode on `EOPNOTSUPP`/`EINVAL`) only changes how the NIC fills the UMEM.
//!
//! What works on veth (kernel 6.18, checked by `tests/xdp.rs`): the steering program
//! attaches in native mode (`Auto` picks it) and in generic mode, and in both the AF_XDP
//! socket of the veth that carries the program receives the transit frames the peer sends;
//! the peer needs no program of its own for that (a peer program, or GRO, is needed only
//! for frames *redirected into* a veth with `XDP_REDIRECT`, which this backend does not
//! do). veth has no zero-copy, so sockets bind in copy mode either way; transmit (copy
//! mode) hands each frame to the veth's transmit function and it arrives at the peer.
//!
//! Measured by `tests/xdp_rate.rs` (one core sending 64-byte frames from an AF_XDP socket
//! on the peer and receiving them on the port, loaded two-core machine): `recv` itself
//! costs about 20 ns per frame in native mode and 23 ns in generic mode, against 42 ns for
//! the AF_PACKET backend in the same run; the whole path moves 0.5 to 0.6 Mpps in every
//! mode, because the copy-mode transmit on the sending side (a socket buffer per frame)
//! dominates. On veth, native mode gains nothing over generic: frames arrive as socket
//! buffers either way.
//!
//! Who does the receive work. The XDP program and the copy into the UMEM run in the
//! interface's NAPI context, in the kernel. With zero-copy sockets and
//! [`XdpConfig::busy_poll`], the worker runs that context itself (preferred busy polling,
//! kernel 5.11+: `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`, the device's
//! `napi_defer_hard_irqs` and `gro_flush_timeout`, restored when the interface closes):
//! each [`Backend::recv`](crate::Backend::recv) polls the device for one budget of frames, so the kernel never
//! fills a ring the worker cannot empty. Since kernel 6.13 a socket learns the NAPI context
//! to poll only at bind time and only in zero-copy mode, so copy-mode sockets (every veth)
//! do not busy-poll; there the router keeps its worker ahead of the NAPI thread by
//! scheduling priority instead (see `vfsrd::runtime::realtime`).
//!
//! The steering program also holds the XDP fast path ([`FastPath`]): a destination flow
//! table the workers fill, which lets the program forward frames to destinations already
//! decided without the copy into user space and the socket buffer of copy-mode transmit.
//!
//! The XDP attach and detach act on the network namespace of the calling thread: an
//! [`XdpInterface`] must be dropped (or [`XdpInterface::close`]d) in the namespace it was
//! opened in. The sockets, once bound, can be used from any thread.
//!
//! Ring counters are read with acquire and written with release ordering (see
//! `xdp/ring.rs`); descriptors read from the rx and completion rings are checked
//! against the UMEM before use, so a bad descriptor is a counted invalid frame.
//!
//! Files: this one holds the configuration, the steering program's interface
//! ([`XdpInterface`], [`open`]); `port.rs` the port and its receive and transmit paths;
//! `socket.rs` a socket's setup (UMEM registration, rings, bind); `ring.rs` the shared
//! rings and mappings; `busypoll.rs` preferred busy polling; `ethtool.rs` what ethtool and
//! sysfs tell of the interface; `fast.rs` the XDP fast path's maps; `police.rs` the
//! program's buckets for control classes.

mod busypoll;
mod ethtool;
mod fast;
mod police;
mod port;
mod ring;
mod socket;

pub use fast::{FastCounters, FastEntry, FastPath};
pub use police::{PolicedClass, PolicedCounters, Policer};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, RawFd};

use crate::bpf::{self, BpfObject, XdpAttachment, XdpMode};
use crate::IoError;

use busypoll::NapiDefer;
pub use ethtool::{driver_name, rx_queue_count};
pub use port::XdpPort;

/// How to attach the steering program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// Native if the driver supports it, else generic.
    Auto,
    /// Native only (an error if the driver has no XDP).
    Native,
    /// Generic only.
    Generic,
}

/// One interface's AF_XDP setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface.
    pub ifname: String,
    /// Queues to open, `0..queues` (at most the interface's receive queues).
    pub queues: u32,
    /// Bytes per UMEM frame: a power of two from 2048 to the page size.
    pub frame_size: u32,
    /// UMEM frames per queue, half for receive and half for transmit: a power of two from
    /// 64 to 2^20.
    pub frames: u32,
    /// How the steering program attaches.
    pub mode: AttachMode,
    /// Try a zero-copy bind first (falls back to copy mode).
    pub zero_copy: bool,
    /// The router's IPv4 addresses on this interface (frames to them go to the kernel).
    pub local4: Vec<Ipv4Addr>,
    /// The router's IPv6 addresses.
    pub local6: Vec<Ipv6Addr>,
    /// Preferred busy polling: the worker runs the interface's receive work itself, in
    /// batches it asks for (`None`: the kernel's NAPI context runs it).
    pub busy_poll: Option<BusyPoll>,
}

/// Preferred busy polling of one interface (kernel 5.11+): see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPoll {
    /// Frames the interface's NAPI poll may deliver per busy poll (`SO_BUSY_POLL_BUDGET`).
    pub budget: u16,
    /// `SO_BUSY_POLL`, microseconds: non-zero turns busy polling on for the socket.
    pub usecs: u32,
    /// How long the kernel keeps the interface's interrupts (on veth: the peer's wake-ups)
    /// off after a busy poll, nanoseconds (`gro_flush_timeout`): a worker that comes back
    /// within this time keeps the receive work to itself.
    pub hold_ns: u64,
    /// How many empty polls of the kernel's own NAPI context may pass before interrupts come
    /// back (`napi_defer_hard_irqs`).
    pub defer_irqs: u32,
}

impl Default for BusyPoll {
    fn default() -> Self {
        BusyPoll {
            budget: 64,
            usecs: 20,
            hold_ns: 200_000,
            defer_irqs: 2,
        }
    }
}

impl XdpConfig {
    /// Defaults for `ifname`: one queue, 4096 frames of 2048 bytes, automatic mode, copy.
    pub fn new(ifname: &str) -> XdpConfig {
        XdpConfig {
            ifname: ifname.to_string(),
            queues: 1,
            frame_size: 2048,
            frames: 4096,
            mode: AttachMode::Auto,
            zero_copy: false,
            local4: Vec::new(),
            local6: Vec::new(),
            busy_poll: None,
        }
    }

    /// Checks the geometry before any system call.
    fn check(&self) -> Result<(), IoError> {
        let name = &self.ifname;
        let page = page_size();
        if !self.frame_size.is_power_of_two()
            || self.frame_size < 2048
            || self.frame_size as usize > page
        {
            return Err(IoError::Unsupported(format!(
                "{name}: AF_XDP frame size {} must be a power of two from 2048 to {page}",
                self.frame_size
            )));
        }
        if !self.frames.is_power_of_two() || !(64..=1 << 20).contains(&self.frames) {
            return Err(IoError::Unsupported(format!(
                "{name}: AF_XDP frame count {} must be a power of two from 64 to 1048576",
                self.frames
            )));
        }
        if let Some(bp) = self.busy_poll {
            if bp.budget == 0 || bp.usecs == 0 || bp.hold_ns == 0 || bp.defer_irqs == 0 {
                return Err(IoError::Unsupported(format!(
                    "{name}: busy polling needs a non-zero budget, time, hold time and \
                     deferral count ({bp:?})"
                )));
            }
        }
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(IoError::Unsupported(format!(
                "{name}: {} AF_XDP queues asked for; from 1 to {MAX_QUEUES}",
                self.queues
            )));
        }
        Ok(())
    }
}

/// Entries of the program's `xsks` map.
const MAX_QUEUES: u32 = 64;
/// Counter slots of the program's `counters` map.
const CNT_REDIRECTED: u32 = 0;
const CNT_PASSED_CONTROL: u32 = 1;
const CNT_XSK_MISSING: u32 = 2;
/// Copy-mode transmit sends at most this many frames per `sendto` (the kernel's
/// `TX_BATCH_SIZE`).
pub(super) const COPY_TX_BATCH: usize = 32;

pub(super) fn page_size() -> usize {
    // SAFETY: plain query.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}

pub(super) fn index_of(name: &str) -> Result<u32, IoError> {
    let c = std::ffi::CString::new(name).map_err(|_| IoError::NoSuchInterface(name.into()))?;
    // SAFETY: a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(IoError::NoSuchInterface(name.into()));
    }
    Ok(i)
}

/// What the steering program counted, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteerCounters {
    /// Frames redirected to a queue's socket.
    pub redirected: u64,
    /// Control frames passed to the kernel.
    pub passed_control: u64,
    /// Transit frames that arrived on a queue with no socket (passed to the kernel).
    pub xsk_missing: u64,
    /// Frames the fast path forwarded (see [`FastPath`]).
    pub fast_forwarded: u64,
    /// Frames whose fast-path entry was stale.
    pub fast_stale: u64,
    /// Control frames dropped by the program's policing (see [`Policer`]).
    pub policed: PolicedCounters,
}

/// The steering program on one interface. Dropping it detaches the program.
pub struct XdpInterface {
    name: String,
    ifindex: u32,
    // Field order: detach before the object (and its maps) is closed.
    attachment: XdpAttachment,
    obj: BpfObject,
    xsks: RawFd,
    local4: RawFd,
    local6: RawFd,
    counters: RawFd,
    zero_copy: bool,
    /// The interface's interrupt-deferral settings while busy polling (restored on drop).
    _napi: Option<NapiDefer>,
}

impl XdpInterface {
    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The mode the program runs in.
    pub fn mode(&self) -> XdpMode {
        self.attachment.mode()
    }

    /// Whether the sockets bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The loaded steering object (for reading its maps).
    pub fn object(&self) -> &BpfObject {
        &self.obj
    }

    /// Frames to `addr` go to the kernel from now on.
    pub fn add_local(&self, addr: IpAddr) -> Result<(), IoError> {
        let r = match addr {
            IpAddr::V4(a) => bpf::map_update(self.local4, &a.octets(), &[1]),
            IpAddr::V6(a) => bpf::map_update(self.local6, &a.octets(), &[1]),
        };
        r.map_err(|e| {
            IoError::Unsupported(format!("{}: adding local address {addr}: {e}", self.name))
        })
    }

    /// Frames to `addr` are transit again.
    pub fn remove_local(&self, addr: IpAddr) -> Result<bool, IoError> {
        match addr {
            IpAddr::V4(a) => bpf::map_delete(self.local4, &a.octets()),
            IpAddr::V6(a) => bpf::map_delete(self.local6, &a.octets()),
        }
    }

    /// Directs queue `port.queue()`'s transit frames to `port` (replacing any socket there).
    pub fn register(&self, port: &XdpPort) -> Result<(), IoError> {
        register(self.xsks, port).map_err(|e| {
            IoError::Unsupported(format!(
                "{}: registering queue {}: {e}",
                self.name, port.queue
            ))
        })
    }

    /// Stops steering queue `queue` to a socket (its transit frames go to the kernel and
    /// are counted as `xsk_missing`).
    pub fn unregister(&self, queue: u32) -> Result<bool, IoError> {
        bpf::map_delete(self.xsks, &queue.to_ne_bytes())
    }

    /// Detaches the program now, reporting a failure (dropping detaches silently).
    pub fn close(self) -> Result<(), IoError> {
        let XdpInterface {
            attachment, obj, ..
        } = self;
        let r = attachment.detach();
        drop(obj);
        r
    }

    /// The program's counters, summed over CPUs.
    pub fn counters(&self) -> Result<SteerCounters, IoError> {
        let read = |slot: u32| fast::read_counter(self.counters, slot);
        Ok(SteerCounters {
            redirected: read(CNT_REDIRECTED)?,
            passed_control: read(CNT_PASSED_CONTROL)?,
            xsk_missing: read(CNT_XSK_MISSING)?,
            fast_forwarded: read(fast::CNT_FAST_FORWARDED)?,
            fast_stale: read(fast::CNT_FAST_STALE)?,
            policed: police::read_policed(self.counters)?,
        })
    }

    /// A handle on the program's buckets for control classes (see [`Policer`]); until one
    /// is set, the program polices nothing.
    pub fn policer(&self) -> Result<Policer, IoError> {
        Policer::for_object(&self.name, &self.obj)
    }

    /// Turns the program's fast path on (see [`FastPath`]): `mac` is this port's MAC,
    /// `egress` the ports frames may leave by, as (port number, kernel interface index in
    /// the caller's network namespace).
    pub fn fast_path(&self, mac: [u8; 6], egress: &[(u32, u32)]) -> Result<FastPath, IoError> {
        FastPath::for_object(&self.name, &self.obj, mac, egress)
    }
}

fn register(xsks: RawFd, port: &XdpPort) -> Result<(), IoError> {
    let fd = u32::try_from(port.fd.as_raw_fd()).unwrap_or(u32::MAX);
    bpf::map_update(xsks, &port.queue.to_ne_bytes(), &fd.to_ne_bytes())
}

/// Sets up `config.ifname`: the steering program with the local addresses, one socket per
/// queue registered in it, the program attached. Returns the interface and the ports,
/// port `i` for queue `i`.
pub fn open(config: &XdpConfig) -> Result<(XdpInterface, Vec<XdpPort>), IoError> {
    config.check()?;
    let name = config.ifname.as_str();
    let ifindex = index_of(name)?;
    match rx_queue_count(name, ifindex) {
        Some(have) if config.queues > have => {
            return Err(IoError::Unsupported(format!(
                "{name}: interface has {have} queues, config asks for {}",
                config.queues
            )))
        }
        _ => {}
    }
    let obj = BpfObject::load("xsk_steer", bpf::objects::XSK_STEER).map_err(|e| {
        IoError::Unsupported(format!("{name}: loading the XDP steering program: {e}"))
    })?;
    let prog = obj.prog_fd("xsk_steer")?;
    let xsks = obj.map_fd("xsks")?;
    let local4 = obj.map_fd("local4")?;
    let local6 = obj.map_fd("local6")?;
    let counters = obj.map_fd("counters")?;
    for a in &config.local4 {
        bpf::map_update(local4, &a.octets(), &[1])?;
    }
    for a in &config.local6 {
        bpf::map_update(local6, &a.octets(), &[1])?;
    }
    let mut ports = Vec::new();
    for q in 0..config.queues {
        let port = XdpPort::open(name, q, config.frame_size, config.frames, config.zero_copy)?;
        register(xsks, &port).map_err(|e| {
            IoError::Unsupported(format!("{name}: registering queue {q}'s socket: {e}"))
        })?;
        ports.push(port);
    }
    // A program of ours that a killed run left behind (the sockets above bound, so no live
    // run holds this interface) is replaced.
    if XdpAttachment::remove_stale(ifindex, "xsk_steer")? {
        eprintln!("{name}: removed the XDP program a stopped run had left attached");
    }
    let attachment = match config.mode {
        AttachMode::Auto => XdpAttachment::attach_auto(ifindex, prog)?,
        AttachMode::Native => XdpAttachment::attach(ifindex, prog, XdpMode::Native)?,
        AttachMode::Generic => XdpAttachment::attach(ifindex, prog, XdpMode::Generic)?,
    };
    let zero_copy = ports.iter().all(|p| p.zero_copy);
    // Busy polling needs the NAPI id a socket learns at bind time, which since kernel 6.13
    // only zero-copy sockets get: in copy mode the kernel's NAPI context does the receive
    // work whatever the socket asks, so there is nothing to turn on.
    let napi = match &config.busy_poll {
        Some(bp) if zero_copy => {
            for p in &mut ports {
                p.set_busy_poll(bp)?;
            }
            Some(NapiDefer::set(name, bp)?)
        }
        _ => None,
    };
    Ok((
        XdpInterface {
            name: name.to_string(),
            ifindex,
            attachment,
            obj,
            xsks,
            local4,
            local6,
            counters,
            zero_copy,
            _napi: napi,
        },
        ports,
    ))
}

#[cfg(test)]
mod tests {
    use super::ethtool::{sysfs_rx_queues, EthtoolDrvinfo};
    use super::*;

    #[test]
    fn bad_geometry_is_refused_before_any_system_call() {
        let mut c = XdpConfig::new("nonexistent0");
        c.frame_size = 1000;
        let e = open(&c).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("frame size 1000"), "{e}");
        let mut c = XdpConfig::new("nonexistent0");
        c.frames = 100;
        let e = open(&c).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("frame count 100"), "{e}");
        let mut c = XdpConfig::new("nonexistent0");
        c.queues = 0;
        let e = open(&c).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("queues"), "{e}");
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = open(&XdpConfig::new("nonexistent0"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("nonexistent0"), "{e}");
    }

    #[test]
    fn driver_names_come_from_ethtool() {
        assert_eq!(std::mem::size_of::<EthtoolDrvinfo>(), 196);
        assert_eq!(driver_name("no-such-if0"), None);
        assert_eq!(driver_name(&"x".repeat(40)), None);
    }

    #[test]
    fn loopback_has_one_queue_and_too_many_are_refused() {
        let lo = index_of("lo").unwrap();
        assert!(rx_queue_count("lo", lo).is_some_and(|n| n >= 1));
        assert_eq!(
            sysfs_rx_queues("lo", lo + 1000),
            None,
            "another interface's sysfs"
        );
        let mut c = XdpConfig::new("lo");
        c.queues = 64;
        let e = open(&c).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("config asks for 64"), "{e}");
    }
}
