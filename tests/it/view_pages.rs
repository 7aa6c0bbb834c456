//! `tmas view` over HTTP: the pages show the store's texts, escape every model text, name
//! runs and pages only from the catalog (no path reaches outside the named directories),
//! and a static export links its pages relatively.

use std::collections::BTreeMap;
use std::path::Path;

use crate::export_parquet::parquet_rows;
use crate::support::cli::{ok, path_arg, run_fresh, tmas, write_config};
use crate::support::engine::{dataset, run_process_on_sim, sim_options};
use crate::support::otlp::{Collector, problem_traces};
use crate::support::serve::served_store;
use crate::support::view::Viewer;

/// A script a model could reply with: it must show as text, never run.
pub const SCRIPT: &str = "<script>document.title='PWNED'</script>";

/// Text as the pages' templates escape it.
pub fn escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '&' => out.push_str("&#38;"),
            '<' => out.push_str("&#60;"),
            '>' => out.push_str("&#62;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A finished simulator run (3 problems, T = 2) whose first solution reply (problem 0,
/// iteration 0, candidate 0) was given a think block and a script, as a model could.
pub fn finished_run(dir: &Path) -> std::path::PathBuf {
    let config = write_config(dir, "embedded-sim", 3, 2);
    let run = dir.join("run");
    ok(run_fresh(&config, &run), "tmas run");
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    let first: String = conn
        .query_row(
            "SELECT problem_id FROM problems ORDER BY ordinal LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("a problem");
    let changed = conn
        .execute(
            "UPDATE calls SET content = '<think>weighing the cases</think>' || content || ?1 \
             WHERE call_key = ?2",
            rusqlite::params![SCRIPT, format!("{first}/it0/solution/c0/a0")],
        )
        .expect("reply updated");
    assert_eq!(changed, 1);
    run
}

fn query_text(run: &Path, sql: &str) -> String {
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    conn.query_row(sql, [], |r| r.get(0)).expect("a row")
}

#[test]
fn a_runs_pages_show_the_stores_texts_with_model_text_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    let view = Viewer::start(&[&run]);
    let (status, list) = view.get("/");
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("href=\"r/run/\""), "{list}");

    let (status, page) = view.get("/r/run/");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<svg"),
        "the run page embeds the Pass@1 chart"
    );
    assert!(page.contains("id=\"pass-at-1\""));

    let question = query_text(&run, "SELECT question FROM problems WHERE ordinal = 0");
    let (status, problem) = view.get("/r/run/p0.html");
    assert_eq!(status, 200, "{problem}");
    assert!(
        problem.contains(&escape(&question)),
        "the question as stored"
    );

    let (status, candidate) = view.get("/r/run/p0-t0-c0.html");
    assert_eq!(status, 200, "{candidate}");
    assert!(
        candidate.contains(&escape(SCRIPT)),
        "the script shows as text"
    );
    assert!(
        !candidate.contains(SCRIPT),
        "a model's script reached the page unescaped"
    );
    assert!(
        candidate.contains("<details class=\"think\"><summary>thinking"),
        "the think block is collapsed"
    );
    let verification = query_text(
        &run,
        "SELECT v.text FROM verifications v JOIN problems p USING (problem_id) \
         WHERE p.ordinal = 0 AND v.iteration = 0 AND v.candidate = 0 AND v.idx = 0",
    );
    assert!(
        candidate.contains(&escape(&verification)),
        "the verification text as stored"
    );

    for page in [
        "/r/run/problems.html",
        "/r/run/p0-banks.html",
        "/r/run/calls.html",
    ] {
        let (status, body) = view.get(page);
        assert_eq!(status, 200, "{page}: {body}");
    }
    // One problem's calls, and only its.
    let first = query_text(&run, "SELECT problem_id FROM problems WHERE ordinal = 0");
    let (status, calls) = view.get(&format!("/r/run/calls.html?problem={first}"));
    assert_eq!(status, 200, "{calls}");
    let rows = calls.matches("<code>tmas.problem_id=").count();
    let its = calls
        .matches(&format!("<code>tmas.problem_id={first}</code>"))
        .count();
    let stored: i64 = rusqlite::Connection::open(run.join("run.sqlite"))
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM calls WHERE problem_id = ?1",
            [&first],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        (rows, its),
        (stored as usize, stored as usize),
        "{calls:.2000}"
    );
    let (status, json) = view.get("/r/run/status.json");
    assert_eq!(status, 200);
    let live: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert_eq!(live["status"], "completed");
    assert_eq!(live["iterations_reached"], 6);
}

