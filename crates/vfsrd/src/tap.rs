//! The host stack's view of a port: a TAP device with the port's MAC, MTU and addresses.
//!
//! What the router does not handle itself (TCP to its addresses, routing protocols, ICMP
//! other than echo) is written into the TAP, so sshd, BGP speakers and the kernel's own
//! tools see it as arriving on an ordinary interface; what the host sends on the TAP is
//! read back and leaves through the port. The TAP carries the port's MAC, so frames the host
//! writes need no rewriting.
//!
//! Made with `/dev/net/tun` (`TUNSETIFF`, `IFF_TAP | IFF_NO_PI`: one frame per read or
//! write, no extra header), configured with `ioctl`s (MAC, MTU, up) and rtnetlink
//! (`RTM_NEWADDR`, IPv6 addresses with `IFA_F_NODAD` so they work at once). Not persistent:
//! closing the descriptor deletes the device.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use vfsr_wire::MacAddr;

use crate::error::{Error, Result};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFA_F_NODAD: u32 = 0x02;
const IFA_FLAGS: u16 = 8;

/// A TAP device, deleted on drop.
pub struct Tap {
    name: String,
    fd: OwnedFd,
    ifindex: u32,
}

fn err(what: &str, name: &str) -> Error {
    let e = std::io::Error::last_os_error();
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs root or CAP_NET_ADMIN)",
        Some(libc::ENOENT) | Some(libc::ENODEV) => " (no /dev/net/tun: load the tun module)",
        Some(libc::EBUSY) | Some(libc::EEXIST) => " (the name is in use)",
        _ => "",
    };
    Error::os(format!("TAP {name}: {what}"), e).hint(hint)
}

fn ifreq(name: &str) -> Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(Error::invalid(
            format!("{name:?}"),
            "not a valid interface name",
        ));
    }
    // SAFETY: ifreq is plain old data; all zeroes is valid.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

struct Sock(OwnedFd);

impl Sock {
    fn dgram() -> Result<Sock> {
        // SAFETY: plain socket call, result checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::last_os("socket"));
        }
        // SAFETY: fd is a new descriptor we own.
        Ok(Sock(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn ioctl(&self, req: libc::c_ulong, r: &mut libc::ifreq) -> bool {
        // SAFETY: `r` is a valid ifreq for the request made.
        unsafe { libc::ioctl(self.0.as_raw_fd(), req as _, r as *mut libc::ifreq) == 0 }
    }
}

impl Tap {
    /// Creates TAP `name` with `mac`, `mtu` and the addresses, and brings it up.
    pub fn create(
        name: &str,
        mac: MacAddr,
        mtu: u16,
        addrs4: &[(Ipv4Addr, u8)],
        addrs6: &[(Ipv6Addr, u8)],
    ) -> Result<Tap> {
        let mut req = ifreq(name)?;
        let path = c"/dev/net/tun";
        // SAFETY: opening a path from a valid C string.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(err("open /dev/net/tun", name));
        }
        // SAFETY: fd is a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        req.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI;
        // SAFETY: TUNSETIFF takes an ifreq.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut libc::ifreq) } != 0
        {
            return Err(err("TUNSETIFF", name));
        }
        let sock = Sock::dgram()?;
        let mut r = ifreq(name)?;
        // SAFETY: writing the hardware-address member of the union.
        unsafe {
            r.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
            for (d, s) in r.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac.0) {
                *d = s as libc::c_char;
            }
        }
        if !sock.ioctl(libc::SIOCSIFHWADDR, &mut r) {
            return Err(err("set MAC", name));
        }
        let mut r = ifreq(name)?;
        r.ifr_ifru.ifru_mtu = libc::c_int::from(mtu);
        if !sock.ioctl(libc::SIOCSIFMTU, &mut r) {
            return Err(err("set MTU", name));
        }
        let mut r = ifreq(name)?;
        if !sock.ioctl(libc::SIOCGIFINDEX, &mut r) {
            return Err(err("get index", name));
        }
        // SAFETY: SIOCGIFINDEX filled the index member.
        let ifindex = unsafe { r.ifr_ifru.ifru_ifindex } as u32;
        // No router solicitations or autoconfiguration on the TAP: the router is the router.
        let conf = format!("/proc/sys/net/ipv6/conf/{name}");
        if std::path::Path::new(&conf).exists() {
            let _ = std::fs::write(format!("{conf}/accept_ra"), "0");
            let _ = std::fs::write(format!("{conf}/accept_dad"), "0");
            let _ = std::fs::write(format!("{conf}/forwarding"), "0");
        }
        let mut r = ifreq(name)?;
        if !sock.ioctl(libc::SIOCGIFFLAGS, &mut r) {
            return Err(err("get flags", name));
        }
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        unsafe {
            r.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        }
        if !sock.ioctl(libc::SIOCSIFFLAGS, &mut r) {
            return Err(err("bring up", name));
        }
        let tap = Tap {
            name: name.to_string(),
            fd,
            ifindex,
        };
        for (a, l) in addrs4 {
            add_address(ifindex, IpAddr::V4(*a), *l)
                .map_err(|e| e.context(format!("TAP {name}")))?;
        }
        for (a, l) in addrs6 {
            add_address(ifindex, IpAddr::V6(*a), *l)
                .map_err(|e| e.context(format!("TAP {name}")))?;
        }
        Ok(tap)
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The descriptor (readable when the host sent a frame).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A frame the host sent, or `None`.
    pub fn read_frame(&mut self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: reads at most buf.len() bytes into buf.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        (n > 0).then_some(n as usize)
    }

    /// Gives the host a frame; `false` if its queue is full (or the frame was refused).
    pub fn write_frame(&mut self, frame: &[u8]) -> bool {
        // SAFETY: writes frame.len() bytes from frame.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        n == frame.len() as isize
    }
}

/// Adds an address to interface `ifindex` over rtnetlink and waits for the kernel's answer.
pub fn add_address(ifindex: u32, addr: IpAddr, len: u8) -> Result<()> {
    let msg = newaddr_message(ifindex, addr, len, 1);
    // SAFETY: plain socket call, result checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(Error::last_os("netlink socket"));
    }
    // SAFETY: fd is a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sends the message bytes on our socket (the kernel is the default peer).
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n != msg.len() as isize {
        return Err(Error::last_os("netlink send"));
    }
    let mut buf = [0u8; 1024];
    // SAFETY: receives into a live local buffer.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(Error::last_os("netlink recv"));
    }
    match ack_error(buf.get(..n as usize).unwrap_or(&[])) {
        Some(0) => Ok(()),
        Some(e) => Err(Error::os(
            format!("adding {addr}/{len}"),
            std::io::Error::from_raw_os_error(-e),
        )),
        None => Err(Error::invalid(
            format!("adding {addr}/{len}"),
            "no answer from the kernel",
        )),
    }
}

