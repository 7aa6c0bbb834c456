//! Benchmarks (`tmas bench …`): each prints its figures as ratios against the ideal
//! measured in the same run and writes them as JSON under `bench-results/`.

pub mod client;
pub mod eval;
pub mod resources;
pub mod schedule;
pub mod sim_process;

/// Writes a benchmark result as pretty JSON to `bench-results/NAME-<unix time>.json`.
pub fn write_result(name: &str, value: &serde_json::Value) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let dir = std::path::Path::new("bench-results");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = dir.join(format!("{name}-{secs}.json"));
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Prints the simulator's peak in-flight against the cap, flagging a violation.
pub fn print_sim_peak(peak: u64, cap: usize) {
    let verdict = if peak as usize <= cap {
        "ok"
    } else {
        "EXCEEDED"
    };
    println!("  sim peak in-flight {peak} (cap {cap}, {verdict})");
}
