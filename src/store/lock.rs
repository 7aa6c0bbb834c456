//! One `tmas` process per run directory: an exclusive `flock` on `RUN_DIR/.tmas.lock`.
//!
//! SQLite would let a second writer in (it only serializes transactions), and two
//! orchestrators interleaving calls in one store would both corrupt the resume logic and
//! double the GPU bill. `flock` is released by the kernel when the process dies — also on
//! SIGKILL — so a crashed run never leaves a lock that blocks: its file stays, naming a
//! process that no longer holds it, and the next `tmas` takes it over with a note. The
//! file holds the owner's pid, to name it in the error and in that note.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Name of the lock file inside a run directory.
pub const LOCK_FILE: &str = ".tmas.lock";

/// Why the run directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "run directory {dir} is in use by another tmas process{}; wait for it to finish or stop it first",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Busy { dir: PathBuf, pid: Option<u32> },
    #[error(
        "run directory {dir} is locked by pid {pid}, which is not running on this machine \
         (another machine or container sharing the directory?); stop that process first"
    )]
    HeldElsewhere { dir: PathBuf, pid: u32 },
    #[error("cannot open the lock file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Holds the lock until dropped (or the process exits).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock without waiting; [`LockError::Busy`] if another process holds it.
    pub fn acquire(dir: &Path) -> Result<Self, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let previous: Option<u32> = text.trim().parse().ok();
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let dir = dir.to_path_buf();
                return Err(match previous {
                    Some(pid) if !is_running(pid) => LockError::HeldElsewhere { dir, pid },
                    pid => LockError::Busy { dir, pid },
                });
            }
            return Err(io(err));
        }
        if let Some(pid) = previous.filter(|p| *p != std::process::id()) {
            // The lock was free, so its last holder has ended (or released it).
            tracing::info!(
                "note: took over the lock {} left by pid {pid}, which no longer holds it",
                path.display()
            );
        }
        let pid = std::process::id().to_string();
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            f.write_all(pid.as_bytes())
        };
        write(&mut file).map_err(io)?;
        Ok(Self { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether a process `pid` exists here (signal 0 checks without sending anything; EPERM
/// means it exists but belongs to another user).
fn is_running(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file description: a second open in the same
        // process conflicts just like another process would.
        let err = RunLock::acquire(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("in use by another tmas process"), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_lock_file_left_by_an_ended_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        // A process that ended: its pid is in the file, its flock went with it.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        assert!(!is_running(dead));
        assert!(is_running(std::process::id()));
        std::fs::write(dir.path().join(LOCK_FILE), dead.to_string()).unwrap();
        let lock = RunLock::acquire(dir.path()).unwrap();
        let held = std::fs::read_to_string(lock.path()).unwrap();
        assert_eq!(
            held,
            std::process::id().to_string(),
            "the file names its new owner"
        );
    }
}
