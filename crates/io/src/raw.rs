//! A plain `AF_PACKET` socket: nonblocking, bound to one interface, one `recv`/`send` system
//! call per frame. The control plane uses it for the little traffic it handles (ARP, ND,
//! punted packets and their replies); it does not put VLAN tags back. The rings of
//! [`crate::packet::PacketPort`] are for the forwarding path's rates.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::packet::{bind_all, index_of, open_socket, setsockopt};
use crate::IoError;

/// A nonblocking AF_PACKET socket bound to one interface, a system call per frame.
pub struct RawSocket {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    truncated: u64,
}

impl RawSocket {
    /// Opens a raw socket on `ifname` for every protocol. With `ignore_outgoing`, frames
    /// sent on the interface (by anyone) are not received.
    pub fn open(ifname: &str, ignore_outgoing: bool) -> Result<RawSocket, IoError> {
        let ifindex = index_of(ifname)?;
        let fd = open_socket(ifname)?;
        if ignore_outgoing {
            let one: libc::c_int = 1;
            setsockopt(
                fd.as_raw_fd(),
                libc::PACKET_IGNORE_OUTGOING,
                &one,
                "PACKET_IGNORE_OUTGOING",
                ifname,
            )?;
        }
        bind_all(fd.as_raw_fd(), ifindex, ifname)?;
        Ok(RawSocket {
            name: ifname.to_string(),
            ifindex,
            fd,
            truncated: 0,
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The descriptor, for poll.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames skipped because they were larger than the buffer given.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// Reads one frame into `buf`: its length, or `None` when nothing is waiting. A frame
    /// larger than `buf` is skipped and counted in [`RawSocket::truncated`].
    pub fn recv_frame(&mut self, buf: &mut [u8]) -> Result<Option<usize>, IoError> {
        loop {
            // SAFETY: `buf` is writable for its length.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            if r < 0 {
                let err = std::io::Error::last_os_error();
                return match err.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(None),
                    Some(libc::EINTR) => continue,
                    _ => Err(IoError::Os {
                        what: format!("recv on the raw socket of {}", self.name),
                        err,
                    }),
                };
            }
            let n = r as usize;
            if n > buf.len() {
                self.truncated += 1;
                continue;
            }
            return Ok(Some(n));
        }
    }

    /// Sends one frame; `false` when the socket's buffer is full (the frame is not sent).
    pub fn send_frame(&mut self, frame: &[u8]) -> Result<bool, IoError> {
        // SAFETY: `frame` is readable for its length.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(false),
            _ => Err(IoError::Os {
                what: format!("send on the raw socket of {}", self.name),
                err,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interface_is_named() {
        let e = RawSocket::open("vfsr-no-such0", true).err().unwrap();
        assert!(matches!(e, IoError::NoSuchInterface(ref n) if n == "vfsr-no-such0"));
        assert!(e.to_string().contains("vfsr-no-such0"), "{e}");
    }
}
