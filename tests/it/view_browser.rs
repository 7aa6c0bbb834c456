//! `tmas view` in headless Chromium: the pages a reader walks through show the store's
//! texts, a script in a reply stays text (the page's title is untouched), and the run
//! page of a run in progress follows it (its poll raises the iteration count). A
//! screenshot of every page is kept in `target/view-screenshots/`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::cli::{spawn_fresh, stored_calls, write_config};
use crate::support::serve::served_store;
use crate::support::view::{
    Viewer, artefacts, chromium, dump_dom, raw_get, screenshot, screenshots,
};
use crate::view_pages::{SCRIPT, finished_run};

/// The number in the element with id `id` of a dumped DOM.
fn number_in(dom: &str, id: &str) -> u64 {
    let marker = format!("id=\"{id}\">");
    let at = dom
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id} in the page"))
        + marker.len();
    dom[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("#{id} holds no number"))
}

#[test]
fn the_browser_shows_a_runs_pages_with_a_script_reply_as_text() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    // Trace ids as a traced run records them (`view_pages` checks a real one's).
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    conn.execute_batch(
        "INSERT INTO problem_traces (problem_id, trace_id, recorded_at_ms) \
         SELECT problem_id, printf('%032x', 3735928559 + ordinal), 0 FROM problems",
    )
    .expect("trace ids stored");
    let trace = format!("{:032x}", 3_735_928_559u64);
    let view = Viewer::start_with(&[&run, &run], &["--jaeger-url", "http://localhost:16686"]);
    let url = |page: &str| format!("{}{page}", view.root);

    let candidate = dump_dom(&chromium, &url("r/run/p0-t0-c0.html"), 1000);
    let as_text = SCRIPT.replace('<', "&lt;").replace('>', "&gt;");
    assert!(
        candidate.contains(&as_text),
        "the reply's script shows as text"
    );
    assert!(
        !candidate.contains("<title>PWNED</title>"),
        "the reply's script ran"
    );
    assert!(
        candidate.contains("weighing the cases"),
        "the think block is on the page"
    );

    let problem = dump_dom(&chromium, &url("r/run/p0.html"), 1000);
    assert!(
        problem.contains("iteration 1"),
        "the problem's iterations are listed"
    );
    assert!(
        problem.contains(&format!(
            "<a class=\"trace\" href=\"http://localhost:16686/trace/{trace}\">{trace}</a>"
        )),
        "the problem links its trace"
    );
    let overview = dump_dom(&chromium, &url("r/run/"), 1000);
    for stem in [
        "unique_guidelines",
        "verification_paradox",
        "explore_exploit",
        "bank_growth",
    ] {
        assert!(
            overview.contains(&format!("id=\"analysis-{stem}\"")),
            "the run page shows the analysis {stem}"
        );
    }
    assert!(
        overview.matches("<svg").count() >= 5,
        "the run page draws Pass@1 and the analyses' charts"
    );
    let banks = dump_dom(&chromium, &url("r/run/p0-banks.html"), 1000);
    assert!(banks.contains("experience bank") && banks.contains("guideline bank"));

    screenshots(
        &chromium,
        &view.root,
        &[
            ("", "runs", 500),
            ("r/run/", "run", 1400),
            ("r/run/analyses.html", "analyses", 2600),
            ("r/run/problems.html", "problems", 500),
            ("r/run/p0.html", "problem", 900),
            ("r/run/p0-t0-c0.html", "candidate", 900),
            ("r/run/p0-banks.html", "banks", 700),
            ("r/run/calls.html", "calls", 700),
            ("compare.html?a=run&b=run-2", "compare", 500),
        ],
    );
}

