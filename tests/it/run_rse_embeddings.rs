//! RSE de-duplicating its bank by embeddings (`method.rse_dedup = "embeddings"`) on the
//! simulator: calls per role against the formula of docs/method.md, near-duplicates that
//! really left the bank, a SIGKILLed run resumed to the same banks and Pass@1, and the
//! start-up check of an endpoint that cannot embed.

use crate::support::cli::*;
use crate::support::engine::{dataset, run_on_sim, sim_options};
use tmas::method::TmasOutcome;
use tmas::sim::task::embedding::embed;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const P: u64 = 4;
const N: u64 = 3;
const T: u64 = 3;
const THRESHOLD: f64 = 0.8;

fn count(stats: &tmas::sim::SimStats, role: &str) -> u64 {
    stats.by_role.get(role).copied().unwrap_or(0)
}

/// An item's kind (its prefix) and the text that is embedded.
fn kind_and_body(item: &str) -> (&str, &str) {
    for prefix in ["Proposition: ", "Pitfall: "] {
        if let Some(body) = item.strip_prefix(prefix) {
            return (prefix, body);
        }
    }
    ("", item)
}

/// Cosine of two items' simulated embeddings, or `None` across kinds.
fn cosine(a: &str, b: &str) -> Option<f64> {
    let ((ka, a), (kb, b)) = (kind_and_body(a), kind_and_body(b));
    (ka == kb).then(|| {
        embed(a)
            .iter()
            .zip(embed(b))
            .map(|(x, y)| f64::from(*x) * f64::from(y))
            .sum()
    })
}

/// Pairs of same-kind items above the threshold.
fn near_pairs(bank: &[String]) -> usize {
    let mut n = 0;
    for (i, a) in bank.iter().enumerate() {
        for b in &bank[i + 1..] {
            if cosine(a, b).is_some_and(|c| c > THRESHOLD) {
                n += 1;
            }
        }
    }
    n
}

