//! The run's progress on stderr: `indicatif` bars on a terminal, otherwise one plain
//! status line every N seconds (logs and CI captures stay readable), or nothing.
//!
//! Both phases are shown: solving (iterations of the method's calls) and judging (each
//! finished problem's candidates, by rules and, when configured, the LLM judge, which can
//! be a third of a run's time). The ETA counts the calls still to make in both.
//!
//! The display polls a [`ProgressSnapshot`] source; it never sits on the calls' path.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The process's stderr as log lines and progress bars share it: the bars being drawn,
/// if any, so that a log line is printed above them instead of tearing them.
/// [`crate::init_logging`] returns the one its subscriber writes through; the command
/// hands it to the display it starts (in [`ProgressMode::Bars`]). A console that no
/// subscriber writes through (a test's, or when another subscriber was installed first)
/// draws the same bars, and log lines may then cross them.
#[derive(Clone, Default)]
pub struct Console(Arc<RwLock<Option<MultiProgress>>>);

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

/// Two handles are equal when they are the same console.
impl PartialEq for Console {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Console {}

impl Console {
    /// Log lines are printed above `bars` from now on.
    pub(crate) fn show(&self, bars: &MultiProgress) {
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(bars.clone());
        }
    }

    pub(crate) fn hide(&self) {
        if let Ok(mut slot) = self.0.write() {
            *slot = None;
        }
    }

    /// Writes one whole log line (nothing sensible to do if stderr itself fails).
    fn print(&self, line: &[u8]) {
        let bars = self.0.read().ok().and_then(|b| b.clone());
        match bars {
            Some(multi) => multi.suspend(|| {
                let _ = std::io::stderr().lock().write_all(line);
            }),
            None => {
                let _ = std::io::stderr().lock().write_all(line);
            }
        }
    }
}

/// Counters the display shows; all are totals since the run started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProgressSnapshot {
    pub problems_total: u64,
    /// Finished with a result (judged and stored or not yet).
    pub problems_done: u64,
    pub problems_failed: u64,
    /// problems × iterations per problem.
    pub iterations_total: u64,
    pub iterations_done: u64,
    pub calls_in_flight: u64,
    pub calls_done: u64,
    /// Output tokens so far (the tokens/s figure is their rate).
    pub tokens_out: u64,
    /// Failed HTTP attempts (each may have been retried).
    pub errors: u64,
    pub retries: u64,
    /// Calls answered from a run store instead of an endpoint (resumed runs).
    pub calls_replayed: u64,
    /// Problems whose candidates have all been judged.
    pub problems_judged: u64,
    /// Iterations whose candidates have all been judged: each is judged as it completes,
    /// so this moves while the method runs (of `iterations_total`).
    pub iterations_judged: u64,
    /// LLM judge calls finished (not in `calls_done`, which counts the method's calls).
    pub judge_calls_done: u64,
    /// Judge verdicts given without a call of their own: a question another candidate of
    /// the problem had asked (`judge.reuse`).
    pub judge_verdicts_reused: u64,
    /// Most LLM judge calls one problem makes (0: no LLM judge); the ETA assumes it until
    /// a problem has been judged, then the average so far.
    pub judge_calls_per_problem: u64,
    /// Pass@1 of the last iteration over the problems judged so far, and how many they
    /// are (`None` before the first).
    pub pass_at_1: Option<(f64, u64)>,
}

/// How progress is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressMode {
    /// `indicatif` bars, redrawn every second, on this console.
    Bars(Console),
    /// A plain line this often.
    Lines {
        every: Duration,
    },
    Off,
}

impl ProgressMode {
    /// Bars when stderr is a terminal, plain lines every `every` otherwise; nothing when
    /// `quiet` (or when `every` is zero and stderr is not a terminal).
    pub fn for_stderr(quiet: bool, every: Duration, console: &Console) -> Self {
        if quiet {
            ProgressMode::Off
        } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            ProgressMode::Bars(console.clone())
        } else if every.is_zero() {
            ProgressMode::Off
        } else {
            ProgressMode::Lines { every }
        }
    }
}

