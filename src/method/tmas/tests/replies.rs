//! Canned replies keyed only by the call key (so they do not depend on delivery order).

use tmas_actors::strategy::{CallOutcome, CallSpec};

use super::harness::ok;

/// A well-behaved model: every verification says 1, banks reply with valid JSON.
pub fn good(spec: &CallSpec) -> CallOutcome {
    let k = &spec.key;
    let c = k.candidate.unwrap_or(0);
    let it = k.iteration;
    match k.role.as_ref() {
        "solution" => ok(format!(
            "<think>SECRET-THINKING</think>SOLUTION-TEXT-c{c}-it{it}: so x = 42. \\boxed{{42}}"
        )),
        "verification" => ok("All steps check out. \\boxed{1}"),
        "summary" => ok(format!("SUMMARY-TEXT-c{c}-it{it}: correct approach.")),
        "experience" => ok(format!(
            "Here it is:\n```json\n{{\"verified_anchors\": [\"anchor{it} holds\"], \"error_avoidance_heuristics\": [\"avoid pitfall{it}\"]}}\n```"
        )),
        "guideline" => ok(format!(
            "{{\"updated_guidelines\": [\"strategy{it} approach\"]}}"
        )),
        other => panic!("unexpected role {other}"),
    }
}
