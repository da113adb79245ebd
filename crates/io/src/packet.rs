//! AF_PACKET with TPACKET_V3 rings: the backend that runs on any Linux interface, and a plain
//! raw socket for the control plane.
//!
//! [`PacketPort`] is the fallback when AF_XDP is not available (a driver without XDP, an
//! old kernel, a veth without a peer program): one `AF_PACKET` socket bound to the
//! interface with two rings shared with the kernel through one `mmap`:
//!
//! ```text
//!  mmap: [ RX block 0 | RX block 1 | ... | RX block n-1 ][ TX slot 0 | TX slot 1 | ... ]
//!
//!  RX block (TPACKET_V3, variable-sized frames, handed over whole):
//!  +----------------------------+---------------------+---------------------+----
//!  | block descriptor           | tpacket3_hdr | frame | tpacket3_hdr | frame | ...
//!  |  status: KERNEL / USER     |  next_offset ───────▶                      |
//!  |  num_pkts, first offset    |  snaplen, mac offset                       |
//!  +----------------------------+---------------------+---------------------+----
//!
//!  TX slot (fixed size): [ tpacket3_hdr: status AVAILABLE / SEND_REQUEST, len | frame ]
//! ```
//!
//! Why TPACKET_V3 for receive: the kernel fills a whole block before handing it over (or
//! retires it after a short timeout, 1 ms by default, so a trickle of frames is not held
//! back), so one status flip moves dozens of frames and the receive path makes no system
//! call at all: [`PacketPort::recv`] walks the frames of the current block by their
//! `tp_next_offset` chain, copies each into a [`Packet`] from the pool, gives the block back
//! (`TP_STATUS_KERNEL`) once every frame in it has been read, and stops after `max` frames to
//! resume mid-block on the next call. Transmit uses fixed slots (the kernel has no block
//! transmit): frames are written into free slots marked `TP_STATUS_SEND_REQUEST` and one
//! `sendto(fd, NULL, 0, MSG_DONTWAIT)` per batch makes the kernel send them all. A slot the
//! kernel still owns means the ring is full: the frame is counted in
//! [`IoStats::tx_dropped`], never waited for.
//!
//! The socket asks for `PACKET_QDISC_BYPASS` (frames go straight to the driver, as a router's
//! would) and `PACKET_IGNORE_OUTGOING`: a packet socket never reads its own transmits, but
//! without the option it would read every frame the host stack (or anyone else) sends on the
//! interface and forward it again. The kernel's drop counter (`PACKET_STATISTICS`,
//! reset by every read) is accumulated into [`IoStats::rx_dropped`].
//!
//! Several queues of one interface (one per worker) are sockets of one fanout group
//! ([`PacketConfig::fanout`]): the kernel hashes each flow to one of them.
//!
//! The kernel takes VLAN tags out of received frames before packet sockets see them and
//! reports them beside the frame (`TP_STATUS_VLAN_VALID`); receive puts the tag back, so a
//! frame reaches the pipeline with the bytes it had on the wire.
//!
//! Everything read from the shared ring is bounds-checked against the block before it is
//! used: the kernel writes it, but a wrong offset must be a counted invalid frame, not a
//! read outside the mapping. Status words are read with acquire and written with release
//! ordering, the same pairing the kernel uses on its side.
//!
//! [`crate::raw::RawSocket`] is the simple form, in a module of its own.
//!
//! The ring layouts and status protocol are the kernel's `Documentation/networking/
//! packet_mmap.rst` and `include/uapi/linux/if_packet.h`; the offsets used here are listed
//! as constants below, next to the structure they come from.

use std::cell::Cell;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use vfsr_packet::Packet;

use crate::rx::RxBatch;
use crate::{Backend, IoError, IoStats, Kind};

