//! `TmasParams::release_texts`: the strategy lets go of texts no prompt quotes again and
//! names, for each, the call whose reply it is, so the texts read back from those replies
//! give exactly the outcome of a run that kept them.

use tmas_actors::strategy::CallSpec;

use super::harness::{Driver, Run, fail, ok, params};
use super::replies::good;
use crate::method::answer::strip_think;
use crate::method::result::{Field, TmasOutcome};

/// Replies with think blocks, re-asked verifications (one whose re-ask fails, so its text
/// is the first attempt's) and an iteration whose solutions all fail (its predecessor's
/// rollouts stay quoted one iteration longer).
fn reply(spec: &CallSpec) -> tmas_actors::strategy::CallOutcome {
    let k = &spec.key;
    match (k.role.as_ref(), k.index, k.attempt) {
        ("solution", _, _) if k.iteration == 1 => fail(),
        ("verification", Some(0), 0) => ok("<think>hm</think> no score here"),
        ("verification", Some(0), _) => fail(),
        ("verification", Some(1), 0) => ok("still no score"),
        ("verification", Some(1), _) => ok("<think>again</think>Fine. \\boxed{1}"),
        _ => good(spec),
    }
}

fn run(release: bool) -> Run {
    let mut p = params(2, 2, 5, 0.0);
    p.max_verification_attempts = 4;
    p.release_texts = release;
    Driver::default().run(p, reply)
}

/// `outcome` with each released text put back from the reply of the call it names.
fn restored(run: &Run) -> TmasOutcome {
    let mut outcome = run.outcome.clone();
    for r in std::mem::take(&mut outcome.released) {
        let spec = run
            .calls
            .iter()
            .find(|c| c.key.to_string() == r.3)
            .unwrap_or_else(|| panic!("{r:?} names a call the strategy never made"));
        let reply = reply(spec).unwrap_or_else(|e| panic!("{r:?} names a failed call: {e:?}"));
        let slot = outcome.text_mut(&r).expect("the reference names a field");
        assert!(slot.is_none(), "{r:?}: a released text is gone");
        *slot = Some(strip_think(&reply.content).into());
    }
    outcome
}

#[test]
fn released_texts_come_back_from_the_replies_they_name() {
    let kept = run(false);
    let lean = run(true);
    assert!(kept.outcome.released.is_empty());
    // The same calls with the same prompts: releasing changes what is held, not asked.
    let prompts = |r: &Run| {
        r.calls
            .iter()
            .map(|c| (c.key.to_string(), Run::prompt(c)))
            .collect::<Vec<_>>()
    };
    assert_eq!(prompts(&lean), prompts(&kept));
    // Iteration 1 failed, so iteration 2 still refined on iteration 0.
    for s in lean.solutions(2) {
        assert!(Run::prompt(s).contains("SUMMARY-TEXT-c0-it0"));
    }

    // Iterations 0, 2 and 3 were let go of; the last one is held for the judge.
    let released_iterations: std::collections::BTreeSet<usize> =
        lean.outcome.released.iter().map(|r| r.0).collect();
    assert_eq!(released_iterations, [0, 2, 3].into());
    for t in [0, 2, 3] {
        for c in &lean.outcome.iterations[t].candidates {
            assert!(c.solution.is_none() && c.summary.is_none(), "iteration {t}");
            assert!(c.verifications.iter().all(|v| v.text.is_none()));
        }
    }
    assert_eq!(lean.outcome.iterations[4], kept.outcome.iterations[4]);
    // The failed re-ask of slot 0 leaves the first attempt's text, named as such.
    assert!(
        lean.outcome
            .released
            .iter()
            .any(|r| { r.2 == Field::Verification(0) && r.3 == "p1/it0/verification/c0/v0/a0" })
    );
    assert!(
        lean.outcome
            .released
            .iter()
            .any(|r| { r.2 == Field::Verification(1) && r.3 == "p1/it0/verification/c0/v1/a1" })
    );

    assert_eq!(restored(&lean), kept.outcome);
}
