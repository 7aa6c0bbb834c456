//! TMAS's banks reading meaning (`method.bank_dedup = "embeddings"`) in a run on the
//! simulator, whose guideline agent sometimes describes every strategy in other words:
//! the paraphrase of a guideline the bank holds is refused by the cosine of the canonical
//! spellings' embeddings, the refusal is stored with the bank version (run store and
//! `banks/` files, what `tmas view` shows), and the embeddings calls are made and counted.
//! The same run de-duplicated lexically keeps both wordings. A SIGKILLed run resumes to the
//! same banks, replaying the stored embeddings calls; a run without an embeddings server
//! says at start that its banks are lexical.

use std::collections::BTreeSet;

use crate::support::engine::{Finished, bank_versions, dataset, run_on_sim, sim_options};

const P: usize = 4;

async fn run(dedup: &str) -> Finished {
    let mut opts = sim_options(31);
    opts.task.guideline_paraphrase_rate = 0.5;
    let dedup = format!("method.bank_dedup=\"{dedup}\"");
    let overrides = [
        "method.n=3",
        "method.m=1",
        "method.iterations=4",
        "method.epsilon=0.3",
        "judge.enabled=false",
        dedup.as_str(),
    ];
    run_on_sim(opts, dataset(P), &overrides).await
}

/// The strategy a simulated guideline names (`Tried NAME: …`).
fn strategy_of(item: &str) -> Option<&str> {
    item.strip_prefix("Tried ")?
        .split_once(": ")
        .map(|(name, _)| name)
}

