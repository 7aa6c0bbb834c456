//! The banks reading meaning (`bank_dedup = "embeddings"`): the plan asks for the
//! embeddings before it sends the update, hands the vectors to the merge, embeds each
//! bank text once, and falls back to the lexical rule, without losing the update, when
//! the embeddings call fails.

use std::sync::Arc;

use tmas_actors::strategy::{CallOutcome, CallSpec, Command, EmbeddingSpec, Strategy};
use tmas_client::wire::ChatResponse;

use super::harness::{Driver, Run, fail, ok, params};
use crate::method::banks::similarity::{Match, canonical, cosine};
use crate::method::banks::{DuplicateRule, ItemFeatures, embedding_text};
use crate::method::params::TmasParams;
use crate::method::prompts::PromptSet;
use crate::method::result::ProblemInput;
use crate::method::tmas::TmasStrategy;
use crate::sim::options::STRATEGY_NAMES;
use crate::sim::task::banks::{describe, paraphrase};
use crate::sim::task::embedding::embed;

/// A guideline the bank holds, and the same strategy in other words.
fn pair() -> (String, String) {
    let name = "generating functions";
    (
        format!("Tried {name}: {}", describe(name)),
        format!("Tried {name}: {}", paraphrase(name)),
    )
}

/// The simulator's embeddings model answering `spec`.
fn vectors(spec: &EmbeddingSpec) -> CallOutcome {
    let embeddings: Vec<Vec<f32>> = spec.request.inputs.iter().map(|t| embed(t)).collect();
    let mut r: ChatResponse = ok("").expect("ok");
    r.embeddings = Some(embeddings.into());
    Ok(r)
}

/// One candidate, no verification (so no experience agent), the guideline agent proposing
/// the bank's item and its paraphrase.
fn guideline_only(iterations: u32, embeddings: bool) -> TmasParams {
    let mut p = params(1, 0, iterations, 0.0);
    p.bank_embeddings = embeddings;
    p
}

fn replies(spec: &CallSpec) -> CallOutcome {
    let (a, b) = pair();
    match spec.key.role.as_ref() {
        "solution" => ok("x = 42. \\boxed{42}"),
        "summary" => ok("SUMMARY"),
        "guideline" => ok(serde_json::json!({ "updated_guidelines": [a, b] }).to_string()),
        other => panic!("unexpected role {other}"),
    }
}

fn driver(embed: bool) -> Driver {
    Driver {
        guidelines: vec![pair().0],
        embed: embed.then(|| Box::new(vectors) as super::harness::EmbedReply),
        ..Driver::default()
    }
}

#[test]
fn the_simulators_paraphrases_are_duplicates_by_meaning_only() {
    let rule = DuplicateRule {
        lexical: 0.7,
        cosine: 0.8,
    };
    for name in STRATEGY_NAMES {
        let a = format!("Tried {name}: {}", describe(name));
        let b = format!("Tried {name}: {}", paraphrase(name));
        let (fa, fb) = (ItemFeatures::of(&a), ItemFeatures::of(&b));
        let c = cosine(&embed(&canonical(&a)), &embed(&canonical(&b)));
        assert!(fa.similarity(&fb) < 0.7, "{name}: {}", fa.similarity(&fb));
        assert!(
            matches!(rule.judge(&fa, &fb, Some(c)), Some(Match::Meaning(_))),
            "{name}: cosine {c}"
        );
    }
}

#[test]
fn the_embeddings_call_comes_before_the_merge_and_carries_the_vectors_to_it() {
    let (a, b) = pair();
    let mut s = TmasStrategy::new(
        ProblemInput {
            id: "p1".into(),
            question: "QUESTION".into(),
        },
        Arc::new(guideline_only(1, true)),
        Arc::new(PromptSet::builtin().expect("built-in prompts")),
        Vec::new(),
        vec![a.clone()],
    );
    let mut commands = s.start();
    // Solution, then summary, then the guideline agent: no embeddings call before.
    let guideline = loop {
        let Some(Command::Call(spec)) = commands.pop() else {
            panic!("expected a call, got {commands:?}");
        };
        if spec.key.role.as_ref() == "guideline" {
            break spec;
        }
        let outcome = replies(&spec);
        commands = s.on_call(spec.key, outcome);
    };
    let outcome = replies(&guideline);
    let commands = s.on_call(guideline.key, outcome);
    // The proposal waits for one embeddings call of the canonical spellings of the bank's
    // item and the new one.
    let [Command::Embed(spec)] = &commands[..] else {
        panic!("expected one embeddings call, got {commands:?}");
    };
    assert_eq!(spec.key.to_string(), "p1/it0/embedding/v1/a0");
    let inputs: Vec<&str> = spec.request.inputs.iter().map(|i| &**i).collect();
    assert_eq!(inputs, [embedding_text(&a), embedding_text(&b)]);
    // Its reply releases the update, with a vector for each item.
    let commands = s.on_call(spec.key.clone(), vectors(spec));
    let [
        Command::UpdateBank {
            bank,
            proposed: Some(proposed),
            embeddings: Some(embeddings),
            ..
        },
    ] = &commands[..]
    else {
        panic!("expected the update with embeddings, got {commands:?}");
    };
    assert_eq!(&**bank, "guideline");
    assert_eq!(proposed, &[a.clone(), b.clone()]);
    assert_eq!(embeddings.keys().collect::<Vec<_>>(), [&a, &b]);
}

