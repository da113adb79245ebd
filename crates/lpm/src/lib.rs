//! # vfsr-lpm: longest-prefix match for the forwarding path
//!
//! Every engine maps an address (IPv4 as `u32`, IPv6 as `u128`, see [`Key`]) to a next-hop
//! index ([`NextHop`], `0` = no route) and implements one trait, [`Lpm`], whose primary call is
//! the bulk lookup: a batch of addresses in, a batch of next hops out. Engines are built from a
//! plain route list ([`LpmBuild::build`]); the list is put in canonical order first
//! ([`canonicalize`]), so every engine sees the same table.
//!
//! ```text
//!             routes (Prefix, NextHop)
//!                        │ canonicalize
//!        ┌───────────┬───┴───────┬────────────┐
//!    Poptrie      LC-trie      Radix      DIR-24-8 (v4)
//!   (poptrie)    (lctrie)     (radix)     (dir24)
//!        └───────────┴─────┬─────┴────────────┘
//!                  trait Lpm<K>: lookup, lookup_bulk, memory_bytes
//! ```
//!
//! Start reading at [`Lpm`], then [`poptrie`], the engine the forwarding path uses. The crate
//! does no I/O and depends on nothing but `core`/`std`: it is data-path code.

pub mod dir24;
pub mod key;
pub mod lctrie;
pub mod poptrie;
pub mod prefix;
pub mod radix;
pub mod update;

#[cfg(test)]
mod testkit;

#[cfg(any(test, feature = "golden"))]
pub mod golden;

pub use key::Key;
pub use prefix::{canonicalize, NextHop, Prefix, PrefixError, Route, NO_ROUTE};
pub use update::{LpmUpdate, RouteMap};

use core::fmt;

/// The cache hint the engines issue before a dependent read (one definition for every crate).
pub(crate) use vfsr_cpu::prefetch;

/// Why an engine could not be built from a route list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// A next hop does not fit the engine's leaf width.
    NextHopTooLarge { nexthop: NextHop, max: NextHop },
    /// The table grew past what the engine can index.
    TooLarge(&'static str),
    /// The engine does not serve this address family.
    WrongFamily(&'static str),
    /// The configuration is out of range.
    BadConfig(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NextHopTooLarge { nexthop, max } => {
                write!(
                    f,
                    "next hop {nexthop} is larger than the engine's limit {max}"
                )
            }
            BuildError::TooLarge(what) => write!(f, "table too large: {what}"),
            BuildError::WrongFamily(what) => write!(f, "wrong address family: {what}"),
            BuildError::BadConfig(what) => write!(f, "bad configuration: {what}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Longest-prefix match from an address to a next-hop index.
///
/// Implementations are immutable once built and may be shared between threads.
pub trait Lpm<K: Key>: Send + Sync {
    /// The next hop of the longest prefix covering `addr`, or [`NO_ROUTE`].
    fn lookup(&self, addr: K) -> NextHop;

    /// Looks up every address of `addrs` and writes its next hop to the same position of `out`.
    /// This is the primary call: engines overlap the memory accesses of the lookups in a batch.
    /// Only `min(addrs.len(), out.len())` addresses are looked up.
    fn lookup_bulk(&self, addrs: &[K], out: &mut [NextHop]) {
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(*a);
        }
    }

    /// Bytes of memory the lookup structure occupies (heap and inline).
    fn memory_bytes(&self) -> usize;

    /// Short name used in reports (`poptrie`, `lctrie`, `radix`, `dir24`).
    fn name(&self) -> &'static str;
}

/// Engines that are built from a route list.
pub trait LpmBuild<K: Key>: Lpm<K> + Sized {
    /// Engine-specific tuning (stride, fill factor...).
    type Config;

    /// Builds the engine. Routes to the same prefix: the last one wins; routes to
    /// [`NO_ROUTE`] are ignored.
    fn build(routes: &[Route<K>], config: &Self::Config) -> Result<Self, BuildError>;
}
