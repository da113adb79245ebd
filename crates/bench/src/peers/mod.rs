//! Peers: the LPM engines users would otherwise pick, behind the same trait.
//!
//! Each adapter wraps one third-party implementation in [`vfsr_lpm::Lpm`] so that `vfsr lpm
//! bench` measures it in the same run, on the same routes and the same addresses, as vfsr's own
//! engines:
//!
//! | report name        | family  | what it wraps                                          |
//! |--------------------|---------|--------------------------------------------------------|
//! | `prefix-trie`      | v4, v6  | [`prefix_trie::PrefixMap`], `get_lpm`                  |
//! | `ip_network_table` | v4, v6  | [`ip_network_table::IpNetworkTable`], `longest_match_*`|
//! | `rotonda-store`    | v4, v6  | [`rotonda_store::rib::StarCastRib`], `match_prefix`    |
//! | `rte_lpm`          | v4      | DPDK `rte_lpm`, `rte_lpm_lookup_bulk` (feature `dpdk`) |
//! | `rte_fib`          | v4      | DPDK `rte_fib` DIR24_8, scalar lookup (feature `dpdk`) |
//! | `rte_fib_avx512`   | v4      | the same with DPDK's AVX-512 lookup (feature `dpdk`)   |
//! | `rte_fib6`         | v6      | DPDK `rte_fib6` TRIE, scalar lookup (feature `dpdk`)   |
//! | `rte_fib6_avx512`  | v6      | the same with DPDK's AVX-512 lookup (feature `dpdk`)   |
//!
//! The benchmark iterates over [`peers`] (or [`peers_v4`] / [`peers_v6`]): every entry names a
//! peer and gives the function that builds it, so the caller can time the build itself and can
//! build, measure and drop one peer at a time. A peer that cannot run here (DPDK's EAL does not
//! start, the AVX-512 lookup cannot be selected) fails its build with
//! [`PeerErrorKind::Unavailable`], which a report shows as "skipped" rather than "failed".
//!
//! Every build first puts the routes in canonical order ([`vfsr_lpm::canonicalize`]): the last
//! route given for a prefix wins and routes to [`vfsr_lpm::NO_ROUTE`] are withdrawals, exactly
//! as for vfsr's engines.

mod ipnt;
mod ptrie;
mod rotonda;

#[cfg(feature = "dpdk")]
pub mod dpdk;

pub use ipnt::IpNetworkTablePeer;
pub use ptrie::PrefixTriePeer;
pub use rotonda::RotondaPeer;

use core::fmt;
use vfsr_lpm::{Key, Lpm, Route};

/// Why a peer could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerErrorKind {
    /// The peer cannot run in this process or on this machine (DPDK's EAL did not start, the
    /// AVX-512 lookup could not be selected...). Reports show it as skipped.
    Unavailable,
    /// The peer runs here but rejected this route list (next hop too large, table full...).
    Build,
}

impl PeerErrorKind {
    /// How a [`PeerError`]'s text names the kind.
    fn what(self) -> &'static str {
        match self {
            PeerErrorKind::Unavailable => "unavailable",
            PeerErrorKind::Build => "build failed",
        }
    }
}

/// A peer's build failure: which peer, what kind of failure and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{peer}: {}: {reason}", .kind.what())]
pub struct PeerError {
    pub peer: &'static str,
    pub kind: PeerErrorKind,
    pub reason: String,
}

impl PeerError {
    pub fn build(peer: &'static str, reason: impl Into<String>) -> Self {
        PeerError {
            peer,
            kind: PeerErrorKind::Build,
            reason: reason.into(),
        }
    }

    pub fn unavailable(peer: &'static str, reason: impl Into<String>) -> Self {
        PeerError {
            peer,
            kind: PeerErrorKind::Unavailable,
            reason: reason.into(),
        }
    }
}

/// Why DPDK's peers cannot run in this process ([`dpdk_available`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DpdkError {
    /// This build has no DPDK peers.
    #[error("vfsr-bench was built without the `dpdk` feature")]
    NotBuilt,
    /// An EAL argument (from `VFSR_DPDK_EAL_ARGS`) cannot be a C string.
    #[error("EAL argument {0:?} holds NUL")]
    NulArgument(String),
    /// `rte_eal_init` refused its arguments (them, DPDK's description of the error).
    #[error("rte_eal_init({args}) failed: {why}")]
    EalInit {
        /// The arguments after the program name.
        args: String,
        /// DPDK's description of the error.
        why: String,
    },
    /// DPDK's SIMD limit could not be raised to 512 bits: the AVX-512 lookups cannot be used.
    #[error("cannot raise DPDK's SIMD limit to 512 bits ({why}; limit stays {limit})")]
    SimdLimit {
        /// DPDK's description of the error.
        why: String,
        /// The limit in force, in bits.
        limit: u16,
    },
    /// The CPU lacks the AVX-512 subsets the lookup needs (`bw`: BW as well as F and DQ).
    #[error("the CPU lacks AVX-512 F/DQ{}", if *.bw { "/BW" } else { "" })]
    NoAvx512 {
        /// Whether BW is needed too.
        bw: bool,
    },
}

/// A boxed peer engine, as the registry hands them out.
pub type DynLpm<K> = Box<dyn Lpm<K>>;

