//! One problem's candidates, one candidate's calls and verifications, and a problem's banks version by version.

use std::collections::BTreeSet;

use askama::Template;

use super::super::paths::{RunPage, encode_query};
use super::super::reply::{Section, prompt_sections, split_think};
use super::super::run::Run;
use super::{
    Head, MethodShown, Mode, NotFound, TraceView, branch_name, candidate_status_name, head_of,
    lookup_problem, request_method, state_name, trace_view,
};
use crate::role::Role;
use crate::store::browse::CallSummary;

// ------------------------------------------------------------------------- a problem

#[derive(Template)]
#[template(path = "problem.html")]
struct ProblemPage {
    head: Head,
    status: String,
    state: &'static str,
    error: Option<String>,
    question: String,
    reference: String,
    /// The request's method (a server's store only).
    method: Option<MethodShown>,
    banks_href: String,
    calls_href: Option<String>,
    pending_note: String,
    iterations: Vec<IterationView>,
    problem_id: String,
    /// The problem's traces, one per session that worked on it, newest first.
    traces: Vec<SessionTrace>,
}

/// One session's trace of a problem, with when that session first made or replayed one
/// of the problem's calls.
struct SessionTrace {
    trace: TraceView,
    since: String,
}

struct IterationView {
    t: u32,
    headline: String,
    candidates: Vec<CandidateRow>,
}

struct CandidateRow {
    candidate: u32,
    href: String,
    branch: &'static str,
    mode: String,
    status: &'static str,
    scores: String,
    mean: String,
    answer: String,
    judge: String,
    score: String,
    score_class: &'static str,
    summary_head: String,
    summary: String,
}

pub fn problem_page(run: &Run, mode: Mode, ordinal: i64) -> anyhow::Result<String> {
    let s = run.summary()?;
    let p = lookup_problem(&s, ordinal)?;
    let id = p.problem.problem_id.clone();
    let candidates = run.with_reader(|r| Ok(r.problem_candidates(&id, None)?))?;
    // Stored oldest first; the session a reader resumed last comes first.
    let traces = run
        .with_reader(|r| Ok(r.problem_traces(Some(&id))?))?
        .iter()
        .rev()
        .map(|t| SessionTrace {
            trace: trace_view(run, &t.trace_id),
            since: crate::engine::run_dir::utc_time((t.recorded_at_ms.max(0) / 1000) as u64),
        })
        .collect();
    let mut iterations: Vec<IterationView> = Vec::new();
    for c in candidates {
        if iterations.last().is_none_or(|it| it.t != c.iteration) {
            let cell = p.cells.get(c.iteration as usize);
            iterations.push(IterationView {
                t: c.iteration,
                headline: cell.map_or(String::new(), |cell| {
                    format!(
                        "{} of {} judged correct, {} explore",
                        cell.correct, cell.judged, cell.explore
                    )
                }),
                candidates: Vec::new(),
            });
        }
        let verdict = c.verdict.as_ref();
        let summary = c.summary.clone().unwrap_or_default();
        let row = CandidateRow {
            candidate: c.candidate,
            href: RunPage::Candidate {
                problem: ordinal,
                iteration: c.iteration,
                candidate: c.candidate,
            }
            .file_name(),
            branch: branch_name(c.branch),
            mode: c.mode.clone(),
            status: candidate_status_name(c.status),
            scores: c
                .scores
                .iter()
                .map(|s| format!("{s}"))
                .collect::<Vec<_>>()
                .join(" "),
            mean: c.average_score.map_or(String::new(), |m| format!("{m:.2}")),
            answer: verdict
                .and_then(|v| v.answer.clone())
                .unwrap_or_else(|| "(none)".into()),
            judge: verdict.map_or(String::new(), |v| {
                format!("{} {}", v.rule_outcome, v.llm_json)
            }),
            score: verdict.map_or(String::new(), |v| format!("{:.2}", v.score)),
            score_class: match verdict {
                Some(v) if crate::eval::judge::is_correct(v.score) => "ok",
                Some(_) => "bad",
                None => "",
            },
            summary_head: head_of(&summary, 80),
            summary,
        };
        if let Some(it) = iterations.last_mut() {
            it.candidates.push(row);
        }
    }
    let pending_note = if p.problem.status == "done" {
        "No candidates stored.".to_string()
    } else {
        "Candidates appear here once the problem is judged; its calls so far are in the calls table."
            .to_string()
    };
    Ok(ProblemPage {
        head: Head::of_run(
            run,
            mode,
            id.clone(),
            vec![("problems.html".into(), "problems".into())],
        ),
        status: p.problem.status.clone(),
        state: state_name(p.state),
        error: p.problem.error.clone(),
        question: p.problem.question.clone(),
        reference: if p.problem.has_reference() {
            p.problem.reference_answer.clone()
        } else {
            "none (a request recorded by tmas serve: not judged)".into()
        },
        method: request_method(&s, &id),
        banks_href: RunPage::Banks(ordinal).file_name(),
        calls_href: (!mode.static_export)
            .then(|| format!("calls.html?problem={}", encode_query(&id))),
        pending_note,
        iterations,
        problem_id: id,
        traces,
    }
    .render()?)
}