/// The ring version, as `PACKET_VERSION` takes it (an `int`).
const TPACKET_V3: libc::c_int = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
/// Bytes in front of a frame in a TX slot: `TPACKET3_HDRLEN - sizeof(sockaddr_ll)`, where the
/// kernel expects the frame when the socket does not set `PACKET_TX_HAS_OFF`.
const TX_DATA_OFFSET: usize = libc::TPACKET3_HDRLEN - size_of::<libc::sockaddr_ll>();
/// The nominal receive frame size the kernel wants in `tpacket_req3` (V3 packs frames by
/// their real size; a frame may take up to a block).
const RX_FRAME_SIZE: u32 = 2048;
/// Size of `struct tpacket3_hdr`.
const FRAME_HDR: usize = size_of::<libc::tpacket3_hdr>();
/// Size of `struct tpacket_block_desc` (what precedes the first frame at the least).
const BLOCK_HDR: usize = size_of::<libc::tpacket_block_desc>();

// Offsets in `struct tpacket_block_desc`: `version`, `offset_to_priv`, then the
// `tpacket_hdr_v1` the ring reads (its fields, shifted by where it starts).
const BLOCK_V1: usize = offset_of!(libc::tpacket_block_desc, hdr);
const BLOCK_STATUS: usize = BLOCK_V1 + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = BLOCK_V1 + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST: usize = BLOCK_V1 + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);

// Offsets in `struct tpacket3_hdr`; the VLAN fields are in `hv1`
// (`struct tpacket_hdr_variant1`).
const HDR_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const HDR_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const HDR_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const HDR_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const HDR_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const HDR_HV1: usize = offset_of!(libc::tpacket3_hdr, hv1);
const HDR_VLAN_TCI: usize = HDR_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const HDR_VLAN_TPID: usize = HDR_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
/// The 802.1Q TPID, used when the kernel does not say which one the tag had.
const ETHERTYPE_VLAN: u16 = 0x8100;

/// Ring geometry and socket options of a [`PacketPort`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketConfig {
    /// Bytes per receive block; a multiple of the page size.
    pub block_size: u32,
    /// Receive blocks in the ring.
    pub block_count: u32,
    /// Milliseconds after which the kernel hands over a block that is not full.
    pub retire_ms: u32,
    /// Bytes per transmit slot (header included; frames up to `tx_frame_size - 48`); a power
    /// of two of at least 128 dividing the page size or a multiple of it.
    pub tx_frame_size: u32,
    /// Transmit slots in the ring.
    pub tx_frames: u32,
    /// Send straight to the driver, past the interface's queueing discipline.
    pub qdisc_bypass: bool,
    /// Do not receive frames sent on the interface (ours and the host stack's).
    pub ignore_outgoing: bool,
    /// Put the interface in promiscuous mode while the port is open.
    pub promiscuous: bool,
    /// Join fanout group `id` (one per interface, shared by its queues): the kernel spreads
    /// received frames over the group's sockets by flow hash, so a flow stays on one
    /// worker. `None`: this socket receives everything.
    pub fanout: Option<u16>,
}

