//! # vfsr-cpu: where a thread runs, at what priority, and what it asks the cache for
//!
//! One home for the few CPU controls vfsr uses, so that the daemon, the benchmarks and the
//! forwarding path do each of them one way:
//!
//! ```text
//!   pin(core) / pin_task(tid, cores)   sched_setaffinity: a worker or a benchmark keeps to
//!                                      its core, the control plane to core 0
//!   fifo(tid, prio) / ordinary(tid)    SCHED_FIFO for the control plane and the workers,
//!                                      back to SCHED_OTHER before clean-up
//!   idle(tid)                          SCHED_IDLE for a load generator
//!   prefetch(p)                        a cache-line hint before a dependent read
//!   rdtsc()                            the time-stamp counter (profiles, TSC frequency)
//!   default_bench_core()               the last core: away from core 0's system work
//!   x86_signature()                    the CPU's vendor, family and model (CPUID): for a
//!                                      default measured to differ between CPU generations,
//!                                      and for naming the machine beside a figure
//!   check_build_features()             the CPU has what the build was compiled to use
//!                                      (x86-64-v2, see .cargo/config.toml); the mains
//!                                      call it through exit_unless_built_for_this_cpu
//! ```
//!
//! A data-path crate may depend on it: it knows nothing of vfsr's other parts.

use std::fmt;

/// Why the kernel refused a CPU setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuError {
    /// A core number at or beyond `CPU_SETSIZE`.
    CoreOutOfRange(usize),
    /// No core was named.
    NoCore,
    /// `sched_setaffinity` failed (for example a core outside the allowed set).
    Affinity { cores: Vec<usize>, error: String },
    /// `sched_setscheduler` failed (for example no `CAP_SYS_NICE`).
    Policy { policy: &'static str, error: String },
}

impl fmt::Display for CpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuError::CoreOutOfRange(c) => write!(f, "core {c} is out of range"),
            CpuError::NoCore => write!(f, "no core given"),
            CpuError::Affinity { cores, error } => match cores.as_slice() {
                [c] => write!(f, "cannot pin to core {c}: {error}"),
                _ => write!(f, "cannot set the CPU affinity to {cores:?}: {error}"),
            },
            CpuError::Policy { policy, error } => {
                write!(f, "cannot set the scheduling policy {policy}: {error}")
            }
        }
    }
}

impl std::error::Error for CpuError {}

impl From<CpuError> for String {
    fn from(e: CpuError) -> String {
        e.to_string()
    }
}

/// Restricts thread `tid` (0: the calling thread) to `cores`. Processes and threads it starts
/// afterwards inherit the set.
pub fn pin_task(tid: i32, cores: &[usize]) -> Result<(), CpuError> {
    if cores.is_empty() {
        return Err(CpuError::NoCore);
    }
    if let Some(&c) = cores.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(CpuError::CoreOutOfRange(c));
    }
    // SAFETY: cpu_set_t is plain data and a zeroed one is empty; CPU_SET writes inside it
    // (every core is below CPU_SETSIZE, checked above); sched_setaffinity reads
    // size_of::<cpu_set_t>() bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(CpuError::Affinity {
            cores: cores.to_vec(),
            error: std::io::Error::last_os_error().to_string(),
        })
    }
}

/// Pins the calling thread to `core`.
pub fn pin(core: usize) -> Result<(), CpuError> {
    pin_task(0, &[core])
}

/// Gives thread `tid` (0: the calling thread) `SCHED_FIFO` at `priority` (1..=99).
pub fn fifo(tid: i32, priority: i32) -> Result<(), CpuError> {
    set_policy(tid, libc::SCHED_FIFO, priority, "SCHED_FIFO")
}

/// Puts thread `tid` (0: the calling thread) back under ordinary scheduling.
pub fn ordinary(tid: i32) -> Result<(), CpuError> {
    set_policy(tid, libc::SCHED_OTHER, 0, "SCHED_OTHER")
}

/// Gives thread `tid` (0: the calling thread) `SCHED_IDLE`: it runs only on an otherwise idle
/// core (a load generator that must not take the measured thread's time).
pub fn idle(tid: i32) -> Result<(), CpuError> {
    set_policy(tid, libc::SCHED_IDLE, 0, "SCHED_IDLE")
}

