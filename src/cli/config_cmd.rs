//! `tmas config check FILE [--set KEY=VALUE]...`: prints the fully resolved config (file +
//! `TMAS_*` environment + overrides, defaults filled in) as TOML and exits 0, or prints
//! every error, one per line with origin, key path and reason, and exits 2.
//! Warnings (e.g. an unset API-key variable, fatal only when a run starts) go to stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{self, resolve::process_env};

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the fully resolved config, or every error with file, key path and reason.
    Check {
        /// The config file (TOML).
        file: PathBuf,
        /// Override a key as a run would (repeatable): `--set method.n=4`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
}

pub async fn run(cmd: ConfigCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Check { file, set } => {
            let env = process_env();
            let code = check(
                &file,
                &set,
                &env,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            )?;
            Ok(ExitCode::from(code))
        }
    }
}

/// The check itself, writing to the given streams; returns the exit status.
fn check(
    file: &Path,
    set: &[String],
    env: &[(String, String)],
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<u8> {
    match config::load(file, env, set) {
        Ok(cfg) => {
            for w in cfg
                .warnings(env)
                .into_iter()
                .chain(cfg.endpoint_sharing_issues())
            {
                writeln!(err, "warning: {w}")?;
            }
            let text = cfg.to_toml_string()?;
            writeln!(
                out,
                "# Resolved from {} (defaults, file, environment, --set)",
                file.display()
            )?;
            write!(out, "{text}")?;
            Ok(0)
        }
        Err(errors) => {
            for e in errors.iter() {
                writeln!(err, "error: {e}")?;
            }
            Ok(super::exit::BAD_INPUT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_check(text: &str, set: &[&str]) -> (u8, String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).expect("write");
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = check(&path, &set, &[], &mut out, &mut err).expect("io");
        let s = |b: Vec<u8>| String::from_utf8_lossy(&b).replace(&path.display().to_string(), "F");
        (code, s(out), s(err))
    }

    const OK: &str = "[endpoints.e]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n\
                      api_key_env = \"TMAS_TEST_UNSET_KEY\"\n";

    #[test]
    fn valid_config_prints_resolved_toml_and_warnings() {
        let (code, out, err) = run_check(OK, &["method.n=3"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("n = 3"), "{out}");
        assert!(out.contains("[roles.judge]"), "{out}");
        assert!(
            out.contains("api_key_env = \"TMAS_TEST_UNSET_KEY\""),
            "{out}"
        );
        assert!(
            err.starts_with("warning: endpoints.e.api_key_env:"),
            "{err}"
        );
    }

    #[test]
    fn invalid_config_prints_every_error_and_exits_2() {
        let (code, out, err) = run_check(&format!("{OK}[method]\nn = 0\nepsilon = 9\n"), &[]);
        assert_eq!(code, crate::cli::exit::BAD_INPUT);
        assert!(out.is_empty());
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines,
            [
                "error: F:6:5: method.n: must be at least 1, got 0",
                "error: F:7:11: method.epsilon: must be within [0, 1], got 9",
            ]
        );
    }
}