/// Where the display reads its numbers.
pub type ProgressSource = Box<dyn Fn() -> ProgressSnapshot + Send + Sync>;

/// A running display; [`ProgressDisplay::finish`] stops it.
pub struct ProgressDisplay {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl ProgressDisplay {
    /// Starts drawing on the current Tokio runtime.
    pub fn start(mode: ProgressMode, source: ProgressSource) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = match mode {
            ProgressMode::Off => None,
            ProgressMode::Lines { every } => Some(tokio::spawn(lines(every, source, stopped))),
            ProgressMode::Bars(console) => Some(tokio::spawn(bars(console, source, stopped))),
        };
        Self { stop, task }
    }

    /// One display for several runs of this process (the variants of `tmas experiment`):
    /// a bar per run (problems finished of its total, with its phase, iterations, judged
    /// problems and calls), or one plain line naming every run, or nothing.
    pub fn start_many(mode: ProgressMode, runs: Vec<(String, ProgressSource)>) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = match mode {
            ProgressMode::Off => None,
            ProgressMode::Lines { every } => Some(tokio::spawn(many_lines(every, runs, stopped))),
            ProgressMode::Bars(console) => Some(tokio::spawn(many_bars(console, runs, stopped))),
        };
        Self { stop, task }
    }

    /// Draws the final state once more and stops (bars are cleared).
    pub async fn finish(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ProgressDisplay {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Output tokens per second over the last few samples.
#[derive(Default)]
struct Rate(VecDeque<(Instant, u64)>);

impl Rate {
    const WINDOW: Duration = Duration::from_secs(10);

    fn push(&mut self, now: Instant, total: u64) -> f64 {
        self.0.push_back((now, total));
        while self.0.len() > 2 && now.duration_since(self.0[0].0) > Self::WINDOW {
            self.0.pop_front();
        }
        let (t0, v0) = self.0[0];
        let dt = now.duration_since(t0).as_secs_f64();
        if dt <= 0.0 {
            0.0
        } else {
            total.saturating_sub(v0) as f64 / dt
        }
    }
}

/// Calls still to make, estimated: the method's calls per iteration (`per_iteration`,
/// else the calls so far over the iterations finished) times the iterations left, plus
/// the judge calls per judged iteration (so far, or the bound before the first is judged)
/// times the iterations left to judge. `None` before the first iteration ends.
fn calls_left(s: &ProgressSnapshot, per_iteration: Option<f64>) -> Option<f64> {
    let solving = if s.iterations_done >= s.iterations_total {
        0.0
    } else if s.iterations_done == 0 {
        return None;
    } else {
        let per_iteration = per_iteration.unwrap_or(s.calls_done as f64 / s.iterations_done as f64);
        (s.iterations_total as f64 * per_iteration - s.calls_done as f64).max(0.0)
    };
    // The judge's work left, by iteration: judged iterations' calls so far, or the bound
    // per problem spread over its iterations before the first is judged.
    let per_problem = s
        .iterations_total
        .checked_div(s.problems_total)
        .unwrap_or(0);
    let judge_per_iteration = if s.iterations_judged > 0 {
        s.judge_calls_done as f64 / s.iterations_judged as f64
    } else if per_problem > 0 {
        s.judge_calls_per_problem as f64 / per_problem as f64
    } else {
        0.0
    };
    let to_judge = s
        .iterations_total
        .saturating_sub(s.iterations_judged + s.problems_failed * per_problem);
    Some(solving + to_judge as f64 * judge_per_iteration)
}

/// The shown remaining time. Two things make the plain estimate ([`eta`]) wrong when
/// every problem runs at once, so that all problems' iteration t ends at about the same
/// moment: between those moments the calls made belong mostly to iterations not finished
/// yet, so calls ÷ iterations finished overstates an iteration's calls (the first
/// estimates were twice the real time); and the estimate jumps at each wave. So the
/// calls of an iteration are the least calls ÷ iterations finished seen so far (reached
/// just as a wave ends; calls of unfinished iterations only raise it), and the finish
/// time is smoothed.
#[derive(Debug, Default)]
struct Eta {
    per_iteration: Option<f64>,
    finish_s: Option<f64>,
}

impl Eta {
    /// Weight of a new estimate of the finish time, per update (about once a second).
    const WEIGHT: f64 = 0.3;

    fn update(&mut self, elapsed: Duration, s: &ProgressSnapshot) -> Option<Duration> {
        if s.iterations_done > 0 && s.iterations_done < s.iterations_total {
            let seen = s.calls_done as f64 / s.iterations_done as f64;
            self.per_iteration = Some(self.per_iteration.map_or(seen, |p| p.min(seen)));
        }
        let now = elapsed.as_secs_f64();
        let Some(raw) = eta_with(elapsed, s, self.per_iteration) else {
            return self
                .finish_s
                .map(|f| Duration::from_secs_f64((f - now).max(0.0)));
        };
        let finish = now + raw.as_secs_f64();
        let smoothed = match self.finish_s {
            Some(prev) if raw > Duration::ZERO => prev + Self::WEIGHT * (finish - prev),
            _ => finish,
        };
        self.finish_s = Some(smoothed);
        Some(Duration::from_secs_f64((smoothed - now).max(0.0)))
    }
}

/// Remaining time: the calls left at the rate calls were sent so far (replayed calls,
/// answered from the store at once, do not count toward the rate).
fn eta(elapsed: Duration, s: &ProgressSnapshot) -> Option<Duration> {
    eta_with(elapsed, s, None)
}

/// [`eta`] with an iteration's calls known (see [`Eta`]).
fn eta_with(
    elapsed: Duration,
    s: &ProgressSnapshot,
    per_iteration: Option<f64>,
) -> Option<Duration> {
    let left = calls_left(s, per_iteration)?;
    let sent = (s.calls_done + s.judge_calls_done).saturating_sub(s.calls_replayed);
    if sent == 0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        elapsed.as_secs_f64() * left / sent as f64,
    ))
}