impl Default for PacketConfig {
    fn default() -> Self {
        PacketConfig {
            block_size: 1 << 18,
            block_count: 16,
            retire_ms: 1,
            tx_frame_size: 2048,
            tx_frames: 1024,
            qdisc_bypass: true,
            ignore_outgoing: true,
            promiscuous: false,
            fanout: None,
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

impl PacketConfig {
    fn check(&self, ifname: &str) -> Result<(), IoError> {
        let page = page_size();
        let bad = |what: String| IoError::Unsupported(format!("AF_PACKET on {ifname}: {what}"));
        if self.block_size == 0 || !(self.block_size as usize).is_multiple_of(page) {
            return Err(bad(format!(
                "block size {} is not a multiple of the page size {page}",
                self.block_size
            )));
        }
        if self.block_count == 0 || self.tx_frames == 0 {
            return Err(bad("the rings need at least one block and one slot".into()));
        }
        let fs = self.tx_frame_size as usize;
        if fs < 128 || !fs.is_power_of_two() || (fs > page && !fs.is_multiple_of(page)) {
            return Err(bad(format!(
                "transmit slot size {fs} must be a power of two of at least 128"
            )));
        }
        if self.retire_ms == 0 {
            return Err(bad("the block retire timeout must be at least 1 ms".into()));
        }
        let total = u64::from(self.block_size) * u64::from(self.block_count)
            + u64::from(self.tx_frame_size) * u64::from(self.tx_frames);
        if total > 1 << 30 {
            return Err(bad(format!("rings of {total} bytes are more than 1 GiB")));
        }
        Ok(())
    }

    /// Bytes per transmit block: a page, or one slot when slots are larger.
    fn tx_block_size(&self) -> u32 {
        (page_size() as u32).max(self.tx_frame_size)
    }

    /// Transmit slots rounded up to whole blocks.
    fn tx_slots(&self) -> u32 {
        let per_block = self.tx_block_size() / self.tx_frame_size;
        self.tx_frames.div_ceil(per_block) * per_block
    }
}

/// The index of interface `name`, or [`IoError::NoSuchInterface`].
pub(crate) fn index_of(name: &str) -> Result<u32, IoError> {
    let c = std::ffi::CString::new(name).map_err(|_| IoError::NoSuchInterface(name.into()))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(IoError::NoSuchInterface(name.into()))
    } else {
        Ok(i)
    }
}

/// Opens an AF_PACKET socket that receives nothing until bound; errors say what to do.
pub(crate) fn open_socket(name: &str) -> Result<OwnedFd, IoError> {
    // SAFETY: plain system call; the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        if matches!(err.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
            return Err(IoError::Unsupported(format!(
                "opening an AF_PACKET socket on {name}: {err}; run as root or give the \
                 binary CAP_NET_RAW (setcap cap_net_raw+ep)"
            )));
        }
        return Err(IoError::Os {
            what: format!("socket(AF_PACKET) for {name}"),
            err,
        });
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn setsockopt<T>(
    fd: RawFd,
    opt: libc::c_int,
    val: &T,
    what: &str,
    name: &str,
) -> Result<(), IoError> {
    // SAFETY: `val` points to a live `T` of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            opt,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(IoError::last(format!("setsockopt({what}) on {name}")))
    } else {
        Ok(())
    }
}

/// Binds `fd` to `ifindex` for every protocol.
pub(crate) fn bind_all(fd: RawFd, ifindex: u32, name: &str) -> Result<(), IoError> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: `sa` is a valid sockaddr_ll of the given length.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let err = std::io::Error::last_os_error();
        let hint = if err.raw_os_error() == Some(libc::ENODEV) {
            " (the interface went away)"
        } else {
            ""
        };
        return Err(IoError::Os {
            what: format!("binding the AF_PACKET socket to {name}{hint}"),
            err,
        });
    }
    Ok(())
}

fn promiscuous(fd: RawFd, ifindex: u32, name: &str) -> Result<(), IoError> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt(
        fd,
        libc::PACKET_ADD_MEMBERSHIP,
        &mreq,
        "PACKET_ADD_MEMBERSHIP promiscuous",
        name,
    )
}

/// The status word at `ptr`, shared with the kernel.
///
/// # Safety
/// `ptr` must be 4-byte aligned and inside the live ring mapping.
unsafe fn status<'a>(ptr: *mut u8) -> &'a AtomicU32 {
    // SAFETY: per the contract; AtomicU32 has the layout of u32.
    unsafe { &*(ptr as *const AtomicU32) }
}

/// A shared mapping of both rings.
struct Ring {
    base: NonNull<u8>,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; nothing refers to it after.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Where receive is in the current block.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    /// The block is ours (its status said so) and partly read.
    open: bool,
    /// Frames of the block not yet read.
    left: u32,
    /// Offset of the next frame's header in the block.
    offset: usize,
}

