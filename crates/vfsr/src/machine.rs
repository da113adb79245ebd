//! The machine a benchmark ran on, named beside every figure: CPU model, cores, the vector
//! extensions the lookups may use, the time-stamp counter's rate (cycles per packet are
//! counted in its ticks, as DPDK counts them), the kernel.
//!
//! The TSC runs at a constant rate whatever the core's current clock: a figure in TSC
//! cycles is time expressed at the nominal frequency, comparable across runs on one model,
//! not a count of the core's own cycles under turbo or throttling.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The CPU's model name (`/proc/cpuinfo`), or "unknown CPU". Where a virtual machine hides
/// the model number ("AMD EPYC"), the AMD core generation its family and model give is
/// added, as in "AMD EPYC (Zen 4; family 25, model 17)": the generations differ in speed and
/// in AVX-512, and a figure must say which one it came from. The vendor, family and model
/// are CPUID's ([`vfsr_cpu::x86_signature`], which the lookups' choice of code reads too);
/// only the name comes from the kernel.
pub fn cpu_model() -> String {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| model_name(&s));
    cpu_model_of(name.as_deref(), vfsr_cpu::x86_signature())
}

/// The first processor's `model name` in the text of `/proc/cpuinfo`.
fn model_name(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .find(|l| {
            l.split(':')
                .next()
                .is_some_and(|k| k.trim() == "model name")
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// [`cpu_model`] from a model name and a CPUID signature.
fn cpu_model_of(name: Option<&str>, sig: Option<vfsr_cpu::X86Signature>) -> String {
    let Some(name) = name else {
        return "unknown CPU".into();
    };
    match sig {
        Some(vfsr_cpu::X86Signature {
            vendor: vfsr_cpu::Vendor::Amd,
            family: f,
            model: m,
        }) if !name.chars().any(|c| c.is_ascii_digit()) => match amd_generation(f, m) {
            Some(g) => format!("{name} ({g}; family {f}, model {m})"),
            None => format!("{name} (family {f}, model {m})"),
        },
        _ => name.to_string(),
    }
}

/// The Zen generation of an AMD family and model (AMD's published model ranges).
fn amd_generation(family: u32, model: u32) -> Option<&'static str> {
    match (family, model) {
        (0x17, 0x00..=0x2f) => Some("Zen or Zen+"),
        (0x17, 0x30..=0xff) => Some("Zen 2"),
        (0x19, 0x00..=0x0f | 0x20..=0x5f) => Some("Zen 3"),
        (0x19, 0x10..=0x1f | 0x60..=0xaf) => Some("Zen 4"),
        (0x1a, _) => Some("Zen 5"),
        _ => None,
    }
}

/// The time-stamp counter's ticks per second, measured against the monotonic clock over
/// `span`; `None` off x86_64 or without an invariant TSC worth trusting.
pub fn tsc_hz_over(span: Duration) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let read = vfsr_cpu::rdtsc;
        let (t0, c0) = (Instant::now(), read());
        while t0.elapsed() < span {
            std::hint::spin_loop();
        }
        let (c1, t1) = (read(), Instant::now());
        let secs = t1.duration_since(t0).as_secs_f64();
        let ticks = c1.checked_sub(c0)? as f64;
        (secs > 0.0 && ticks > 0.0).then_some(ticks / secs)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = span;
        None
    }
}

/// [`tsc_hz_over`] 50 ms.
pub fn tsc_hz() -> Option<f64> {
    tsc_hz_over(Duration::from_millis(50))
}

