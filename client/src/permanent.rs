//! Permanent errors in a row: when one endpoint refuses K consecutive calls with an
//! answer that retrying cannot change (a rejected key, a wrong URL or model, a request the
//! server will not accept: [`ClientError::is_permanent`]), every further call would fail
//! the same way. Rather than burn the whole run into failures, the client raises a stop
//! the run watches (like SIGINT: no new calls, calls in flight finish) and keeps the first
//! such error so the user sees what the server said.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::error::ClientError;

/// Why the client asked the run to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermanentStop {
    pub endpoint: Arc<str>,
    /// Consecutive permanent errors from that endpoint when the limit was reached.
    pub consecutive: u32,
    /// The last of them, as the client reports it (HTTP status and body snippet).
    pub error: String,
}

/// Counts permanent errors per endpoint; see the module docs.
#[derive(Debug)]
pub struct PermanentErrors {
    /// 0: never stop.
    limit: u32,
    stop: CancellationToken,
    reason: Mutex<Option<PermanentStop>>,
}

impl PermanentErrors {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            stop: CancellationToken::new(),
            reason: Mutex::new(None),
        }
    }

    /// Cancelled once an endpoint reached the limit.
    pub fn stopped(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// The first endpoint that reached the limit, if one did.
    pub fn reason(&self) -> Option<PermanentStop> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// An answered call resets its endpoint's count.
    pub(crate) fn on_success(&self, in_a_row: &AtomicU32) {
        if in_a_row.load(Ordering::Relaxed) != 0 {
            in_a_row.store(0, Ordering::Relaxed);
        }
    }

    /// A failed attempt: counts it when permanent, raises the stop at the limit.
    pub(crate) fn on_failure(
        &self,
        endpoint: &Arc<str>,
        in_a_row: &AtomicU32,
        error: &ClientError,
    ) {
        if !error.is_permanent() {
            // Transient failures say nothing about the request or the credentials.
            return;
        }
        let n = in_a_row.fetch_add(1, Ordering::AcqRel) + 1;
        if self.limit == 0 || n < self.limit {
            return;
        }
        let mut reason = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if reason.is_none() {
            tracing::error!(endpoint = %endpoint, consecutive = n, %error,
                "permanent errors in a row: stopping the run");
            *reason = Some(PermanentStop {
                endpoint: endpoint.clone(),
                consecutive: n,
                error: error.to_string(),
            });
        }
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16) -> ClientError {
        ClientError::Status {
            endpoint: "gpu".into(),
            status,
            body_snippet: "{\"error\":\"bad key\"}".into(),
        }
    }

    #[test]
    fn stops_after_k_in_a_row_only() {
        let p = PermanentErrors::new(3);
        let (name, count): (Arc<str>, _) = ("gpu".into(), AtomicU32::new(0));
        p.on_failure(&name, &count, &status(401));
        p.on_failure(&name, &count, &status(401));
        p.on_success(&count);
        p.on_failure(&name, &count, &status(503));
        p.on_failure(&name, &count, &status(401));
        p.on_failure(&name, &count, &status(404));
        assert!(
            !p.stopped().is_cancelled(),
            "a success resets, a 503 is not counted"
        );
        p.on_failure(&name, &count, &status(401));
        assert!(p.stopped().is_cancelled());
        let reason = p.reason().expect("a reason");
        assert_eq!(&*reason.endpoint, "gpu");
        assert_eq!(reason.consecutive, 3);
        assert!(reason.error.contains("HTTP 401") && reason.error.contains("bad key"));
    }

    #[test]
    fn limit_zero_never_stops() {
        let p = PermanentErrors::new(0);
        let (name, count): (Arc<str>, _) = ("gpu".into(), AtomicU32::new(0));
        for _ in 0..100 {
            p.on_failure(&name, &count, &status(403));
        }
        assert!(!p.stopped().is_cancelled());
    }
}
