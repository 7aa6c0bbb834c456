//! CPU time and peak memory of the current process and thread: for benchmark reports and
//! the run store writer's own CPU figure. Below every other module, so any may use it.

/// User + system CPU seconds this process has used so far.
pub fn cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF).unwrap_or(f64::NAN)
}

/// User + system CPU seconds the calling thread has used so far (Linux only).
pub fn this_thread_cpu_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        rusage_seconds(libc::RUSAGE_THREAD)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// User + system seconds of `getrusage(who)`.
fn rusage_seconds(who: libc::c_int) -> Option<f64> {
    // SAFETY: getrusage writes into the zeroed struct we pass; callers pass a `who` the
    // platform defines.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(tv(usage.ru_utime) + tv(usage.ru_stime))
}

/// Peak resident set size of this process in bytes (`VmHWM`), if the platform reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix("VmHWM:")?;
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_positive_and_monotonic() {
        let a = cpu_seconds();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = cpu_seconds();
        assert!(a >= 0.0 && b >= a, "{a} then {b}");
        if let Some(thread) = this_thread_cpu_seconds() {
            // This thread did the loop; the process total includes it.
            assert!(thread > 0.0 && thread <= cpu_seconds() + 1e-6, "{thread}");
        }
    }

    #[test]
    fn peak_rss_is_reported_on_linux() {
        let rss = peak_rss_bytes().expect("VmHWM present on Linux");
        assert!(rss > 1024 * 1024, "peak RSS {rss} bytes looks wrong");
    }
}
