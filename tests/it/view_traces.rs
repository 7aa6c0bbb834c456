//! A traced run that is killed and resumed: the store keeps one trace row per problem and
//! session (each session's problem span roots a trace of its own, and the calls a session
//! made are in its trace only), and `tmas view` lists a problem's traces newest first and
//! names, per call, the trace of the session that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::cli::{ok, path_arg, signal, spawn_fresh, tmas, wait_for_stored, write_config};
use crate::support::otlp::{Collector, problem_traces};
use crate::support::view::Viewer;

/// (trace id, recorded at ms) per problem, oldest first.
fn stored_traces(run: &Path) -> BTreeMap<String, Vec<(String, i64)>> {
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    let mut by_problem: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    let rows: Vec<(String, String, i64)> = conn
        .prepare(
            "SELECT problem_id, trace_id, recorded_at_ms FROM problem_traces \
             ORDER BY problem_id, recorded_at_ms",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (problem, trace, at) in rows {
        by_problem.entry(problem).or_default().push((trace, at));
    }
    by_problem
}

/// The table row of the calls page that shows `key`.
fn row_of<'a>(page: &'a str, key: &str) -> &'a str {
    let at = page
        .find(&format!(">{key}</a>"))
        .unwrap_or_else(|| panic!("{key} not on the page"));
    let start = page[..at].rfind("<tr>").expect("a row");
    let end = at + page[at..].find("</tr>").expect("row end");
    &page[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_traced_run_keeps_one_trace_per_problem_and_session_shown_newest_first() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "embedded-sim", 2, 4);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[observability]\notlp_endpoint = \"{}\"\notlp_protocol = \"grpc\"\n",
        collector.endpoint
    ));
    std::fs::write(&config, text).unwrap();
    let run = dir.path().join("run");
    let first = tokio::task::block_in_place(|| {
        let mut child = spawn_fresh(&config, &run);
        wait_for_stored(&run, 20, &mut child);
        signal(&child, libc::SIGKILL);
        let _ = child.wait();
        stored_traces(&run)
    });
    assert_eq!(first.len(), 2, "both problems started: {first:?}");
    assert!(first.values().all(|t| t.len() == 1), "{first:?}");
    tokio::task::block_in_place(|| {
        ok(
            tmas(&["run", "--resume", path_arg(&run), "--progress-every", "0"]),
            "resume",
        )
    });
    let spans = collector.finish().await;
    let exported: BTreeSet<(String, String)> = problem_traces(&spans).collect();
    let both = stored_traces(&run);
    for (problem, traces) in &both {
        assert_eq!(
            traces.len(),
            2,
            "one trace per session of {problem}: {traces:?}"
        );
        assert_eq!(
            traces[0], first[problem][0],
            "the first session's row is kept"
        );
        assert_ne!(traces[0].0, traces[1].0, "each session its own trace");
        assert!(
            exported.contains(&(problem.clone(), traces[1].0.clone())),
            "the resumed session's row names its exported problem span's trace"
        );
    }
    let problem = both.keys().next().expect("a problem").clone();
    let (old, new) = (&both[&problem][0], &both[&problem][1]);
    // A call the first session made (stored before the resume) and one the resumed
    // session made.
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    let key_of = |sql: &str| -> String {
        conn.query_row(sql, rusqlite::params![problem, new.1], |r| r.get(0))
            .expect("a call")
    };
    let made_first = key_of(
        "SELECT call_key FROM calls WHERE problem_id = ?1 AND completed_at_ms < ?2 \
         ORDER BY rowid LIMIT 1",
    );
    let made_after = key_of(
        "SELECT call_key FROM calls WHERE problem_id = ?1 AND completed_at_ms >= ?2 \
         ORDER BY rowid DESC LIMIT 1",
    );
    let ordinal: i64 = conn
        .query_row(
            "SELECT ordinal FROM problems WHERE problem_id = ?1",
            [&problem],
            |r| r.get(0),
        )
        .expect("the problem's ordinal");
    drop(conn);
    tokio::task::block_in_place(|| {
        let view = Viewer::start(&[&run]);
        let (status, page) = view.get(&format!("/r/run/p{ordinal}.html"));
        assert_eq!(status, 200, "{page:.600}");
        let list_at = page
            .find("<ol id=\"session-traces\">")
            .expect("a list of traces");
        let list = &page[list_at..list_at + page[list_at..].find("</ol>").unwrap()];
        let (at_new, at_old) = (
            list.find(&new.0).expect("the resumed session's trace"),
            list.find(&old.0).expect("the first session's trace"),
        );
        assert!(at_new < at_old, "newest first: {list}");
        let first_item = &list[..list.find("</li>").unwrap()];
        assert!(
            first_item.contains(&new.0) && first_item.contains("(latest)"),
            "{list}"
        );
        assert_eq!(list.matches("(latest)").count(), 1, "{list}");
        let (status, calls) = view.get(&format!("/r/run/calls.html?problem={problem}"));
        assert_eq!(status, 200, "{calls:.600}");
        for (key, trace, other) in [(&made_first, &old.0, &new.0), (&made_after, &new.0, &old.0)] {
            let row = row_of(&calls, key);
            assert!(
                row.contains(trace.as_str()) && !row.contains(other.as_str()),
                "{key} is in its session's trace: {row}"
            );
        }
    });
}
