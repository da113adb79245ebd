//! Pinning the calling thread to one core, so that a benchmark measures one core's work.

/// Pins the current thread to `core`. Returns an error naming the core when the kernel refuses
/// (for example a core outside the process's allowed set).
pub fn pin_to_core(core: usize) -> Result<(), String> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(format!("core {core} is out of range"));
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it, and
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "cannot pin to core {core}: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// The core a benchmark should use by default: the last one, away from core 0 where the
/// system and the control plane run.
pub fn default_bench_core() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_existing_core_and_refuses_a_missing_one() {
        assert!(pin_to_core(0).is_ok());
        assert!(pin_to_core(100_000).is_err());
    }
}
