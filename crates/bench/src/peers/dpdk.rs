//! DPDK's LPM engines through FFI (feature `dpdk`): `rte_lpm` and `rte_fib` (DIR24_8) for
//! IPv4, `rte_fib6` (TRIE) for IPv6, each FIB with its scalar and its AVX-512 lookup.
//!
//! Built and tested against Debian 12's DPDK 22.11 (`apt-get install libdpdk-dev pkg-config`);
//! `build.rs` finds it with `pkg-config libdpdk` and compiles `csrc/dpdk_shim.c`, which wraps
//! what Rust cannot call directly (`rte_lpm_lookup_bulk` is a static inline function,
//! `rte_errno` a per-lcore macro, the FIB configurations hold anonymous unions).
//!
//! # The EAL
//!
//! DPDK's environment abstraction layer is started once per process, lazily, by the first
//! build of a DPDK peer or by [`dpdk_available`], with
//!
//! ```text
//! --no-huge -m <MB> --no-pci --no-shconf --no-telemetry -l <core> --log-level=error
//! ```
//!
//! `--no-huge` takes plain anonymous memory instead of hugepages (it forces DPDK's legacy
//! memory mode, which rules out `--in-memory`; `--no-shconf` keeps its run-time files off the
//! disk instead). `-m` reserves address space only; pages are touched when tables are
//! allocated. It is 4096 MB unless `VFSR_DPDK_MEM_MB` says otherwise; extra EAL arguments can be
//! given, whitespace separated, in `VFSR_DPDK_EAL_ARGS`. With `VFSR_DPDK_HUGE` set, DPDK runs as
//! it does in production, on hugepages: `--no-huge` is left out, so 2 MiB pages must be
//! reserved (`vm.nr_hugepages`), hugetlbfs mounted and `VFSR_DPDK_MEM_MB` within them (1500 for
//! every peer with the real table). On an AMD EPYC Zen 5 that built rte_fib in 0.13 s instead
//! of 0.36 s; its lookups stayed within their run-to-run spread (matched4 309 and 339 Mlps
//! with AVX-512 against 296 on plain pages, in runs taking turns).
//!
//! `<core>` is the core the calling thread runs on at that moment, and **the EAL pins the calling thread to it**: call
//! [`dpdk_available`] from the thread that will run the benchmark. Right after the EAL is up the
//! process-wide SIMD limit is raised to 512 bits (`rte_vect_set_max_simd_bitwidth`) so that the
//! AVX-512 lookups can be selected; the scalar peers select their scalar lookup explicitly, so
//! the raised limit does not change what they run.
//!
//! # Next hops and table sizes
//!
//! Lookups return next hop 0 where no route matches (the FIBs are created with default next
//! hop 0, and `rte_lpm`'s miss is mapped to 0), which is [`NO_ROUTE`].
//!
//! * `rte_lpm` entries are 4 bytes with 24-bit next hops (up to 16 777 215). `rte_lpm` does not
//!   accept depth 0: a default route is installed as the two /1 routes it stands for, except
//!   where the table has that /1 already (which would win over the /0 anyway), so lookups answer
//!   exactly as longest-prefix match does.
//! * `rte_fib` (DIR24_8) and `rte_fib6` (TRIE) keep next hops in 2-, 4- or 8-byte entries, one
//!   bit of which flags an extended entry, and the entry also indexes the tbl8 groups. The
//!   adapters pick **2-byte entries when every next hop and the tbl8 group count fit in 15 bits**
//!   (≤ 32 767; the benchmark's next hops are mostly 1..=64) and **4-byte entries otherwise**
//!   (31 bits); larger next hops are rejected.
//! * Group (tbl8) counts are computed from the routes instead of guessed: for IPv4, one group
//!   per distinct /24 that holds a longer route; for IPv6, the reservation `rte_fib6`'s TRIE
//!   makes route by route, replayed on the canonical route order. 64 spare groups are added. If
//!   DPDK still runs out (`ENOSPC`), the table is rebuilt once with twice the groups.
//! * `max_routes`/`max_rules` are the route count plus slack (the RIB behind a FIB gets twice
//!   that many nodes).
//!
//! # Memory
//!
//! `memory_bytes` is an estimate computed from the configuration, not a measurement: the bytes
//! DPDK allocates for the lookup tables (tbl24, every configured tbl8 group, the group
//! bookkeeping). The control-plane copies DPDK keeps beside them (`rte_lpm`'s rule table, the
//! `rte_rib`/`rte_rib6` behind a FIB) are not counted; neither are the EAL's own overheads.

use super::{DpdkError, PeerError};
use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use vfsr_lpm::{canonicalize, Key, Lpm, NextHop, Prefix, Route, NO_ROUTE};

/// The DPDK version the crate was built against (from `pkg-config --modversion libdpdk`).
pub const DPDK_VERSION: &str = env!("VFSR_DPDK_VERSION");

