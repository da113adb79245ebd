//! The XDP fast path: a destination flow table in the steering program (`bpf/xsk_steer.c`).
//!
//! The forwarding worker decides every packet that reaches it. Some decisions depend on the
//! destination alone: one next hop (no ECMP group), its MAC resolved, a packet that fits
//! the egress MTU. For those the worker stores the outcome here, under the interface's
//! current generation, and the program replays it for later frames to the same destination
//! in the kernel's receive hook: it checks the frame as the pipeline's input stages would
//! (anything unusual goes to the worker), writes the MACs, lowers the TTL or hop limit and
//! redirects the frame to the egress port. This is FreeBSD's flowtable (Li & Macy) in its
//! destination-hashing mode (section 4.2), placed where a frame costs least: with AF_XDP in
//! copy mode (every veth, NICs without zero-copy) a frame that goes through user space costs
//! the kernel a copy in and a socket buffer out, several times the pipeline's own work.
//!
//! ```text
//!   worker: Forward, one next hop ──install(dst, {gen, port, MACs, MTU})──▶ fast4 / fast6
//!   control plane: neighbor change published ──invalidate()──▶ fastctl.gen += 1
//!   program: entry.gen == fastctl.gen ? rewrite + redirect : to the worker
//! ```
//!
//! Correctness rests on the order of two reads and two writes. A worker reads the
//! generation *before* it looks at any snapshot for a batch and tags what it installs with
//! that value; the control plane bumps the generation *after* it publishes a change. A
//! decision made from a snapshot older than a change therefore carries a generation older
//! than the bump, and the program treats it as a miss. Each interface has its own tables
//! (filled by the workers that receive from it); the control plane is the only writer of
//! the generation.
//!
//! Egress is an XDP redirect (`tx_ports`, a devmap): the egress driver must accept
//! redirected frames (`ndo_xdp_xmit`). Physical NIC drivers with XDP do; a veth does when
//! its peer has an XDP program or GRO on, and otherwise drops them, which is why the fast
//! path is off unless asked for.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::ring::Mapping;
use crate::bpf;
use crate::IoError;

/// One cached decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastEntry {
    /// The generation read before the decision was made ([`FastPath::generation`]).
    pub gen: u32,
    /// The egress port (the key it has in the program's `tx_ports`).
    pub port: u32,
    /// The next hop's MAC.
    pub dmac: [u8; 6],
    /// The egress port's MAC.
    pub smac: [u8; 6],
    /// The egress port's IP MTU.
    pub mtu: u16,
}

impl FastEntry {
    /// The program's `struct fast_nh`.
    fn bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..4].copy_from_slice(&self.gen.to_ne_bytes());
        b[4..8].copy_from_slice(&self.port.to_ne_bytes());
        b[8..14].copy_from_slice(&self.dmac);
        b[14..20].copy_from_slice(&self.smac);
        b[20..22].copy_from_slice(&self.mtu.to_ne_bytes());
        b
    }

    fn from_bytes(b: &[u8; 24]) -> FastEntry {
        let mut dmac = [0u8; 6];
        let mut smac = [0u8; 6];
        dmac.copy_from_slice(&b[8..14]);
        smac.copy_from_slice(&b[14..20]);
        FastEntry {
            gen: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            port: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            dmac,
            smac,
            mtu: u16::from_ne_bytes([b[20], b[21]]),
        }
    }
}

/// Fast-path counters of one interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastCounters {
    /// Frames forwarded by the program.
    pub forwarded: u64,
    /// Frames whose entry was older than the generation (sent to the worker).
    pub stale: u64,
}

/// Counter slots of the program's `counters` map (see `bpf/xsk_steer.c`).
pub(crate) const CNT_FAST_FORWARDED: u32 = 3;
pub(crate) const CNT_FAST_STALE: u32 = 4;

/// A handle on one interface's fast-path tables. It holds its own descriptors of the
/// program's maps (and its own mapping of `fastctl`), so it stays valid (if no longer used
/// by the kernel) whatever happens to the interface, and it can be moved to any thread.
pub struct FastPath {
    name: String,
    fast4: OwnedFd,
    fast6: OwnedFd,
    ctl_fd: OwnedFd,
    counters: OwnedFd,
    /// `fastctl`'s one value, mapped: generation at 0, switch at 4, MAC at 8.
    ctl: Mapping,
}

// SAFETY: the mapping is shared memory that the kernel and other handles also use; this
// handle touches it only through atomics (generation, switch) and a byte write made before
// the switch is turned on.
unsafe impl Send for FastPath {}

