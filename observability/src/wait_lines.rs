//! What the process is waiting for, one line per thing waited for (an endpoint that is
//! not answering yet): redrawn in place on a terminal, so a wait of many minutes stays one
//! line per endpoint; otherwise (a log file, CI) printed when the wait starts and then at
//! most once per [`WaitLines::PLAIN_EVERY`], so a long wait does not fill the log.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::progress::Console;

/// See the module documentation.
pub struct WaitLines {
    mode: Mode,
    state: Mutex<State>,
}

enum Mode {
    /// One spinner line per key, on this console (log lines are printed above them).
    InPlace {
        multi: MultiProgress,
        console: Console,
    },
    /// A plain line per key when it starts waiting, then at most once per `every`.
    Plain {
        every: Duration,
    },
    Off,
}

#[derive(Default)]
struct State {
    /// In place: each waiting key's line.
    bars: HashMap<String, ProgressBar>,
    /// Plain: when each key's line was last printed.
    printed: HashMap<String, Instant>,
}

impl WaitLines {
    /// How often a plain line of one key is printed at most.
    pub const PLAIN_EVERY: Duration = Duration::from_secs(60);

    /// Lines in place when stderr is a terminal, plain lines otherwise; nothing when
    /// `quiet`.
    pub fn for_stderr(quiet: bool, console: &Console) -> Self {
        let mode = if quiet {
            Mode::Off
        } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            Mode::InPlace {
                multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
                console: console.clone(),
            }
        } else {
            Mode::Plain {
                every: Self::PLAIN_EVERY,
            }
        };
        Self {
            mode,
            state: Mutex::default(),
        }
    }

    /// Prints nothing.
    pub fn off() -> Self {
        Self {
            mode: Mode::Off,
            state: Mutex::default(),
        }
    }

    /// `key` is (still) waiting: `text` says for what and how long.
    pub fn update(&self, key: &str, text: String) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &self.mode {
            Mode::Off => {}
            Mode::Plain { every } => {
                if state.due(key, Instant::now(), *every) {
                    eprintln!("{text}");
                }
            }
            Mode::InPlace { multi, console } => match state.bars.get(key) {
                Some(bar) => bar.set_message(text),
                None => {
                    if state.bars.is_empty() {
                        console.show(multi);
                    }
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.enable_steady_tick(Duration::from_millis(250));
                    bar.set_message(text);
                    state.bars.insert(key.to_owned(), bar);
                }
            },
        }
    }

    /// `key` no longer waits (it answered, or the wait is over): its line goes.
    pub fn clear(&self, key: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.printed.remove(key);
        if let (Some(bar), Mode::InPlace { multi, console }) = (state.bars.remove(key), &self.mode)
        {
            bar.finish_and_clear();
            multi.remove(&bar);
            if state.bars.is_empty() {
                console.hide();
            }
        }
    }
}

impl Drop for WaitLines {
    fn drop(&mut self) {
        let keys: Vec<String> = {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.bars.keys().cloned().collect()
        };
        for key in keys {
            self.clear(&key);
        }
    }
}

impl State {
    /// Whether a plain line of `key` is due at `now`: the first one, then one per `every`.
    fn due(&mut self, key: &str, now: Instant, every: Duration) -> bool {
        match self.printed.get(key) {
            Some(last) if now.duration_since(*last) < every => false,
            _ => {
                self.printed.insert(key.to_owned(), now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_is_printed_when_a_key_starts_waiting_then_once_per_period() {
        let mut state = State::default();
        let every = Duration::from_secs(60);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(state.due("a", at(0), every), "the first line at once");
        assert!(state.due("b", at(1), every), "each key has its own line");
        for s in [5, 10, 30, 59] {
            assert!(!state.due("a", at(s), every), "nothing at {s} s");
        }
        assert!(state.due("a", at(60), every));
        assert!(!state.due("a", at(100), every));
        assert!(state.due("a", at(121), every));
        assert!(!state.due("b", at(60), every));
    }

    #[test]
    fn off_prints_nothing_and_clearing_an_unknown_key_is_harmless() {
        let lines = WaitLines::off();
        lines.update("a", "waiting".into());
        lines.clear("a");
        lines.clear("never");
        assert!(lines.state.lock().unwrap().printed.is_empty());
    }
}
