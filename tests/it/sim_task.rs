//! The synthetic task model over loopback HTTP: facts raise success, exploring prompts
//! pick untried strategies, memory-agent replies are well-formed JSON, and the
//! experience bank makes Pass@1 rise across iterations.

use crate::support::sim::*;
use serde_json::Value;
use tmas::sim::task::Problem;
use tmas::sim::{SimOptions, SimServer, TaskOptions};

fn problem(id: &str) -> Problem {
    Problem::derive(id, None, &TaskOptions::default())
}

async fn success_rate(
    client: &reqwest::Client,
    server: &SimServer,
    id: &str,
    prompt: &str,
    n: usize,
) -> f64 {
    let p = problem(id);
    let mut wins = 0;
    for _ in 0..n {
        let s = ask(client, server, "solution", id, 0, prompt).await;
        if last_boxed(&s) == Some(p.answer.as_str()) {
            wins += 1;
        }
    }
    wins as f64 / n as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_facts_in_the_prompt_raise_success() {
    let server = start(SimOptions {
        seed: 11,
        ..SimOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    let p = problem("facts");
    let none = success_rate(&client, &server, "facts", "Solve the problem.", 300).await;
    let facts: String = p
        .facts
        .iter()
        .map(|f| format!("- Anchor: {}\n", f.statement(true)))
        .collect();
    let with = success_rate(
        &client,
        &server,
        "facts",
        &format!("Solve the problem.\n{facts}"),
        300,
    )
    .await;
    let wrong: String = p
        .facts
        .iter()
        .map(|f| format!("{}\n", f.statement(false)))
        .collect();
    let misled = success_rate(
        &client,
        &server,
        "facts",
        &format!("Solve the problem.\n{wrong}"),
        300,
    )
    .await;
    assert!(
        with > none + 0.25,
        "no facts {none}, all correct facts {with}"
    );
    assert!(misled < none, "no facts {none}, wrong facts {misled}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exploring_prompt_picks_an_untried_strategy() {
    let server = start(SimOptions::default()).await;
    let client = reqwest::Client::new();
    let p = problem("explore");
    let tried: String = p.strategies[1..]
        .iter()
        .map(|s| format!("- Tried {}: done before\n", s.name))
        .collect();
    let prompt = format!(
        "Solve the problem with a strategy not listed below.\nStrategies already tried:\n{tried}"
    );
    for _ in 0..40 {
        let s = ask(&client, &server, "solution", "explore", 2, &prompt).await;
        assert!(
            s.starts_with(&format!("Strategy: {}\n", p.strategies[0].name)),
            "{s}"
        );
    }
    // Without the list the popular strategies dominate.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..60 {
        let s = ask(
            &client,
            &server,
            "solution",
            "explore",
            2,
            "Solve the problem.",
        )
        .await;
        seen.insert(s.lines().next().unwrap().to_owned());
    }
    assert!(seen.len() >= 3, "{seen:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_agent_replies_are_well_formed() {
    let mut opts = SimOptions::default();
    opts.task.verifier_partial_rate = 0.0;
    opts.task.verifier_false_positive_rate = 0.0;
    let dataset = vec![("ds".to_owned(), "\\frac{1}{2}".to_owned())];
    let server = start_with(opts, Some(dataset)).await;
    let client = reqwest::Client::new();
    let p = problem("bank");

    // Verification and summary of a right and a wrong candidate.
    let right = format!(
        "Strategy: {}\n{}\nFinal answer: \\boxed{{{}}}",
        p.strategies[0].name,
        p.facts[0].statement(true),
        p.answer
    );
    let wrong = format!(
        "Strategy: {}\n{}\nFinal answer: \\boxed{{-1}}",
        p.strategies[1].name,
        p.facts[1].statement(false)
    );
    let v_right = ask(&client, &server, "verification", "bank", 0, &right).await;
    let v_wrong = ask(&client, &server, "verification", "bank", 0, &wrong).await;
    assert_eq!(last_boxed(&v_right), Some("1"));
    assert_eq!(last_boxed(&v_wrong), Some("0"));
    let s_right = ask(
        &client,
        &server,
        "summary",
        "bank",
        0,
        &format!("{right}\n{v_right}"),
    )
    .await;
    let s_wrong = ask(
        &client,
        &server,
        "summary",
        "bank",
        0,
        &format!("{wrong}\n{v_wrong}"),
    )
    .await;
    assert!(
        s_right.contains(p.strategies[0].name) && s_right.contains(&p.facts[0].statement(true))
    );
    assert!(s_right.contains("accepted") && s_wrong.contains("rejected"));

    let exp = ask(
        &client,
        &server,
        "experience",
        "bank",
        0,
        &format!("Rollouts:\n{s_right}\n{s_wrong}\nOld bank:\n"),
    )
    .await;
    let v = json_in(&exp);
    let anchors = v["verified_anchors"].as_array().unwrap();
    let heuristics = v["error_avoidance_heuristics"].as_array().unwrap();
    assert_eq!(anchors.len(), 1, "{exp}");
    assert!(
        anchors[0]
            .as_str()
            .unwrap()
            .contains(&p.facts[0].statement(true))
    );
    assert_eq!(heuristics.len(), 1, "{exp}");
    assert!(
        heuristics[0]
            .as_str()
            .unwrap()
            .contains(&p.facts[1].avoid_marker())
    );

    let old = format!("- Tried {}: earlier\n", p.strategies[2].name);
    let g = ask(
        &client,
        &server,
        "guideline",
        "bank",
        0,
        &format!("{old}Rollouts:\n{s_right}\n{s_wrong}"),
    )
    .await;
    let items: Vec<String> = json_in(&g)["updated_guidelines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(items.len(), 3, "{items:?}");

    let judge = |r: &str, c: &str| {
        format!(
            "<reference_answer>{r}</reference_answer>\n<candidate_answer>{c}</candidate_answer>"
        )
    };
    assert_eq!(
        last_boxed(&ask(&client, &server, "judge", "bank", 0, &judge("12", " 12 ")).await),
        Some("yes")
    );
    assert_eq!(
        last_boxed(&ask(&client, &server, "judge", "bank", 0, &judge("12", "13")).await),
        Some("no")
    );

    // The dataset's reference answer is used for its problem.
    let ds = ask(
        &client,
        &server,
        "verification",
        "ds",
        0,
        "Final answer: \\boxed{\\frac{1}{2}}",
    )
    .await;
    assert!(ds.ends_with("\\boxed{1}"), "{ds}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guideline_rewrites_return_a_shorter_list() {
    let mut opts = SimOptions::default();
    opts.task.guideline_rewrite_rate = 1.0;
    let server = start(opts).await;
    let client = reqwest::Client::new();
    let p = problem("gl");
    let prompt: String = p
        .strategies
        .iter()
        .map(|s| format!("- Tried {}\n", s.name))
        .collect();
    let v: Value = json_in(&ask(&client, &server, "guideline", "gl", 0, &prompt).await);
    let items = v["updated_guidelines"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(
        items
            .iter()
            .all(|i| i.as_str().unwrap().contains("reworded"))
    );
    server.shutdown().await;
}

/// One problem's run of a simplified TMAS loop (exploit only, M = 2); returns Pass@1 per
/// iteration.
async fn mini_tmas(
    client: &reqwest::Client,
    server: &SimServer,
    id: &str,
    with_bank: bool,
    iterations: u32,
) -> Vec<f64> {
    let p = problem(id);
    let (n, m) = (8, 2);
    let mut bank: Vec<String> = Vec::new();
    let mut prev: Vec<String> = Vec::new();
    let mut curve = Vec::new();
    for t in 0..iterations {
        let mut prompt = format!("Problem {id}: solve it.\n");
        if with_bank && !bank.is_empty() {
            prompt += "Experience bank:\n";
            for item in &bank {
                prompt += &format!("- {item}\n");
            }
        }
        if !prev.is_empty() {
            prompt += "Previous rollouts:\n";
            prompt += &prev.join("\n");
        }
        let mut summaries = Vec::new();
        let mut right = 0;
        for _ in 0..n {
            let sol = ask(client, server, "solution", id, t, &prompt).await;
            if last_boxed(&sol) == Some(p.answer.as_str()) {
                right += 1;
            }
            let mut verifs = String::new();
            for _ in 0..m {
                verifs += &ask(
                    client,
                    server,
                    "verification",
                    id,
                    t,
                    &format!("Check:\n{sol}"),
                )
                .await;
                verifs.push('\n');
            }
            summaries.push(
                ask(
                    client,
                    server,
                    "summary",
                    id,
                    t,
                    &format!("{sol}\n{verifs}"),
                )
                .await,
            );
        }
        curve.push(f64::from(right) / f64::from(n));
        if with_bank {
            let old: String = bank.iter().map(|b| format!("- {b}\n")).collect();
            let reply = ask(
                client,
                server,
                "experience",
                id,
                t,
                &format!("{}\nOld bank:\n{old}", summaries.join("\n")),
            )
            .await;
            let v = json_in(&reply);
            let mut next = Vec::new();
            for (key, prefix) in [
                ("verified_anchors", "Anchor: "),
                ("error_avoidance_heuristics", "Heuristic: "),
            ] {
                for item in v[key].as_array().unwrap() {
                    next.push(format!("{prefix}{}", item.as_str().unwrap()));
                }
            }
            if !next.is_empty() {
                bank = next;
            }
        }
        prev = summaries;
    }
    curve
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn experience_bank_makes_pass_at_1_rise() {
    let server = start(SimOptions {
        seed: 5,
        ..SimOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    let (problems, iterations) = (24, 6);
    let mut with = vec![0.0; iterations as usize];
    let mut without = vec![0.0; iterations as usize];
    for i in 0..problems {
        let id = format!("mini-{i}");
        for (t, v) in mini_tmas(&client, &server, &id, true, iterations)
            .await
            .into_iter()
            .enumerate()
        {
            with[t] += v / f64::from(problems);
        }
        for (t, v) in mini_tmas(&client, &server, &id, false, iterations)
            .await
            .into_iter()
            .enumerate()
        {
            without[t] += v / f64::from(problems);
        }
    }
    eprintln!("Pass@1 per iteration with the experience bank {with:?}, without {without:?}");
    // Mean of the last three iterations against iteration 0, and with against without.
    let tail = |c: &[f64]| c[c.len() - 3..].iter().sum::<f64>() / 3.0;
    assert!(tail(&with) > with[0] + 0.2, "with bank {with:?}");
    assert!(tail(&without) > without[0], "without bank {without:?}");
    assert!(
        tail(&with) > tail(&without) + 0.1,
        "with bank {with:?}, without {without:?}"
    );
    server.shutdown().await;
}