pub const LPM_NAME: &str = "rte_lpm";
pub const FIB_NAME: &str = "rte_fib";
pub const FIB_AVX512_NAME: &str = "rte_fib_avx512";
pub const FIB6_NAME: &str = "rte_fib6";
pub const FIB6_AVX512_NAME: &str = "rte_fib6_avx512";

/// Addresses handed to DPDK per bulk call (bounded so the conversion buffers live on the stack).
const CHUNK: usize = 128;
/// Spare tbl8 groups added to the computed need.
const SPARE_TBL8: u32 = 64;
/// Largest next hop of a 2-byte FIB entry (one bit flags extended entries).
const MAX_NH_2B: u64 = (1 << 15) - 1;
/// Largest next hop of a 4-byte FIB entry.
const MAX_NH_4B: u64 = (1 << 31) - 1;
/// Largest `rte_lpm` next hop (24 bits).
const MAX_NH_LPM: u32 = (1 << 24) - 1;
/// Entries of a tbl24 and of a tbl8 group.
const TBL24_ENTRIES: usize = 1 << 24;
const TBL8_ENTRIES: usize = 256;
const ENOSPC: c_int = 28;

/// DPDK's opaque table types. They are `pub` inside this private module so that [`FibKey`]
/// can name them without exporting them.
mod sys {
    #[repr(C)]
    pub struct RteLpmT {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct RteFibT {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct RteFib6T {
        _opaque: [u8; 0],
    }
}

use sys::{RteFib6T, RteFibT, RteLpmT};

extern "C" {
    fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;

    fn rte_lpm_add(lpm: *mut RteLpmT, ip: u32, depth: u8, next_hop: u32) -> c_int;
    fn rte_lpm_free(lpm: *mut RteLpmT);

    fn rte_fib_add(fib: *mut RteFibT, ip: u32, depth: u8, next_hop: u64) -> c_int;
    fn rte_fib_lookup_bulk(
        fib: *mut RteFibT,
        ips: *mut u32,
        next_hops: *mut u64,
        n: c_int,
    ) -> c_int;
    fn rte_fib_free(fib: *mut RteFibT);

    fn rte_fib6_add(fib: *mut RteFib6T, ip: *const u8, depth: u8, next_hop: u64) -> c_int;
    fn rte_fib6_lookup_bulk(
        fib: *mut RteFib6T,
        ips: *mut [u8; 16],
        next_hops: *mut u64,
        n: c_int,
    ) -> c_int;
    fn rte_fib6_free(fib: *mut RteFib6T);

    // csrc/dpdk_shim.c
    fn vfsr_rte_errno() -> c_int;
    fn vfsr_rte_strerror(err: c_int) -> *const c_char;
    fn vfsr_cpu_has_avx512(need_bw: c_int) -> c_int;
    fn vfsr_set_max_simd_bitwidth(bits: u16) -> c_int;
    fn vfsr_get_max_simd_bitwidth() -> u16;
    fn vfsr_lpm_create(name: *const c_char, max_rules: u32, number_tbl8s: u32) -> *mut RteLpmT;
    fn vfsr_lpm_lookup_bulk(lpm: *const RteLpmT, ips: *const u32, out: *mut u32, n: usize);
    fn vfsr_fib_create(
        name: *const c_char,
        max_routes: c_int,
        num_tbl8: u32,
        nh_bytes: c_uint,
    ) -> *mut RteFibT;
    fn vfsr_fib_select(fib: *mut RteFibT, avx512: c_int) -> c_int;
    fn vfsr_fib6_create(
        name: *const c_char,
        max_routes: c_int,
        num_tbl8: u32,
        nh_bytes: c_uint,
    ) -> *mut RteFib6T;
    fn vfsr_fib6_select(fib: *mut RteFib6T, avx512: c_int) -> c_int;
}

/// DPDK's description of an error number (negative numbers are taken as `-errno`).
fn strerror(err: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated string.
    unsafe {
        let p = vfsr_rte_strerror(err.abs());
        if p.is_null() {
            format!("error {err}")
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

fn last_error() -> String {
    // SAFETY: reads DPDK's per-thread error number.
    strerror(unsafe { vfsr_rte_errno() })
}

/// What the EAL start left behind.
struct Eal {
    /// Why the AVX-512 lookups cannot be used, if they cannot.
    simd512: Result<(), DpdkError>,
}

static EAL: OnceLock<Result<Eal, DpdkError>> = OnceLock::new();

fn eal_args() -> Vec<String> {
    let mb = std::env::var("VFSR_DPDK_MEM_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&m| m > 0)
        .unwrap_or(4096);
    // SAFETY: sched_getcpu has no preconditions; -1 means unknown.
    let core = unsafe { libc::sched_getcpu() }.max(0);
    let mut args: Vec<String> = [
        "vfsr-bench",
        "--no-huge",
        "-m",
        &mb.to_string(),
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "-l",
        &core.to_string(),
        "--log-level=error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if std::env::var_os("VFSR_DPDK_HUGE").is_some() {
        args.retain(|a| a != "--no-huge");
    }
    if let Ok(extra) = std::env::var("VFSR_DPDK_EAL_ARGS") {
        args.extend(extra.split_whitespace().map(str::to_string));
    }
    args
}

fn start_eal() -> Result<Eal, DpdkError> {
    let args = eal_args();
    let c_args: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| DpdkError::NulArgument(a.clone())))
        .collect::<Result<_, _>>()?;
    // The EAL may keep pointers into argv, so argv and its strings live as long as the process.
    let argv: &'static mut [*mut c_char] = Box::leak(
        c_args
            .into_iter()
            .map(CString::into_raw)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let argc = (argv.len() - 1) as c_int;
    // SAFETY: argv is a NULL-terminated array of argc valid C strings that are never freed,
    // and this runs once per process (guarded by the OnceLock in `eal`).
    let ret = unsafe { rte_eal_init(argc, argv.as_mut_ptr()) };
    if ret < 0 {
        return Err(DpdkError::EalInit {
            args: args[1..].join(" "),
            why: last_error(),
        });
    }
    // SAFETY: plain calls into the initialised EAL.
    let simd512 = unsafe {
        let r = vfsr_set_max_simd_bitwidth(512);
        if r < 0 {
            Err(DpdkError::SimdLimit {
                why: strerror(r),
                limit: vfsr_get_max_simd_bitwidth(),
            })
        } else {
            Ok(())
        }
    };
    Ok(Eal { simd512 })
}

fn eal() -> Result<&'static Eal, DpdkError> {
    EAL.get_or_init(start_eal).as_ref().map_err(Clone::clone)
}

/// Starts DPDK's EAL if that has not been tried yet in this process (see the module docs for
/// its arguments; it pins the calling thread) and tells whether DPDK's peers can run, or why
/// not. The answer never changes within a process.
pub fn dpdk_available() -> Result<(), DpdkError> {
    eal().map(|_| ())
}

/// Why the AVX-512 lookups cannot be selected here, checked before any table is built.
fn avx512_precheck(need_bw: bool) -> Result<(), DpdkError> {
    let e = eal()?;
    e.simd512.clone()?;
    // SAFETY: reads CPU flags through the initialised EAL.
    if unsafe { vfsr_cpu_has_avx512(need_bw as c_int) } == 0 {
        return Err(DpdkError::NoAvx512 { bw: need_bw });
    }
    Ok(())
}

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A name no other DPDK object of this process has (DPDK keys its memory zones, rings and
/// mempools by name, some limited to 25 characters).
fn unique_name() -> CString {
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("vfsr{n}")).unwrap_or_default()
}

fn max_nexthop<K: Key>(routes: &[Route<K>]) -> NextHop {
    routes.iter().map(|r| r.nexthop).max().unwrap_or(0)
}

/// Number of distinct /24 blocks that hold a route longer than /24: the tbl8 groups a
/// DIR-24-8 table (rte_lpm, rte_fib) needs. `routes` must be canonical (sorted).
fn v4_tbl8_groups(routes: &[Route<u32>]) -> u32 {
    let mut count = 0u32;
    let mut last: Option<u32> = None;
    for r in routes.iter().filter(|r| r.prefix.len() > 24) {
        let block = r.prefix.addr() >> 8;
        if last != Some(block) {
            count += 1;
            last = Some(block);
        }
    }
    count
}

/// The tbl8 groups `rte_fib6`'s TRIE reserves when `routes` (canonical order) are added one by
/// one: DPDK 22.11's `trie_modify` reserves, for a route longer than /24 with no route already
/// inside its byte-aligned block, one group per byte between the longest covering route (at
/// least /24) and the route, and skips the reservation when the covering route has the same
/// next hop. Returns the largest running total, which is what the table must be created with.
fn v6_tbl8_reservation(routes: &[Route<u128>]) -> u32 {
    let mut stack: Vec<Route<u128>> = Vec::new();
    let mut prev: Option<Prefix<u128>> = None;
    let mut rsvd: u64 = 0;
    let mut need: u64 = 0;
    for r in routes {
        let (addr, depth) = (r.prefix.addr(), r.prefix.len());
        // Canonical order is a depth-first walk of the prefix tree, so the routes covering
        // this one are exactly those left on the stack once non-covering ones are popped.
        while let Some(top) = stack.last() {
            if top.prefix.covers(&r.prefix) {
                break;
            }
            stack.pop();
        }
        let parent = stack.last().copied();
        let mut diff = 0u64;
        if depth > 24 {
            let floor = depth & !7;
            let block = addr.masked(floor);
            // Is there already a route strictly longer than `floor` inside the block? In
            // canonical order, that holds exactly when it holds for the previous route.
            let inside = prev.is_some_and(|p| {
                p.addr().masked(floor) == block && (p.addr() != block || p.len() > floor)
            });
            if !inside {
                let pd = parent.map_or(24, |p| p.prefix.len().max(24));
                let ceil = |d: u8| (u64::from(d) + 7) & !7;
                diff = (ceil(depth) - ceil(pd)) >> 3;
            }
        }
        need = need.max(rsvd + diff);
        if parent.is_none_or(|p| p.nexthop != r.nexthop) {
            rsvd += diff;
        }
        stack.push(*r);
        prev = Some(r.prefix);
    }
    need.min(u64::from(u32::MAX)) as u32
}

/// Entry size for a FIB whose next hops reach `max_nh` and which needs `tbl8` groups.
fn fib_entry_bytes(peer: &'static str, max_nh: NextHop, tbl8: u32) -> Result<u32, PeerError> {
    let wanted = u64::from(max_nh).max(u64::from(tbl8));
    if wanted <= MAX_NH_2B {
        Ok(2)
    } else if wanted <= MAX_NH_4B {
        Ok(4)
    } else {
        Err(PeerError::build(
            peer,
            format!(
                "next hop {max_nh} or {tbl8} tbl8 groups exceed 4-byte entries (max {MAX_NH_4B})"
            ),
        ))
    }
}

fn route_count(peer: &'static str, n: usize) -> Result<c_int, PeerError> {
    c_int::try_from(n + 64)
        .map_err(|_| PeerError::build(peer, format!("{n} routes are more than DPDK can hold")))
}

/// Creates a table with `tbl8s` groups and adds `routes` to it in order. When DPDK runs out of
/// groups (`ENOSPC`) on the first attempt, that table is dropped and the whole build is done
/// again with twice as many. `create` gets the group count and whether this is the second
/// attempt; `add` returns DPDK's status for one route, and `add_fn` names it in errors.
fn build_retrying<K: Key, T>(
    peer: &'static str,
    add_fn: &str,
    routes: &[Route<K>],
    mut tbl8s: u32,
    mut create: impl FnMut(u32, bool) -> Result<T, PeerError>,
    mut add: impl FnMut(&T, &Route<K>) -> c_int,
) -> Result<T, PeerError>
where
    Prefix<K>: fmt::Display,
{
    for attempt in 0..2 {
        let table = create(tbl8s, attempt > 0)?;
        let failed = routes
            .iter()
            .map(|r| (add(&table, r), r))
            .find(|&(rc, _)| rc < 0);
        match failed {
            None => return Ok(table),
            Some((rc, _)) if -rc == ENOSPC && attempt == 0 => tbl8s = tbl8s.saturating_mul(2),
            Some((rc, r)) => {
                return Err(PeerError::build(
                    peer,
                    format!(
                        "{add_fn}({}, {}) failed: {}",
                        r.prefix,
                        r.nexthop,
                        strerror(rc)
                    ),
                ))
            }
        }
    }
    Err(PeerError::build(peer, "out of tbl8 groups"))
}

// ---- rte_lpm -----------------------------------------------------------------------------

/// DPDK's `rte_lpm` (IPv4 DIR-24-8, 4-byte entries, 24-bit next hops). Bulk lookups are
/// `rte_lpm_lookup_bulk` in batches of 64; a single lookup is a batch of one.
///
/// `memory_bytes` is an estimate from the configuration: tbl24 (2^24 × 4 bytes) plus every
/// configured tbl8 group (256 × 4 bytes each); the rule table is not counted.
///
/// Building is slow for large tables: `rte_lpm_add` keeps its rules in one array grouped by
/// depth and scans a depth's rules linearly to place each new one, so a full IPv4 table (900k
/// routes, most of them /24s) takes on the order of minutes to load. That is DPDK's own cost.
pub struct RteLpm {
    lpm: *mut RteLpmT,
    tbl8s: u32,
    resized: bool,
}

// SAFETY: after build the table is only read; DPDK's lookups do not write to it, and the
// pointer is freed once, in Drop.
unsafe impl Send for RteLpm {}
// SAFETY: shared use only reads the table (lookups), as above.
unsafe impl Sync for RteLpm {}

impl Drop for RteLpm {
    fn drop(&mut self) {
        // SAFETY: created by rte_lpm_create, freed only here.
        unsafe { rte_lpm_free(self.lpm) }
    }
}

impl RteLpm {
    /// Builds the table (starts the EAL if needed).
    pub fn build(routes: &[Route<u32>]) -> Result<Self, PeerError> {
        eal().map_err(|e| PeerError::unavailable(LPM_NAME, e.to_string()))?;
        Self::build_with(routes, SPARE_TBL8)
    }

    fn build_with(routes: &[Route<u32>], spare: u32) -> Result<Self, PeerError> {
        let routes = lpm_routes(routes);
        let max_nh = max_nexthop(&routes);
        if max_nh > MAX_NH_LPM {
            return Err(PeerError::build(
                LPM_NAME,
                format!("next hop {max_nh} does not fit rte_lpm's 24 bits"),
            ));
        }
        let max_rules = route_count(LPM_NAME, routes.len())? as u32;
        let tbl8s = (v4_tbl8_groups(&routes) + spare).max(1);
        let create = |tbl8s: u32, resized: bool| {
            let name = unique_name();
            // SAFETY: name is a valid C string; the config values are in range.
            let lpm = unsafe { vfsr_lpm_create(name.as_ptr(), max_rules, tbl8s) };
            if lpm.is_null() {
                return Err(PeerError::build(
                    LPM_NAME,
                    format!(
                        "rte_lpm_create({max_rules} rules, {tbl8s} tbl8s) failed: {}",
                        last_error()
                    ),
                ));
            }
            Ok(RteLpm {
                lpm,
                tbl8s,
                resized,
            })
        };
        // SAFETY: the table is live; depth is 1..=32 (see lpm_routes).
        let add = |t: &RteLpm, r: &Route<u32>| unsafe {
            rte_lpm_add(t.lpm, r.prefix.addr(), r.prefix.len(), r.nexthop)
        };
        build_retrying(LPM_NAME, "rte_lpm_add", &routes, tbl8s, create, add)
    }

    /// Configured tbl8 groups.
    pub fn tbl8_groups(&self) -> u32 {
        self.tbl8s
    }

    /// Whether the computed tbl8 group count fell short and the table was built a second time
    /// with twice as many (the build time then includes both attempts).
    pub fn resized(&self) -> bool {
        self.resized
    }
}

/// The canonical routes with a default route replaced by the /1 routes it stands for (rte_lpm
/// rejects depth 0); a /1 already in the table wins over the expansion.
fn lpm_routes(routes: &[Route<u32>]) -> Vec<Route<u32>> {
    let canon = canonicalize(routes);
    let Some(default) = canon.iter().find(|r| r.prefix.is_empty()).copied() else {
        return canon;
    };
    let mut all: Vec<Route<u32>> = [0u32, 0x8000_0000]
        .iter()
        .map(|&a| Route::new(Prefix::new_masked(a, 1), default.nexthop))
        .collect();
    all.extend(canon.into_iter().filter(|r| !r.prefix.is_empty()));
    canonicalize(&all)
}

impl Lpm<u32> for RteLpm {
    fn lookup(&self, addr: u32) -> NextHop {
        let mut out = NO_ROUTE;
        // SAFETY: one address in, one next hop out.
        unsafe { vfsr_lpm_lookup_bulk(self.lpm, &addr, &mut out, 1) };
        out
    }

    fn lookup_bulk(&self, addrs: &[u32], out: &mut [NextHop]) {
        let n = addrs.len().min(out.len());
        // SAFETY: both slices hold at least n elements.
        unsafe { vfsr_lpm_lookup_bulk(self.lpm, addrs.as_ptr(), out.as_mut_ptr(), n) };
    }

    fn memory_bytes(&self) -> usize {
        TBL24_ENTRIES * 4 + self.tbl8s as usize * TBL8_ENTRIES * 4
    }

    fn name(&self) -> &'static str {
        LPM_NAME
    }
}

// ---- rte_fib (IPv4) and rte_fib6 (IPv6) --------------------------------------------------

mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u128 {}
}

/// What sets `rte_fib` (IPv4, DIR24_8) and `rte_fib6` (IPv6, TRIE) apart: names, DPDK calls
/// and table layout (sealed: implemented for `u32` and `u128`).
pub trait FibKey: Key + private::Sealed {
    /// DPDK's opaque table type.
    #[doc(hidden)]
    type Raw;
    /// Report name with the scalar lookup.
    #[doc(hidden)]
    const NAME: &'static str;
    /// Report name with the AVX-512 lookup.
    #[doc(hidden)]
    const AVX512_NAME: &'static str;
    /// Whether the AVX-512 lookup needs AVX-512 BW besides F and DQ.
    #[doc(hidden)]
    const AVX512_NEEDS_BW: bool;
    /// DPDK's name of the AVX-512 lookup.
    #[doc(hidden)]
    const AVX512_LOOKUP: &'static str;
    /// The create call and data plane, as errors name them.
    #[doc(hidden)]
    const CREATE_FN: &'static str;
    #[doc(hidden)]
    const PLANE: &'static str;
    /// The add call, as errors name it.
    #[doc(hidden)]
    const ADD_FN: &'static str;