/// Text of a page as the templates' escaping wrote it, read back.
fn unescape(html: &str) -> String {
    html.replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#38;", "&")
}

#[test]
fn the_run_page_shows_the_analyses_tmas_report_prints_with_their_charts() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    let view = Viewer::start(&[&run]);
    let report = ok(tmas(&["report", path_arg(&run)]), "tmas report");
    for page in ["/r/run/", "/r/run/analyses.html"] {
        let (status, body) = view.get(page);
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("id=\"analyses\" data-state=\"ready\""),
            "{page}: {body:.3000}"
        );
        assert!(body.contains("over the 3 judged problem(s)"), "{page}");
        for stem in [
            "unique_guidelines",
            "verification_paradox",
            "explore_exploit",
            "bank_growth",
        ] {
            let marker = format!("<pre class=\"text\" id=\"analysis-{stem}\">");
            let at = body
                .find(&marker)
                .unwrap_or_else(|| panic!("{page}: no {stem} table"))
                + marker.len();
            let rest = &body[at..];
            let table = unescape(&rest[..rest.find("</pre>").expect("table ends")]);
            assert!(table.lines().count() > 2, "{stem}: {table}");
            assert!(
                report.contains(&table),
                "{stem}: the page's table is not the one tmas report prints:\n{table}\n---\n{report}"
            );
            let after = &rest[rest.find("</pre>").unwrap()..];
            let next = after.find("<pre").unwrap_or(after.len());
            assert!(
                after[..next].contains("<div class=\"chart\"><svg"),
                "{page}: {stem} has no chart"
            );
        }
    }
}

#[test]
fn the_calls_table_filters_by_latency_tokens_and_retries() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    conn.execute_batch(
        "UPDATE calls SET latency_ms = 5, prompt_tokens = 10, completion_tokens = 10, \
         attempts = 1",
    )
    .expect("calls updated");
    let keys: Vec<String> = conn
        .prepare("SELECT call_key FROM calls ORDER BY rowid LIMIT 3")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let [slow, long, retried] = &keys[..] else {
        panic!("three calls")
    };
    for (sql, key) in [
        (
            "UPDATE calls SET latency_ms = 9000 WHERE call_key = ?1",
            slow,
        ),
        (
            "UPDATE calls SET completion_tokens = 50000 WHERE call_key = ?1",
            long,
        ),
        ("UPDATE calls SET attempts = 3 WHERE call_key = ?1", retried),
    ] {
        assert_eq!(conn.execute(sql, [key]).unwrap(), 1);
    }
    let total: usize = conn
        .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get::<_, i64>(0))
        .unwrap() as usize;
    assert!(total < 100, "one page holds every call");
    let view = Viewer::start(&[&run]);
    let rows = |query: &str| {
        let (status, body) = view.get(&format!("/r/run/calls.html?{query}"));
        assert_eq!(status, 200, "{query}: {body:.600}");
        let shown: Vec<String> = keys
            .iter()
            .filter(|k| body.contains(&format!(">{}</a>", escape(k))))
            .cloned()
            .collect();
        (body.matches("</td></tr>").count(), shown)
    };
    assert_eq!(rows("min_latency=8000"), (1, vec![slow.clone()]));
    assert_eq!(
        rows("max_latency=5"),
        (total - 1, vec![long.clone(), retried.clone()])
    );
    assert_eq!(rows("min_latency=5&max_latency=5&min_tokens=").0, total - 1);
    assert_eq!(rows("min_tokens=40000"), (1, vec![long.clone()]));
    assert_eq!(rows("min_tokens=20").0, total);
    assert_eq!(rows("retried=1"), (1, vec![retried.clone()]));
    assert_eq!(rows("retried=1&min_latency=8000").0, 0);
    let (_, body) = view.get("/r/run/calls.html?retried=1&min_tokens=40000");
    assert!(
        body.contains("checked") && body.contains("value=\"40000\""),
        "the form shows the filter applied"
    );
    let (status, body) = view.get("/r/run/calls.html?min_latency=fast");
    assert_eq!(status, 404);
    assert!(body.contains("min_latency = `fast`"), "{body}");
}

