//! An attempt in flight, and what its end tells the plan: its slot given back, its
//! outcome recorded against its endpoint (breaker, limit, permanent errors, telemetry),
//! and whether its endpoint went down under it or answered others meanwhile.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use futures::future::BoxFuture;

use super::super::endpoint::{AttemptError, Endpoint};
use super::super::error::ClientError;
use super::Shared;
use super::acquire::Slot;
use super::job::{Ended, Job};
use super::plan::{AttemptId, Event, Failure};

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

impl<R> Running<'_, R> {
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