    /// The tbl8 groups the canonical `routes` need, spares not included.
    #[doc(hidden)]
    fn tbl8_need(routes: &[Route<Self>]) -> u32;
    /// Creates an empty FIB (null on failure, with `rte_errno` set).
    #[doc(hidden)]
    fn create(name: &CStr, max_routes: c_int, tbl8s: u32, entry_bytes: u32) -> *mut Self::Raw;
    /// Selects the scalar or the AVX-512 lookup; DPDK's status.
    #[doc(hidden)]
    fn select(fib: &Fib<Self>, avx512: bool) -> c_int;
    /// Adds one route; DPDK's status.
    #[doc(hidden)]
    fn add(fib: &Fib<Self>, r: &Route<Self>) -> c_int;
    /// Looks up `addrs` in batches of [`CHUNK`].
    #[doc(hidden)]
    fn lookup_bulk(fib: &Fib<Self>, addrs: &[Self], out: &mut [NextHop]);
    /// The estimate behind [`Lpm::memory_bytes`].
    #[doc(hidden)]
    fn memory_bytes(entry_bytes: usize, tbl8s: usize) -> usize;
    /// # Safety
    ///
    /// `fib` comes from [`FibKey::create`], is not null and is not used afterwards.
    #[doc(hidden)]
    unsafe fn free(fib: *mut Self::Raw);
}

/// DPDK's `rte_fib` or `rte_fib6`, by address family: see [`RteFib`] and [`RteFib6`].
pub struct Fib<K: FibKey> {
    fib: *mut K::Raw,
    name: &'static str,
    entry_bytes: u32,
    tbl8s: u32,
    resized: bool,
}

/// DPDK's `rte_fib` with the DIR24_8 data plane. [`Fib::build`] selects the scalar lookup
/// (`RTE_FIB_LOOKUP_DIR24_8_SCALAR_MACRO`, what DPDK picks when vector units may not be used),
/// [`Fib::build_avx512`] the AVX-512 one (`RTE_FIB_LOOKUP_DIR24_8_VECTOR_AVX512`). Lookups go
/// through `rte_fib_lookup_bulk` in batches of 128 whose 8-byte results are narrowed to
/// [`NextHop`].
///
/// `memory_bytes` is an estimate from the configuration: tbl24 (2^24 entries), every configured
/// tbl8 group plus DPDK's spare one (256 entries each), at 2 or 4 bytes per entry, and the
/// group bitmap; the RIB behind the FIB is not counted.
pub type RteFib = Fib<u32>;

/// DPDK's `rte_fib6` with the TRIE data plane (a 24-bit first level, then 8-bit tbl8 levels).
/// [`Fib::build`] selects `RTE_FIB6_LOOKUP_TRIE_SCALAR`, [`Fib::build_avx512`]
/// `RTE_FIB6_LOOKUP_TRIE_VECTOR_AVX512`. Lookups go through `rte_fib6_lookup_bulk` in batches
/// of 128; the addresses are written out in network byte order first (DPDK takes IPv6
/// addresses as byte arrays), which is part of the measured cost.
///
/// `memory_bytes` is an estimate from the configuration: tbl24 (2^24 entries), every configured
/// tbl8 group plus DPDK's spare one (256 entries each) at 2 or 4 bytes per entry, and the group
/// pool (4 bytes per group); the RIB behind the FIB is not counted.
pub type RteFib6 = Fib<u128>;

// SAFETY: see RteLpm.
unsafe impl<K: FibKey> Send for Fib<K> {}
// SAFETY: see RteLpm: shared use only reads the table.
unsafe impl<K: FibKey> Sync for Fib<K> {}

impl<K: FibKey> Drop for Fib<K> {
    fn drop(&mut self) {
        // SAFETY: created by K::create (never null here), freed only here.
        unsafe { K::free(self.fib) }
    }
}

impl<K: FibKey> Fib<K>
where
    Prefix<K>: fmt::Display,
{
    /// Builds the FIB with the scalar lookup (starts the EAL if needed).
    pub fn build(routes: &[Route<K>]) -> Result<Self, PeerError> {
        eal().map_err(|e| PeerError::unavailable(K::NAME, e.to_string()))?;
        Self::build_with(routes, K::NAME, false, SPARE_TBL8)
    }

    /// Builds the FIB with DPDK's AVX-512 lookup. Fails with
    /// [`super::PeerErrorKind::Unavailable`] when the CPU, the SIMD limit or this DPDK build
    /// does not allow selecting it; that is checked before any route is added.
    pub fn build_avx512(routes: &[Route<K>]) -> Result<Self, PeerError> {
        avx512_precheck(K::AVX512_NEEDS_BW)
            .map_err(|e| PeerError::unavailable(K::AVX512_NAME, e.to_string()))?;
        Self::build_with(routes, K::AVX512_NAME, true, SPARE_TBL8)
    }

    fn build_with(
        routes: &[Route<K>],
        peer: &'static str,
        avx512: bool,
        spare: u32,
    ) -> Result<Self, PeerError> {
        let routes = canonicalize(routes);
        let max_nh = max_nexthop(&routes);
        let max_routes = route_count(peer, routes.len())?;
        let tbl8s = K::tbl8_need(&routes).saturating_add(spare).max(1);
        let create = |tbl8s: u32, resized: bool| {
            let entry_bytes = fib_entry_bytes(peer, max_nh, tbl8s)?;
            let fib = K::create(&unique_name(), max_routes, tbl8s, entry_bytes);
            if fib.is_null() {
                return Err(PeerError::build(
                    peer,
                    format!(
                        "{}({}, {max_routes} routes, {tbl8s} tbl8s, {entry_bytes}-byte entries) \
                         failed: {}",
                        K::CREATE_FN,
                        K::PLANE,
                        last_error()
                    ),
                ));
            }
            let table = Fib {
                fib,
                name: peer,
                entry_bytes,
                tbl8s,
                resized,
            };
            let rc = K::select(&table, avx512);
            if rc < 0 {
                let what = if avx512 {
                    format!(
                        "the AVX-512 lookup ({}) cannot be selected: this DPDK build lacks it",
                        K::AVX512_LOOKUP
                    )
                } else {
                    "the scalar lookup cannot be selected".to_string()
                };
                return Err(PeerError::unavailable(
                    peer,
                    format!("{what} ({})", strerror(rc)),
                ));
            }
            Ok(table)
        };
        build_retrying(peer, K::ADD_FN, &routes, tbl8s, create, K::add)
    }

    /// Bytes per table entry (2 or 4).
    pub fn entry_bytes(&self) -> u32 {
        self.entry_bytes
    }

    /// Configured tbl8 groups.
    pub fn tbl8_groups(&self) -> u32 {
        self.tbl8s
    }

    /// Whether the computed tbl8 group count fell short and the table was built a second time
    /// with twice as many (the build time then includes both attempts).
    pub fn resized(&self) -> bool {
        self.resized
    }
}

impl<K: FibKey> Lpm<K> for Fib<K> {
    fn lookup(&self, addr: K) -> NextHop {
        let mut out = [NO_ROUTE];
        self.lookup_bulk(&[addr], &mut out);
        out[0]
    }

