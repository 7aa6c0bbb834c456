//! A reply as the pages show it: the model's `<think>…</think>` block apart (shown
//! collapsed), the rest as the answer.

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
