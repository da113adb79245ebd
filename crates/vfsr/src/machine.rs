//! The machine a benchmark ran on, named beside every figure: CPU model, cores, the vector
//! extensions the lookups may use, the time-stamp counter's rate (cycles per packet are
//! counted in its ticks, as DPDK counts them), the kernel.
//!
//! The TSC runs at a constant rate whatever the core's current clock: a figure in TSC
//! cycles is time expressed at the nominal frequency, comparable across runs on one model,
//! not a count of the core's own cycles under turbo or throttling.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The CPU's model name (`/proc/cpuinfo`), or "unknown CPU".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
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

/// The facts for a benchmark's JSON: `cpu`, `cores`, `features`, `tsc_ghz`, `kernel`.
pub fn facts() -> Value {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
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