#[test]
fn the_run_page_follows_a_run_in_progress() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "embedded-sim", 2, 30);
    let run_dir = dir.path().join("live");
    let mut run = spawn_fresh(&config, &run_dir);
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored_calls(&run_dir) < 10 {
        assert!(Instant::now() < deadline, "the run stored no calls");
        std::thread::sleep(Duration::from_millis(50));
    }
    let view = Viewer::start(&[Path::new(&run_dir)]);
    let page = format!("{}r/live/", view.root);
    let first = dump_dom(&chromium, &page, 2500);
    assert!(first.contains("data-polled=\""), "the page's poll ran");
    assert!(
        first.contains("id=\"live-status\">running<"),
        "the run is in progress"
    );
    assert!(
        first.contains("No problem is judged yet"),
        "no analyses before a problem is done"
    );
    let before = number_in(&first, "live-iterations");
    std::thread::sleep(Duration::from_secs(3));
    let second = dump_dom(&chromium, &page, 2500);
    let after = number_in(&second, "live-iterations");
    assert!(
        after > before,
        "iterations {before} → {after}: the page did not follow the run"
    );
    screenshot(&chromium, &page, &artefacts().join("run-live.png"), 500);
    let _ = run.kill();
    let _ = run.wait();
}

/// The run page of a run whose analyses take longer than a page waits: it shows
/// "computing…", and its script puts the analyses in place without a reload. The viewer's
/// test knob delays each computation (a store slow enough to compute would take minutes
/// to write); the page itself is the product's.
#[test]
fn the_run_page_shows_computing_then_swaps_the_analyses_in() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    // Chromium must load the page while the analyses are still being computed: on a
    // loaded two-core machine its start alone can take several seconds.
    let delay_ms = 20_000;
    let view = Viewer::start_with_env(
        &[&run],
        &[],
        &[(tmas::view::ANALYSES_DELAY_ENV, &delay_ms.to_string())],
    );
    let (status, served) = raw_get(&view.root, "/r/run/");
    assert_eq!(status, 200, "{served:.600}");
    assert!(
        served.contains("data-state=\"computing\"")
            && served.contains("Computing the paper&#39;s analyses"),
        "the page says computing… first: {}",
        served
            .find("<section id=\"analyses\"")
            .map_or(served.as_str(), |at| &served[at..])
    );
    assert!(!served.contains("id=\"analysis-"), "no analyses yet");
    // Polls cost real time (each fetch waits up to 0.25 s at the server) while the
    // budget's virtual time stands still during a fetch: room for far more than the delay.
    let dom = dump_dom(&chromium, &format!("{}r/run/", view.root), 120_000);
    let section = dom
        .find("<section id=\"analyses\"")
        .map(|at| &dom[at..])
        .expect("an analyses section");
    let open_tag = &section[..section.find('>').expect("a tag")];
    assert!(
        open_tag.contains("data-state=\"ready\"") && open_tag.contains("data-swapped-after=\""),
        "the page's script put the ready analyses in place: {open_tag}"
    );
    for stem in [
        "unique_guidelines",
        "verification_paradox",
        "explore_exploit",
        "bank_growth",
    ] {
        assert!(
            dom.contains(&format!("id=\"analysis-{stem}\"")),
            "the swapped-in analyses hold {stem}"
        );
    }
    assert!(
        !dom.contains("Computing the paper"),
        "the computing note is gone"
    );
}

#[test]
fn the_browser_shows_a_servers_requests_with_their_methods() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let served = served_store(dir.path());
    let view = Viewer::start(&[&served]);
    let url = |page: &str| format!("{}{page}", view.root);

    let list = dump_dom(&chromium, &url("r/served/problems.html"), 1000);
    assert!(list.contains("<th>method</th>"), "{list}");
    assert!(
        list.contains("<td class=\"method\">tmas n=2 m=1 iterations=1 epsilon=0.5</td>"),
        "{list}"
    );
    assert!(
        list.contains("<td class=\"method\">majority-vote k=3 iterations=1</td>"),
        "{list}"
    );
    let problem = dump_dom(&chromium, &url("r/served/p0.html"), 1000);
    assert!(
        problem.contains("<code id=\"method\">tmas n=2 m=1 iterations=1 epsilon=0.5</code>"),
        "{problem}"
    );
    screenshots(
        &chromium,
        &view.root,
        &[
            ("r/served/problems.html", "served-problems", 400),
            ("r/served/p0.html", "served-problem", 700),
        ],
    );
}
