//! An attempt in flight, and what its end tells the plan: its slot given back, its
//! outcome recorded against its endpoint (breaker, limit, permanent errors, telemetry),
//! and whether its endpoint went down under it or answered others meanwhile.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use tracing::Instrument;

use super::Shared;
use super::acquire::{Ready, Slot};
use super::job::{Ended, Job};
use super::plan::{AttemptId, Event, Failure};
use crate::endpoint::{AttemptError, Endpoint};
use crate::error::ClientError;
use crate::telemetry;

/// An attempt in flight, holding its slot.
pub(super) struct Running<'a, R> {
    pub id: AttemptId,
    pub fut: BoxFuture<'static, Result<R, AttemptError>>,
    pub slot: Slot<'a>,
    pub span: tracing::Span,
    pub started: Instant,
    pub max_tokens: u32,
    /// The endpoint's breaker trips and answers when the attempt was sent.
    pub trips: u64,
    pub successes: u64,
}

/// An attempt's end, as the driver keeps it.
pub(super) struct Outcome<T> {
    pub event: Event<Arc<Endpoint>>,
    /// The call's response, if the attempt answered.
    pub answer: Option<T>,
    /// Its failure and span, for the retry's log line and span event.
    pub failure: Option<(tracing::Span, ClientError)>,
    /// A crash seen while its endpoint was still marked up: the endpoint and its breaker
    /// trips when the attempt was sent, to tell at the next acquire whether it went down.
    pub crash: Option<(Arc<Endpoint>, u64)>,
}

/// Polls `f` if there is one; never ready otherwise.
pub(super) async fn maybe<F: Future + Unpin>(f: Option<&mut F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The first of the attempts to end, by index.
pub(super) async fn first_ended<R>(
    running: &mut [Running<'_, R>],
) -> (usize, Result<R, AttemptError>) {
    std::future::poll_fn(|cx| {
        for (i, r) in running.iter_mut().enumerate() {
            if let Poll::Ready(out) = r.fut.as_mut().poll(cx) {
                return Poll::Ready((i, out));
            }
        }
        Poll::Pending
    })
    .await
}

impl<'a, R: 'static> Running<'a, R> {
    /// Sends attempt `attempt` of `job` on a slot just acquired, with the call's tag
    /// headers and the attempt span's `traceparent`.
    pub fn launch<J: Job<Reply = R>>(
        job: &J,
        (slot, enc, started): Ready<'a, J::Body>,
        attempt: AttemptId,
        scale: f64,
        mut headers: HeaderMap,
    ) -> Self {
        let ep = slot.endpoint.clone();
        if attempt > 1 {
            ep.retries.fetch_add(1, Ordering::Relaxed);
            job.count_retry(&ep);
        }
        let span = job.span(&ep, &enc, attempt);
        telemetry::inject_traceparent(&span, &mut headers);
        let trips = ep.trips.load(Ordering::Relaxed);
        let successes = ep.successes.load(Ordering::Relaxed);
        let fut = job.send(ep, enc.body, headers, scale);
        Running {
            id: attempt,
            fut: Box::pin(fut.instrument(span.clone())),
            slot,
            span,
            started,
            max_tokens: enc.max_tokens,
            trips,
            successes,
        }
    }

    /// Ends the attempt with `result` (attempt `attempts` of its call).
    pub fn end<J: Job<Reply = R>>(
        self,
        shared: &Shared,
        job: &J,
        result: Result<R, AttemptError>,
        attempts: u32,
    ) -> Outcome<J::Response> {
        let Running {
            id,
            fut,
            slot,
            span,
            started,
            max_tokens,
            trips,
            successes,
        } = self;
        drop(fut);
        let ep = slot.endpoint.clone();
        drop(slot);
        let done = Ended {
            endpoint: &ep,
            span: &span,
            started,
            max_tokens,
        };
        let now = Instant::now();
        let failure = match result {
            Ok(reply) => {
                let answer = job.answered(&done, reply, attempts);
                shared.permanent.on_success(&ep.permanent_in_a_row);
                let event = Event::Finished {
                    attempt: id,
                    result: Ok(()),
                    now,
                };
                return Outcome {
                    event,
                    answer: Some(answer),
                    failure: None,
                    crash: None,
                };
            }
            Err(f) => f,
        };
        let effects = ep.record_failure(&failure.error, started);
        shared
            .permanent
            .on_failure(ep.name(), &ep.permanent_in_a_row, &failure.error);
        job.failed(&done, &failure.error, effects);
        let healthy = ep.is_healthy();
        let went_down = !healthy || ep.trips.load(Ordering::Relaxed) != trips;
        let crash = (failure.error.is_crash() && !went_down).then(|| (ep.clone(), trips));
        let logged = Some((span.clone(), failure.error.clone()));
        let result = Err(Failure {
            error: failure.error,
            retry_after: failure.retry_after,
            healthy,
            went_down,
            served: ep.successes.load(Ordering::Relaxed) > successes,
        });
        let event = Event::Finished {
            attempt: id,
            result,
            now,
        };
        Outcome {
            event,
            answer: None,
            failure: logged,
            crash,
        }
    }
}