    fn lookup_bulk(&self, addrs: &[K], out: &mut [NextHop]) {
        K::lookup_bulk(self, addrs, out)
    }

    fn memory_bytes(&self) -> usize {
        K::memory_bytes(self.entry_bytes as usize, self.tbl8s as usize)
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

/// Hands `addrs` to `lookup` in chunks of [`CHUNK`], each with room for as many of DPDK's
/// 8-byte next hops, and narrows those into `out`.
fn fib_lookup_chunks<A>(
    addrs: &[A],
    out: &mut [NextHop],
    mut lookup: impl FnMut(&[A], &mut [u64]),
) {
    let mut nh = [0u64; CHUNK];
    for (a, o) in addrs.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
        let n = a.len().min(o.len());
        lookup(&a[..n], &mut nh[..n]);
        for (d, s) in o[..n].iter_mut().zip(&nh[..n]) {
            *d = *s as NextHop;
        }
    }
}

impl FibKey for u32 {
    type Raw = RteFibT;
    const NAME: &'static str = FIB_NAME;
    const AVX512_NAME: &'static str = FIB_AVX512_NAME;
    const AVX512_NEEDS_BW: bool = false;
    const AVX512_LOOKUP: &'static str = "RTE_FIB_LOOKUP_DIR24_8_VECTOR_AVX512";
    const CREATE_FN: &'static str = "rte_fib_create";
    const PLANE: &'static str = "DIR24_8";
    const ADD_FN: &'static str = "rte_fib_add";

