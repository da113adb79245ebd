//! What ethtool and sysfs tell of an interface: its driver and its receive queues.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
pub(super) struct EthtoolChannels {
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

pub(super) const ETHTOOL_GCHANNELS: u32 = 0x3c;
pub(super) const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// Receive queues of interface `name` (index `ifindex`): the ethtool channel count (in the
/// caller's network namespace), else sysfs when it shows this very interface (sysfs shows
/// the namespace it was mounted in, which may not be ours); `None` when neither says.
pub fn rx_queue_count(name: &str, ifindex: u32) -> Option<u32> {
    ethtool_rx_queues(name).or_else(|| sysfs_rx_queues(name, ifindex))
}

/// Runs one `SIOCETHTOOL` request on interface `name` (in the caller's network namespace);
/// `data` is the ethtool command structure, its `cmd` word set.
pub(super) fn ethtool<T>(name: &str, data: &mut T) -> bool {
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

pub(super) fn ethtool_rx_queues(name: &str) -> Option<u32> {
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
pub(super) struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    counts: [u32; 5],
}

pub(super) const ETHTOOL_GDRVINFO: u32 = 0x03;

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

pub(super) fn sysfs_rx_queues(name: &str, ifindex: u32) -> Option<u32> {
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