// ------------------------------------------------------------------------ a candidate

#[derive(Template)]
#[template(path = "candidate.html")]
struct CandidatePage {
    head: Head,
    branch: &'static str,
    mode: String,
    status: &'static str,
    mean: String,
    answer: String,
    judge: String,
    calls: Vec<CallView>,
    /// (index, status, score, attempts, text, first line).
    verifications: Vec<(u32, String, String, u32, String, String)>,
}

struct CallView {
    anchor: String,
    role: String,
    key: String,
    meta: String,
    prompt: Option<Vec<Section>>,
    prompt_bytes: usize,
    prompt_note: String,
    think: Option<String>,
    reply: Option<String>,
    error: Option<String>,
}

fn call_meta(c: &CallSummary) -> String {
    let mut parts = vec![if c.ok {
        "answered".to_string()
    } else {
        "failed".to_string()
    }];
    if let Some(e) = &c.endpoint {
        parts.push(format!("endpoint {e}"));
    }
    if let Some(l) = c.latency_ms {
        parts.push(format!("{l} ms"));
    }
    if let (Some(p), Some(q)) = (c.prompt_tokens, c.completion_tokens) {
        parts.push(format!("{p} prompt + {q} completion tokens"));
    }
    if let Some(a) = c.attempts {
        parts.push(format!("{a} HTTP attempt(s)"));
    }
    if let Some(f) = &c.finish_reason {
        parts.push(format!("finish {f}"));
    }
    parts.join(" · ")
}

pub fn candidate_page(
    run: &Run,
    mode: Mode,
    ordinal: i64,
    iteration: u32,
    candidate: u32,
) -> anyhow::Result<String> {
    let s = run.summary()?;
    let p = lookup_problem(&s, ordinal)?;
    let id = p.problem.problem_id.clone();
    let (view, calls, verifications) = run.with_reader(|r| {
        let view = r
            .problem_candidates(&id, Some((iteration, candidate)))?
            .into_iter()
            .next();
        let mut summaries = r.iteration_calls(&id, iteration, Some(candidate))?;
        // In the order the method makes them: solution, verifications, summary, judge.
        summaries.sort_by_key(|c| {
            (
                Role::from_label(&c.role).map_or(usize::MAX, Role::index),
                c.idx,
                c.attempt,
            )
        });
        let mut seen_prompts: BTreeSet<String> = BTreeSet::new();
        let mut calls = Vec::new();
        for c in summaries {
            let Some((c, texts)) = r.call_with_texts(&c.call_key)? else {
                continue;
            };
            // Calls that share a prompt (the M verifications) show it once.
            let (prompt, prompt_note) = if seen_prompts.insert(texts.prompt_id.clone()) {
                (r.prompt_text(&texts.prompt_id)?, String::new())
            } else {
                (None, "same prompt as the call above".to_string())
            };
            let (think, reply) = match texts.content.as_deref() {
                Some(content) => {
                    let (think, rest) = split_think(content);
                    let think = match (think, texts.reasoning.clone()) {
                        (Some(t), _) => Some(t.to_string()),
                        (None, r) => r,
                    };
                    (think, Some(rest.to_string()))
                }
                None => (texts.reasoning.clone(), None),
            };
            calls.push(CallView {
                anchor: encode_query(&c.call_key),
                role: c.role.clone(),
                key: c.call_key.clone(),
                meta: call_meta(&c),
                prompt_bytes: prompt.as_ref().map_or(0, String::len),
                prompt: prompt.as_deref().map(prompt_sections),
                prompt_note,
                think,
                reply,
                error: (!c.ok).then(|| {
                    format!(
                        "{}: {}",
                        c.error_kind.clone().unwrap_or_default(),
                        c.error_message.clone().unwrap_or_default()
                    )
                }),
            });
        }
        let verifications = r.candidate_verifications(&id, iteration, candidate)?;
        Ok((view, calls, verifications))
    })?;
    if view.is_none() && calls.is_empty() {
        return Err(NotFound(format!(
            "problem {id} has no candidate {candidate} at iteration {iteration}"
        ))
        .into());
    }
    let verdict = view.as_ref().and_then(|v| v.verdict.as_ref());
    Ok(CandidatePage {
        head: Head::of_run(
            run,
            mode,
            format!("iteration {iteration}, candidate {candidate}"),
            vec![
                ("problems.html".into(), "problems".into()),
                (RunPage::Problem(ordinal).file_name(), id.clone()),
            ],
        ),
        branch: view.as_ref().map_or("", |v| branch_name(v.branch)),
        mode: view.as_ref().map_or(String::new(), |v| v.mode.clone()),
        status: view
            .as_ref()
            .map_or("not judged yet", |v| candidate_status_name(v.status)),
        mean: view
            .as_ref()
            .and_then(|v| v.average_score)
            .map_or(String::new(), |m| format!("{m:.2}")),
        answer: verdict
            .and_then(|v| v.answer.clone())
            .unwrap_or_else(|| "(none)".into()),
        judge: verdict.map_or(String::new(), |v| {
            format!("{} {} score {:.2}", v.rule_outcome, v.llm_json, v.score)
        }),
        calls,
        verifications: verifications
            .into_iter()
            .map(|v| {
                let text = v.text.unwrap_or_default();
                let first = head_of(&text, 80);
                (
                    v.idx,
                    verification_status_name(v.status).to_string(),
                    v.score.map_or(String::new(), |s| format!("{s}")),
                    v.attempts,
                    text,
                    first,
                )
            })
            .collect(),
    }
    .render()?)
}