fn push_attr(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The bytes of an `RTM_NEWADDR` request (create, fail if it exists, ask for an ack).
pub fn newaddr_message(ifindex: u32, addr: IpAddr, len: u8, seq: u32) -> Vec<u8> {
    // The body first; the nlmsghdr, which holds the total length, goes in front at the end.
    let mut m = Vec::with_capacity(64);
    let (family, bytes, flags): (u8, Vec<u8>, u32) = match addr {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec(), 0),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec(), IFA_F_NODAD),
    };
    // ifaddrmsg: family, prefixlen, flags, scope, index.
    m.extend_from_slice(&[family, len, flags as u8, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    push_attr(&mut m, libc::IFA_LOCAL, &bytes);
    push_attr(&mut m, libc::IFA_ADDRESS, &bytes);
    push_attr(&mut m, IFA_FLAGS, &flags.to_ne_bytes());
    let total = (m.len() + NLMSG_HDRLEN) as u32;
    let nl_flags =
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_ne_bytes());
    out.extend_from_slice(&libc::RTM_NEWADDR.to_ne_bytes());
    out.extend_from_slice(&nl_flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it
    out.extend_from_slice(&m);
    out
}

/// Bytes of `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;

/// The error code of a netlink ack (`0` = success, negative errno), `None` if the bytes are
/// not an ack.
pub fn ack_error(b: &[u8]) -> Option<i32> {
    let len = u32::from_ne_bytes(b.get(0..4)?.try_into().ok()?) as usize;
    let kind = u16::from_ne_bytes(b.get(4..6)?.try_into().ok()?);
    if kind != libc::NLMSG_ERROR as u16 || len < 20 || len > b.len() {
        return None;
    }
    Some(i32::from_ne_bytes(b.get(16..20)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newaddr_message_layout() {
        let m = newaddr_message(7, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 24, 3);
        // 16 header + 8 ifaddrmsg + 3 attributes of 8 bytes.
        assert_eq!(m.len(), 48);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 48);
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 20);
        assert_eq!(&m[16..20], &[2, 24, 0, 0]);
        assert_eq!(u32::from_ne_bytes(m[20..24].try_into().unwrap()), 7);
        assert_eq!(&m[24..32], &[8, 0, 2, 0, 10, 0, 0, 1]);
        let m6 = newaddr_message(7, IpAddr::V6(Ipv6Addr::LOCALHOST), 128, 1);
        assert_eq!(m6.len(), 16 + 8 + 20 + 20 + 8);
        assert_eq!(m6[18], IFA_F_NODAD as u8);
    }

    #[test]
    fn acks_are_read_and_garbage_is_not() {
        let mut ack = vec![0u8; 36];
        ack[0..4].copy_from_slice(&36u32.to_ne_bytes());
        ack[4..6].copy_from_slice(&(libc::NLMSG_ERROR as u16).to_ne_bytes());
        ack[16..20].copy_from_slice(&(-17i32).to_ne_bytes());
        assert_eq!(ack_error(&ack), Some(-17));
        assert_eq!(ack_error(&ack[..10]), None);
        let mut lie = ack.clone();
        lie[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(ack_error(&lie), None);
        assert_eq!(ack_error(&[]), None);
        assert!(ifreq("a/b").is_err());
        assert!(ifreq("this-is-sixteen!").is_err());
    }
}
