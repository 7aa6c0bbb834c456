//! Two runs side by side: each problem's outcome and share correct per iteration in both.

use std::collections::BTreeSet;

use askama::Template;
use serde::Deserialize;

use super::super::run::{ProblemSummary, Run};
use super::{Head, problem_href};
use crate::engine::accounting::ProblemState;

// --------------------------------------------------------------------------- compare

/// The compare page's query.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CompareQuery {
    #[serde(default)]
    pub a: Option<String>,
    #[serde(default)]
    pub b: Option<String>,
    #[serde(default)]
    pub differ: Option<String>,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    head: Head,
    runs: Vec<(String, String)>,
    a: String,
    b: String,
    a_label: String,
    b_label: String,
    differ: bool,
    shown: String,
    rows: Vec<CompareRow>,
}

struct CompareRow {
    id: String,
    differs: bool,
    a_outcome: String,
    b_outcome: String,
    a_href: Option<String>,
    b_href: Option<String>,
    a_cells: String,
    b_cells: String,
}

fn outcome(p: Option<&ProblemSummary>) -> String {
    match p {
        None => "absent".into(),
        Some(p) => match p.first_solved {
            Some(t) => format!("solved (first at {t})"),
            None if p.state == ProblemState::Unfinished => "unfinished".into(),
            None => "never solved".into(),
        },
    }
}

fn cells_line(p: Option<&ProblemSummary>) -> String {
    p.map_or(String::new(), |p| {
        p.cells
            .iter()
            .map(|c| {
                c.share()
                    .map_or("–".into(), |s| format!("{:.0}", s * 100.0))
            })
            .collect::<Vec<_>>()
            .join(" ")
    })
}

pub fn compare_page(
    a: &Run,
    b: &Run,
    runs: &[(String, String)],
    differ_only: bool,
) -> anyhow::Result<String> {
    let (sa, sb) = (a.summary()?, b.summary()?);
    let mut ids: Vec<&str> = sa
        .problems
        .iter()
        .map(|p| p.problem.problem_id.as_str())
        .collect();
    let in_a: BTreeSet<&str> = ids.iter().copied().collect();
    ids.extend(
        sb.problems
            .iter()
            .map(|p| p.problem.problem_id.as_str())
            .filter(|id| !in_a.contains(id)),
    );
    let mut rows = Vec::new();
    for id in &ids {
        let (pa, pb) = (sa.problem_by_id(id), sb.problem_by_id(id));
        let differs = pa.map(|p| p.first_solved.is_some()) != pb.map(|p| p.first_solved.is_some());
        if differ_only && !differs {
            continue;
        }
        let href = |run: &Run, p: Option<&ProblemSummary>| {
            p.map(|p| format!("r/{}/{}", run.entry.name, problem_href(p)))
        };
        rows.push(CompareRow {
            id: id.to_string(),
            differs,
            a_outcome: outcome(pa),
            b_outcome: outcome(pb),
            a_href: href(a, pa),
            b_href: href(b, pb),
            a_cells: cells_line(pa),
            b_cells: cells_line(pb),
        });
    }
    let differing = ids
        .iter()
        .filter(|id| {
            sa.problem_by_id(id).map(|p| p.first_solved.is_some())
                != sb.problem_by_id(id).map(|p| p.first_solved.is_some())
        })
        .count();
    Ok(ComparePage {
        head: Head {
            title: format!("{} vs {}", a.entry.label, b.entry.label),
            crumbs: vec![("./".into(), "runs".into())],
        },
        runs: runs.to_vec(),
        a: a.entry.name.clone(),
        b: b.entry.name.clone(),
        a_label: a.entry.label.clone(),
        b_label: b.entry.label.clone(),
        differ: differ_only,
        shown: format!(
            "{} problems, {differing} with a different outcome; {} shown",
            ids.len(),
            rows.len()
        ),
        rows,
    }
    .render()?)
}
