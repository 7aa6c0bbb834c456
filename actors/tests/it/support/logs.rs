//! Log capture without a process-wide subscriber: the tests of this binary run as threads
//! of one process, and a global subscriber can be set once per process only.
//!
//! [`run_with_subscriber`] drives a test on a two-worker Tokio runtime of its own whose
//! worker and blocking threads all use the given subscriber (actors run on those threads,
//! so a default set on the test's thread alone would miss their events).

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::Dispatch;
use tracing::dispatcher::DefaultGuard;
use tracing::subscriber::NoSubscriber;

thread_local! {
    /// A runtime thread's subscriber, set when the thread starts and reset when it stops.
    static GUARD: RefCell<Option<DefaultGuard>> = const { RefCell::new(None) };
}

/// Runs `test` to the end with `subscriber` on every thread that runs its tasks.
pub fn run_with_subscriber<S, F>(subscriber: S, test: F) -> F::Output
where
    S: tracing::Subscriber + Send + Sync + 'static,
    F: Future,
{
    keep_interest_per_thread();
    let dispatch = Dispatch::new(subscriber);
    let on_start = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&on_start);
            GUARD.with(|g| *g.borrow_mut() = Some(guard));
        })
        // Reset before the thread's locals are torn down (the guard touches `tracing`'s).
        .on_thread_stop(|| drop(GUARD.with(|g| g.borrow_mut().take())))
        .build()
        .expect("a Tokio runtime for the test");
    let output = tracing::dispatcher::with_default(&dispatch, || runtime.block_on(test));
    drop(runtime);
    output
}

/// Collects everything a subscriber writes, in memory.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Keeps a second, never-dropped dispatcher registered, so that `tracing` asks every thread
/// whether a callsite is enabled instead of caching one answer for the whole process.
///
/// `tracing-core` caches each callsite's interest, combined over the registered
/// dispatchers. When exactly one is registered it consults the *global* dispatcher
/// instead (none in this binary), so a callsite first hit while a test's scoped subscriber
/// was the only one alive was cached as "never" for every thread: the DEBUG `call` spans
/// of a test that ran beside other tests were missing at random. With a second
/// dispatcher that is never interested, the combined interest of a callsite a test's
/// subscriber wants is "sometimes", which is decided per thread and per call.
fn keep_interest_per_thread() {
    static SECOND: OnceLock<Dispatch> = OnceLock::new();
    SECOND.get_or_init(|| Dispatch::new(NoSubscriber::default()));
}
