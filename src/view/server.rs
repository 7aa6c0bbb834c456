//! The HTTP side: axum routes over the catalog's runs. A run is found by its catalog
//! name and a page by [`RunPage::parse`]; anything else is a 404 saying what was not
//! found. Store reads run on blocking threads.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::pages::{self, CallsQuery, CompareQuery, Mode, NotFound, ProblemsQuery};
use super::paths::{RunPage, encode_query};
use super::run::{NotStarted, Run};

/// The runs being served, by catalog name and in catalog order.
pub struct Catalog {
    pub runs: Vec<Arc<Run>>,
    by_name: HashMap<String, Arc<Run>>,
}

impl Catalog {
    pub fn new(runs: Vec<Run>) -> Self {
        let runs: Vec<Arc<Run>> = runs.into_iter().map(Arc::new).collect();
        let by_name = runs
            .iter()
            .map(|r| (r.entry.name.clone(), r.clone()))
            .collect();
        Self { runs, by_name }
    }

    pub fn get(&self, name: &str) -> Result<Arc<Run>, NotFound> {
        self.by_name.get(name).cloned().ok_or_else(|| {
            NotFound(format!(
                "no run named `{name}` is served here (the runs list names each one)"
            ))
        })
    }

    /// (name, label) of every run.
    fn names(&self) -> Vec<(String, String)> {
        self.runs
            .iter()
            .map(|r| (r.entry.name.clone(), r.entry.label.clone()))
            .collect()
    }
}

const SERVER: Mode = Mode {
    static_export: false,
};

pub fn router(catalog: Arc<Catalog>) -> Router {
    Router::new()
        .route("/", get(runs_list))
        .route("/index.html", get(runs_list))
        .route("/compare.html", get(compare))
        .route("/r/{run}", get(run_root))
        .route("/r/{run}/", get(run_index))
        .route("/r/{run}/{page}", get(run_page))
        .fallback(not_found)
        .with_state(catalog)
}

/// A page's outcome as a response: HTML, a 404 naming what is missing, or a 500 with
/// the error.
fn respond(result: anyhow::Result<String>, content_type: &'static str) -> Response {
    match result {
        Ok(body) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(e) if e.is::<NotFound>() || e.is::<NotStarted>() => html_status(
            StatusCode::NOT_FOUND,
            "not found",
            &tmas_observability::error_text(e.as_ref()),
        ),
        Err(e) => html_status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error",
            &tmas_observability::error_text(e.as_ref()),
        ),
    }
}

fn html_status(status: StatusCode, title: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, HTML)],
        pages::message_page(title, message),
    )
        .into_response()
}

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";

async fn blocking(
    f: impl FnOnce() -> anyhow::Result<String> + Send + 'static,
) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| anyhow::anyhow!("the page's reader stopped: {e}"))?
}

async fn runs_list(State(catalog): State<Arc<Catalog>>) -> Response {
    respond(
        blocking(move || pages::runs_list(&catalog.runs)).await,
        HTML,
    )
}

async fn compare(State(catalog): State<Arc<Catalog>>, Query(q): Query<CompareQuery>) -> Response {
    let result = blocking(move || {
        let a = catalog.get(q.a.as_deref().unwrap_or(""))?;
        let b = catalog.get(q.b.as_deref().unwrap_or(""))?;
        pages::compare_page(&a, &b, &catalog.names(), q.differ.is_some())
    })
    .await;
    respond(result, HTML)
}

async fn run_root(Path(run): Path<String>) -> Response {
    Redirect::permanent(&format!("/r/{}/", encode_query(&run))).into_response()
}

async fn run_index(
    State(catalog): State<Arc<Catalog>>,
    Path(run): Path<String>,
    uri: Uri,
) -> Response {
    serve_page(catalog, run, String::new(), uri).await
}

async fn run_page(
    State(catalog): State<Arc<Catalog>>,
    Path((run, page)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    serve_page(catalog, run, page, uri).await
}

async fn serve_page(catalog: Arc<Catalog>, run: String, page: String, uri: Uri) -> Response {
    let Some(which) = RunPage::parse(&page) else {
        return html_status(
            StatusCode::NOT_FOUND,
            "not found",
            &format!(
                "no page `{page}` in a run (its pages are index.html, problems.html, calls.html, analyses.html and the problem pages they link)"
            ),
        );
    };
    let content_type = if which == RunPage::Status { JSON } else { HTML };
    let result = blocking(move || {
        let r = catalog.get(&run)?;
        match which {
            RunPage::Index => pages::run_page(&r, SERVER),
            RunPage::Status => Ok(serde_json::to_string(&r.live()?)?),
            RunPage::Analyses => pages::analyses_page(&r, SERVER),
            RunPage::Problems => {
                let q: ProblemsQuery = query(&uri)?;
                // Another run is read only for the filter that compares with it.
                let other = match q.other.as_deref().filter(|o| !o.is_empty() && q.compares()) {
                    Some(name) => Some(catalog.get(name)?.summary()?),
                    None => None,
                };
                let others: Vec<(String, String)> = catalog
                    .names()
                    .into_iter()
                    .filter(|(name, _)| *name != r.entry.name)
                    .collect();
                pages::problems_page(&r, SERVER, &q, other.as_deref(), &others)
            }
            RunPage::Calls => {
                let q: CallsQuery = query(&uri)?;
                let pairs = q.filter_pairs();
                let link = move |after: i64| {
                    let mut s = format!("calls.html?after={after}");
                    for (key, value) in &pairs {
                        s.push_str(&format!("&{key}={}", encode_query(value)));
                    }
                    s
                };
                Ok(pages::calls_page(&r, SERVER, &q, &link)?.0)
            }
            RunPage::Problem(p) => pages::problem_page(&r, SERVER, p),
            RunPage::Banks(p) => pages::banks_page(&r, SERVER, p),
            RunPage::Candidate {
                problem,
                iteration,
                candidate,
            } => pages::candidate_page(&r, SERVER, problem, iteration, candidate),
        }
    })
    .await;
    respond(result, content_type)
}

fn query<T: serde::de::DeserializeOwned>(uri: &Uri) -> anyhow::Result<T> {
    Query::<T>::try_from_uri(uri)
        .map(|Query(q)| q)
        .map_err(|e| NotFound(format!("bad query string: {e}")).into())
}

async fn not_found(uri: Uri) -> Response {
    html_status(
        StatusCode::NOT_FOUND,
        "not found",
        &format!("no page at {} (the runs list is at /)", uri.path()),
    )
}