// ----------------------------------------------------------------------------- banks

#[derive(Template)]
#[template(path = "banks.html")]
struct BanksPage {
    head: Head,
    banks: Vec<BankView>,
}

struct BankView {
    name: String,
    growth: String,
    versions: Vec<BankVersionView>,
}

struct BankVersionView {
    version: u32,
    iteration: String,
    size: usize,
    added: Vec<String>,
    removed: Vec<String>,
    kept: usize,
    items: Vec<String>,
    rejected: Vec<(String, String)>,
}

pub fn banks_page(run: &Run, mode: Mode, ordinal: i64) -> anyhow::Result<String> {
    let s = run.summary()?;
    let p = lookup_problem(&s, ordinal)?;
    let id = p.problem.problem_id.clone();
    let versions = run.with_reader(|r| Ok(r.bank_versions(&id)?))?;
    let mut banks: Vec<BankView> = Vec::new();
    let mut previous: Vec<String> = Vec::new();
    for (iteration, v) in versions {
        if banks.last().is_none_or(|b| b.name != *v.bank) {
            banks.push(BankView {
                name: v.bank.to_string(),
                growth: String::new(),
                versions: Vec::new(),
            });
            previous.clear();
        }
        let before: BTreeSet<&String> = previous.iter().collect();
        let after: BTreeSet<&String> = v.items.iter().collect();
        let view = BankVersionView {
            version: v.version,
            iteration: iteration.map_or("(initial)".into(), |t| format!("after iteration {t}")),
            size: v.items.len(),
            added: v
                .items
                .iter()
                .filter(|i| !before.contains(i))
                .cloned()
                .collect(),
            removed: previous
                .iter()
                .filter(|i| !after.contains(i))
                .cloned()
                .collect(),
            kept: v.items.iter().filter(|i| before.contains(i)).count(),
            items: v.items.to_vec(),
            rejected: v
                .rejected
                .iter()
                .map(|r| (r.item.clone(), r.reason.clone()))
                .collect(),
        };
        previous = v.items.to_vec();
        if let Some(bank) = banks.last_mut() {
            bank.versions.push(view);
        }
    }
    for bank in &mut banks {
        bank.growth = bank
            .versions
            .iter()
            .map(|v| v.size.to_string())
            .collect::<Vec<_>>()
            .join(" → ");
    }
    Ok(BanksPage {
        head: Head::of_run(
            run,
            mode,
            format!("banks of {id}"),
            vec![
                ("problems.html".into(), "problems".into()),
                (RunPage::Problem(ordinal).file_name(), id.clone()),
            ],
        ),
        banks,
    }
    .render()?)
}

fn verification_status_name(s: crate::method::result::VerificationStatus) -> &'static str {
    use crate::method::result::VerificationStatus as S;
    match s {
        S::Scored => "scored",
        S::Unparseable => "unparseable",
        S::Failed => "failed",
    }
}
