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
//! The receive half of the frames always belongs to the fill ring (or to the kernel, or
//! sits in the rx ring): [`XdpPort::recv`] takes up to `max` descriptors from the rx ring,
//! copies each frame into a [`Packet`] from the pool, and hands all those frames back to
//! the fill ring in one batch. The transmit half is a free list: [`XdpPort::send`] reclaims
//! what the completion ring returned, copies each frame into a free one and submits the
//! batch with one producer update. No frame, no ring slot: the frame is counted in
//! [`IoStats::tx_dropped`], never waited for.
//!
//! System calls are made only when the kernel asks for them (`XDP_USE_NEED_WAKEUP`): a
//! `recvfrom` when the fill ring's need-wakeup flag is set, a `sendto(MSG_DONTWAIT)` when
//! the transmit ring's is. In copy mode the transmit flag is always set (the kernel sends
//! copy-mode frames from inside `sendto`, at most 32 per call, so a longer batch takes
//! several calls); in zero-copy mode the driver's interrupt path usually sends without one.
//! Every call is counted in [`IoStats::kicks`].
//!
//! The copy into a [`Packet`] is deliberate: the forwarding pipeline owns its buffers
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
//! each [`Backend::recv`] polls the device for one budget of frames, so the kernel never
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

mod fast;
mod ring;

pub use fast::{FastCounters, FastEntry, FastPath};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use vfsr_packet::Packet;

use crate::bpf::{self, BpfObject, XdpAttachment, XdpMode};
use crate::{Backend, IoError, IoStats, Kind};

use ring::{Mapping, Ring};

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
const COPY_TX_BATCH: usize = 32;

fn page_size() -> usize {
    // SAFETY: plain query.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}

fn index_of(name: &str) -> Result<u32, IoError> {
    let c = std::ffi::CString::new(name).map_err(|_| IoError::NoSuchInterface(name.into()))?;
    // SAFETY: a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(IoError::NoSuchInterface(name.into()));
    }
    Ok(i)
}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// Receive queues of interface `name` (index `ifindex`): the ethtool channel count (in the
/// caller's network namespace), else sysfs when it shows this very interface (sysfs shows
/// the namespace it was mounted in, which may not be ours); `None` when neither says.
pub fn rx_queue_count(name: &str, ifindex: u32) -> Option<u32> {
    ethtool_rx_queues(name).or_else(|| sysfs_rx_queues(name, ifindex))
}

/// Runs one `SIOCETHTOOL` request on interface `name` (in the caller's network namespace);
/// `data` is the ethtool command structure, its `cmd` word set.
fn ethtool<T>(name: &str, data: &mut T) -> bool {
    if name.len() >= libc::IF_NAMESIZE {
        return false;
    }
    // SAFETY: all-zero is a valid ifreq.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: a plain datagram socket for the ioctl, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifr` points at `data`, which outlives the call and is the structure (and
    // size) the kernel copies for the command in its first word.
    unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) == 0 }
}

fn ethtool_rx_queues(name: &str) -> Option<u32> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    let ok = ethtool(name, &mut ch);
    let n = ch.rx_count.saturating_add(ch.combined_count);
    (ok && n > 0).then_some(n)
}

/// `struct ethtool_drvinfo` (`linux/ethtool.h`).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    counts: [u32; 5],
}

const ETHTOOL_GDRVINFO: u32 = 0x03;

/// The name of interface `name`'s driver (`veth`, `mlx5_core`, ...), as `ethtool -i` shows.
pub fn driver_name(name: &str) -> Option<String> {
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        counts: [0; 5],
    };
    if !ethtool(name, &mut info) {
        return None;
    }
    let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
    let d = String::from_utf8_lossy(info.driver.get(..end)?).into_owned();
    (!d.is_empty()).then_some(d)
}