/// The phase a run is in: solving while iterations are left, then judging.
fn phase(s: &ProgressSnapshot) -> &'static str {
    if s.iterations_done < s.iterations_total {
        "solving"
    } else {
        "judging"
    }
}

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// `, Pass@1 42.5 % (n=8)`: the last iteration's Pass@1 over the problems judged so far
/// (empty before the first): an early read of where the run is heading, over fewer
/// problems than the final table.
fn running_pass_at_1(s: &ProgressSnapshot) -> String {
    s.pass_at_1.map_or_else(String::new, |(p, n)| {
        format!(", Pass@1 {:.1} % (n={n})", p * 100.0)
    })
}

/// `N judge calls`, and how many verdicts were reused when some were.
fn judge_calls_text(s: &ProgressSnapshot) -> String {
    if s.judge_verdicts_reused > 0 {
        format!(
            "{} judge calls, {} verdicts reused",
            s.judge_calls_done, s.judge_verdicts_reused
        )
    } else {
        format!("{} judge calls", s.judge_calls_done)
    }
}

/// One plain status line (also the text under the bars), with the unsmoothed ETA.
pub fn status_line(elapsed: Duration, s: &ProgressSnapshot, tokens_per_s: f64) -> String {
    status_line_with(elapsed, s, tokens_per_s, eta(elapsed, s))
}