/// Strategies the bank holds in two wordings.
fn twice(bank: &[String]) -> usize {
    let mut seen = BTreeSet::new();
    bank.iter()
        .filter_map(|item| strategy_of(item))
        .filter(|name| !seen.insert(name.to_string()))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paraphrased_guideline_is_refused_by_meaning_and_the_refusal_is_stored() {
    let done = run("embeddings").await;
    let embeddings = done.sim.by_role.get("embedding").copied().unwrap_or(0);
    let counted: u64 = done
        .records
        .iter()
        .map(|r| u64::from(r.outcome.calls.embedding))
        .sum();
    assert!(embeddings > 0, "{:?}", done.sim.by_role);
    assert_eq!(
        counted, embeddings,
        "the records count the embeddings calls"
    );

    let store = tmas::store::StoreReader::open_read_only(&done.dir.path().join("run.sqlite"))
        .expect("the run store opens");
    let mut refused = 0;
    for r in &done.records {
        let stored = store.bank_versions(&r.problem_id).expect("bank versions");
        let versions = bank_versions(done.dir.path(), &r.problem_id, "guideline");
        // Append-only still: a paraphrasing agent's list lacks the old wordings, and
        // they stay where they were.
        for pair in versions.windows(2) {
            assert_eq!(
                &pair[1].items[..pair[0].items.len()],
                &pair[0].items[..],
                "{} guideline v{}",
                r.problem_id,
                pair[1].version
            );
        }
        for v in versions {
            for rej in &v.rejected {
                if !rej.reason.contains("of the canonical spellings") {
                    continue;
                }
                // The other wording of the same strategy stayed in the bank.
                let name = strategy_of(&rej.item).expect("a simulated guideline");
                assert!(
                    v.items
                        .iter()
                        .any(|i| strategy_of(i) == Some(name) && *i != rej.item),
                    "{rej:?} in {:?}",
                    v.items
                );
                // The run store holds the same refusal with that version.
                assert!(
                    stored.iter().any(|(_, s)| {
                        &*s.bank == "guideline"
                            && s.version == v.version
                            && s.rejected
                                .iter()
                                .any(|s| s.item == rej.item && s.reason == rej.reason)
                    }),
                    "{rej:?} not in the store"
                );
                refused += 1;
            }
        }
        assert_eq!(
            twice(&r.outcome.guidelines),
            0,
            "{:?}",
            r.outcome.guidelines
        );
    }
    eprintln!("{embeddings} embeddings calls; {refused} paraphrased guidelines refused");
    assert!(refused > 0, "no paraphrase was refused by meaning");

    // `tmas view` lists them among a bank version's refused items.
    let site = done.dir.path().join("site");
    let out = crate::support::cli::tmas(&[
        "view",
        crate::support::cli::path_arg(done.dir.path()),
        "--out",
        crate::support::cli::path_arg(&site),
    ]);
    assert!(out.status.success(), "{}", crate::support::cli::show(&out));
    let shown = std::fs::read_dir(&site)
        .expect("the site")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with("-banks.html"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter(|html| html.contains("refused:") && html.contains("of the canonical spellings)"))
        .count();
    assert!(shown > 0, "no bank page shows a refusal by meaning");

    // Lexically, the paraphrases pile up and no embeddings call is made.
    let lexical = run("jaccard").await;
    assert_eq!(
        lexical.sim.by_role.get("embedding").copied().unwrap_or(0),
        0
    );
    let piled: usize = lexical
        .records
        .iter()
        .map(|r| twice(&r.outcome.guidelines))
        .sum();
    eprintln!("{piled} strategies held in two wordings by the lexical banks");
    assert!(piled > 0, "the lexical banks keep both wordings");
}

#[test]
fn a_tmas_run_says_at_start_when_its_banks_are_lexical() {
    use crate::support::cli::{path_arg, show, text, tmas, write_config};
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 1, 2);
    let run = |dir: &str, extra: &[&str]| {
        let out_dir = tmp.path().join(dir);
        let mut args = vec![
            "run",
            "-c",
            path_arg(&config),
            "--out",
            path_arg(&out_dir),
            "--progress-every",
            "0",
            "--set",
            "judge.enabled=false",
        ];
        args.extend(extra);
        let out = tmas(&args);
        assert!(out.status.success(), "{}", show(&out));
        text(&out.stderr)
    };
    let warning = "warning: TMAS de-duplicates its banks lexically";
    let stderr = run("lexical", &[]);
    let line = stderr
        .lines()
        .find(|l| l.starts_with(warning))
        .unwrap_or_else(|| panic!("no warning in:\n{stderr}"));
    assert!(
        line.contains("no embeddings server is configured"),
        "{line}"
    );
    // Asked for embeddings (the embedded simulator answers them): no warning.
    let stderr = run("meaning", &["--set", "method.bank_dedup=\"embeddings\""]);
    assert!(!stderr.contains(warning), "{stderr}");
}

#[test]
fn a_sigkilled_run_whose_banks_read_meaning_resumes_to_the_same_banks() {
    use crate::support::cli::*;
    let sim = Sim::start(0, 100);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, 4, 3);
    let text = std::fs::read_to_string(&config).expect("config readable");
    std::fs::write(
        &config,
        text.replace("[method]\n", "[method]\nbank_dedup = \"embeddings\"\n"),
    )
    .expect("config written");
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
    let stored_embeddings = stored_of_role(&dir, "embedding");
    let before_resume = embeddings_at_sim(&sim);
    assert!(stored_calls(&dir) < base.requests, "the kill came too late");

    let out = ok(
        tmas(&["run", "--resume", path_arg(&dir), "--progress-every", "0"]),
        "resume after SIGKILL",
    );
    assert!(out.contains("replayed from the store"), "{out}");
    // The same banks (and refusals), candidates and verdicts as the uninterrupted run.
    assert_eq!(export(&dir), base.export, "resumed results differ");
    assert_eq!(export_csv(&dir), base.csv);
    // The stored embeddings calls were replayed, only the others sent.
    let resent = embeddings_at_sim(&sim) - before_resume;
    assert_eq!(
        resent,
        base_embeddings - stored_embeddings,
        "{stored_embeddings} of {base_embeddings} embeddings calls were stored at the kill"
    );
}