    fn tbl8_need(routes: &[Route<u32>]) -> u32 {
        v4_tbl8_groups(routes)
    }

    fn create(name: &CStr, max_routes: c_int, tbl8s: u32, entry_bytes: u32) -> *mut RteFibT {
        // SAFETY: name is a valid C string; the config values are in range.
        unsafe { vfsr_fib_create(name.as_ptr(), max_routes, tbl8s, entry_bytes) }
    }

    fn select(fib: &Fib<u32>, avx512: bool) -> c_int {
        // SAFETY: fib is live.
        unsafe { vfsr_fib_select(fib.fib, avx512 as c_int) }
    }

    fn add(fib: &Fib<u32>, r: &Route<u32>) -> c_int {
        // SAFETY: fib is live; depth is at most 32.
        unsafe {
            rte_fib_add(
                fib.fib,
                r.prefix.addr(),
                r.prefix.len(),
                u64::from(r.nexthop),
            )
        }
    }

    fn lookup_bulk(fib: &Fib<u32>, addrs: &[u32], out: &mut [NextHop]) {
        fib_lookup_chunks(addrs, out, |a, nh| {
            // SAFETY: fib is live; DPDK reads a.len() addresses (it does not write through
            // `ips`, the pointer is only non-const in the prototype) and writes as many next
            // hops.
            unsafe {
                rte_fib_lookup_bulk(
                    fib.fib,
                    a.as_ptr() as *mut u32,
                    nh.as_mut_ptr(),
                    a.len() as c_int,
                )
            };
        });
    }

