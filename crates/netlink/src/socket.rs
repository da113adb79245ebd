//! The kernel's routing socket (`NETLINK_ROUTE`, rtnetlink(7)), read without blocking.
//!
//! [`RouteSocket::open`] binds a socket in the calling thread's network namespace, joins the
//! multicast groups of links, IPv4/IPv6 addresses, IPv4/IPv6 routes and next-hop objects, and
//! sets its receive buffer. From then on the kernel queues a message on it for every change;
//! [`RouteSocket::recv`] decodes what is queued.
//!
//! **Overruns.** When changes come faster than they are read and the receive buffer is full,
//! the kernel drops messages and the next read fails with `ENOBUFS`: [`RecvStatus::Overrun`].
//! The socket's view is then stale; the caller dumps everything again and reconciles (what
//! the dump does not mention is gone). `NETLINK_NO_ENOBUFS` is left off on purpose: losing
//! messages silently would leave stale routes forever.
//!
//! **Dumps.** The kernel runs one dump per socket at a time (a second request is refused with
//! `EBUSY`), so [`RouteSocket::request_dump`] queues: the first request is sent at once, the
//! next when [`RouteSocket::recv`] sees the running dump end (`NLMSG_DONE`, or an
//! `NLMSG_ERROR` answering the request). Every dump ends with a [`Message::Done`] (or
//! [`Message::Error`]) in the output, in request order; [`RouteSocket::dumps_pending`] is 0
//! once the last has ended. [`RouteSocket::request_full_dump`] queues the five dumps a
//! route source starts with: links, addresses, next-hop objects, IPv4 routes, IPv6 routes
//! (the objects before the routes that name them). Changes keep arriving during a dump,
//! interleaved with its messages.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::AddressFamily;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::consts::*;
use crate::decode::{decode_into_marked, DecodeError, DecodeStats};
use crate::encode::emit;
use crate::msg::Message;
use crate::nhmsg::NextHopHeader;

/// What to dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DumpKind {
    /// Every interface (`RTM_GETLINK`).
    Links,
    /// Every IPv4 and IPv6 address (`RTM_GETADDR`, `AF_UNSPEC`).
    Addrs,
    /// Every next-hop object (`RTM_GETNEXTHOP`).
    NextHops,
    /// Every IPv4 route of every table (`RTM_GETROUTE`, `AF_INET`).
    Routes4,
    /// Every IPv6 route of every table (`RTM_GETROUTE`, `AF_INET6`).
    Routes6,
}

impl DumpKind {
    /// The dumps a route source starts with, in the order it needs them.
    pub const ALL: [DumpKind; 5] = [
        DumpKind::Links,
        DumpKind::Addrs,
        DumpKind::NextHops,
        DumpKind::Routes4,
        DumpKind::Routes6,
    ];
}

/// What one [`RouteSocket::recv`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecvStatus {
    /// Datagrams were read; this many messages were pushed.
    Messages(usize),
    /// Nothing queued now: poll the fd.
    WouldBlock,
    /// `ENOBUFS`: the kernel dropped messages. Apply what was pushed, then dump again
    /// ([`RouteSocket::request_full_dump`]) and reconcile.
    Overrun,
    /// A datagram could not be decoded (or did not fit in the receive buffer); its messages
    /// are lost, as with an overrun. Those of earlier datagrams were pushed.
    Malformed(DecodeError),
}

/// Size of the buffer one datagram is read into. The kernel sizes dump datagrams at up to
/// 32 KiB; a larger one is detected (`MSG_TRUNC`) and reported as malformed.
const RECV_BUFFER: usize = 64 * 1024;
/// Datagrams read by one [`RouteSocket::recv`] at most, so one call stays short.
const MAX_DATAGRAMS: usize = 64;

/// A nonblocking rtnetlink socket subscribed to route, next-hop, link and address changes.
#[derive(Debug)]
pub struct RouteSocket {
    sock: Socket,
    buf: Vec<u8>,
    seq: u32,
    rcvbuf: usize,
    running: Option<DumpKind>,
    queued: VecDeque<DumpKind>,
}