/// [`status_line`] with the ETA given (the smoothed one, in a running display).
fn status_line_with(
    elapsed: Duration,
    s: &ProgressSnapshot,
    tokens_per_s: f64,
    eta: Option<Duration>,
) -> String {
    let eta = eta.map_or_else(|| "-".to_owned(), hms);
    let replayed = if s.calls_replayed > 0 {
        format!(" ({} replayed)", s.calls_replayed)
    } else {
        String::new()
    };
    let judge_calls = if s.judge_calls_done > 0 || s.judge_calls_per_problem > 0 {
        format!(", {}", judge_calls_text(s))
    } else {
        String::new()
    };
    let pass = running_pass_at_1(s);
    format!(
        "[{:>7}] {} | problems {}/{} done ({} failed) | iterations {}/{} | judged {}/{} ({}/{} iterations){judge_calls}{pass} | calls {} in flight, {} done{replayed} | {:.0} tok/s | errors {} retries {} | ETA {}",
        hms(elapsed),
        phase(s),
        s.problems_done,
        s.problems_total,
        s.problems_failed,
        s.iterations_done,
        s.iterations_total,
        s.problems_judged,
        s.problems_total,
        s.iterations_judged,
        s.iterations_total,
        s.calls_in_flight,
        s.calls_done,
        tokens_per_s,
        s.errors,
        s.retries,
        eta
    )
}

async fn lines(every: Duration, source: ProgressSource, mut stopped: watch::Receiver<bool>) {
    let started = Instant::now();
    let mut rate = Rate::default();
    let mut remaining = Eta::default();
    rate.push(started, source().tokens_out);
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let s = source();
        let tps = rate.push(Instant::now(), s.tokens_out);
        let elapsed = started.elapsed();
        let eta = remaining.update(elapsed, &s);
        eprintln!("{}", status_line_with(elapsed, &s, tps, eta));
    }
}

fn style(template: &str) -> ProgressStyle {
    // The templates are constants; a bad one falls back to the default style.
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

async fn bars(console: Console, source: ProgressSource, mut stopped: watch::Receiver<bool>) {
    let mut remaining = Eta::default();
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let problems = multi.add(ProgressBar::new(0));
    problems.set_style(style("{prefix:>10} [{bar:32}] {pos}/{len} {msg}"));
    problems.set_prefix("problems");
    let iterations = multi.add(ProgressBar::new(0));
    iterations.set_style(style(
        "{prefix:>10} [{bar:32}] {pos}/{len} elapsed {elapsed_precise}",
    ));
    iterations.set_prefix("iterations");
    let judged = multi.add(ProgressBar::new(0));
    judged.set_style(style("{prefix:>10} [{bar:32}] {pos}/{len} {msg}"));
    judged.set_prefix("judged");
    let status = multi.add(ProgressBar::new(0));
    status.set_style(style("{prefix:>10} {msg}"));
    status.set_prefix("calls");
    console.show(&multi);
    let mut rate = Rate::default();
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let done = tokio::select! {
            _ = tick.tick() => false,
            _ = stopped.changed() => true,
        };
        let s = source();
        let tps = rate.push(Instant::now(), s.tokens_out);
        problems.set_length(s.problems_total);
        problems.set_position(s.problems_done + s.problems_failed);
        problems.set_message(if s.problems_failed > 0 {
            format!("({} failed)", s.problems_failed)
        } else {
            String::new()
        });
        iterations.set_length(s.iterations_total);
        iterations.set_position(s.iterations_done);
        // By iteration: each is judged as it completes, so the bar moves during the run.
        judged.set_length(s.iterations_total);
        judged.set_position(s.iterations_judged);
        let problems = format!("({}/{} problems", s.problems_judged, s.problems_total);
        judged.set_message(if s.judge_calls_done > 0 {
            format!(
                "{problems}, {}){}",
                judge_calls_text(&s),
                running_pass_at_1(&s)
            )
        } else {
            format!("{problems}){}", running_pass_at_1(&s))
        });
        let eta = remaining
            .update(started.elapsed(), &s)
            .map_or_else(|| "-".to_owned(), hms);
        status.set_message(format!(
            "{} in flight, {} done | {:.0} tok/s | errors {} retries {} | {} | ETA {eta}",
            s.calls_in_flight,
            s.calls_done,
            tps,
            s.errors,
            s.retries,
            phase(&s)
        ));
        if done {
            break;
        }
    }
    console.hide();
    for bar in [&problems, &iterations, &judged, &status] {
        bar.finish();
    }
    let _ = multi.clear();
}

