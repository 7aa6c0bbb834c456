//! One exit-code table for every command (`docs/cli.md`, "Exit codes"; a test compares
//! the two). Like failures exit alike: whatever the command, bad input is 2 and a job that
//! finished with something missing is 3.

pub use crate::config::BadInput;
use crate::config::ConfigErrors;
use crate::engine::plan::ResumeRefused;
#[cfg(test)]
use crate::engine::shutdown;
use crate::eval::dataset::DatasetError;
use crate::store::StoreError;
use crate::store::schema::SchemaError;

/// Failed while working: an error after the work started (I/O, the run store, a variant
/// that could not run), or a benchmark's correctness check failed.
pub const FAILED: u8 = 1;
/// Bad input, found before anything was created or changed: the command line, a config,
/// a dataset, a path that cannot be used, a refused resume, the start-up check of the
/// endpoints.
pub const BAD_INPUT: u8 = 2;
/// Finished with something missing: calls lost, problems failed, rollouts not sampled, a
/// reward resting on a fallback. Resuming (where the command can) sends what is missing.
pub const INCOMPLETE: u8 = 3;
/// Stopped because an endpoint kept answering with errors retrying cannot fix.
pub const ENDPOINT_REFUSED: u8 = 4;

/// Every exit code with its one-line meaning, in `docs/cli.md`'s order (a test compares
/// the two; 0, `ExitCode::SUCCESS`, is every check passed).
#[cfg(test)]
pub const TABLE: &[(u8, &str)] = &[
    (0, "done"),
    (FAILED, "failed while working"),
    (BAD_INPUT, "bad input"),
    (INCOMPLETE, "finished with something missing"),
    (ENDPOINT_REFUSED, "stopped: an endpoint kept refusing"),
    (shutdown::EXIT_INTERRUPTED, "stopped by SIGINT"),
    (shutdown::EXIT_TERMINATED, "stopped by SIGTERM"),
    (shutdown::EXIT_ABORTED, "aborted by a second signal"),
];

/// The exit code of a command that ended with `err`: [`BAD_INPUT`] when the error (or one
/// of its causes) is about the input — including a file or directory that does not exist
/// or may not be read or written — [`FAILED`] otherwise.
pub fn code_of(err: &anyhow::Error) -> u8 {
    let bad_input = err.chain().any(|e| {
        e.is::<BadInput>()
            || e.is::<ConfigErrors>()
            || e.is::<DatasetError>()
            || e.is::<ResumeRefused>()
            || e.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                )
            })
            || e.downcast_ref::<StoreError>().is_some_and(|s| {
                matches!(
                    s,
                    StoreError::Missing { .. }
                        | StoreError::Exists { .. }
                        | StoreError::Lock(_)
                        | StoreError::Schema(
                            SchemaError::Newer { .. } | SchemaError::Unknown { .. }
                        )
                )
            })
    });
    if bad_input { BAD_INPUT } else { FAILED }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_errors_exit_2_and_others_1_also_under_context() {
        let bad = anyhow::Error::new(BadInput("no dataset".into())).context("starting");
        assert_eq!(code_of(&bad), BAD_INPUT);
        let missing = anyhow::Error::new(StoreError::Missing {
            path: "x/run.sqlite".into(),
        });
        assert_eq!(code_of(&missing), BAD_INPUT);
        let io = anyhow::Error::new(std::io::Error::other("disk full")).context("writing");
        assert_eq!(code_of(&io), FAILED);
    }
}
