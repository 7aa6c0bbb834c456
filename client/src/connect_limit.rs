//! How many connections an endpoint's client opens at once.
//!
//! A run starts with thousands of calls and, over HTTP/1.1, one connection per call in
//! flight. Opened all at once, they arrive at the server as one burst of handshakes; a
//! burst larger than the server's listen backlog (uvicorn's default is 2,048) has some
//! connections refused or reset, which reads as connection failures — the evidence that
//! opens the breaker. So each endpoint's connector is wrapped in a concurrency limit: at
//! most `max_connecting` handshakes are in progress, the others wait for one to finish.
//! Pooled connections are reused without passing through the connector, so the limit costs
//! nothing once the pool is warm.
//!
//! The connect timeout sits *inside* the limit: it bounds one handshake, not the time a
//! connection waited for its turn (reqwest's own `connect_timeout` would wrap the whole
//! stack and count the wait too). The wait is bounded by the call's request timeout.
//!
//! ```
//! use std::time::Duration;
//! # use tmas_client::connect_limit_layer;
//! // 64 handshakes at once, each given 10 s.
//! let http = reqwest::Client::builder()
//!     .connector_layer(connect_limit_layer(64, Duration::from_secs(10)))
//!     .build()
//!     .expect("a client without TLS roots to load builds");
//! # drop(http);
//! ```

use std::time::Duration;

use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::limit::ConcurrencyLimitLayer;
use tower::timeout::TimeoutLayer;

/// The connector layers of one endpoint: at most `max_connecting` connections being
/// established at once (at least 1), each handshake bounded by `timeout`.
pub fn connect_limit_layer(
    max_connecting: usize,
    timeout: Duration,
) -> ServiceBuilder<Stack<TimeoutLayer, Stack<ConcurrencyLimitLayer, Identity>>> {
    ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::new(max_connecting.max(1)))
        .layer(TimeoutLayer::new(timeout))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::future::join_all;
    use tower::{BoxError, Service, ServiceExt};

    use super::*;

    /// A connector whose handshake takes `delay` and which records the most handshakes
    /// ever in progress at once.
    fn slow_connector(
        delay: Duration,
        peak: Arc<AtomicUsize>,
    ) -> impl Service<u32, Response = u32, Error = BoxError, Future: Send> + Clone {
        let now = Arc::new(AtomicUsize::new(0));
        tower::service_fn(move |i: u32| {
            let (now, peak) = (now.clone(), peak.clone());
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, BoxError>(i)
            }
        })
    }

    async fn connect_all<S>(service: S, n: u32) -> Vec<Result<u32, BoxError>>
    where
        S: Service<u32, Response = u32, Error = BoxError> + Clone,
    {
        join_all((0..n).map(|i| service.clone().oneshot(i))).await
    }

    #[tokio::test]
    async fn no_more_than_the_limit_connect_at_once() {
        let peak = Arc::new(AtomicUsize::new(0));
        let service = connect_limit_layer(4, Duration::from_secs(10))
            .service(slow_connector(Duration::from_millis(5), peak.clone()));
        let results = connect_all(service, 40).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(peak.load(Ordering::SeqCst), 4);
    }

    /// Ten handshakes of 20 ms one at a time take 200 ms in all, twice the 100 ms connect
    /// timeout, which must count only each connection's own handshake.
    #[tokio::test]
    async fn the_wait_for_a_turn_does_not_count_against_the_connect_timeout() {
        let peak = Arc::new(AtomicUsize::new(0));
        let service = connect_limit_layer(1, Duration::from_millis(100))
            .service(slow_connector(Duration::from_millis(20), peak.clone()));
        let started = std::time::Instant::now();
        let results = connect_all(service, 10).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(peak.load(Ordering::SeqCst), 1);
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn a_handshake_longer_than_the_timeout_fails() {
        let peak = Arc::new(AtomicUsize::new(0));
        let service = connect_limit_layer(8, Duration::from_millis(20))
            .service(slow_connector(Duration::from_millis(300), peak));
        let results = connect_all(service, 3).await;
        assert!(results.iter().all(Result::is_err));
    }

    #[tokio::test]
    async fn a_limit_of_zero_still_lets_connections_through_one_at_a_time() {
        let peak = Arc::new(AtomicUsize::new(0));
        let service = connect_limit_layer(0, Duration::from_secs(1))
            .service(slow_connector(Duration::from_millis(2), peak.clone()));
        let results = connect_all(service, 5).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(peak.load(Ordering::SeqCst), 1);
    }
}