/// Builds a peer from a route list.
pub type PeerBuildFn<K> = fn(&[Route<K>]) -> Result<DynLpm<K>, PeerError>;

/// One entry of the registry: a peer's report name and its build function.
#[derive(Clone, Copy)]
pub struct Peer<K: Key> {
    /// The name the built engine reports through [`Lpm::name`].
    pub name: &'static str,
    /// Builds the peer; the caller times this call.
    pub build: PeerBuildFn<K>,
}

impl<K: Key> fmt::Debug for Peer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer").field("name", &self.name).finish()
    }
}

/// Address families the peers serve: `u32` (IPv4) and `u128` (IPv6).
pub trait PeerKey: Key {
    /// Every peer compiled into this build for the family, in report order.
    fn peers() -> Vec<Peer<Self>>;
}

fn boxed<K: Key, E: Lpm<K> + 'static>(r: Result<E, PeerError>) -> Result<DynLpm<K>, PeerError> {
    r.map(|e| Box::new(e) as DynLpm<K>)
}

/// The peers written in Rust, which serve both families, in report order.
fn rust_peers<K>() -> Vec<Peer<K>>
where
    K: ipnt::IpntKey + rotonda::RotondaKey,
    (K, u8): prefix_trie::Prefix<R = K>,
{
    vec![
        Peer {
            name: ptrie::NAME,
            build: |r| boxed(PrefixTriePeer::build(r)),
        },
        Peer {
            name: ipnt::NAME,
            build: |r| boxed(IpNetworkTablePeer::build(r)),
        },
        Peer {
            name: rotonda::NAME,
            build: |r| boxed(RotondaPeer::build(r)),
        },
    ]
}

impl PeerKey for u32 {
    fn peers() -> Vec<Peer<u32>> {
        #[allow(unused_mut)]
        let mut v = rust_peers();
        #[cfg(feature = "dpdk")]
        v.extend([
            Peer {
                name: dpdk::LPM_NAME,
                build: |r| boxed(dpdk::RteLpm::build(r)),
            },
            Peer {
                name: dpdk::FIB_NAME,
                build: |r| boxed(dpdk::RteFib::build(r)),
            },
            Peer {
                name: dpdk::FIB_AVX512_NAME,
                build: |r| boxed(dpdk::RteFib::build_avx512(r)),
            },
        ]);
        v
    }
}

impl PeerKey for u128 {
    fn peers() -> Vec<Peer<u128>> {
        #[allow(unused_mut)]
        let mut v = rust_peers();
        #[cfg(feature = "dpdk")]
        v.extend([
            Peer {
                name: dpdk::FIB6_NAME,
                build: |r| boxed(dpdk::RteFib6::build(r)),
            },
            Peer {
                name: dpdk::FIB6_AVX512_NAME,
                build: |r| boxed(dpdk::RteFib6::build_avx512(r)),
            },
        ]);
        v
    }
}

/// Every peer compiled into this build for the family `K`, in report order. DPDK's peers are
/// listed only when the crate is built with the `dpdk` feature; they may still fail to build
/// with [`PeerErrorKind::Unavailable`] at run time.
pub fn peers<K: PeerKey>() -> Vec<Peer<K>> {
    K::peers()
}

/// The IPv4 peers ([`peers`] for `u32`).
pub fn peers_v4() -> Vec<Peer<u32>> {
    peers::<u32>()
}

/// The IPv6 peers ([`peers`] for `u128`).
pub fn peers_v6() -> Vec<Peer<u128>> {
    peers::<u128>()
}

/// Builds every peer of the family from `routes`, in report order. Each result keeps the
/// peer's name so that a failed build can still be reported. Convenient for tests and quick
/// checks; a benchmark that times builds or must bound its memory should use [`peers`] and
/// build one peer at a time.
pub fn build_all<K: PeerKey>(
    routes: &[Route<K>],
) -> Vec<(&'static str, Result<DynLpm<K>, PeerError>)> {
    peers::<K>()
        .into_iter()
        .map(|p| (p.name, (p.build)(routes)))
        .collect()
}

/// Whether DPDK's peers can run in this process. Starts DPDK's EAL the first time it is called
/// (once per process) and returns why it could not, if it could not. Without the `dpdk` feature
/// it always says so.
pub fn dpdk_available() -> Result<(), DpdkError> {
    #[cfg(feature = "dpdk")]
    {
        dpdk::dpdk_available()
    }
    #[cfg(not(feature = "dpdk"))]
    {
        Err(DpdkError::NotBuilt)
    }
}

/// Bytes the C allocator has handed out and not taken back, as glibc's `mallinfo2` counts them
/// (small-chunk arena bytes in use plus `mmap`ed chunks). `None` where that count is not
/// available. Used to estimate the footprint of peers that cannot report their own.
pub(crate) fn heap_in_use() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments, only reads the allocator's statistics, and
        // exists in every glibc since 2.33 (Debian 12 ships 2.36).
        let m = unsafe { libc::mallinfo2() };
        let total = m.uordblks.saturating_add(m.hblkhd);
        if total == 0 {
            // Rust's global allocator is not glibc's malloc: nothing is counted.
            None
        } else {
            Some(total)
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}