    fn memory_bytes(entry_bytes: usize, tbl8s: usize) -> usize {
        let groups = tbl8s.div_ceil(64) * 64;
        TBL24_ENTRIES * entry_bytes + (groups + 1) * TBL8_ENTRIES * entry_bytes + groups / 8
    }

    unsafe fn free(fib: *mut RteFibT) {
        // SAFETY: the caller's promise.
        unsafe { rte_fib_free(fib) }
    }
}

impl FibKey for u128 {
    type Raw = RteFib6T;
    const NAME: &'static str = FIB6_NAME;
    const AVX512_NAME: &'static str = FIB6_AVX512_NAME;
    const AVX512_NEEDS_BW: bool = true;
    const AVX512_LOOKUP: &'static str = "RTE_FIB6_LOOKUP_TRIE_VECTOR_AVX512";
    const CREATE_FN: &'static str = "rte_fib6_create";
    const PLANE: &'static str = "TRIE";
    const ADD_FN: &'static str = "rte_fib6_add";

    fn tbl8_need(routes: &[Route<u128>]) -> u32 {
        v6_tbl8_reservation(routes)
    }

    fn create(name: &CStr, max_routes: c_int, tbl8s: u32, entry_bytes: u32) -> *mut RteFib6T {
        // SAFETY: name is a valid C string; the config values are in range.
        unsafe { vfsr_fib6_create(name.as_ptr(), max_routes, tbl8s, entry_bytes) }
    }

