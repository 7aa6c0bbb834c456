//! `tmas view RUN --out DIR`: one run's pages written as a static folder, the same files
//! the server would send (links between them are bare file names), without the forms
//! and the live poll a server answers.

use std::path::Path;

use anyhow::Context;

use super::pages::{self, CallsQuery, Mode, ProblemsQuery};
use super::paths::RunPage;
use super::run::Run;

const STATIC: Mode = Mode {
    static_export: true,
};

/// What was written.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub pages: usize,
}

/// Writes every page of `run` into `out` (created; it must not exist or be empty).
pub fn write_static(run: &Run, out: &Path) -> anyhow::Result<Written> {
    if let Some(why) = crate::engine::run_dir::not_empty(out, "view export") {
        return Err(crate::config::BadInput(why).into());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut written = Written::default();
    let mut put = |page: String, body: String| -> anyhow::Result<()> {
        let path = out.join(&page);
        std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
        written.pages += 1;
        Ok(())
    };
    put(RunPage::Index.file_name(), pages::run_page(run, STATIC)?)?;
    put(
        RunPage::Problems.file_name(),
        pages::problems_page(run, STATIC, &ProblemsQuery::default(), None, &[])?,
    )?;
    // The calls table, page after page: calls.html, calls-2.html, …
    let mut after = 0;
    let mut number = 1;
    loop {
        let name = |n: usize| {
            if n <= 1 {
                "calls.html".to_string()
            } else {
                format!("calls-{n}.html")
            }
        };
        let next_number = number + 1;
        let link = move |a: i64| if a == 0 { name(1) } else { name(next_number) };
        let query = CallsQuery {
            after: Some(after),
            ..CallsQuery::default()
        };
        let (body, next) = pages::calls_page(run, STATIC, &query, &link)?;
        put(name(number), body)?;
        match next {
            Some(a) => {
                after = a;
                number += 1;
            }
            None => break,
        }
    }
    let summary = run.summary()?;
    for p in &summary.problems {
        let ordinal = p.problem.ordinal;
        put(
            RunPage::Problem(ordinal).file_name(),
            pages::problem_page(run, STATIC, ordinal)?,
        )?;
        put(
            RunPage::Banks(ordinal).file_name(),
            pages::banks_page(run, STATIC, ordinal)?,
        )?;
        let candidates =
            run.with_reader(|r| Ok(r.problem_candidates(&p.problem.problem_id, None)?))?;
        for c in candidates {
            let page = RunPage::Candidate {
                problem: ordinal,
                iteration: c.iteration,
                candidate: c.candidate,
            };
            put(
                page.file_name(),
                pages::candidate_page(run, STATIC, ordinal, c.iteration, c.candidate)?,
            )?;
        }
    }
    Ok(written)
}