/// One queue of an interface through an AF_PACKET socket with TPACKET_V3 rings.
pub struct PacketPort {
    name: String,
    ifindex: u32,
    // Field order: the mapping goes before the socket is closed.
    ring: Ring,
    fd: OwnedFd,
    block_size: usize,
    block_count: usize,
    block: usize,
    cursor: Cursor,
    tx_base: usize,
    tx_slot: usize,
    tx_slots: usize,
    tx_head: usize,
    /// Frames queued since the last successful kick.
    tx_pending: usize,
    stats: IoStats,
    /// Kernel drops read so far (the kernel resets its counter on each read).
    kernel_drops: Cell<u64>,
}

// SAFETY: the mapping is owned by this value alone; moving it to another thread moves
// the only user.
unsafe impl Send for PacketPort {}

impl PacketPort {
    /// Opens `ifname` with the default ring geometry.
    pub fn open(ifname: &str) -> Result<PacketPort, IoError> {
        PacketPort::with_config(ifname, &PacketConfig::default())
    }

    /// Opens `ifname` with `config`: socket, options, rings, mapping, then the bind (so no
    /// frame of another interface is ever queued on it).
    pub fn with_config(ifname: &str, config: &PacketConfig) -> Result<PacketPort, IoError> {
        config.check(ifname)?;
        let ifindex = index_of(ifname)?;
        let fd = open_socket(ifname)?;
        let raw = fd.as_raw_fd();
        setsockopt(
            raw,
            libc::PACKET_VERSION,
            &TPACKET_V3,
            "PACKET_VERSION",
            ifname,
        )?;
        if config.qdisc_bypass {
            let one: libc::c_int = 1;
            setsockopt(
                raw,
                libc::PACKET_QDISC_BYPASS,
                &one,
                "PACKET_QDISC_BYPASS",
                ifname,
            )?;
        }
        if config.ignore_outgoing {
            let one: libc::c_int = 1;
            setsockopt(
                raw,
                libc::PACKET_IGNORE_OUTGOING,
                &one,
                "PACKET_IGNORE_OUTGOING",
                ifname,
            )?;
        }
        let rx = libc::tpacket_req3 {
            tp_block_size: config.block_size,
            tp_block_nr: config.block_count,
            // Only a bound on the count for V3 receive: frames are packed by size.
            tp_frame_size: RX_FRAME_SIZE,
            tp_frame_nr: config.block_size / RX_FRAME_SIZE * config.block_count,
            tp_retire_blk_tov: config.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(raw, libc::PACKET_RX_RING, &rx, "PACKET_RX_RING", ifname)?;
        let tx_block = config.tx_block_size();
        let tx_slots = config.tx_slots();
        let tx = libc::tpacket_req3 {
            tp_block_size: tx_block,
            tp_block_nr: tx_slots / (tx_block / config.tx_frame_size),
            tp_frame_size: config.tx_frame_size,
            tp_frame_nr: tx_slots,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(raw, libc::PACKET_TX_RING, &tx, "PACKET_TX_RING", ifname)?;
        let rx_len = config.block_size as usize * config.block_count as usize;
        let len = rx_len + tx_slots as usize * config.tx_frame_size as usize;
        // SAFETY: a fresh shared mapping of the socket's rings, of the size they were made.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                raw,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(IoError::last(format!(
                "mapping the AF_PACKET rings of {ifname} ({len} bytes)"
            )));
        }
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| IoError::Unsupported(format!("mmap for {ifname} returned NULL")))?;
        let ring = Ring { base, len };
        if config.promiscuous {
            promiscuous(raw, ifindex, ifname)?;
        }
        bind_all(raw, ifindex, ifname)?;
        if let Some(id) = config.fanout {
            // No DEFRAG flag: a router forwards fragments as they come. The kernel's flow
            // hash leaves ports out for fragments, so all of a packet's fragments still
            // land on one socket.
            let arg: u32 = u32::from(id) | (libc::PACKET_FANOUT_HASH << 16);
            setsockopt(raw, libc::PACKET_FANOUT, &arg, "PACKET_FANOUT", ifname)?;
        }
        Ok(PacketPort {
            name: ifname.to_string(),
            ifindex,
            ring,
            fd,
            block_size: config.block_size as usize,
            block_count: config.block_count as usize,
            block: 0,
            cursor: Cursor::default(),
            tx_base: rx_len,
            tx_slot: config.tx_frame_size as usize,
            tx_slots: tx_slots as usize,
            tx_head: 0,
            tx_pending: 0,
            stats: IoStats::default(),
            kernel_drops: Cell::new(0),
        })
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Start of receive block `i`.
    fn block_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: i < block_count, so the offset is inside the mapping.
        unsafe { self.ring.base.as_ptr().add(i * self.block_size) }
    }

    /// A u32 field of the current block at byte `off` (checked against the block).
    fn block_u32(&self, off: usize) -> Option<u32> {
        if off.checked_add(4)? > self.block_size || !off.is_multiple_of(4) {
            return None;
        }
        // SAFETY: inside the block, aligned (blocks are page aligned).
        Some(unsafe { std::ptr::read_volatile(self.block_ptr(self.block).add(off).cast::<u32>()) })
    }

    fn block_u16(&self, off: usize) -> Option<u16> {
        if off.checked_add(2)? > self.block_size || !off.is_multiple_of(2) {
            return None;
        }
        // SAFETY: inside the block, aligned.
        Some(unsafe { std::ptr::read_volatile(self.block_ptr(self.block).add(off).cast::<u16>()) })
    }

    /// Gives the current block back to the kernel and moves to the next one.
    fn release_block(&mut self) {
        // SAFETY: the status word is inside the block, aligned.
        unsafe { status(self.block_ptr(self.block).add(BLOCK_STATUS)) }
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.cursor = Cursor::default();
        self.block = (self.block + 1) % self.block_count;
    }

    /// Opens the current block if the kernel has handed it over.
    fn open_block(&mut self) -> bool {
        // SAFETY: the status word is inside the block, aligned.
        let st =
            unsafe { status(self.block_ptr(self.block).add(BLOCK_STATUS)) }.load(Ordering::Acquire);
        if st & libc::TP_STATUS_USER == 0 {
            return false;
        }
        let left = self.block_u32(BLOCK_NUM_PKTS).unwrap_or(0);
        let first = self.block_u32(BLOCK_FIRST).unwrap_or(0) as usize;
        self.cursor = Cursor {
            open: true,
            left,
            offset: first,
        };
        true
    }

    /// The frame whose header is at `off`, or `None` when its header or data lie outside
    /// the block.
    fn frame_at(&self, off: usize) -> Option<RxFrame> {
        if off < BLOCK_HDR || off.checked_add(FRAME_HDR)? > self.block_size {
            return None;
        }
        let next = self.block_u32(off + HDR_NEXT)?;
        let snap = self.block_u32(off + HDR_SNAPLEN)? as usize;
        let len = self.block_u32(off + HDR_LEN)? as usize;
        let status = self.block_u32(off + HDR_STATUS)?;
        let mac = self.block_u16(off + HDR_MAC)? as usize;
        let start = off.checked_add(mac)?;
        if mac < FRAME_HDR || start.checked_add(snap)? > self.block_size {
            return None;
        }
        let vlan = if status & libc::TP_STATUS_VLAN_VALID != 0 {
            let tci = self.block_u32(off + HDR_VLAN_TCI)? as u16;
            let tpid = match self.block_u16(off + HDR_VLAN_TPID)? {
                t if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && t != 0 => t,
                _ => ETHERTYPE_VLAN,
            };
            Some((tpid, tci))
        } else {
            None
        };
        Some(RxFrame {
            start,
            len: snap,
            truncated: snap < len,
            next,
            vlan,
        })
    }

    /// Copies `f` into `p`, putting back the 802.1Q tag the kernel took out of the frame
    /// (it moves tags into metadata before packet sockets see the frame); `false` if it
    /// does not fit or is shorter than an Ethernet address pair.
    fn copy_frame(&self, f: &RxFrame, p: &mut Packet) -> bool {
        // SAFETY: frame_at checked start + len against the block.
        let data =
            unsafe { std::slice::from_raw_parts(self.block_ptr(self.block).add(f.start), f.len) };
        let Some((tpid, tci)) = f.vlan else {
            if f.len > p.capacity() {
                return false;
            }
            p.set_frame(data);
            return true;
        };
        let total = f.len + 4;
        let (Some(macs), Some(rest)) = (data.get(..12), data.get(12..)) else {
            return false;
        };
        let mut head = [0u8; 16];
        head[..12].copy_from_slice(macs);
        head[12..14].copy_from_slice(&tpid.to_be_bytes());
        head[14..].copy_from_slice(&tci.to_be_bytes());
        let Some((h, t)) = p
            .buffer_mut()
            .get_mut(..total)
            .and_then(|d| d.split_at_mut_checked(16))
        else {
            return false;
        };
        h.copy_from_slice(&head);
        t.copy_from_slice(rest);
        p.set_len(total)
    }
}

