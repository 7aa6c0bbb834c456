//! SIGINT/SIGTERM for the commands that run calls (`tmas run`, `tmas experiment`,
//! `tmas select-hard`): the first signal stops whatever phase the command is in, the
//! second aborts at once.
//!
//! The first signal cancels the command's stop token, and every phase watches it: the
//! start-up wait for an endpoint and the checks before anything is created end at once
//! (nothing was created, [`StoppedBeforeStart`]); a run sends no new calls, gives the
//! calls in flight `run.shutdown_grace_secs` to finish and be stored (and problems whose
//! calls all finished that long to be judged), flushes the store and exits with
//! [`Signals::exit_code`] (130 after SIGINT, 143 after SIGTERM) and a message saying how
//! to resume. Abort: the process exits with [`EXIT_ABORTED`] without waiting; the store
//! stays consistent because every write is a transaction (a batch being committed is
//! either all there or not at all), and resume re-sends only the calls that were not
//! committed.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit code after a graceful stop by SIGINT (128 + 2, as shells report an interrupted
/// job); also the code of a stop that no signal asked for.
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code after a graceful stop by SIGTERM (128 + 15).
pub const EXIT_TERMINATED: u8 = 143;
/// Exit code after a second signal aborted the run.
pub const EXIT_ABORTED: u8 = 137;

/// The signals that stop a command gracefully.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
}

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// 128 + the signal's number.
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => EXIT_INTERRUPTED,
            StopSignal::Terminate => EXIT_TERMINATED,
        }
    }
}

/// Which signal stopped the command, once one did.
#[derive(Debug, Clone, Default)]
pub struct Signals(Arc<OnceLock<StopSignal>>);

impl Signals {
    /// The first signal received, if any.
    pub fn received(&self) -> Option<StopSignal> {
        self.0.get().copied()
    }

    /// The exit code of a command that stopped before its end: that of the signal
    /// received ([`EXIT_INTERRUPTED`] when none was).
    pub fn exit_code(&self) -> u8 {
        self.received()
            .map_or(EXIT_INTERRUPTED, StopSignal::exit_code)
    }
}

/// Listens for SIGINT and SIGTERM: the first cancels `stop`, the second exits the
/// process with [`EXIT_ABORTED`]. Fails only if the handlers cannot be installed.
pub fn install(stop: CancellationToken) -> std::io::Result<Signals> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let signals = Signals::default();
    let seen = signals.0.clone();
    tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                Some(()) = int.recv() => StopSignal::Interrupt,
                Some(()) = term.recv() => StopSignal::Terminate,
                else => return,
            };
            let name = received.name();
            if seen.set(received).is_ok() {
                eprintln!("{name} received: stopping (send it again to abort at once)");
                stop.cancel();
            } else {
                eprintln!(
                    "{name} received again: aborting now; the run store is consistent, resume \
                     re-sends the calls that were in flight"
                );
                std::process::exit(i32::from(EXIT_ABORTED));
            }
        }
    });
    Ok(signals)
}

/// The command was stopped before its run (or experiment) started: during the checks,
/// the start-up wait for an endpoint or the planning. Nothing was created, or what exists
/// is unchanged.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("stopped before the run started")]
pub struct StoppedBeforeStart;

/// `work`, unless `stop` is cancelled first: then [`StoppedBeforeStart`] (and `work` is
/// dropped, which ends whatever it was waiting for).
pub async fn until_stopped<T>(
    stop: &CancellationToken,
    work: impl Future<Output = T>,
) -> Result<T, StoppedBeforeStart> {
    if stop.is_cancelled() {
        return Err(StoppedBeforeStart);
    }
    tokio::select! {
        biased;
        _ = stop.cancelled() => Err(StoppedBeforeStart),
        done = work => Ok(done),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn work_ends_when_the_stop_comes_first_and_not_otherwise() {
        let stop = CancellationToken::new();
        assert_eq!(until_stopped(&stop, async { 7 }).await.ok(), Some(7));
        let cancel = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            cancel.cancel();
        });
        let forever = std::future::pending::<()>();
        assert!(until_stopped(&stop, forever).await.is_err());
        // Already stopped: the work does not even start.
        assert!(until_stopped(&stop, async { 7 }).await.is_err());
    }

    #[test]
    fn the_exit_code_is_the_signals() {
        let signals = Signals::default();
        assert_eq!(signals.exit_code(), EXIT_INTERRUPTED);
        signals.0.set(StopSignal::Terminate).unwrap();
        assert_eq!(signals.exit_code(), 143);
        assert_eq!(StopSignal::Interrupt.exit_code(), 130);
    }
}
