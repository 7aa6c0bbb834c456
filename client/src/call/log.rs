//! What a call says about itself: its log lines and the retry events on its attempts'
//! spans, apart from the driver so the IO loop reads as the plan's actions.

use std::time::Duration;

use super::attempt::Running;
use super::job::Job;
use crate::error::ClientError;
use crate::telemetry;

/// An attempt set aside: past its timeout (a hedge starts beside it, and its span records
/// the timeout as a retry), or beside an attempt cut by a crash (a replacement races it).
pub(super) fn set_aside<R>(group: &str, run: &Running<'_, R>, hedged: bool) {
    let (ep, attempt) = (run.slot.endpoint.name(), run.id);
    if hedged {
        tracing::debug!(%group, endpoint = %ep, attempt, "attempt past its timeout: hedging");
        let error = ClientError::Timeout {
            endpoint: ep.clone(),
            after: run.started.elapsed(),
        };
        telemetry::on_retry(&run.span, &error, Duration::ZERO);
    } else {
        tracing::debug!(%group, endpoint = %ep, attempt, "the attempt beside this one was cut by a crash: racing a replacement");
    }
}

/// A retry after `delay`, following the failure of the attempt whose span is `span`.
pub(super) fn retrying<J: Job>(
    group: &str,
    attempts: u32,
    span: &tracing::Span,
    error: &ClientError,
    delay: Duration,
) {
    tracing::debug!(%group, attempts, ?delay, error = %error, "retrying {}", J::WHAT);
    telemetry::on_retry(span, error, delay);
}

/// The call failed with its budget spent. Logged with the call's identity: the call's own
/// span exists only at DEBUG or when exporting.
pub(super) fn failed<J: Job>(job: &J, group: &str, attempts: u32, error: &ClientError) {
    let call = job.tags().call.as_deref().unwrap_or("");
    tracing::warn!(call, %group, attempts, error = %error, "{} failed after retries", J::WHAT);
}