/// Where a received frame is in its block and what the kernel says about it.
#[derive(Clone, Copy, Debug)]
struct RxFrame {
    start: usize,
    len: usize,
    /// Cut short by the ring (the frame was larger than a block allows).
    truncated: bool,
    /// Offset from this frame's header to the next one (0: last).
    next: u32,
    /// The VLAN tag the kernel removed: (TPID, TCI).
    vlan: Option<(u16, u16)>,
}

impl Backend for PacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        Kind::Packet
    }

    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        let mut rx = RxBatch::new(out, pool, self.ifindex);
        while rx.got() < max {
            if !self.cursor.open && !self.open_block() {
                break;
            }
            if self.cursor.left == 0 {
                self.release_block();
                continue;
            }
            let off = self.cursor.offset;
            let Some(f) = self.frame_at(off) else {
                // A header outside the block: the rest of the block cannot be walked.
                rx.invalid(u64::from(self.cursor.left));
                self.release_block();
                continue;
            };
            self.cursor.left -= 1;
            self.cursor.offset = off.saturating_add(f.next as usize);
            if f.next == 0 && self.cursor.left > 0 {
                rx.invalid(u64::from(self.cursor.left));
                self.cursor.left = 0;
            }
            rx.push_with(|p| !f.truncated && self.copy_frame(&f, p));
            if self.cursor.left == 0 {
                self.release_block();
            }
        }
        Ok(rx.finish(&mut self.stats))
    }

    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        let room = self.tx_slot - TX_DATA_OFFSET;
        let mut n = 0;
        for f in frames {
            if f.len() > room || f.is_empty() {
                self.stats.tx_dropped += 1;
                continue;
            }
            // SAFETY: tx_head < tx_slots, so the slot is inside the mapping; slots are
            // 128-byte aligned.
            let slot = unsafe {
                self.ring
                    .base
                    .as_ptr()
                    .add(self.tx_base + self.tx_head * self.tx_slot)
            };
            // SAFETY: the status word is inside the slot, aligned.
            let st = unsafe { status(slot.add(HDR_STATUS)) };
            let s = st.load(Ordering::Acquire);
            if s != libc::TP_STATUS_AVAILABLE && s & libc::TP_STATUS_WRONG_FORMAT == 0 {
                self.stats.tx_dropped += 1;
                continue;
            }
            if s & libc::TP_STATUS_WRONG_FORMAT != 0 {
                // The kernel refused what was there before; that frame is lost.
                self.stats.tx_dropped += 1;
            }
            // SAFETY: header and data fit in the slot (len ≤ room); the kernel does not
            // touch a slot whose status is not SEND_REQUEST.
            unsafe {
                std::ptr::write_volatile(slot.add(HDR_NEXT).cast::<u32>(), 0);
                std::ptr::write_volatile(slot.add(HDR_LEN).cast::<u32>(), f.len() as u32);
                std::ptr::write_volatile(slot.add(HDR_SNAPLEN).cast::<u32>(), f.len() as u32);
                std::ptr::copy_nonoverlapping(f.as_ptr(), slot.add(TX_DATA_OFFSET), f.len());
            }
            st.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_head = (self.tx_head + 1) % self.tx_slots;
            n += 1;
        }
        self.stats.tx += n as u64;
        self.tx_pending += n;
        if self.tx_pending > 0 {
            self.kick()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        if self.tx_pending > 0 {
            self.kick()?;
        }
        Ok(())
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn stats(&self) -> IoStats {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` is writable for `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(st.tp_drops));
        }
        let mut s = self.stats;
        s.rx_dropped += self.kernel_drops.get();
        s
    }
}

