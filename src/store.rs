//! The run store: an embedded SQLite database (`RUN_DIR/run.sqlite`, WAL mode) holding
//! everything a run computed, so an interrupted run can be resumed without re-sending any
//! finished call. Schema and queries: `docs/run-store.md`.
//!
//! - [`schema`]: tables, views and meta keys; [`version`]: the version check (`migrate`:
//!   older versions);
//!   [`lock`]: one process per run directory.
//! - [`rows`] + `writer`: the facts and the single writer thread (group commit).
//! - [`chunks`] + [`prompts`]: prompts stored as content-defined chunks, shared between
//!   prompts that quote the same text; [`record_texts`]: judged records stored without
//!   the replies the `calls` table holds.
//! - [`read`]: queries; [`executor`]: the replaying/recording call executor;
//!   [`sink`]: bank versions (into the store and, through [`bank_files`], the run
//!   directory's `banks/` JSON files); [`resume`]: which config changes a resume accepts;
//!   [`export`]: `tmas export`; [`browse`]: the pages of `tmas view` (small, bounded
//!   queries).
//!
//! Writes go through one thread that owns the read-write connection, so the async
//! runtime never blocks on SQLite and transactions never interleave. Reads (replay
//! lookups) use a second connection; WAL lets them run while the writer commits.

pub mod bank_files;
pub mod browse;
mod by_allocation;
pub mod chunks;
pub(crate) mod executor;
pub(crate) mod export;
pub(crate) mod lock;
pub(crate) mod merge;
mod migrate;
pub(crate) mod parquet;
pub(crate) mod prompts;
pub(crate) mod read;
pub(crate) mod record_texts;
pub mod requests;
pub(crate) mod resume;
pub(crate) mod rows;
pub(crate) mod schema;
pub(crate) mod sink;
pub mod traces;
pub(crate) mod version;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub use lock::{LOCK_FILE, LockError, RunLock};
pub use read::{StoreReader, StoredCall, StoredProblem};
pub use rows::{CallRow, Envelope, Fact, ProblemRow, StatusRow, WriteResult};
pub use schema::{SCHEMA_VERSION, SchemaError};

/// File name of the database inside a run directory.
pub const DB_FILE: &str = "run.sqlite";

/// Errors opening or using the store; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("{path}: {context}: {source}")]
    Sql {
        path: PathBuf,
        context: &'static str,
        source: rusqlite::Error,
    },
    #[error("{path} does not exist: not a run directory written by this tmas (no run store)")]
    Missing { path: PathBuf },
    #[error("{path} already holds a run; resume it with `tmas run --resume {}` or choose another --out", path.parent().map(|p| p.display().to_string()).unwrap_or_default())]
    Exists { path: PathBuf },
    #[error("{path}: {what} is not valid: {reason}")]
    Corrupt {
        path: PathBuf,
        what: String,
        reason: String,
    },
    #[error("run store {path}: {message}")]
    Write { path: PathBuf, message: String },
}

impl StoreError {
    pub(crate) fn sql(path: &Path, context: &'static str, source: rusqlite::Error) -> Self {
        Self::Sql {
            path: path.to_path_buf(),
            context,
            source,
        }
    }
}

struct Inner {
    path: PathBuf,
    tx: Mutex<Option<Sender<Envelope>>>,
    reader: Mutex<StoreReader>,
    /// The first write failure (disk full, …); the run stops when it is set.
    failure: Mutex<Option<Arc<str>>>,
    failed: CancellationToken,
    thread: Mutex<Option<JoinHandle<Option<f64>>>>,
    /// CPU seconds the writer thread used, once it has stopped ([`RunStore::close`]).
    writer_cpu_s: Mutex<Option<f64>>,
    _lock: RunLock,
}

/// Handle to an open run store; cheap to clone.
#[derive(Clone)]
pub struct RunStore {
    inner: Arc<Inner>,
}

impl RunStore {
    /// Creates the store of a new run in `dir` (which must exist and be writable).
    pub fn create(dir: &Path) -> Result<Self, StoreError> {
        let lock = RunLock::acquire(dir)?;
        let path = dir.join(DB_FILE);
        if path.exists() {
            return Err(StoreError::Exists { path });
        }
        Self::open_locked(path, lock)
    }