/// Iterations from It1 on whose update had an item not yet in the bank: the ones that
/// make an embeddings call. Such an item was kept (the bank grew), dropped by the
/// strategy (`deduplicated`) or refused by the bank (`rejected`).
fn updates_with_new_items(outcome: &TmasOutcome) -> u64 {
    let mut before = 0;
    let mut n = 0;
    for it in outcome.iterations.iter().skip(1) {
        for u in &it.bank_updates {
            let v = u.version.as_ref().expect("every update applied");
            if v.items.len() > before || !u.deduplicated.is_empty() || !v.rejected.is_empty() {
                n += 1;
            }
            before = v.items.len();
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rse_with_embeddings_makes_the_documented_calls_and_its_bank_loses_near_duplicates() {
    let overrides = |dedup: &str| {
        vec![
            "method.name=\"rse\"".to_string(),
            format!("method.rse_dedup=\"{dedup}\""),
            format!("method.n={N}"),
            format!("method.iterations={T}"),
            "judge.enabled=false".to_string(),
        ]
    };
    let run = |dedup: &'static str| async move {
        let o = overrides(dedup);
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        run_on_sim(sim_options(21), dataset(P as usize), &o).await
    };
    let done = run("embeddings").await;
    let s = &done.sim;

    // docs/method.md: N·T solution + N·(T−1) extraction + one embeddings call per update
    // from It1 that brought an item not yet in the bank (at most T−1).
    assert_eq!(count(s, "solution"), P * N * T, "{:?}", s.by_role);
    assert_eq!(count(s, "extraction"), P * N * (T - 1), "{:?}", s.by_role);
    let expected: u64 = done
        .records
        .iter()
        .map(|r| updates_with_new_items(&r.outcome))
        .sum();
    assert_eq!(count(s, "embedding"), expected, "{:?}", s.by_role);
    assert!(expected > 0 && expected <= P * (T - 1));
    let counted: u64 = done
        .records
        .iter()
        .map(|r| u64::from(r.outcome.calls.embedding))
        .sum();
    assert_eq!(counted, expected, "the records count them too");
    for role in [
        "verification",
        "summary",
        "experience",
        "guideline",
        "other",
    ] {
        assert_eq!(count(s, role), 0, "{role}: {:?}", s.by_role);
    }

    // Budget: the embedding role has its tokens (input only) in every record and run.json.
    let summary = tmas::engine::run_dir::RunDir::open(done.dir.path())
        .and_then(|d| d.read_summary())
        .expect("run.json");
    let usage = summary.usage_by_role["embedding"];
    assert_eq!(usage.calls, expected);
    assert!(
        usage.prompt_tokens > 0 && usage.completion_tokens == 0,
        "{usage:?}"
    );
    assert!(done.records.iter().any(|r| {
        r.outcome
            .iterations
            .iter()
            .any(|it| it.tokens_by_role.contains_key("embedding"))
    }));

    // Near-duplicates left the bank: every dropped item has an item of its kind in the
    // bank after the update at cosine > 0.8 (or it is identical to or contained in a kept one); some were not exact repeats; the final banks
    // hold no such pair.
    let mut dropped = 0;
    let mut paraphrases = 0;
    for r in &done.records {
        for it in &r.outcome.iterations {
            for u in &it.bank_updates {
                let bank = &u.version.as_ref().expect("applied").items;
                for d in &u.deduplicated {
                    dropped += 1;
                    // The released rule merges an identical text, a text contained in a
                    // kept one, or one at cosine above the threshold.
                    if d.reason.ends_with("(contained in it)") {
                        let kept = d.reason.split('"').nth(1).expect("the kept entry");
                        assert!(bank.iter().any(|b| b == kept), "{d:?}");
                        continue;
                    }
                    assert!(
                        d.reason.contains("(cosine ") || d.reason.ends_with("(identical)"),
                        "{d:?}"
                    );
                    let best = bank
                        .iter()
                        .filter_map(|b| cosine(&d.item, b))
                        .fold(f64::MIN, f64::max);
                    assert!(best > THRESHOLD - 1e-6, "{d:?}: best {best}");
                    if !bank.contains(&d.item) {
                        paraphrases += 1;
                    }
                }
            }
        }
        assert_eq!(
            near_pairs(&r.outcome.experience),
            0,
            "{:?}",
            r.outcome.experience
        );
    }
    eprintln!(
        "{expected} embeddings calls; {dropped} items dropped, {paraphrases} of them not exact repeats"
    );
    assert!(
        dropped > 0 && paraphrases > 0,
        "{dropped} dropped, {paraphrases} not exact"
    );

    // The same run de-duplicated lexically keeps such pairs (a fact and its wrong variant
    // are one number apart), and makes no embeddings call.
    let lexical = run("jaccard").await;
    assert_eq!(count(&lexical.sim, "embedding"), 0);
    let kept: usize = lexical
        .records
        .iter()
        .map(|r| near_pairs(&r.outcome.experience))
        .sum();
    eprintln!("{kept} near pairs in the lexically de-duplicated banks");
    assert!(
        kept > 0,
        "the lexical banks hold near pairs the embeddings run dropped"
    );
}

/// `write_config` for RSE de-duplicating by embeddings.
fn rse_embeddings_config(dir: &std::path::Path, base_url: &str) -> std::path::PathBuf {
    let path = write_config(dir, base_url, 4, 3);
    let text = std::fs::read_to_string(&path)
        .expect("config readable")
        .replace(
            "[method]\n",
            "[method]\nname = \"rse\"\nrse_dedup = \"embeddings\"\nembedding_threshold = 0.8\n",
        );
    std::fs::write(&path, text).expect("config written");
    path
}

#[test]
fn a_sigkilled_rse_embeddings_run_resumes_to_the_same_banks_and_pass_at_1() {
    let sim = Sim::start(0, 100);
    let tmp = tempfile::tempdir().unwrap();
    let config = rse_embeddings_config(tmp.path(), &sim.root);
    let base = baseline(&sim, &config, &tmp.path().join("uninterrupted"));
    let embeddings_at_sim = |sim: &Sim| sim.stats()["by_role"]["embedding"].as_u64().unwrap_or(0);
    let base_embeddings = embeddings_at_sim(&sim);
    assert!(base_embeddings > 0, "the run made embeddings calls");

    reset(&sim);
    let dir = tmp.path().join("killed");
    let mut child = spawn_fresh(&config, &dir);
    // Killed once an embeddings reply is stored, so the resume must replay one.
    wait_for_stored_of_role(&dir, "embedding", &mut child);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    let stored = stored_calls(&dir);
    let stored_embeddings = stored_of_role(&dir, "embedding");
    let before_resume = embeddings_at_sim(&sim);
    assert!(
        stored < base.requests,
        "the kill came too late to test anything"
    );

    let out = ok(
        tmas(&[
            "run",
            "--resume",
            &dir.display().to_string(),
            "--progress-every",
            "0",
        ]),
        "resume after SIGKILL",
    );
    assert!(out.contains("replayed from the store"), "{out}");
    // Same records (banks, the strategy's de-duplication decisions, candidates, verdicts)
    // and the same Pass@1 as the uninterrupted run.
    assert_eq!(export(&dir), base.export, "resumed results differ");
    assert_eq!(export_csv(&dir), base.csv);
    let pass = std::fs::read_to_string(dir.join("pass_at_1.csv")).unwrap();
    assert_eq!(pass, base.csv);
    // The resume replayed the stored embeddings calls and sent only the others.
    let resent = embeddings_at_sim(&sim) - before_resume;
    eprintln!(
        "baseline {} requests, {base_embeddings} embeddings; at the kill {stored} calls and \
         {stored_embeddings} embeddings stored; {resent} embeddings sent by the resume",
        base.requests
    );
    assert_eq!(
        resent,
        base_embeddings - stored_embeddings,
        "{stored_embeddings} of {base_embeddings} embeddings calls were stored at the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_check_names_an_embeddings_endpoint_that_cannot_embed() {
    let sim = Sim::start(0, 0);
    let tmp = tempfile::tempdir().unwrap();
    let config = rse_embeddings_config(tmp.path(), &sim.root);
    // A chat-only server as the embedding role's endpoint: models listed, no /embeddings.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "object": "list", "data": [{"id": "bge-m3", "object": "model"}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(404).set_body_string("{\"detail\":\"Not Found\"}"))
        .mount(&server)
        .await;
    let base_text = std::fs::read_to_string(&config).unwrap();
    let with_emb = format!(
        "{base_text}\n[endpoints.emb]\nbase_url = \"{}/v1\"\nmodel = \"bge-m3\"\n\n[groups]\n\
         default = [\"sim\"]\nembed = [\"emb\"]\n\n[roles.embedding]\ngroup = \"embed\"\n",
        server.uri()
    );
    std::fs::write(&config, with_emb).unwrap();
    let dir = tmp.path().join("run");
    let cfg = config.clone();
    let out_dir = dir.clone();
    let out = tokio::task::spawn_blocking(move || {
        command(&["run", "-c"])
            .arg(&cfg)
            .arg("--out")
            .arg(&out_dir)
            .args(["--progress-every", "0"])
            .output()
            .expect("tmas runs")
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    for needle in [
        "endpoint `emb`",
        "/v1/embeddings",
        "HTTP 404",
        "roles.embedding.group",
        "embeddings model",
    ] {
        assert!(
            stderr.contains(needle),
            "missing {needle:?}:\n{}",
            show(&out)
        );
    }
    // The chat endpoint (the simulator) passed; nothing was created.
    assert!(!stderr.contains("endpoint `sim`"), "{}", show(&out));
    assert!(!dir.exists());

    // A reply with the wrong number of vectors is named too.
    server.reset().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "object": "list", "data": [{"id": "bge-m3", "object": "model"}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [0.2]}]
        })))
        .mount(&server)
        .await;
    let cfg = config.clone();
    let out_dir = dir.clone();
    let out = tokio::task::spawn_blocking(move || {
        command(&["run", "-c"])
            .arg(&cfg)
            .arg("--out")
            .arg(&out_dir)
            .args(["--progress-every", "0"])
            .output()
            .expect("tmas runs")
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr
            .contains("did not answer a usable embeddings reply (2 vectors in `data` for 1 inputs"),
        "{}",
        show(&out)
    );
    assert!(!dir.exists());
}
