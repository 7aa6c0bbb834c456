//! `{…}` groups of LaTeX text.

/// Byte index of the `}` closing the `{` at byte index `open`, counting nested groups and
/// skipping escaped characters (`\{`, `\}` are literal braces in LaTeX, not groups).
/// `None` when `open` is not a `{` or the group is never closed.
pub fn matching_brace(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.get(open) != Some(&b'{') {
        return None;
    }
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_brace_handles_escapes_and_bad_input() {
        assert_eq!(matching_brace("{a\\}b}", 0), Some(5));
        assert_eq!(matching_brace("{{}", 0), None);
        assert_eq!(matching_brace("x", 0), None);
        assert_eq!(matching_brace("{\\", 0), None);
        assert_eq!(matching_brace("", 3), None);
    }
}