fn set_policy(tid: i32, policy: i32, priority: i32, name: &'static str) -> Result<(), CpuError> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain system call with a valid parameter block on the stack.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(CpuError::Policy {
            policy: name,
            error: std::io::Error::last_os_error().to_string(),
        })
    }
}

/// The cores thread `tid` (0: the calling thread) may run on, in ascending order; empty if
/// the kernel would not say.
pub fn allowed_cores(tid: i32) -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data and a zeroed one is empty; sched_getaffinity writes at
    // most size_of::<cpu_set_t>() bytes into it; CPU_ISSET reads inside it (every index is
    // below CPU_SETSIZE).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The cores the calling thread may run on, the ones a configuration may name: under an
/// affinity of cores 2 and 3 on a four-core machine, `[2, 3]` (a count of two would refuse
/// both and accept core 0). Cores 0 to the available parallelism less one if the kernel
/// would not say.
pub fn usable_cores() -> Vec<usize> {
    let cores = allowed_cores(0);
    if cores.is_empty() {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    } else {
        cores
    }
}

/// The core a benchmark uses unless told otherwise: the last one the process may run on,
/// away from core 0 where the system and the control plane run. Under `taskset -c 1` that is
/// core 1 (counting the allowed cores instead would name core 0, outside the set).
pub fn default_bench_core() -> usize {
    usable_cores().last().copied().unwrap_or(0)
}

/// Asks the CPU to bring the line holding `p` into L1 ahead of a read. Only a hint: it never
/// faults, whatever the address, so callers may prefetch before they know an index is valid.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Who made an x86 CPU, as CPUID's vendor string says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// "AuthenticAMD".
    Amd,
    /// "GenuineIntel".
    Intel,
    /// Any other vendor string.
    Other,
}

/// Who made an x86 CPU and which one it is, from CPUID leaves 0 and 1: what the kernel shows
/// as `vendor_id`, `cpu family` and `model` in `/proc/cpuinfo`, read at the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct X86Signature {
    /// The vendor string's maker.
    pub vendor: Vendor,
    /// The family: the base family, plus the extended family where the base is 15 (AMD Zen 4
    /// is family 25, Zen 5 family 26).
    pub family: u32,
    /// The model: the base model, plus the extended model times 16 where the base family
    /// is 6 or 15.
    pub model: u32,
}

/// This CPU's [`X86Signature`]; `None` on other architectures.
pub fn x86_signature() -> Option<X86Signature> {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        #[allow(unused_unsafe)]
        // SAFETY: CPUID exists on every x86-64 CPU; leaves 0 and 1 are defined on all of them.
        let (l0, eax1) = unsafe { (__cpuid(0), __cpuid(1).eax) };
        Some(X86Signature {
            vendor: vendor_of(l0.ebx, l0.edx, l0.ecx),
            family: family_of(eax1),
            model: model_of(eax1),
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The vendor named by CPUID leaf 0's registers (the string is EBX, EDX, ECX in that order).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn vendor_of(ebx: u32, edx: u32, ecx: u32) -> Vendor {
    let mut name = [0u8; 12];
    for (i, r) in [ebx, edx, ecx].into_iter().enumerate() {
        name[4 * i..4 * i + 4].copy_from_slice(&r.to_le_bytes());
    }
    match &name {
        b"AuthenticAMD" => Vendor::Amd,
        b"GenuineIntel" => Vendor::Intel,
        _ => Vendor::Other,
    }
}

/// The model in CPUID leaf 1's EAX: bits 4-7, plus bits 16-19 as the high nibble when the
/// base family (bits 8-11) is 6 or 15.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn model_of(eax: u32) -> u32 {
    let base = eax >> 4 & 0xf;
    match eax >> 8 & 0xf {
        0x6 | 0xf => base | (eax >> 16 & 0xf) << 4,
        _ => base,
    }
}

/// The family in CPUID leaf 1's EAX: bits 8-11, plus bits 20-27 when those are 15.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn family_of(eax: u32) -> u32 {
    let base = eax >> 8 & 0xf;
    if base == 0xf {
        base + (eax >> 20 & 0xff)
    } else {
        base
    }
}