impl PacketPort {
    /// Tells the kernel to send every slot marked SEND_REQUEST, without waiting.
    fn kick(&mut self) -> Result<(), IoError> {
        self.stats.kicks += 1;
        // SAFETY: a NULL buffer of length 0 is how a TX ring is flushed.
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
            self.tx_pending = 0;
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            // The frames stay in the ring; the next send or flush retries.
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(()),
            _ => Err(IoError::Os {
                what: format!("sendto (transmit ring) on {}", self.name),
                err,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_layout_is_the_kernels() {
        // The x86-64 and aarch64 ABI of <linux/if_packet.h>, as the kernel lays it out.
        assert_eq!((FRAME_HDR, BLOCK_HDR, TX_DATA_OFFSET), (48, 48, 48));
        assert_eq!((BLOCK_STATUS, BLOCK_NUM_PKTS, BLOCK_FIRST), (8, 12, 16));
        assert_eq!(
            (HDR_NEXT, HDR_SNAPLEN, HDR_LEN, HDR_STATUS),
            (0, 12, 16, 20)
        );
        assert_eq!((HDR_MAC, HDR_VLAN_TCI, HDR_VLAN_TPID), (24, 32, 36));
        assert_eq!(TPACKET_V3, 2);
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = PacketPort::open("vfsr-no-such0").err().unwrap();
        assert!(matches!(e, IoError::NoSuchInterface(ref n) if n == "vfsr-no-such0"));
    }

    #[test]
    fn without_privileges_the_error_says_what_to_do() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            vfsr_skip::skip("running as root, the socket opens");
            return;
        }
        let e = PacketPort::open("lo").err().unwrap();
        let s = e.to_string();
        assert!(s.contains("lo") && s.contains("CAP_NET_RAW"), "{s}");
    }

    #[test]
    fn bad_geometry_is_refused_before_any_system_call() {
        let c = PacketConfig {
            block_size: 1000,
            ..PacketConfig::default()
        };
        let e = PacketPort::with_config("lo", &c).err().unwrap();
        assert!(e.to_string().contains("page size"), "{e}");
        let c = PacketConfig {
            tx_frame_size: 100,
            ..PacketConfig::default()
        };
        assert!(PacketPort::with_config("lo", &c).is_err());
        let c = PacketConfig {
            retire_ms: 0,
            ..PacketConfig::default()
        };
        assert!(PacketPort::with_config("lo", &c).is_err());
    }

    #[test]
    fn transmit_slots_fill_whole_blocks() {
        let c = PacketConfig {
            tx_frame_size: 2048,
            tx_frames: 3,
            ..PacketConfig::default()
        };
        let per_block = c.tx_block_size() / 2048;
        assert_eq!(c.tx_slots() % per_block, 0);
        assert!(c.tx_slots() >= 3);
    }
}