pub(super) fn dup(fd: RawFd, what: &str) -> Result<OwnedFd, IoError> {
    // SAFETY: duplicating a descriptor we hold; the copy is owned below.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if d < 0 {
        return Err(IoError::last(format!(
            "duplicating the {what} map descriptor"
        )));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

fn page_size() -> usize {
    // SAFETY: plain query.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

impl FastPath {
    fn open(name: &str, fds: [RawFd; 4]) -> Result<FastPath, IoError> {
        let [fast4, fast6, ctl, counters] = fds;
        let ctl_fd = dup(ctl, "fastctl")?;
        let map = Mapping::new(
            Some(ctl_fd.as_raw_fd()),
            page_size(),
            0,
            &format!("{name}: fastctl"),
        )?;
        Ok(FastPath {
            name: name.to_string(),
            fast4: dup(fast4, "fast4")?,
            fast6: dup(fast6, "fast6")?,
            ctl_fd,
            counters: dup(counters, "counters")?,
            ctl: map,
        })
    }

    /// Turns the fast path on in a loaded `xsk_steer` object (`name` names it in errors):
    /// fills `tx_ports` with `egress` (port number, kernel interface index, both in the
    /// caller's network namespace) and sets the port's MAC, keeping the generation.
    /// [`super::XdpInterface::fast_path`] does this for an interface's program.
    pub fn for_object(
        name: &str,
        obj: &bpf::BpfObject,
        mac: [u8; 6],
        egress: &[(u32, u32)],
    ) -> Result<FastPath, IoError> {
        let fast4 = obj.map_fd("fast4")?;
        let fast6 = obj.map_fd("fast6")?;
        let ctl = obj.map_fd("fastctl")?;
        let tx_ports = obj.map_fd("tx_ports")?;
        let counters = obj.map_fd("counters")?;
        for &(port, ifindex) in egress {
            bpf::map_update(tx_ports, &port.to_ne_bytes(), &ifindex.to_ne_bytes()).map_err(
                |e| {
                    IoError::Unsupported(format!(
                        "{name}: fast path: port {port} (ifindex {ifindex}) cannot take \
                         XDP redirects: {e}"
                    ))
                },
            )?;
        }
        let f = FastPath::open(name, [fast4, fast6, ctl, counters])?;
        // SAFETY: the mapping is a page; bytes 8..14 hold the MAC, which the program reads
        // only once the switch (stored after it, with release) is on.
        unsafe {
            std::ptr::copy_nonoverlapping(mac.as_ptr(), f.ctl.ptr().add(8), 6);
        }
        f.word(4).store(1, Ordering::Release);
        Ok(f)
    }

    /// Another handle on the same tables.
    pub fn try_clone(&self) -> Result<FastPath, IoError> {
        FastPath::open(
            &self.name,
            [
                self.fast4.as_raw_fd(),
                self.fast6.as_raw_fd(),
                self.ctl_fd.as_raw_fd(),
                self.counters.as_raw_fd(),
            ],
        )
    }

    /// The 32-bit word at byte `at` (0 or 4) of `fastctl`'s value.
    fn word(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at == 0 || at == 4);
        // SAFETY: `at` is 0 or 4: inside the page-sized, page-aligned mapping, which lives
        // as long as `self`; the program reads the word, user space changes it atomically.
        unsafe { &*(self.ctl.ptr().add(at & 4) as *const AtomicU32) }
    }

    /// The interface.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current generation: read it before making the decisions to install.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.word(0).load(Ordering::Acquire)
    }

    /// Retires every entry at once. Call it after publishing a change: a decision made from
    /// anything older then carries an older generation.
    pub fn invalidate(&self) {
        self.word(0).fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the program uses the fast path.
    pub fn enabled(&self) -> bool {
        self.word(4).load(Ordering::Acquire) != 0
    }

    /// Turns the program's fast path off (entries stay, unused).
    pub fn disable(&self) {
        self.word(4).store(0, Ordering::Release);
    }

    /// Stores the decision for destination `dst`.
    pub fn install(&self, dst: IpAddr, entry: &FastEntry) -> Result<(), IoError> {
        match dst {
            IpAddr::V4(a) => bpf::map_update(self.fast4.as_raw_fd(), &a.octets(), &entry.bytes()),
            IpAddr::V6(a) => bpf::map_update(self.fast6.as_raw_fd(), &a.octets(), &entry.bytes()),
        }
    }

    /// The entry stored for `dst`, if any (whatever its generation).
    pub fn get(&self, dst: IpAddr) -> Result<Option<FastEntry>, IoError> {
        let mut b = [0u8; 24];
        let found = match dst {
            IpAddr::V4(a) => bpf::map_lookup(self.fast4.as_raw_fd(), &a.octets(), &mut b)?,
            IpAddr::V6(a) => bpf::map_lookup(self.fast6.as_raw_fd(), &a.octets(), &mut b)?,
        };
        Ok(found.then(|| FastEntry::from_bytes(&b)))
    }

    /// What the program did on the fast path so far.
    pub fn counters(&self) -> Result<FastCounters, IoError> {
        Ok(FastCounters {
            forwarded: read_counter(self.counters.as_raw_fd(), CNT_FAST_FORWARDED)?,
            stale: read_counter(self.counters.as_raw_fd(), CNT_FAST_STALE)?,
        })
    }
}

/// The sum over CPUs of slot `slot` of a per-CPU counter map.
pub(crate) fn read_counter(fd: RawFd, slot: u32) -> Result<u64, IoError> {
    let cpus = bpf::possible_cpus()?;
    let mut buf = vec![0u8; cpus * 8];
    if !bpf::map_lookup(fd, &slot.to_ne_bytes(), &mut buf)? {
        return Ok(0);
    }
    Ok(buf
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_bytes_follow_the_program_struct() {
        let e = FastEntry {
            gen: 7,
            port: 2,
            dmac: [1, 2, 3, 4, 5, 6],
            smac: [0xa, 0xb, 0xc, 0xd, 0xe, 0xf],
            mtu: 1500,
        };
        let b = e.bytes();
        assert_eq!(&b[0..4], &7u32.to_ne_bytes());
        assert_eq!(&b[4..8], &2u32.to_ne_bytes());
        assert_eq!(&b[8..14], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(&b[14..20], &[0xa, 0xb, 0xc, 0xd, 0xe, 0xf]);
        assert_eq!(&b[20..22], &1500u16.to_ne_bytes());
        assert_eq!(&b[22..24], &[0, 0]);
        assert_eq!(FastEntry::from_bytes(&b), e);
    }
}