fn sysfs_rx_queues(name: &str, ifindex: u32) -> Option<u32> {
    let base = format!("/sys/class/net/{name}");
    let shown: u32 = std::fs::read_to_string(format!("{base}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if shown != ifindex {
        return None;
    }
    let n = std::fs::read_dir(format!("{base}/queues"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    u32::try_from(n).ok().filter(|&n| n > 0)
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

/// Socket options of preferred busy polling (`asm-generic/socket.h`).
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// An interface's `napi_defer_hard_irqs` and `gro_flush_timeout`, set for busy polling and
/// put back as they were when dropped.
struct NapiDefer {
    dir: String,
    old: Vec<(&'static str, String)>,
}

impl NapiDefer {
    fn set(name: &str, bp: &BusyPoll) -> Result<NapiDefer, IoError> {
        let dir = format!("/sys/class/net/{name}");
        let mut d = NapiDefer {
            dir,
            old: Vec::new(),
        };
        for (file, value) in [
            ("napi_defer_hard_irqs", bp.defer_irqs.to_string()),
            ("gro_flush_timeout", bp.hold_ns.to_string()),
        ] {
            let path = format!("{}/{file}", d.dir);
            let old = std::fs::read_to_string(&path).map_err(|e| {
                IoError::Unsupported(format!(
                    "{name}: busy polling: reading {path}: {e} (set busy_poll = false)"
                ))
            })?;
            std::fs::write(&path, &value).map_err(|e| {
                IoError::Unsupported(format!(
                    "{name}: busy polling: writing {value} to {path}: {e} (needs root; or set \
                     busy_poll = false)"
                ))
            })?;
            d.old.push((file, old.trim().to_string()));
        }
        Ok(d)
    }
}

impl Drop for NapiDefer {
    fn drop(&mut self) {
        for (file, value) in self.old.drain(..).rev() {
            let _ = std::fs::write(format!("{}/{file}", self.dir), value);
        }
    }
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
        })
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

/// One AF_XDP socket bound to (interface, queue), with its UMEM and four rings.
pub struct XdpPort {
    name: String,
    ifindex: u32,
    queue: u32,
    // Field order: rings unmapped, then the socket closed, then the UMEM unmapped.
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
    umem: Mapping,
    frame_size: u64,
    /// Transmit frames not in the kernel's hands.
    tx_free: Vec<u64>,
    /// Receive frames waiting to go back to the fill ring (only if it was ever full).
    fill_pending: Vec<u64>,
    /// Frames in the transmit ring the kernel may not have been woken for.
    tx_kick_pending: bool,
    zero_copy: bool,
    /// Whether each receive drives the interface's NAPI poll itself (a `recvfrom`).
    busy_poll: bool,
    stats: IoStats,
}

// SAFETY: the mappings are owned by this value alone; moving it to another thread moves
// their only user.
unsafe impl Send for XdpPort {}

/// What a socket setup attempt produced.
struct Socket {
    fd: OwnedFd,
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, val: &T, what: &str) -> Result<(), IoError> {
    // SAFETY: `val` is readable for size_of::<T>() bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(IoError::last(what.to_string()));
    }
    Ok(())
}

/// Creates, sets up and binds one socket; `Err((errno of bind, error))`.
fn setup(
    name: &str,
    ifindex: u32,
    queue: u32,
    umem: &Mapping,
    frame_size: u32,
    half: u32,
    bind_flags: u16,
) -> Result<Socket, (i32, IoError)> {
    let os = |e: IoError| (0, e);
    // SAFETY: plain system call; the descriptor is owned below.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let err = std::io::Error::last_os_error();
        return Err(os(match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::Unsupported(format!(
                "{name}: opening an AF_XDP socket: {err}; needs root or CAP_NET_ADMIN+CAP_BPF \
                 (CAP_NET_RAW too)"
            )),
            Some(libc::EAFNOSUPPORT) => IoError::Unsupported(format!(
                "{name}: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS); set backend = \
                 \"packet\""
            )),
            _ => IoError::Os {
                what: format!("{name}: socket(AF_XDP)"),
                err,
            },
        }));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let s = fd.as_raw_fd();
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr() as u64,
        len: umem.len() as u64,
        chunk_size: frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    let q = format!("{name} queue {queue}");
    setsockopt(
        s,
        libc::XDP_UMEM_REG,
        &reg,
        &format!("{q}: registering UMEM"),
    )
    .map_err(os)?;
    for (opt, what) in [
        (libc::XDP_UMEM_FILL_RING, "fill ring"),
        (libc::XDP_UMEM_COMPLETION_RING, "completion ring"),
        (libc::XDP_RX_RING, "rx ring"),
        (libc::XDP_TX_RING, "tx ring"),
    ] {
        setsockopt(s, opt, &half, &format!("{q}: sizing the {what}")).map_err(os)?;
    }
    // SAFETY: all-zero is a valid xdp_mmap_offsets.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: `off` is writable for `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            s,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(os(IoError::last(format!("{q}: reading ring offsets"))));
    }
    if len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(os(IoError::Unsupported(format!(
            "{q}: the kernel's AF_XDP rings have no flags word (kernel older than 5.4); set \
             backend = \"packet\""
        ))));
    }
    let fill = Ring::map(
        s,
        libc::XDP_UMEM_PGOFF_FILL_RING,
        &off.fr,
        half,
        true,
        &format!("{q} fill ring"),
    )
    .map_err(os)?;
    let comp = Ring::map(
        s,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        &off.cr,
        half,
        false,
        &format!("{q} completion ring"),
    )
    .map_err(os)?;
    let rx = Ring::map(
        s,
        libc::XDP_PGOFF_RX_RING as u64,
        &off.rx,
        half,
        false,
        &format!("{q} rx ring"),
    )
    .map_err(os)?;
    let tx = Ring::map(
        s,
        libc::XDP_PGOFF_TX_RING as u64,
        &off.tx,
        half,
        true,
        &format!("{q} tx ring"),
    )
    .map_err(os)?;
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: bind_flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // A router killed a moment ago still holds its queues until the kernel's deferred
    // release of its sockets has run: a busy queue is tried again for up to a second.
    let mut tries = 0;
    let r = loop {
        // SAFETY: `sa` is a valid sockaddr_xdp of the given size.
        let r = unsafe {
            libc::bind(
                s,
                (&sa as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        let busy = r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBUSY);
        if !busy || tries >= 10 {
            break r;
        }
        tries += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    if r < 0 {
        let err = std::io::Error::last_os_error();
        let errno = err.raw_os_error().unwrap_or(0);
        if errno == libc::EINVAL {
            return Err((
                errno,
                IoError::Unsupported(format!(
                    "{q}: binding the AF_XDP socket: {err}; does {name} have a queue {queue} \
                     (ethtool -l {name})?"
                )),
            ));
        }
        if errno == libc::EBUSY {
            return Err((
                errno,
                IoError::Unsupported(format!(
                    "{q}: the queue is in use by another AF_XDP socket (EBUSY); is another \
                     router or XDP application running on {name}?"
                )),
            ));
        }
        return Err((
            errno,
            IoError::Os {
                what: format!("{q}: binding the AF_XDP socket"),
                err,
            },
        ));
    }
    Ok(Socket {
        fd,
        fill,
        comp,
        rx,
        tx,
    })
}

impl XdpPort {
    /// Opens a socket on `ifname` queue `queue` with `frames` UMEM frames of `frame_size`
    /// bytes, trying zero-copy first if `zero_copy`. It receives nothing until an
    /// [`XdpInterface`] (or another XDP program) redirects to it.
    pub fn open(
        ifname: &str,
        queue: u32,
        frame_size: u32,
        frames: u32,
        zero_copy: bool,
    ) -> Result<XdpPort, IoError> {
        let mut c = XdpConfig::new(ifname);
        c.frame_size = frame_size;
        c.frames = frames;
        c.check()?;
        let ifindex = index_of(ifname)?;
        match rx_queue_count(ifname, ifindex) {
            Some(have) if queue >= have => {
                return Err(IoError::Unsupported(format!(
                    "{ifname}: interface has {have} queues, queue {queue} asked for"
                )))
            }
            _ => {}
        }
        bpf::raise_memlock_limit();
        let len = frames as usize * frame_size as usize;
        let umem = Mapping::new(None, len, 0, &format!("{ifname} queue {queue} UMEM"))?;
        let half = frames / 2;
        let mut attempts = vec![(libc::XDP_COPY, false)];
        if zero_copy {
            attempts.insert(0, (libc::XDP_ZEROCOPY, true));
        }
        let mut result = None;
        for (flag, zc) in attempts {
            match setup(
                ifname,
                ifindex,
                queue,
                &umem,
                frame_size,
                half,
                flag | libc::XDP_USE_NEED_WAKEUP,
            ) {
                Ok(s) => {
                    result = Some((s, zc));
                    break;
                }
                // No zero-copy in this driver (or mode): the whole socket is set up again in
                // copy mode, since a socket whose bind failed cannot be bound again safely.
                Err((libc::EOPNOTSUPP | libc::EINVAL | libc::EPROTONOSUPPORT, _)) if zc => {}
                Err((_, e)) => return Err(e),
            }
        }
        let Some((s, zero_copy)) = result else {
            return Err(IoError::Unsupported(format!(
                "{ifname} queue {queue}: no AF_XDP bind mode worked"
            )));
        };
        let mut port = XdpPort {
            name: format!("{ifname}:{queue}"),
            ifindex,
            queue,
            fill: s.fill,
            comp: s.comp,
            rx: s.rx,
            tx: s.tx,
            fd: s.fd,
            umem,
            frame_size: u64::from(frame_size),
            tx_free: (half..frames)
                .rev()
                .map(|i| u64::from(i) * u64::from(frame_size))
                .collect(),
            fill_pending: (0..half)
                .map(|i| u64::from(i) * u64::from(frame_size))
                .collect(),
            tx_kick_pending: false,
            zero_copy,
            busy_poll: false,
            stats: IoStats::default(),
        };
        port.refill();
        Ok(port)
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The queue this socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket is bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Turns preferred busy polling on for this socket: from now on every [`Backend::recv`]
    /// first runs the interface's NAPI poll for up to `bp.budget` frames (one `recvfrom`),
    /// and transmit kicks do the same.
    pub fn set_busy_poll(&mut self, bp: &BusyPoll) -> Result<(), IoError> {
        let fd = self.fd.as_raw_fd();
        for (opt, val, what) in [
            (SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"),
            (libc::SO_BUSY_POLL, bp.usecs as libc::c_int, "SO_BUSY_POLL"),
            (
                SO_BUSY_POLL_BUDGET,
                libc::c_int::from(bp.budget),
                "SO_BUSY_POLL_BUDGET",
            ),
        ] {
            // SAFETY: `val` is a readable c_int.
            let r = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&val as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r < 0 {
                let err = std::io::Error::last_os_error();
                return Err(IoError::Unsupported(format!(
                    "{}: setting {what}: {err} (busy polling needs kernel 5.11+ and \
                     CAP_NET_ADMIN; or set busy_poll = false)",
                    self.name
                )));
            }
        }
        self.busy_poll = true;
        Ok(())
    }

    /// Gives `fill_pending` back to the fill ring, as much as fits.
    fn refill(&mut self) {
        let want = u32::try_from(self.fill_pending.len()).unwrap_or(u32::MAX);
        let n = self.fill.reserve(want);
        for i in 0..n {
            if let Some(a) = self.fill_pending.pop() {
                self.fill.write(i, a);
            }
        }
        self.fill.submit(n);
    }

    /// A zero-length nonblocking receive: wakes the driver, and with busy polling runs one
    /// NAPI poll of the interface.
    fn wake_rx(&mut self) {
        self.stats.kicks += 1;
        // SAFETY: a zero-length nonblocking receive with no buffer, as AF_XDP expects.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Moves completed transmit frames back to the free list.
    fn reclaim(&mut self) {
        let n = self.comp.peek(self.comp.size());
        let limit = self.umem.len() as u64;
        for i in 0..n {
            let a = self.comp.read(i);
            let base = a - a % self.frame_size;
            // Only transmit frames come back here; anything else is not ours to reuse.
            if base >= limit / 2 && base < limit && self.tx_free.len() < self.tx.size() as usize {
                self.tx_free.push(base);
            }
        }
        self.comp.release(n);
    }

    /// Wakes the kernel to send what the transmit ring holds. Copy mode sends at most
    /// [`COPY_TX_BATCH`] frames per call and says `EAGAIN` when more remain.
    fn kick_tx(&mut self, queued: usize) -> Result<(), IoError> {
        let tries = queued / COPY_TX_BATCH + 2;
        for _ in 0..tries {
            self.stats.kicks += 1;
            // SAFETY: a zero-length send with no buffer, as AF_XDP expects.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                self.tx_kick_pending = false;
                return Ok(());
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                // The device is busy or the completion ring full: retried on the next
                // send or flush.
                Some(libc::EBUSY) | Some(libc::ENOBUFS) => break,
                _ => {
                    return Err(IoError::Os {
                        what: format!("{}: sendto (AF_XDP transmit)", self.name),
                        err,
                    })
                }
            }
        }
        self.tx_kick_pending = true;
        Ok(())
    }
}

impl Backend for XdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        Kind::Xdp
    }

    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        let want = u32::try_from(max).unwrap_or(u32::MAX);
        if self.busy_poll && self.rx.peek(want) < want {
            // One NAPI poll of the interface, run here: it moves up to the budget's frames
            // from the device into the rx ring.
            self.wake_rx();
        }
        let n = self.rx.peek(want);
        let base_ptr = self.umem.ptr();
        let limit = self.umem.len() as u64;
        let mut got = 0;
        for i in 0..n {
            let d = self.rx.read(i);
            let len = u64::from(d.len);
            let within = d.addr % self.frame_size;
            let base = d.addr - within;
            if base < limit / 2 {
                // Only receive frames are ever in the fill ring; a transmit frame's
                // address here would corrupt the free list if given back.
                self.fill_pending.push(base);
            }
            if within + len > self.frame_size || base >= limit {
                self.stats.rx_invalid += 1;
                continue;
            }
            let mut p = pool
                .pop()
                .unwrap_or_else(|| Packet::with_capacity(vfsr_packet::DEFAULT_BUFFER));
            if d.len as usize > p.capacity() {
                self.stats.rx_invalid += 1;
                pool.push(p);
                continue;
            }
            // SAFETY: `addr + len` lies inside one UMEM frame (checked above); the kernel
            // wrote it before publishing the descriptor, and does not touch it until the
            // frame is back in the fill ring (after this loop).
            let data = unsafe {
                std::slice::from_raw_parts(base_ptr.add(d.addr as usize), d.len as usize)
            };
            p.set_frame(data);
            p.iif = self.ifindex;
            p.oif = 0;
            out.push(p);
            got += 1;
        }
        self.rx.release(n);
        if !self.fill_pending.is_empty() {
            self.refill();
        }
        if !self.busy_poll && self.fill.needs_wakeup() {
            self.wake_rx();
        }
        self.stats.rx += got as u64;
        Ok(got)
    }

    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        self.reclaim();
        let room = self.tx.reserve(self.tx.size());
        let base_ptr = self.umem.ptr();
        let mut n: u32 = 0;
        for f in frames {
            if n >= room || f.is_empty() || f.len() as u64 > self.frame_size {
                self.stats.tx_dropped += 1;
                continue;
            }
            let Some(addr) = self.tx_free.pop() else {
                self.stats.tx_dropped += 1;
                continue;
            };
            // SAFETY: `addr` is a transmit frame of the UMEM (the free list holds nothing
            // else) and the frame fits in it; the kernel does not read it until submitted.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), base_ptr.add(addr as usize), f.len());
            }
            self.tx.write(
                n,
                libc::xdp_desc {
                    addr,
                    len: f.len() as u32,
                    options: 0,
                },
            );
            n += 1;
        }
        if n > 0 {
            self.tx.submit(n);
            self.stats.tx += u64::from(n);
            self.tx_kick_pending = true;
        }
        if self.tx_kick_pending {
            if self.tx.needs_wakeup() {
                self.kick_tx(n as usize)?;
            } else {
                self.tx_kick_pending = false;
            }
        }
        self.reclaim();
        Ok(n as usize)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        if self.tx_kick_pending || (self.tx.outstanding() > 0 && self.tx.needs_wakeup()) {
            let q = self.tx.outstanding() as usize;
            self.kick_tx(q)?;
        }
        self.reclaim();
        Ok(())
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn stats(&self) -> IoStats {
        let mut s = self.stats;
        // SAFETY: all-zero is a valid xdp_statistics.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` is writable for `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut st as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        };
        if r == 0 {
            // Cumulative counters: the kernel never resets them.
            s.rx_dropped += st.rx_dropped + st.rx_ring_full + st.rx_fill_ring_empty_descs;
            s.rx_invalid += st.rx_invalid_descs;
            s.tx_dropped += st.tx_invalid_descs;
        }
        s
    }
}

#[cfg(test)]
mod tests {
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
