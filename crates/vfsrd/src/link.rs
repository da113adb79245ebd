//! What the control plane talks through: a [`Link`] sends and receives single frames (a raw socket
//! on a port, a TAP device, or memory in tests), [`ToControl`] is what the workers hand over
//! (through a bounded channel, the inbox), and a [`Wake`] eventfd lets a worker wake the control
//! plane once per batch instead of once per packet.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use vfsr_fwd::{Packet, PuntClass};

/// One frame at a time, never blocking.
pub trait Link: Send {
    /// A waiting frame into `buf`, or `None`.
    fn recv(&mut self, buf: &mut [u8]) -> Option<usize>;
    /// Sends a frame; `false` if it could not be queued (counted by the caller).
    fn send(&mut self, frame: &[u8]) -> bool;
    /// A descriptor to poll for readability.
    fn fd(&self) -> Option<RawFd>;
}

/// What a worker hands to the control plane.
#[derive(Debug)]
pub enum ToControl {
    /// A packet for the router (its class decided by the pipeline).
    Punt {
        /// Its class.
        class: PuntClass,
        /// The frame as received.
        packet: Packet,
    },
    /// A packet whose next hop needs resolving.
    Resolve {
        /// The egress port.
        ifindex: u32,
        /// The neighbor.
        nexthop: IpAddr,
        /// The packet (TTL already decremented).
        packet: Packet,
    },
}

/// An eventfd: workers [`Wake::notify`], the control plane polls it.
pub struct Wake {
    fd: RawFd,
}

impl Wake {
    /// A new eventfd (nonblocking).
    pub fn new() -> std::io::Result<Wake> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Wake { fd })
    }

    /// Wakes the poller (a full counter is already a wake-up, so errors are ignored).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own descriptor.
        unsafe {
            libc::write(self.fd, (&one as *const u64).cast(), 8);
        }
    }

    /// Clears pending wake-ups.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our own descriptor.
        unsafe {
            libc::read(self.fd, (&mut v as *mut u64).cast(), 8);
        }
    }

    /// The descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns, once.
        unsafe {
            libc::close(self.fd);
        }
    }
}

#[derive(Default)]
struct MemQueues {
    to_router: VecDeque<Vec<u8>>,
    from_router: VecDeque<Vec<u8>>,
}

fn lock(q: &Mutex<MemQueues>) -> MutexGuard<'_, MemQueues> {
    match q.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// A link in memory; [`MemLink::pair`] gives the router's end and the test's end.
#[derive(Clone, Default)]
pub struct MemLink {
    q: Arc<Mutex<MemQueues>>,
    router_side: bool,
}

impl MemLink {
    /// The router's end and the test's end of one link.
    pub fn pair() -> (MemLink, MemLink) {
        let q = Arc::new(Mutex::new(MemQueues::default()));
        (
            MemLink {
                q: Arc::clone(&q),
                router_side: true,
            },
            MemLink {
                q,
                router_side: false,
            },
        )
    }

    /// Everything sent from the other end, oldest first.
    pub fn take(&self) -> Vec<Vec<u8>> {
        let mut q = lock(&self.q);
        if self.router_side {
            q.to_router.drain(..).collect()
        } else {
            q.from_router.drain(..).collect()
        }
    }
}

impl Link for MemLink {
    fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut q = lock(&self.q);
        let f = if self.router_side {
            q.to_router.pop_front()
        } else {
            q.from_router.pop_front()
        }?;
        let n = f.len().min(buf.len());
        buf.get_mut(..n)?.copy_from_slice(f.get(..n)?);
        Some(n)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        let mut q = lock(&self.q);
        if self.router_side {
            q.from_router.push_back(frame.to_vec());
        } else {
            q.to_router.push_back(frame.to_vec());
        }
        true
    }

    fn fd(&self) -> Option<RawFd> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_link_carries_frames_both_ways() {
        let (mut r, mut t) = MemLink::pair();
        assert!(t.send(&[1, 2]));
        assert!(r.send(&[3]));
        let mut buf = [0u8; 8];
        assert_eq!(r.recv(&mut buf), Some(2));
        assert_eq!(&buf[..2], &[1, 2]);
        assert_eq!(r.recv(&mut buf), None);
        assert_eq!(t.take(), vec![vec![3]]);
    }

    #[test]
    fn wake_polls_readable_until_drained() {
        let w = Wake::new().unwrap();
        let readable = |w: &Wake| {
            let mut p = libc::pollfd {
                fd: w.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, 0) == 1 }
        };
        assert!(!readable(&w));
        w.notify();
        w.notify();
        assert!(readable(&w));
        w.drain();
        assert!(!readable(&w));
    }
}