/// The `after=N` of the next-page link of a calls page, if it has one.
fn next_after(body: &str) -> Option<i64> {
    let at = body.find("\">next page</a>")?;
    let link = &body[..at];
    let from = link.rfind("after=")? + "after=".len();
    link[from..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

/// A store with more calls than a page looks at: a filter that only its last call passes
/// is answered page by page, each saying how far it looked, and none says that no call
/// passes before the last row was looked at.
#[test]
fn a_calls_filter_that_few_calls_pass_looks_at_a_bounded_window_per_page() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    // 45,000 answered calls of a problem of their own, then one from another endpoint.
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 45000) \
         INSERT INTO calls (call_key, problem_id, iteration, role, attempt, prompt_id, \
           request_json, ok, latency_ms, endpoint, attempts, completed_at_ms) \
         SELECT 'filler/it0/solution/c' || i || '/a0', 'filler', 0, 'solution', 0, \
           (SELECT prompt_id FROM calls LIMIT 1), '{}', 1, 5, 'sim', 1, 0 FROM n; \
         INSERT INTO calls (call_key, problem_id, iteration, role, attempt, prompt_id, \
           request_json, ok, latency_ms, endpoint, attempts, completed_at_ms) \
         SELECT 'filler/it0/solution/c0/a0', 'filler', 0, 'solution', 0, \
           (SELECT prompt_id FROM calls LIMIT 1), '{}', 1, 5, 'far-away', 1, 0;",
    )
    .expect("calls added");
    let last: i64 = conn
        .query_row("SELECT MAX(rowid) FROM calls", [], |r| r.get(0))
        .unwrap();
    drop(conn);
    let view = Viewer::start(&[&run]);
    let page = |query: &str| {
        let (status, body) = view.get(&format!("/r/run/calls.html?{query}"));
        assert_eq!(status, 200, "{query}: {body:.600}");
        body
    };
    let mut after = 0;
    let mut looked = Vec::new();
    let found = loop {
        let body = page(&format!("endpoint=far-away&after={after}"));
        if body.contains("data-scan=\"complete\"") {
            break body;
        }
        assert!(body.contains("data-scan=\"stopped\""), "{body:.2000}");
        assert!(
            !body.contains("No call stored"),
            "claimed none: {body:.2000}"
        );
        assert!(
            body.contains("No match in the rows after row") && body.contains("not looked at yet"),
            "{body:.2000}"
        );
        assert_eq!(body.matches("</td></tr>").count(), 0);
        let next = next_after(&body).expect("a next page");
        assert!(next > after && next < last, "{after} → {next}");
        looked.push(next - after);
        after = next;
    };
    assert!(
        looked.len() >= 2 && looked.iter().all(|&rows| rows <= 20_000),
        "each page looks at a bounded window: {looked:?}"
    );
    assert!(
        found.contains(">filler/it0/solution/c0/a0</a>"),
        "{found:.2000}"
    );
    assert_eq!(found.matches("</td></tr>").count(), 1);
    assert_eq!(next_after(&found), None, "nothing after the last row");
    // Only once every row after the start was looked at does a page say none passes.
    let none = page(&format!("endpoint=nowhere&after={after}"));
    assert!(
        none.contains(&format!(
            "No call stored after row {after} passing the filter"
        )),
        "{none:.2000}"
    );
    // One problem's calls are looked at whole, whatever their number.
    let of_problem = page("problem=filler&endpoint=far-away");
    assert!(
        of_problem.contains("data-scan=\"complete\""),
        "{of_problem:.2000}"
    );
    assert_eq!(of_problem.matches("</td></tr>").count(), 1);
}