    /// Opens the store of an existing run for resuming.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(DB_FILE);
        if !path.is_file() {
            return Err(StoreError::Missing { path });
        }
        let lock = RunLock::acquire(dir)?;
        Self::open_locked(path, lock)
    }

    fn open_locked(path: PathBuf, lock: RunLock) -> Result<Self, StoreError> {
        let open = |flags| {
            let conn = Connection::open_with_flags(&path, flags)
                .map_err(|e| StoreError::sql(&path, "opening the database", e))?;
            conn.busy_timeout(std::time::Duration::from_secs(10))
                .map_err(|e| StoreError::sql(&path, "setting the busy timeout", e))?;
            Ok::<_, StoreError>(conn)
        };
        let mut conn = open(OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE)?;
        // The version check comes first: a newer store is refused before anything is written.
        version::ensure(&mut conn, &path.display().to_string())?;
        // Additive, and independent of the schema version (see `traces`).
        traces::ensure_table(&conn)
            .map_err(|e| StoreError::sql(&path, "creating the problem_traces table", e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| StoreError::sql(&path, "switching to WAL mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(path = %path.display(), mode, "the run store could not use WAL mode");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| StoreError::sql(&path, "setting synchronous=NORMAL", e))?;
        let reader = StoreReader::from_conn(open(OpenFlags::SQLITE_OPEN_READ_ONLY)?, &path)?;

        let (tx, rx) = mpsc::channel::<Envelope>();
        let failed = CancellationToken::new();
        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let weak = weak.clone();
            let thread = std::thread::Builder::new()
                .name("tmas-store".into())
                .spawn(move || {
                    writer::run(conn, rx, |message| {
                        if let Some(inner) = weak.upgrade() {
                            inner.set_failure(message);
                        }
                    })
                });
            Inner {
                path: path.clone(),
                tx: Mutex::new(Some(tx)),
                reader: Mutex::new(reader),
                failure: Mutex::new(None),
                failed,
                thread: Mutex::new(thread.ok()),
                writer_cpu_s: Mutex::new(None),
                _lock: lock,
            }
        });
        if inner
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
        {
            return Err(StoreError::Write {
                path,
                message: "cannot start the writer thread".into(),
            });
        }
        Ok(Self { inner })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Queues a fact without waiting for its commit.
    pub fn send(&self, fact: Fact) {
        self.enqueue(fact, None);
    }

    fn enqueue(&self, fact: Fact, ack: Option<oneshot::Sender<WriteResult>>) {
        let guard = self.inner.tx.lock().unwrap_or_else(|p| p.into_inner());
        let envelope = Envelope { fact, ack };
        let refused = match guard.as_ref() {
            Some(tx) => tx.send(envelope).err().map(|e| e.0),
            None => Some(envelope),
        };
        if let Some(envelope) = refused
            && let Some(ack) = envelope.ack
        {
            let _ = ack.send(Err("the run store is closed".into()));
        }
    }

    /// Queues a fact and waits until it is committed.
    pub async fn write(&self, fact: Fact) -> WriteResult {
        let (tx, rx) = oneshot::channel();
        self.enqueue(fact, Some(tx));
        rx.await
            .unwrap_or_else(|_| Err("the run store writer stopped".into()))
    }

    /// Waits until everything queued so far is committed.
    pub async fn flush(&self) -> WriteResult {
        self.write(Fact::Flush).await
    }

    /// Commits what is queued, checkpoints the WAL and stops the writer. Later writes fail.
    pub async fn close(&self) -> WriteResult {
        let result = self.write(Fact::Close).await;
        self.inner
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let thread = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(thread) = thread
            && let Ok(Ok(cpu_s)) = tokio::task::spawn_blocking(move || thread.join()).await
        {
            *self
                .inner
                .writer_cpu_s
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = cpu_s;
        }
        result
    }

    /// CPU seconds (user + system) the writer thread used, once [`close`](Self::close)
    /// has stopped it; `None` before that or where the platform cannot measure a thread.
    /// `tmas bench eval` reports it beside the process total.
    pub fn writer_cpu_seconds(&self) -> Option<f64> {
        *self
            .inner
            .writer_cpu_s
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The first write failure, if any.
    pub fn failure(&self) -> Option<Arc<str>> {
        self.inner
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Cancelled when a write fails: the engine stops the run then.
    pub fn failed(&self) -> CancellationToken {
        self.inner.failed.clone()
    }

    /// Runs a query on the read connection, off the async threads.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&StoreReader) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let reader = inner.reader.lock().unwrap_or_else(|p| p.into_inner());
            f(&reader)
        })
        .await
        .map_err(|e| StoreError::Write {
            path: self.inner.path.clone(),
            message: format!("a read task failed: {e}"),
        })?
    }

    /// Runs a query on the read connection on this thread (startup and tests).
    pub fn read_now<T>(
        &self,
        f: impl FnOnce(&StoreReader) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let reader = self.inner.reader.lock().unwrap_or_else(|p| p.into_inner());
        f(&reader)
    }
}

impl Inner {
    fn set_failure(&self, message: &str) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            tracing::error!(path = %self.path.display(), "{message}");
            *slot = Some(message.into());
        }
        self.failed.cancel();
    }
}

/// Creates the schema on `conn` as opening a store for writing does: the setup of the unit
/// tests of the store's parts (through this module, so those parts do not import the
/// version check that imports them).
#[cfg(test)]
pub(crate) fn ensure_schema_for_tests(conn: &mut Connection) {
    version::ensure(conn, "mem").expect("schema on a test database");
}

#[cfg(test)]
pub(crate) mod tests;