/// One run's part of a several-run display: its phase, iterations, judged problems and
/// calls (the bar or the line shows its problems).
pub fn run_summary(s: &ProgressSnapshot) -> String {
    let replayed = if s.calls_replayed > 0 {
        format!(" ({} replayed)", s.calls_replayed)
    } else {
        String::new()
    };
    let failed = if s.problems_failed > 0 {
        format!(", {} failed", s.problems_failed)
    } else {
        String::new()
    };
    format!(
        "{} | iterations {}/{} | judged {}/{}{failed} | {} calls{replayed}",
        phase(s),
        s.iterations_done,
        s.iterations_total,
        s.problems_judged,
        s.problems_total,
        s.calls_done + s.judge_calls_done
    )
}

/// One plain line for several runs: each run's problems done of its total.
pub fn runs_line(elapsed: Duration, runs: &[(String, ProgressSnapshot)]) -> String {
    let parts: Vec<String> = runs
        .iter()
        .map(|(name, s)| {
            format!(
                "{name} {}/{} ({})",
                s.problems_done + s.problems_failed,
                s.problems_total,
                run_summary(s)
            )
        })
        .collect();
    format!("[{:>7}] {}", hms(elapsed), parts.join(" · "))
}

async fn many_lines(
    every: Duration,
    runs: Vec<(String, ProgressSource)>,
    mut stopped: watch::Receiver<bool>,
) {
    let started = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let snapshots: Vec<(String, ProgressSnapshot)> =
            runs.iter().map(|(n, f)| (n.clone(), f())).collect();
        eprintln!("{}", runs_line(started.elapsed(), &snapshots));
    }
}

async fn many_bars(
    console: Console,
    runs: Vec<(String, ProgressSource)>,
    mut stopped: watch::Receiver<bool>,
) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let width = runs
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(8);
    let bars: Vec<ProgressBar> = runs
        .iter()
        .map(|(name, _)| {
            let bar = multi.add(ProgressBar::new(0));
            bar.set_style(style(&format!(
                "{{prefix:>{width}}} [{{bar:32}}] {{pos}}/{{len}} {{msg}}"
            )));
            bar.set_prefix(name.clone());
            bar
        })
        .collect();
    console.show(&multi);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let done = tokio::select! {
            _ = tick.tick() => false,
            _ = stopped.changed() => true,
        };
        for ((_, source), bar) in runs.iter().zip(&bars) {
            let s = source();
            bar.set_length(s.problems_total);
            bar.set_position(s.problems_done + s.problems_failed);
            bar.set_message(run_summary(&s));
        }
        if done {
            break;
        }
    }
    console.hide();
    for bar in &bars {
        bar.finish();
    }
    let _ = multi.clear();
}

/// `MakeWriter` for log lines: each formatted line is written whole, above the progress
/// bars when they are drawn.
pub(crate) struct StderrWriter(pub(crate) Console);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for StderrWriter {
    type Writer = LineWriter<'a>;
    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter(Vec::with_capacity(256), &self.0)
    }
}