/// A run exported to an OTLP collector: the store names each problem's trace, the one
/// its exported `problem` span is in, and the problem and calls pages show it, linked to
/// the Jaeger UI `--jaeger-url` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_runs_pages_name_each_problems_trace_and_link_it_to_jaeger() {
    let collector = Collector::start().await;
    let endpoint = format!("observability.otlp_endpoint=\"{}\"", collector.endpoint);
    let finished = run_process_on_sim(
        sim_options(3),
        dataset(2),
        &[&endpoint, "observability.otlp_protocol=\"grpc\""],
        "warn",
    )
    .await;
    let spans = collector.finish().await;
    let exported: BTreeMap<String, String> = problem_traces(&spans).collect();
    assert_eq!(exported.len(), 2, "one trace per problem");
    let run = finished._dir.path().join("run");
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store opens");
    let stored: BTreeMap<String, String> = conn
        .prepare("SELECT problem_id, trace_id FROM problem_traces")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(stored, exported, "the store names the exported traces");
    let tables = finished._dir.path().join("tables");
    tokio::task::block_in_place(|| {
        ok(
            tmas(&[
                "export",
                path_arg(&run),
                "--format",
                "parquet",
                "--output",
                path_arg(&tables),
            ]),
            "export --format parquet",
        )
    });
    assert_eq!(
        parquet_rows(&tables.join("problem_traces.parquet")),
        stored.len(),
        "the Parquet export carries each problem's trace"
    );
    let jaeger = "http://127.0.0.1:16686";
    tokio::task::block_in_place(|| {
        let view = Viewer::start_with(&[&run], &["--jaeger-url", &format!("{jaeger}/")]);
        // The dataset's order is the ids' order: p00, p01.
        for (ordinal, (problem, trace)) in exported.iter().enumerate() {
            let link = format!("<a class=\"trace\" href=\"{jaeger}/trace/{trace}\">{trace}</a>");
            let (status, page) = view.get(&format!("/r/run/p{ordinal}.html"));
            assert_eq!(status, 200, "{page}");
            assert!(page.contains(&link), "p{ordinal}: {page:.2000}");
            let (status, calls) = view.get(&format!("/r/run/calls.html?problem={problem}"));
            assert_eq!(status, 200, "{calls}");
            let rows = calls.matches("</td></tr>").count();
            assert!(rows > 0);
            assert_eq!(
                calls.matches(&link).count(),
                rows,
                "every call names its trace"
            );
        }
        drop(view);
        let plain = Viewer::start(&[&run]);
        let (_, page) = plain.get("/r/run/p0.html");
        let trace = &exported["p00"];
        assert!(
            page.contains(&format!("<code class=\"trace\">{trace}</code>")),
            "without --jaeger-url the id alone: {page:.2000}"
        );
    });
}

#[test]
fn no_request_reaches_a_file_outside_the_served_pages() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    std::fs::write(dir.path().join("secret.txt"), "SECRET-OUTSIDE").unwrap();
    let view = Viewer::start(&[&run]);
    for path in [
        "/r/..%2Fsecret.txt/",
        "/r/..%2F..%2Fetc%2Fpasswd/",
        "/r/%2Fetc%2Fpasswd/index.html",
        "/r/run/..%2Fsecret.txt",
        "/r/run/..%2F..%2Fsecret.txt",
        "/r/run/%2Fetc%2Fpasswd",
        "/r/run/../../secret.txt",
        "/r/run/run.sqlite",
        "/r/run/config.toml",
        "/r/run/p-1.html",
        "/r/run/p99.html",
        "/r/run/p0-t9-c9.html",
        "/r/nosuchrun/",
        "/secret.txt",
        "/../secret.txt",
    ] {
        let (status, body) = view.get(path);
        assert_eq!(status, 404, "{path}: {body:.300}");
        assert!(
            body.contains("id=\"message\""),
            "{path}: a page saying what is missing"
        );
        for leaked in ["SECRET-OUTSIDE", "SQLite format", "root:x:0"] {
            assert!(!body.contains(leaked), "{path} leaked {leaked}");
        }
    }
    let (_, body) = view.get("/r/nosuchrun/");
    assert!(body.contains("no run named `nosuchrun`"), "{body}");
    let (_, body) = view.get("/r/run/p99.html");
    assert!(body.contains("no problem number 99"), "{body}");
}

