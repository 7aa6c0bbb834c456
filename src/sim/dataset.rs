//! Reference answers for the simulator from a JSONL dataset (`problem_id`, `answer`;
//! other fields are ignored, numbers are accepted as text).

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

/// Reads `(problem id, reference answer)` pairs; errors name the file and line.
pub fn load_answers(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read dataset {}", path.display()))?;
    parse_answers(&text).with_context(|| format!("dataset {}", path.display()))
}

/// Parses JSONL text (blank lines are skipped).
pub fn parse_answers(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("line {n}: not a JSON object"))?;
        let field = |name: &str| -> anyhow::Result<String> {
            match v.get(name) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(Value::Number(x)) => Ok(x.to_string()),
                Some(_) => bail!("line {n}: field `{name}` must be a string or a number"),
                None => bail!("line {n}: missing field `{name}`"),
            }
        };
        out.push((field("problem_id")?, field("answer")?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_lines() {
        let ok = parse_answers("{\"problem_id\":\"a\",\"answer\":\"12\",\"question\":\"q\"}\n\n{\"problem_id\":7,\"answer\":3}\n")
            .unwrap();
        assert_eq!(
            ok,
            vec![("a".into(), "12".into()), ("7".into(), "3".into())]
        );
        let e = parse_answers("{\"problem_id\":\"a\",\"answer\":\"1\"}\n{\"problem_id\":\"b\"}\n")
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("line 2: missing field `answer`"),
            "{e:#}"
        );
        let e = parse_answers("not json").unwrap_err();
        assert!(format!("{e:#}").contains("line 1"));
    }
}