pub(crate) struct LineWriter<'a>(Vec<u8>, &'a Console);

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            self.1.print(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(done: u64, total: u64) -> ProgressSnapshot {
        ProgressSnapshot {
            problems_total: 4,
            problems_done: 1,
            problems_failed: 1,
            iterations_total: total,
            iterations_done: done,
            calls_in_flight: 7,
            calls_done: 90,
            tokens_out: 1000,
            errors: 2,
            retries: 3,
            calls_replayed: 0,
            problems_judged: 0,
            iterations_judged: 0,
            judge_calls_done: 0,
            judge_verdicts_reused: 0,
            pass_at_1: None,
            judge_calls_per_problem: 0,
        }
    }

    #[test]
    fn the_status_line_shows_every_counter_and_an_eta_from_iterations() {
        let line = status_line(Duration::from_secs(100), &snap(10, 40), 12.4);
        for part in [
            "problems 1/4 done (1 failed)",
            "iterations 10/40",
            "calls 7 in flight, 90 done",
            "12 tok/s",
            "errors 2 retries 3",
            // 100 s for 10 iterations, 30 left.
            "ETA 5m00s",
        ] {
            assert!(line.contains(part), "{part:?} missing in {line}");
        }
        assert!(status_line(Duration::from_secs(1), &snap(0, 40), 0.0).ends_with("ETA -"));
    }

    /// A run whose problems all run at once: P problems, T iterations of `secs` seconds
    /// each, `per_iteration` calls per problem and iteration made evenly, iterations
    /// ending in waves. Its snapshot at second `t`.
    fn waves(t: f64) -> ProgressSnapshot {
        const P: u64 = 100;
        const T: u64 = 5;
        const SECS: f64 = 10.0;
        const PER_ITERATION: f64 = 82.0;
        let total_s = T as f64 * SECS;
        let t = t.min(total_s);
        ProgressSnapshot {
            problems_total: P,
            iterations_total: P * T,
            iterations_done: P * (t / SECS).floor() as u64,
            calls_done: (P as f64 * PER_ITERATION * t / SECS) as u64,
            ..ProgressSnapshot::default()
        }
    }

    #[test]
    fn the_eta_follows_the_real_time_left_when_every_problem_runs_at_once() {
        // Updated once a second as the displays do, against the time really left (50 s
        // in all): no estimate before the first wave of iterations ends, then within 5 %
        // of the run's length, the first one included.
        let mut remaining = Eta::default();
        let mut worst: f64 = 0.0;
        for second in 1..50 {
            let t = f64::from(second);
            let eta = remaining.update(Duration::from_secs_f64(t), &waves(t));
            if second < 10 {
                assert_eq!(eta, None, "second {second}: no iteration has ended");
                continue;
            }
            let eta = eta
                .expect("an estimate once an iteration ended")
                .as_secs_f64();
            worst = worst.max((eta - (50.0 - t)).abs() / 50.0);
        }
        assert!(
            worst < 0.05,
            "the ETA strays from the time left by {:.1} % of the run",
            worst * 100.0
        );
        // The estimate of calls ÷ iterations finished alone, at second 15 (half-way
        // through the second wave), is far off: what the smoothed one corrects.
        let plain = eta(Duration::from_secs(15), &waves(15.0))
            .unwrap()
            .as_secs_f64();
        assert!(plain > 50.0, "plain ETA {plain:.1} s, 35 s left");
    }

    #[test]
    fn progress_goes_on_through_the_judge_phase_and_the_eta_counts_judge_calls() {
        // Every iteration done, 1 of 4 problems (10 of 40 iterations) judged with 24 judge
        // calls; 1 failed.
        let s = ProgressSnapshot {
            iterations_done: 40,
            problems_judged: 1,
            iterations_judged: 10,
            judge_calls_done: 24,
            judge_verdicts_reused: 0,
            pass_at_1: None,
            judge_calls_per_problem: 96,
            ..snap(40, 40)
        };
        let reused = ProgressSnapshot {
            judge_verdicts_reused: 72,
            ..s
        };
        let line = status_line(Duration::from_secs(114), &reused, 0.0);
        assert!(
            line.contains("judged 1/4 (10/40 iterations), 24 judge calls, 72 verdicts reused"),
            "{line}"
        );
        let judged = ProgressSnapshot {
            pass_at_1: Some((0.425, 8)),
            ..s
        };
        let line = status_line(Duration::from_secs(114), &judged, 0.0);
        assert!(
            line.contains("judge calls, Pass@1 42.5 % (n=8) |"),
            "{line}"
        );
        let line = status_line(Duration::from_secs(114), &s, 0.0);
        for part in [
            "judging |",
            "judged 1/4 (10/40 iterations), 24 judge calls",
            "iterations 40/40",
        ] {
            assert!(line.contains(part), "{part:?} missing in {line}");
        }
        // 20 iterations left to judge (the failed problem's 10 are not) at 2.4 calls each;
        // 114 s for 90 + 24 calls sent.
        assert_eq!(calls_left(&s, None), Some(48.0));
        assert_eq!(
            eta(Duration::from_secs(114), &s),
            Some(Duration::from_secs(48))
        );
        // Before any problem is judged, the bound per problem is assumed.
        let before = ProgressSnapshot {
            problems_judged: 0,
            iterations_judged: 0,
            judge_calls_done: 0,
            judge_verdicts_reused: 0,
            pass_at_1: None,
            ..s
        };
        assert_eq!(calls_left(&before, None), Some(3.0 * 96.0));
        assert!(
            status_line(Duration::from_secs(1), &before, 0.0)
                .contains("judged 0/4 (0/40 iterations), 0 judge calls")
        );
        // While solving: the method's calls per iteration so far times the iterations left.
        let solving = ProgressSnapshot {
            judge_calls_per_problem: 10,
            ..snap(10, 40)
        };
        assert_eq!(calls_left(&solving, None), Some(30.0 * 9.0 + 3.0 * 10.0));
        assert!(status_line(Duration::from_secs(1), &solving, 0.0).contains("] solving |"));
        // Iterations are judged while the method runs: the count moves, and the judge work
        // left is counted by iteration (16 calls for 8 iterations, 22 left to judge).
        let judging_meanwhile = ProgressSnapshot {
            iterations_judged: 8,
            judge_calls_done: 16,
            ..solving
        };
        let line = status_line(Duration::from_secs(1), &judging_meanwhile, 0.0);
        assert!(line.contains("judged 0/4 (8/40 iterations)"), "{line}");
        assert_eq!(
            calls_left(&judging_meanwhile, None),
            Some(270.0 + 22.0 * 2.0)
        );
        // Replayed calls (a resumed run) do not speed up the estimate.
        let resumed = ProgressSnapshot {
            calls_replayed: 60,
            ..snap(10, 40)
        };
        assert_eq!(
            eta(Duration::from_secs(30), &resumed),
            Some(Duration::from_secs(270))
        );
        // All done: nothing left.
        let done = ProgressSnapshot {
            problems_judged: 3,
            iterations_judged: 30,
            ..snap(40, 40)
        };
        assert_eq!(eta(Duration::from_secs(5), &done), Some(Duration::ZERO));
    }

    #[test]
    fn the_rate_is_tokens_over_the_window() {
        let mut rate = Rate::default();
        let t0 = Instant::now();
        assert_eq!(rate.push(t0, 100), 0.0);
        let r = rate.push(t0 + Duration::from_secs(2), 300);
        assert!((r - 100.0).abs() < 1e-9, "{r}");
    }

    #[test]
    fn quiet_turns_the_display_off() {
        assert_eq!(
            ProgressMode::for_stderr(true, Duration::from_secs(10), &Console::default()),
            ProgressMode::Off
        );
    }

    #[test]
    fn the_several_runs_line_names_each_run_with_its_problems_and_phase() {
        let mut judging = snap(40, 40);
        judging.problems_judged = 2;
        judging.calls_replayed = 5;
        let line = runs_line(
            Duration::from_secs(65),
            &[("TMAS".into(), snap(10, 40)), ("V-R".into(), judging)],
        );
        assert!(line.starts_with("[  1m05s] "), "{line}");
        assert!(
            line.contains(
                "TMAS 2/4 (solving | iterations 10/40 | judged 0/4, 1 failed | 90 calls)"
            ),
            "{line}"
        );
        assert!(
            line.contains(" · V-R 2/4 (judging | iterations 40/40 | judged 2/4, 1 failed | 90 calls (5 replayed))"),
            "{line}"
        );
    }

    #[tokio::test]
    async fn a_display_of_several_runs_that_is_off_draws_nothing_and_finishes() {
        let display = ProgressDisplay::start_many(
            ProgressMode::Off,
            vec![("a".into(), Box::new(|| snap(0, 1)) as ProgressSource)],
        );
        assert!(display.task.is_none());
        display.finish().await;
    }
}
