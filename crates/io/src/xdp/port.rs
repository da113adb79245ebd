//! An AF_XDP port: one socket bound to (interface, queue) with its UMEM and four rings, and
//! its receive and transmit paths as a [`Backend`].

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use vfsr_packet::Packet;

use crate::bpf;
use crate::rx::RxBatch;
use crate::{Backend, IoError, IoStats, Kind};

use super::busypoll::{SO_BUSY_POLL_BUDGET, SO_PREFER_BUSY_POLL};
use super::ring::{Mapping, Ring};
use super::socket::setup;
use super::{index_of, rx_queue_count, BusyPoll, XdpConfig, COPY_TX_BATCH};

/// One AF_XDP socket bound to (interface, queue), with its UMEM and four rings.
pub struct XdpPort {
    pub(super) name: String,
    pub(super) ifindex: u32,
    pub(super) queue: u32,
    // Field order: rings unmapped, then the socket closed, then the UMEM unmapped.
    pub(super) fill: Ring<u64>,
    pub(super) comp: Ring<u64>,
    pub(super) rx: Ring<libc::xdp_desc>,
    pub(super) tx: Ring<libc::xdp_desc>,
    pub(super) fd: OwnedFd,
    pub(super) umem: Mapping,
    pub(super) frame_size: u64,
    /// Transmit frames not in the kernel's hands.
    pub(super) tx_free: Vec<u64>,
    /// Receive frames waiting to go back to the fill ring (only if it was ever full).
    pub(super) fill_pending: Vec<u64>,
    /// Frames in the transmit ring the kernel may not have been woken for.
    pub(super) tx_kick_pending: bool,
    pub(super) zero_copy: bool,
    /// Whether each receive drives the interface's NAPI poll itself (a `recvfrom`).
    pub(super) busy_poll: bool,
    pub(super) stats: IoStats,
}

// SAFETY: the mappings are owned by this value alone; moving it to another thread moves
// their only user.
unsafe impl Send for XdpPort {}

impl XdpPort {
    /// Opens a socket on `ifname` queue `queue` with `frames` UMEM frames of `frame_size`
    /// bytes, trying zero-copy first if `zero_copy`. It receives nothing until an
    /// [`XdpInterface`](super::XdpInterface) (or another XDP program) redirects to it.
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
        let mut rx = RxBatch::new(out, pool, self.ifindex);
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
                rx.invalid(1);
                continue;
            }
            // SAFETY: `addr + len` lies inside one UMEM frame (checked above); the kernel
            // wrote it before publishing the descriptor, and does not touch it until the
            // frame is back in the fill ring (after this loop).
            let data = unsafe {
                std::slice::from_raw_parts(base_ptr.add(d.addr as usize), d.len as usize)
            };
            rx.push_copy(data);
        }
        let got = rx.finish(&mut self.stats);
        self.rx.release(n);
        if !self.fill_pending.is_empty() {
            self.refill();
        }
        if !self.busy_poll && self.fill.needs_wakeup() {
            self.wake_rx();
        }
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