    fn select(fib: &Fib<u128>, avx512: bool) -> c_int {
        // SAFETY: fib is live.
        unsafe { vfsr_fib6_select(fib.fib, avx512 as c_int) }
    }

    fn add(fib: &Fib<u128>, r: &Route<u128>) -> c_int {
        let ip = r.prefix.addr().to_be_bytes();
        // SAFETY: fib is live; ip is 16 bytes; depth is at most 128.
        unsafe { rte_fib6_add(fib.fib, ip.as_ptr(), r.prefix.len(), u64::from(r.nexthop)) }
    }

    fn lookup_bulk(fib: &Fib<u128>, addrs: &[u128], out: &mut [NextHop]) {
        let mut ips = [[0u8; 16]; CHUNK];
        fib_lookup_chunks(addrs, out, |a, nh| {
            for (d, s) in ips.iter_mut().zip(a) {
                *d = s.to_be_bytes();
            }
            // SAFETY: fib is live; DPDK reads a.len() addresses and writes as many next hops.
            unsafe {
                rte_fib6_lookup_bulk(fib.fib, ips.as_mut_ptr(), nh.as_mut_ptr(), a.len() as c_int)
            };
        });
    }

    fn memory_bytes(entry_bytes: usize, tbl8s: usize) -> usize {
        TBL24_ENTRIES * entry_bytes + (tbl8s + 1) * TBL8_ENTRIES * entry_bytes + tbl8s * 4
    }