#[test]
fn a_static_export_writes_the_runs_pages_linked_relatively() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    let out = dir.path().join("site");
    let stdout = ok(
        tmas(&["view", path_arg(&run), "--out", path_arg(&out)]),
        "tmas view --out",
    );
    assert!(stdout.contains("wrote"), "{stdout}");
    for page in [
        "index.html",
        "problems.html",
        "calls.html",
        "p0.html",
        "p0-banks.html",
        "p0-t0-c0.html",
        "p2-t1-c1.html",
    ] {
        assert!(out.join(page).is_file(), "{page} missing");
    }
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let html = std::fs::read_to_string(&path).unwrap();
        assert!(
            !html.contains("href=\"/") && !html.contains("href=\"../"),
            "{} links outside its folder",
            path.display()
        );
        assert!(
            !html.contains(SCRIPT),
            "{} holds the script unescaped",
            path.display()
        );
    }
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        index.contains("id=\"analyses\" data-state=\"ready\"")
            && index.contains("id=\"analysis-bank_growth\""),
        "the export's run page holds the analyses"
    );
    // The export's folder must be new or empty.
    let again = tmas(&["view", path_arg(&run), "--out", path_arg(&out)]);
    assert_eq!(again.status.code(), Some(2));
}

#[test]
fn a_servers_store_shows_each_requests_method_in_the_list_and_on_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let served = served_store(dir.path());
    let view = Viewer::start(&[&served]);
    let (status, list) = view.get("/r/served/problems.html");
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("<th>method</th>"), "{list}");
    for method in [
        "tmas n=2 m=1 iterations=1 epsilon=0.5",
        "majority-vote k=3 iterations=1",
    ] {
        assert!(
            list.contains(&format!("<td class=\"method\">{method}</td>")),
            "the list names {method}:\n{list}"
        );
    }
    let (status, page) = view.get("/r/served/p1.html");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<code id=\"method\">majority-vote k=3 iterations=1</code>"),
        "{page}"
    );
    assert!(page.contains("id=\"method-keys\""), "{page}");
    let (_, plain) = view.get("/r/served/p2.html");
    assert!(
        plain.contains("<code id=\"method\">tmas-sim (plain model, passed through)</code>"),
        "{plain}"
    );
    // The runs list names what the requests ran, not the served config's method alone.
    let (status, runs) = view.get("/");
    assert_eq!(status, 200, "{runs}");
    assert!(
        runs.contains("served: majority-vote, plain model, tmas"),
        "{runs}"
    );

    // A run over a dataset has no request: no method column, no method line.
    let run = finished_run(dir.path());
    let view = Viewer::start(&[&run]);
    let (_, list) = view.get("/r/run/problems.html");
    assert!(!list.contains("<th>method</th>"), "{list}");
    let (_, page) = view.get("/r/run/p0.html");
    assert!(!page.contains("id=\"method\""), "{page}");
}

#[test]
fn an_experiment_directory_lists_its_variants_and_compares_two() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("table1");
    ok(
        tmas(&[
            "experiment",
            "experiments/table1.toml",
            "--out",
            path_arg(&out),
            "--quiet",
            "--set",
            "endpoints.local.base_url=\"embedded-sim\"",
            "--set",
            "endpoints.judge.base_url=\"embedded-sim\"",
            "--set",
            "simulator.latency=\"fixed:2ms\"",
            "--set",
            "run.dataset=data/imo-answerbench-sample.jsonl",
            "--set",
            "run.limit=3",
            "--set",
            "method.iterations=2",
            "--set",
            "method.n=2",
            "--set",
            "method.m=2",
            "--set",
            "judge.repeats=1",
        ]),
        "tmas experiment",
    );
    let view = Viewer::start(&[&out]);
    let (status, list) = view.get("/");
    assert_eq!(status, 200, "{list}");
    for variant in [
        "TMAS",
        "MV_64",
        "Self-Refine",
        "Verify-Refine",
        "PaCoRe",
        "RSE",
    ] {
        let name = format!("table1~{variant}");
        assert!(
            list.contains(&format!("href=\"r/{name}/\"")),
            "{variant}: {list}"
        );
        for page in [
            "",
            "problems.html",
            "p0.html",
            "p0-banks.html",
            "calls.html",
        ] {
            let (status, body) = view.get(&format!("/r/{name}/{page}"));
            assert_eq!(status, 200, "{name}/{page}: {body:.400}");
        }
    }
    let (status, compare) = view.get("/compare.html?a=table1~TMAS&b=table1~MV_64");
    assert_eq!(status, 200, "{compare}");
    assert!(compare.contains("3 problems"), "{compare}");
    let (status, differ) = view.get("/compare.html?a=table1~TMAS&b=table1~MV_64&differ=1");
    assert_eq!(status, 200, "{differ}");
}