#[test]
fn a_paraphrase_is_refused_with_embeddings_and_kept_without() {
    let (a, b) = pair();
    let run = driver(true).run(guideline_only(1, true), replies);
    let at = |run: &Run, what: &str| run.log.iter().position(|l| l.starts_with(what));
    let (embed, update) = (at(&run, "embed 1"), at(&run, "update guideline"));
    assert!(embed.is_some() && embed < update, "{:?}", run.log);
    assert_eq!(
        run.log[update.unwrap()],
        "update guideline (with embeddings)"
    );
    assert_eq!(run.outcome.guidelines, std::slice::from_ref(&a));
    let version = run.outcome.iterations[0].bank_updates[0]
        .version
        .clone()
        .expect("applied");
    let [refused] = &version.rejected[..] else {
        panic!("{:?}", version.rejected);
    };
    assert_eq!(refused.item, b);
    assert!(
        refused
            .reason
            .starts_with(&format!("duplicates entry {a:?} (cosine "))
            && refused
                .reason
                .ends_with("≥ 0.80 of the canonical spellings)"),
        "{}",
        refused.reason
    );
    assert_eq!(run.outcome.calls.embedding, 1);

    // Without embeddings: no call, the lexical rule, and the paraphrase piles up.
    let run = driver(false).run(guideline_only(1, false), replies);
    assert!(run.embeds.is_empty());
    assert!(run.log.contains(&"update guideline (lexical)".to_string()));
    assert_eq!(run.outcome.guidelines, [a, b]);
}

#[test]
fn a_bank_text_is_embedded_once_and_a_refused_one_again_when_proposed_again() {
    let (a, b) = pair();
    let run = driver(true).run(guideline_only(3, true), replies);
    let inputs: Vec<Vec<String>> = run
        .embeds
        .iter()
        .map(|e| e.request.inputs.iter().map(|i| i.to_string()).collect())
        .collect();
    assert_eq!(
        inputs,
        [
            vec![embedding_text(&a), embedding_text(&b)],
            vec![embedding_text(&b)],
            vec![embedding_text(&b)],
        ]
    );
    assert_eq!(run.outcome.guidelines, [a]);
}

#[test]
fn a_failed_embeddings_call_merges_lexically_and_is_recorded() {
    let (a, b) = pair();
    let mut d = driver(true);
    d.embed = Some(Box::new(|_: &EmbeddingSpec| fail()));
    let run = d.run(guideline_only(1, true), replies);
    assert!(run.log.contains(&"update guideline (lexical)".to_string()));
    let it = &run.outcome.iterations[0];
    let update = &it.bank_updates[0];
    assert!(update.proposed && update.lexical_fallback);
    assert_eq!(run.outcome.guidelines, [a, b], "the update is not lost");
    assert_eq!(it.calls.failed, 1);
    assert!(
        it.failures
            .iter()
            .any(|f| f.key.role.as_ref() == "embedding"),
        "{:?}",
        it.failures
    );
}

#[test]
fn the_embeddings_asked_for_do_not_depend_on_completion_order() {
    use super::harness::Order;
    use super::replies::good;
    // Both banks update each iteration; the guideline agent also proposes the paraphrase.
    let reply = |spec: &CallSpec| match spec.key.role.as_ref() {
        "guideline" => replies(spec),
        _ => good(spec),
    };
    let mut p = params(3, 2, 3, 0.3);
    p.bank_embeddings = true;
    let run = |order: Order| {
        let mut d = driver(true);
        d.order = order;
        d.run(p.clone(), reply)
    };
    let asked = |run: &Run| -> Vec<(String, Vec<String>)> {
        let mut v: Vec<(String, Vec<String>)> = run
            .embeds
            .iter()
            .map(|e| {
                let inputs = e.request.inputs.iter().map(|i| i.to_string()).collect();
                (e.key.to_string(), inputs)
            })
            .collect();
        v.sort();
        v
    };
    let fifo = run(Order::Fifo);
    assert!(
        fifo.embeds.iter().any(|e| e.key.index == Some(0))
            && fifo.embeds.iter().any(|e| e.key.index == Some(1)),
        "both banks embed: {:?}",
        fifo.log
    );
    for order in [Order::Lifo, Order::Shuffled(3), Order::Shuffled(8)] {
        let other = run(order);
        assert_eq!(asked(&other), asked(&fifo), "{order:?}");
        assert_eq!(other.outcome.guidelines, fifo.outcome.guidelines);
        assert_eq!(other.outcome.experience, fifo.outcome.experience);
    }
}
