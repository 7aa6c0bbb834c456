//! Texts as the pages show them: a reply with the model's `<think>…</think>` block apart
//! (shown collapsed) from the answer, a prompt cut into its Markdown sections (the
//! problem, each quoted attempt, the bank sections) to open one at a time.

/// One section of a prompt: its heading line (none for the text before the first) and
/// its text, heading included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub heading: String,
    pub text: String,
}

/// `prompt` cut before each line that starts a `##` or `###` heading; the sections
/// together are the prompt, byte for byte.
pub fn prompt_sections(prompt: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for line in prompt.split_inclusive('\n') {
        let heading = ["## ", "### "]
            .iter()
            .any(|h| line.starts_with(h))
            .then(|| line.trim().trim_start_matches('#').trim().to_string());
        match (heading, sections.last_mut()) {
            (Some(heading), _) => sections.push(Section {
                heading,
                text: line.to_string(),
            }),
            (None, Some(last)) => last.text.push_str(line),
            (None, None) => sections.push(Section {
                heading: "(start)".into(),
                text: line.to_string(),
            }),
        }
    }
    sections
}

/// (the think block's text, the rest). A reply without a complete `<think>` block is all
/// rest; text before the block stays in the rest.
pub fn split_think(reply: &str) -> (Option<&str>, std::borrow::Cow<'_, str>) {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    let Some(start) = reply.find(OPEN) else {
        return (None, reply.into());
    };
    let inner_start = start + OPEN.len();
    let Some(len) = reply[inner_start..].find(CLOSE) else {
        return (None, reply.into());
    };
    let think = &reply[inner_start..inner_start + len];
    let after = &reply[inner_start + len + CLOSE.len()..];
    let before = &reply[..start];
    let rest = if before.trim().is_empty() {
        after.trim_start().into()
    } else {
        format!("{before}{after}").into()
    };
    (Some(think.trim()), rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_is_cut_at_its_headings_and_nothing_is_lost() {
        let prompt = "Solve it.\n\n## Problem\nx + 1 = 2\n## Earlier attempts\n### Attempt 1\nA\n";
        let sections = prompt_sections(prompt);
        let headings: Vec<&str> = sections.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(
            headings,
            ["(start)", "Problem", "Earlier attempts", "Attempt 1"]
        );
        let joined: String = sections.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(joined, prompt);
    }

    #[test]
    fn the_think_block_is_taken_apart_from_the_answer() {
        let (think, rest) = split_think("<think>\nlet me see\n</think>\n\nThe answer is 4.");
        assert_eq!(think, Some("let me see"));
        assert_eq!(rest, "The answer is 4.");
    }

    #[test]
    fn a_reply_without_a_complete_block_is_all_answer() {
        for reply in ["no thinking", "<think> cut off by max_tokens"] {
            let (think, rest) = split_think(reply);
            assert_eq!(think, None);
            assert_eq!(rest, reply);
        }
    }
}
