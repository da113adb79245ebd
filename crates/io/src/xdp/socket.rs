//! One AF_XDP socket's setup: the UMEM registration, ring sizes and mappings, the bind
//! (zero-copy first when asked, copy mode otherwise).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::IoError;

use super::ring::{Mapping, Ring};

/// What a socket setup attempt produced.
pub(super) struct Socket {
    pub(super) fd: OwnedFd,
    pub(super) fill: Ring<u64>,
    pub(super) comp: Ring<u64>,
    pub(super) rx: Ring<libc::xdp_desc>,
    pub(super) tx: Ring<libc::xdp_desc>,
}

pub(super) fn setsockopt<T>(
    fd: RawFd,
    opt: libc::c_int,
    val: &T,
    what: &str,
) -> Result<(), IoError> {
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
pub(super) fn setup(
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