    unsafe fn free(fib: *mut RteFib6T) {
        // SAFETY: the caller's promise.
        unsafe { rte_fib6_free(fib) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nested random routes: each new prefix extends a random earlier one or is fresh.
    fn routes<K: Key>(seed: u64, n: usize, lens: &[u8]) -> Vec<Route<K>> {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut out: Vec<Route<K>> = Vec::new();
        for _ in 0..n {
            let len = lens[next() as usize % lens.len()];
            let noise = (u128::from(next()) << 64) | u128::from(next());
            let bits = match out.len() {
                0 => noise,
                m if next() % 4 != 0 => {
                    let base = out[next() as usize % m].prefix;
                    let mask = u128::MAX
                        .checked_shl(128 - u32::from(base.len()))
                        .unwrap_or(0);
                    (base.addr().to_u128_left() & mask) | (noise & !mask)
                }
                _ => noise,
            };
            let nh = 1 + (next() % 8) as NextHop;
            out.push(Route::new(
                Prefix::new_masked(K::from_u128_left(bits), len),
                nh,
            ));
        }
        out
    }

    /// With no spare groups at all, the computed tbl8 counts must still be enough.
    #[test]
    fn computed_tbl8_counts_are_exact_enough() {
        if let Err(e) = dpdk_available() {
            vfsr_skip::skip(&e);
            return;
        }
        let v4 = routes::<u32>(7, 20_000, &[8, 16, 20, 24, 25, 26, 28, 30, 32]);
        let lpm = RteLpm::build_with(&v4, 0).expect("rte_lpm");
        assert!(!lpm.resized());
        let fib = RteFib::build_with(&v4, FIB_NAME, false, 0).expect("rte_fib");
        assert!(!fib.resized());
        let v6 = routes::<u128>(
            11,
            20_000,
            &[16, 24, 28, 29, 32, 33, 40, 44, 48, 56, 64, 65, 96, 127, 128],
        );
        let fib6 = RteFib6::build_with(&v6, FIB6_NAME, false, 0).expect("rte_fib6");
        assert!(
            !fib6.resized(),
            "{} groups were not enough",
            fib6.tbl8_groups()
        );
        println!(
            "groups: v4 {}, v6 {} ({} entry bytes)",
            fib.tbl8_groups(),
            fib6.tbl8_groups(),
            fib6.entry_bytes()
        );
    }

    #[test]
    fn v4_groups_count_distinct_blocks() {
        let r = |a: u32, l: u8| Route::new(Prefix::new_masked(a, l), 1);
        let c = canonicalize(&[
            r(0x0a00_0000, 24),
            r(0x0a00_0000, 25),
            r(0x0a00_0080, 25),
            r(0x0a00_0100, 32),
            r(0x0b00_0000, 8),
        ]);
        assert_eq!(v4_tbl8_groups(&c), 2);
    }
}