/// The multicast groups joined.
const GROUPS: [u32; 6] = [
    RTNLGRP_LINK,
    RTNLGRP_IPV4_IFADDR,
    RTNLGRP_IPV6_IFADDR,
    RTNLGRP_IPV4_ROUTE,
    RTNLGRP_IPV6_ROUTE,
    RTNLGRP_NEXTHOP,
];

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let ptr = (&value as *const libc::c_int).cast::<libc::c_void>();
    // SAFETY: `ptr` points to a live c_int of `len` bytes for the duration of the call.
    let rc = unsafe { libc::setsockopt(fd, level, name, ptr, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `SO_RCVBUFFORCE` from `asm-generic/socket.h` (the `libc` crate does not export it for
/// Linux); the architectures with their own numbering only get `SO_RCVBUF`.
#[cfg(not(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
const SO_RCVBUFFORCE: Option<libc::c_int> = Some(33);
#[cfg(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
const SO_RCVBUFFORCE: Option<libc::c_int> = None;

impl RouteSocket {
    /// Opens the socket in the calling thread's network namespace, nonblocking, subscribed
    /// to the groups of links, addresses, routes and next-hop objects, with a receive buffer
    /// of `rcvbuf` bytes: `SO_RCVBUFFORCE` (beyond `net.core.rmem_max`, needs
    /// `CAP_NET_ADMIN`), else `SO_RCVBUF` (capped at `rmem_max`). The kernel doubles the
    /// value for its bookkeeping and has a minimum; [`RouteSocket::rcvbuf`] says what was
    /// obtained.
    pub fn open(rcvbuf: usize) -> io::Result<RouteSocket> {
        Self::open_groups(rcvbuf, &GROUPS)
    }

    /// As [`RouteSocket::open`], subscribed to links only (`RTNLGRP_LINK`): for a reader of
    /// interface state that must not be flooded by a full table's route changes.
    pub fn open_links(rcvbuf: usize) -> io::Result<RouteSocket> {
        Self::open_groups(rcvbuf, &[RTNLGRP_LINK])
    }

    fn open_groups(rcvbuf: usize, groups: &[u32]) -> io::Result<RouteSocket> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        let fd = sock.as_raw_fd();
        let want = libc::c_int::try_from(rcvbuf).unwrap_or(libc::c_int::MAX);
        let forced =
            SO_RCVBUFFORCE.is_some_and(|opt| set_int(fd, libc::SOL_SOCKET, opt, want).is_ok());
        if !forced {
            set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, want)?;
        }
        sock.bind(&SocketAddr::new(0, 0))?;
        for group in groups {
            sock.add_membership(*group)?;
        }
        sock.set_non_blocking(true)?;
        let rcvbuf = sock.get_rx_buf_sz()?;
        Ok(RouteSocket {
            sock,
            buf: Vec::with_capacity(RECV_BUFFER),
            seq: 0,
            rcvbuf,
            running: None,
            queued: VecDeque::new(),
        })
    }

    /// The receive buffer size the kernel reports (`SO_RCVBUF`: twice what was set).
    pub fn rcvbuf(&self) -> usize {
        self.rcvbuf
    }

    /// The dump running now, if any.
    pub fn dumping(&self) -> Option<DumpKind> {
        self.running
    }

    /// Dumps running or queued.
    pub fn dumps_pending(&self) -> usize {
        self.queued.len() + usize::from(self.running.is_some())
    }

    /// Queues a dump; sends its request now if no dump runs. Its messages, then a
    /// [`Message::Done`], come out of [`RouteSocket::recv`].
    pub fn request_dump(&mut self, what: DumpKind) -> io::Result<()> {
        self.queued.push_back(what);
        self.start_next()
    }

    /// Queues the dumps of [`DumpKind::ALL`].
    pub fn request_full_dump(&mut self) -> io::Result<()> {
        self.queued.extend(DumpKind::ALL);
        self.start_next()
    }

    /// Forgets the running and queued dumps (for a caller that gives up waiting for a
    /// `Done`, e.g. after reopening).
    pub fn reset_dumps(&mut self) {
        self.running = None;
        self.queued.clear();
    }

    fn start_next(&mut self) -> io::Result<()> {
        if self.running.is_some() {
            return Ok(());
        }
        let Some(what) = self.queued.pop_front() else {
            return Ok(());
        };
        self.seq = self.seq.wrapping_add(1);
        let mut req = Vec::with_capacity(64);
        let flags = NLM_F_REQUEST | NLM_F_DUMP;
        match what {
            DumpKind::Links => emit(
                RTM_GETLINK,
                flags,
                self.seq,
                &LinkMessage::default(),
                &mut req,
            ),
            DumpKind::Addrs => emit(
                RTM_GETADDR,
                flags,
                self.seq,
                &AddressMessage::default(),
                &mut req,
            ),
            DumpKind::NextHops => emit(
                RTM_GETNEXTHOP,
                flags,
                self.seq,
                &NextHopHeader::default(),
                &mut req,
            ),
            DumpKind::Routes4 | DumpKind::Routes6 => {
                let mut msg = RouteMessage::default();
                msg.header.address_family = if what == DumpKind::Routes4 {
                    AddressFamily::Inet
                } else {
                    AddressFamily::Inet6
                };
                emit(RTM_GETROUTE, flags, self.seq, &msg, &mut req)
            }
        }
        debug_assert_eq!(req.len() % 4, 0);
        let kernel = SocketAddr::new(0, 0);
        match self.sock.send_to(&req, &kernel, 0) {
            Ok(_) => {
                self.running = Some(what);
                Ok(())
            }
            Err(e) => {
                self.queued.push_front(what);
                Err(e)
            }
        }
    }

    /// Reads the datagrams queued (up to 64), decoding their messages onto `out`, and starts
    /// the next queued dump when one ends. See [`RecvStatus`] for the outcomes; an `Err` is
    /// the socket's (reading, or sending the next dump request), and the messages pushed
    /// before it stay in `out`.
    pub fn recv(
        &mut self,
        out: &mut Vec<Message>,
        stats: &mut DecodeStats,
    ) -> io::Result<RecvStatus> {
        let mut multi = Vec::new();
        self.recv_marked(out, &mut multi, stats)
    }

    /// As [`RouteSocket::recv`], and for each message whether it is part of a dump
    /// (`NLM_F_MULTI`) or a notification of a change, pushed onto `multi`: a notification
    /// that arrives during a dump can be newer than the dump's listing of the same route.
    pub fn recv_marked(
        &mut self,
        out: &mut Vec<Message>,
        multi: &mut Vec<bool>,
        stats: &mut DecodeStats,
    ) -> io::Result<RecvStatus> {
        let mut pushed = 0usize;
        let mut datagrams = 0usize;
        while datagrams < MAX_DATAGRAMS {
            self.buf.clear();
            let n = match self.sock.recv(&mut self.buf, libc::MSG_TRUNC) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(RecvStatus::Overrun)
                }
                Err(e) => return Err(e),
            };
            datagrams += 1;
            if n > self.buf.len() {
                return Ok(RecvStatus::Malformed(DecodeError::Truncated {
                    offset: 0,
                    len: u32::try_from(n).ok(),
                    available: self.buf.len(),
                }));
            }
            let first = out.len();
            match decode_into_marked(&self.buf, out, multi, stats) {
                Ok(k) => pushed += k,
                Err(e) => return Ok(RecvStatus::Malformed(e)),
            }
            let ended = out
                .get(first..)
                .unwrap_or_default()
                .iter()
                .filter(|m| matches!(m, Message::Done | Message::Error(_)))
                .count();
            for _ in 0..ended {
                if self.running.take().is_some() {
                    self.start_next()?;
                }
            }
        }
        Ok(if datagrams == 0 {
            RecvStatus::WouldBlock
        } else {
            RecvStatus::Messages(pushed)
        })
    }
}

impl AsRawFd for RouteSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for RouteSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}