/// The x86-64 features this build was compiled to use without asking (`target-cpu` in
/// `.cargo/config.toml`: x86-64-v2, so `popcnt` and SSE4.2 among others) that the CPU it runs
/// on lacks, by name. Empty on a CPU that has them all, and on other architectures.
///
/// Asks CPUID itself: the standard library's feature detection answers "present" for a
/// feature the build was compiled with, whatever the CPU. A binary's `main` calls this first
/// and refuses to run with a clear message, instead of dying of an illegal instruction in the
/// middle of a lookup.
pub fn missing_build_features() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        // Leaf 1 ECX, and the extended leaf 0x8000_0001 ECX.
        #[allow(unused_unsafe)]
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 1 and, when the maximum extended
        // leaf allows it, 0x8000_0001 are defined there.
        let (ecx1, ecx_ext) = unsafe {
            let ecx1 = __cpuid(1).ecx;
            let max_ext = __cpuid(0x8000_0000).eax;
            let ecx_ext = if max_ext >= 0x8000_0001 {
                __cpuid(0x8000_0001).ecx
            } else {
                0
            };
            (ecx1, ecx_ext)
        };
        let bit = |r: u32, b: u32| r >> b & 1 == 1;
        let wanted: [(&'static str, bool, bool); 7] = [
            ("sse3", cfg!(target_feature = "sse3"), bit(ecx1, 0)),
            ("ssse3", cfg!(target_feature = "ssse3"), bit(ecx1, 9)),
            (
                "cmpxchg16b",
                cfg!(target_feature = "cmpxchg16b"),
                bit(ecx1, 13),
            ),
            ("sse4.1", cfg!(target_feature = "sse4.1"), bit(ecx1, 19)),
            ("sse4.2", cfg!(target_feature = "sse4.2"), bit(ecx1, 20)),
            ("popcnt", cfg!(target_feature = "popcnt"), bit(ecx1, 23)),
            (
                "lahfsahf",
                cfg!(target_feature = "lahfsahf"),
                bit(ecx_ext, 0),
            ),
        ];
        not_on_this_cpu(&wanted)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

/// The names of the features (name, compiled in, on this CPU) that are compiled in and not
/// on this CPU.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn not_on_this_cpu(features: &[(&'static str, bool, bool)]) -> Vec<&'static str> {
    features
        .iter()
        .filter(|(_, built, has)| *built && !*has)
        .map(|(name, _, _)| *name)
        .collect()
}

/// Features the build was compiled to use that this CPU lacks (see [`missing_build_features`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingFeatures(pub Vec<&'static str>);

impl fmt::Display for MissingFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this CPU lacks {}, which this build of vfsr was compiled to use (target-cpu \
             x86-64-v2 in .cargo/config.toml); for any x86-64 CPU, build it again with \
             RUSTFLAGS=\"-C target-cpu=x86-64\"",
            self.0.join(", ")
        )
    }
}

impl std::error::Error for MissingFeatures {}

/// Refuses to go on, naming what is missing, when the CPU lacks a feature the build was
/// compiled to use.
pub fn check_build_features() -> Result<(), MissingFeatures> {
    refuse_missing(missing_build_features())
}

fn refuse_missing(missing: Vec<&'static str>) -> Result<(), MissingFeatures> {
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MissingFeatures(missing))
    }
}

/// The first call of a program's `main`: returns when the CPU has what the build uses, and
/// otherwise ends the process (status 1) with [`check_build_features`]'s message under the
/// program's name on standard error. Nothing has been set up yet that would need undoing.
pub fn exit_unless_built_for_this_cpu(program: &str) {
    if let Err(e) = check_build_features() {
        eprintln!("{program}: {e}");
        std::process::exit(1);
    }
}

