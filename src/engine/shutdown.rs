//! SIGINT/SIGTERM for `tmas run`: the first signal stops the run gracefully, the second
//! aborts at once.
//!
//! Graceful: no new calls, calls in flight get `run.shutdown_grace_secs` to finish and be
//! stored, the store is flushed, and the process exits with [`EXIT_INTERRUPTED`] and a
//! message saying how to resume. Abort: the process exits with [`EXIT_ABORTED`] without
//! waiting; the store stays consistent because every write is a transaction (a batch
//! being committed is either all there or not at all), and resume re-sends only the
//! calls that were not committed.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit code after a graceful stop (128 + SIGINT, as shells report an interrupted job).
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code after a second signal aborted the run.
pub const EXIT_ABORTED: u8 = 137;

/// Listens for SIGINT and SIGTERM: the first cancels `stop`, the second exits the
/// process with [`EXIT_ABORTED`]. Fails only if the handlers cannot be installed.
pub fn install(stop: CancellationToken) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(tokio::spawn(async move {
        let mut seen = 0;
        loop {
            let name = tokio::select! {
                Some(()) = int.recv() => "SIGINT",
                Some(()) = term.recv() => "SIGTERM",
                else => return,
            };
            seen += 1;
            if seen == 1 {
                eprintln!("{name} received: stopping gracefully (send it again to abort at once)");
                stop.cancel();
            } else {
                eprintln!(
                    "{name} received again: aborting now; the run store is consistent, resume \
                     re-sends the calls that were in flight"
                );
                std::process::exit(i32::from(EXIT_ABORTED));
            }
        }
    }))
}
