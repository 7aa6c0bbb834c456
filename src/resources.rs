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

/// The environment variable that, when set, leaves transparent huge pages to the
/// allocator's own setting (mimalloc reads it: `1` allows them, `0` turns them off).
pub const ALLOW_HUGE_PAGES_ENV: &str = "MIMALLOC_ALLOW_THP";

/// Turns transparent huge pages off for this process (and the processes it starts),
/// unless [`ALLOW_HUGE_PAGES_ENV`] is set. Called first thing by the command line.
///
/// Why: the orchestrator's heap is many replies and prompts of 1–400 KB allocated and
/// freed at thousands per second. With huge pages a 2 MiB page stays resident as long as
/// any block on it lives, so the resident set stayed far above the heap and varied from
/// run to run with the timing of the kernel's page merging; with 4 KiB pages it is about
/// a quarter lower and steadier, at no CPU cost (docs/benchmarks.md, "Transparent huge
/// pages").
/// Cluster nodes often run with huge pages `always`, where the difference is larger.
pub fn small_pages_only() {
    if std::env::var_os(ALLOW_HUGE_PAGES_ENV).is_none() {
        disable_huge_pages();
    }
}

/// `prctl(PR_SET_THP_DISABLE)`: no new huge page for this process's memory. A kernel
/// without the call (or another platform) keeps its setting; nothing else depends on it.
fn disable_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes no memory
        // this process can observe.
        let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
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

    /// Whether transparent huge pages may back this process's memory (`THP_enabled` in
    /// `/proc/self/status`), if the kernel says.
    fn huge_pages_enabled() -> Option<bool> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        status.lines().find_map(|line| {
            let rest = line.strip_prefix("THP_enabled:")?;
            Some(rest.trim() == "1")
        })
    }

    #[test]
    fn huge_pages_are_off_once_disabled() {
        let Some(before) = huge_pages_enabled() else {
            eprintln!("SKIPPED: this kernel's /proc/self/status has no THP_enabled line");
            return;
        };
        disable_huge_pages();
        assert_eq!(huge_pages_enabled(), Some(false), "was {before}");
    }
}