/// Whether the CPU has `feature` (as `is_x86_feature_detected!` sees it).
fn has(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match feature {
            "avx2" => std::arch::is_x86_feature_detected!("avx2"),
            "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
            "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
            "popcnt" => std::arch::is_x86_feature_detected!("popcnt"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        false
    }
}

/// The facts for a benchmark's JSON: `cpu`, `cores` (the machine's, online), `cores_allowed`
/// (those the benchmark may run on: fewer under `taskset`), `features`, `tsc_ghz`, `kernel`.
pub fn facts() -> Value {
    let allowed = vfsr_cpu::allowed_cores(0).len();
    // SAFETY: sysconf only reads a system value.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let cores = usize::try_from(online)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get()));
    let features: Vec<&str> = ["popcnt", "bmi2", "avx2", "avx512f"]
        .into_iter()
        .filter(|f| has(f))
        .collect();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    json!({
        "cpu": cpu_model(),
        "cores": cores,
        "cores_allowed": allowed,
        "features": features,
        "tsc_ghz": tsc_hz().map(|h| (h / 1e6).round() / 1e3),
        "kernel": kernel,
    })
}

/// One line for a readable report: "AMD EPYC 7B13 (2 cores; avx2; TSC 2.45 GHz)".
pub fn summary(facts: &Value) -> String {
    let features: Vec<&str> = facts["features"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|f| f.starts_with("avx"))
                .collect()
        })
        .unwrap_or_default();
    let tsc = facts["tsc_ghz"]
        .as_f64()
        .map(|g| format!("; TSC {g:.2} GHz"))
        .unwrap_or_default();
    format!(
        "{} ({} cores; {}{tsc})",
        facts["cpu"].as_str().unwrap_or("unknown CPU"),
        facts["cores"].as_u64().unwrap_or(0),
        if features.is_empty() {
            "no AVX".to_string()
        } else {
            features.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_name_the_cpu_and_a_plausible_tsc() {
        let f = facts();
        assert!(!f["cpu"].as_str().unwrap().is_empty());
        assert!(f["cores"].as_u64().unwrap() >= 1);
        // The machine's cores, not only those this process may use.
        let allowed = f["cores_allowed"].as_u64().unwrap();
        assert!(
            allowed >= 1 && f["cores"].as_u64().unwrap() >= allowed,
            "{f}"
        );
        if cfg!(target_arch = "x86_64") {
            // Any x86 server of this century: between 0.5 and 6 GHz.
            let g = f["tsc_ghz"].as_f64().expect("a TSC rate on x86_64");
            assert!((0.5..6.0).contains(&g), "{g} GHz");
        }
        let s = summary(&f);
        assert!(s.contains(f["cpu"].as_str().unwrap()), "{s}");
        assert!(s.contains("cores"), "{s}");
    }

    #[test]
    fn cores_count_the_machine_not_the_affinity() {
        let all = vfsr_cpu::allowed_cores(0);
        if all.len() < 2 {
            return; // one core: nothing to tell apart
        }
        // As under `taskset -c 0`: a thread that may run on one core still names them all.
        let f = std::thread::spawn(move || {
            vfsr_cpu::pin(all[0]).unwrap();
            facts()
        })
        .join()
        .unwrap();
        assert_eq!(f["cores_allowed"], 1, "{f}");
        assert!(f["cores"].as_u64().unwrap() >= 2, "{f}");
    }

    #[test]
    fn a_hidden_amd_model_is_named_by_its_generation() {
        use vfsr_cpu::{Vendor, X86Signature};
        let sig = |vendor, family, model| {
            Some(X86Signature {
                vendor,
                family,
                model,
            })
        };
        for (family, model, named) in [
            (25, 17, "Zen 4; family 25, model 17"),
            (25, 1, "Zen 3; family 25, model 1"),
            (26, 2, "Zen 5; family 26, model 2"),
            (16, 2, "family 16, model 2"),
        ] {
            let got = cpu_model_of(Some("AMD EPYC"), sig(Vendor::Amd, family, model));
            assert_eq!(got, format!("AMD EPYC ({named})"));
        }
        // A full model name says it all already; other vendors are left as named.
        let full = "AMD EPYC 7B13 64-Core Processor";
        assert_eq!(cpu_model_of(Some(full), sig(Vendor::Amd, 25, 1)), full);
        let intel = "Intel Xeon Processor";
        assert_eq!(cpu_model_of(Some(intel), sig(Vendor::Intel, 6, 143)), intel);
        assert_eq!(cpu_model_of(Some("AMD EPYC"), None), "AMD EPYC");
        assert_eq!(cpu_model_of(None, sig(Vendor::Amd, 26, 2)), "unknown CPU");
    }

    #[test]
    fn the_model_name_is_the_first_processors() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 2\n\
                    model name\t: AMD EPYC\nflags\t\t: fpu\n\n\
                    processor\t: 1\nmodel name\t: Other\n";
        assert_eq!(model_name(info).as_deref(), Some("AMD EPYC"));
        assert_eq!(model_name("processor\t: 0\n\nmodel name\t: late\n"), None);
        assert_eq!(model_name(""), None);
    }

    #[test]
    fn summary_reads_a_recorded_machine() {
        let f = json!({"cpu": "AMD EPYC 7B13 64-Core Processor", "cores": 2,
            "features": ["popcnt", "bmi2", "avx2"], "tsc_ghz": 2.45, "kernel": "6.1.0"});
        assert_eq!(
            summary(&f),
            "AMD EPYC 7B13 64-Core Processor (2 cores; avx2; TSC 2.45 GHz)"
        );
        assert_eq!(summary(&json!({})), "unknown CPU (0 cores; no AVX)");
    }
}
