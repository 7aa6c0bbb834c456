//! A Python interpreter with the modules a test needs, for checks that run the tools
//! researchers use (pyarrow reading our Parquet files).
//!
//! The interpreter is `$TMAS_PYTHON` when set (`.ci/run` makes a virtual environment with
//! the packages and points it there), else `python3`. When the modules are missing the
//! test skips that check and says so on standard error, unless `TMAS_REQUIRE_PYTHON=1`
//! (set by `.ci/run`), which turns the skip into a failure: CI never passes such a check
//! silently.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// The interpreter to use, if it imports every one of `modules`; `None` (after saying so
/// loudly) when it does not and Python is not required.
pub fn python_with(modules: &[&str], check: &str) -> Option<PathBuf> {
    let python = std::env::var_os("TMAS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let imports = format!("import {}", modules.join(", "));
    let found = Command::new(&python)
        .args(["-c", &imports])
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(python);
    }
    let why = format!(
        "{} cannot `{imports}`: {check} needs it (`pip install {}`, or set TMAS_PYTHON to an \
         interpreter that has it)",
        python.display(),
        modules.join(" ")
    );
    if std::env::var("TMAS_REQUIRE_PYTHON").is_ok_and(|v| v == "1") {
        panic!("TMAS_REQUIRE_PYTHON=1 but {why}");
    }
    // Straight to the process's standard error: the test harness captures `eprintln!` of a
    // passing test, and a skip nobody sees is a silent pass.
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED CHECK *** {why}\n");
    None
}
