//! Waiting for a condition in a test: [`wait_until`] it holds, within [`TEST_TIMEOUT`].

use std::time::Duration;

/// Generous bound so a broken runtime fails the test instead of hanging CI.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Polls `cond` every 5 ms until true; fails the test, naming `what`, after
/// [`TEST_TIMEOUT`].
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TEST_TIMEOUT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
