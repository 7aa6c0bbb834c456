//! The pages of one run and their file names. A run's pages sit side by side in one
//! folder (`/r/NAME/` on the server, the export's folder on disk), so every link between
//! them is a bare file name and works the same served or exported. A problem is named by
//! its ordinal in the dataset, never by its id: an id may hold any text, a number cannot
//! name a file outside the folder.

/// A page of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPage {
    Index,
    Problems,
    Calls,
    Status,
    /// The paper's analyses alone (what the run page's "computing…" polls for).
    Analyses,
    Problem(i64),
    Banks(i64),
    Candidate {
        problem: i64,
        iteration: u32,
        candidate: u32,
    },
}

impl RunPage {
    pub fn file_name(self) -> String {
        match self {
            RunPage::Index => "index.html".into(),
            RunPage::Problems => "problems.html".into(),
            RunPage::Calls => "calls.html".into(),
            RunPage::Status => "status.json".into(),
            RunPage::Analyses => "analyses.html".into(),
            RunPage::Problem(p) => format!("p{p}.html"),
            RunPage::Banks(p) => format!("p{p}-banks.html"),
            RunPage::Candidate {
                problem,
                iteration,
                candidate,
            } => format!("p{problem}-t{iteration}-c{candidate}.html"),
        }
    }

    /// The page a file name names (`None`: no such page).
    pub fn parse(name: &str) -> Option<RunPage> {
        match name {
            "" | "index.html" => return Some(RunPage::Index),
            "problems.html" => return Some(RunPage::Problems),
            "calls.html" => return Some(RunPage::Calls),
            "status.json" => return Some(RunPage::Status),
            "analyses.html" => return Some(RunPage::Analyses),
            _ => {}
        }
        let stem = name.strip_prefix('p')?.strip_suffix(".html")?;
        let mut parts = stem.split('-');
        let problem = number(parts.next()?)?;
        let page = match (parts.next(), parts.next()) {
            (None, _) => RunPage::Problem(problem),
            (Some("banks"), None) => RunPage::Banks(problem),
            (Some(t), Some(c)) => RunPage::Candidate {
                problem,
                iteration: number(t.strip_prefix('t')?)?,
                candidate: number(c.strip_prefix('c')?)?,
            },
            _ => return None,
        };
        parts.next().is_none().then_some(page)
    }
}

/// Plain ASCII digits only (no sign, no `+`, no leading zeros but `0` itself), so one
/// page has one name.
fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if plain { text.parse().ok() } else { None }
}

/// `text` percent-encoded for a query string value (everything but unreserved ASCII).
pub fn encode_query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_reads_back_from_its_file_name() {
        for page in [
            RunPage::Index,
            RunPage::Problems,
            RunPage::Calls,
            RunPage::Status,
            RunPage::Analyses,
            RunPage::Problem(0),
            RunPage::Problem(17),
            RunPage::Banks(3),
            RunPage::Candidate {
                problem: 12,
                iteration: 0,
                candidate: 7,
            },
        ] {
            assert_eq!(RunPage::parse(&page.file_name()), Some(page));
        }
    }

    #[test]
    fn names_that_are_not_pages_are_refused() {
        for name in [
            "../run.sqlite",
            "..%2Frun.sqlite",
            "/etc/passwd",
            "p-1.html",
            "p01.html",
            "p+1.html",
            "p1.html.bak",
            "p1-banks-x.html",
            "p1-t1-c1-x.html",
            "p1-t1.html",
            "run.sqlite",
            "config.toml",
        ] {
            assert_eq!(RunPage::parse(name), None, "{name}");
        }
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode_query("a/b c&d=é"), "a%2Fb%20c%26d%3D%C3%A9");
    }
}