/// The time-stamp counter (0 where there is none): the clock of per-stage profiles and of the
/// TSC frequency measurement.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a counter; it has no preconditions in x86-64 user space.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_existing_core_and_refuses_a_missing_one() {
        assert!(pin(0).is_ok());
        assert_eq!(pin(100_000), Err(CpuError::CoreOutOfRange(100_000)));
        assert_eq!(pin_task(0, &[]), Err(CpuError::NoCore));
        // Every core of the machine at once, then back to the first: both allowed.
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let all: Vec<usize> = (0..n).collect();
        assert!(pin_task(0, &all).is_ok());
        assert!(pin(0).is_ok());
    }

    #[test]
    fn the_bench_core_is_the_last_allowed_one() {
        let all = allowed_cores(0);
        assert!(!all.is_empty());
        let last = *all.last().unwrap();
        // What a thread restricted to `core` is told: its bench core, allowed and usable cores.
        let on = |core: usize| {
            std::thread::spawn(move || {
                pin(core).unwrap();
                (default_bench_core(), allowed_cores(0), usable_cores())
            })
            .join()
            .unwrap()
        };
        // Restricted to the first core: that is the one named, even on a machine with more
        // (as under `taskset -c 0`).
        let first = all[0];
        assert_eq!(on(first), (first, vec![first], vec![first]));
        // Restricted to the last core, the last one; and that core alone may be named, not
        // the first as many cores as there are allowed.
        assert_eq!(on(last), (last, vec![last], vec![last]));
    }

    #[test]
    fn errors_name_the_core_or_the_policy() {
        assert_eq!(
            CpuError::CoreOutOfRange(4096).to_string(),
            "core 4096 is out of range"
        );
        let e = CpuError::Affinity {
            cores: vec![3],
            error: "Invalid argument".into(),
        };
        assert_eq!(e.to_string(), "cannot pin to core 3: Invalid argument");
    }

    #[test]
    fn ordinary_scheduling_is_always_allowed() {
        assert!(ordinary(0).is_ok());
    }

    #[test]
    fn this_cpu_runs_what_the_build_uses() {
        // The test itself runs compiled code, so the CPU has what the build uses; and a
        // feature the build was not compiled with is never reported missing.
        assert_eq!(missing_build_features(), Vec::<&str>::new());
        assert!(check_build_features().is_ok());
    }

    #[test]
    fn a_feature_compiled_in_and_absent_is_named() {
        let features = [
            ("popcnt", true, false),
            ("sse4.2", true, true),
            ("avx2", false, false),
            ("ssse3", true, false),
        ];
        let missing = not_on_this_cpu(&features);
        assert_eq!(missing, ["popcnt", "ssse3"]);
        let e = refuse_missing(missing).unwrap_err();
        assert_eq!(e, MissingFeatures(vec!["popcnt", "ssse3"]));
        let said = e.to_string();
        assert!(said.contains("lacks popcnt, ssse3"), "{said}");
        assert!(said.contains("target-cpu=x86-64"), "{said}");
        assert!(refuse_missing(Vec::new()).is_ok());
    }

    #[test]
    fn cpuid_vendor_family_and_model_are_read_as_the_vendors_define_them() {
        // "AuthenticAMD" and "GenuineIntel" as leaf 0 returns them (EBX, EDX, ECX).
        let regs = |s: &[u8; 12]| {
            let w = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
            (w(0), w(4), w(8))
        };
        let (b, d, c) = regs(b"AuthenticAMD");
        assert_eq!(vendor_of(b, d, c), Vendor::Amd);
        let (b, d, c) = regs(b"GenuineIntel");
        assert_eq!(vendor_of(b, d, c), Vendor::Intel);
        let (b, d, c) = regs(b"HygonGenuine");
        assert_eq!(vendor_of(b, d, c), Vendor::Other);
        // Zen 5 (base 15 + extended 11), Zen 4 (15 + 10), Intel family 6 (no extension).
        assert_eq!(family_of(0x00b0_0f21), 26);
        assert_eq!(family_of(0x00a1_0f11), 25);
        assert_eq!(family_of(0x000c_06f1), 6);
        // Models: Zen 5 model 2, Zen 4 model 17 (extended 1, base 1), Intel family 6 model
        // 207 (extended 12, base 15); a base family other than 6 or 15 takes no extension.
        assert_eq!(model_of(0x00b0_0f21), 2);
        assert_eq!(model_of(0x00a1_0f11), 17);
        assert_eq!(model_of(0x000c_06f1), 207);
        assert_eq!(model_of(0x0001_0521), 2);
        // This CPU's, against what the kernel says of it.
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let kernel = |key: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        match (x86_signature(), kernel("cpu family"), kernel("model")) {
            (Some(s), Some(f), Some(m)) => {
                assert_eq!((s.family, s.model), (f, m));
            }
            (found, f, m) => {
                println!("CPU not compared: CPUID {found:?}, kernel family {f:?} model {m:?}")
            }
        }
    }

    #[test]
    fn prefetch_of_any_address_does_not_fault() {
        prefetch(std::ptr::null::<u8>());
        prefetch(usize::MAX as *const u64);
        let x = [1u32; 16];
        prefetch(x.as_ptr());
    }
}
