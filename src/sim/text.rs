//! Filler text to bring replies to a configured size cheaply: slices of one static block,
//! built once. The filler never contains anything the task model looks for (fact markers,
//! strategy names, `\boxed`, bank-item lines).

use std::borrow::Cow;
use std::sync::OnceLock;

const LOREM: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor \
in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur \
sint occaecat cupidatat non proident, sunt in culpa qui officia deserunt mollit anim id est \
laborum.\n";

const BLOCK_BYTES: usize = 1 << 20;

fn block() -> &'static str {
    static BLOCK: OnceLock<String> = OnceLock::new();
    BLOCK.get_or_init(|| LOREM.repeat(BLOCK_BYTES / LOREM.len() + 1))
}

/// `n` bytes of filler (ASCII, so any cut is a char boundary).
pub fn filler(n: usize) -> Cow<'static, str> {
    let b = block();
    if n <= b.len() {
        Cow::Borrowed(&b[..n])
    } else {
        let mut s = String::with_capacity(n);
        while s.len() + b.len() <= n {
            s.push_str(b);
        }
        let rest = n - s.len();
        s.push_str(&b[..rest]);
        Cow::Owned(s)
    }
}

/// Inserts filler at byte `at` of `text` so the result is about `target` bytes long
/// (unchanged when it is already that long).
pub fn pad_at(text: &mut String, at: usize, target: usize) {
    if target <= text.len() {
        return;
    }
    let fill = filler(target - text.len());
    text.insert_str(at.min(text.len()), &fill);
}

/// Cuts `s` to at most `max` bytes at a char boundary.
pub fn truncate_at_char(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_sizes() {
        assert_eq!(filler(0).len(), 0);
        assert_eq!(filler(10_000).len(), 10_000);
        assert_eq!(filler(BLOCK_BYTES * 2 + 7).len(), BLOCK_BYTES * 2 + 7);
        assert!(!filler(5000).contains("\\boxed"));
    }

    #[test]
    fn pad_and_truncate() {
        let mut s = String::from("headtail");
        pad_at(&mut s, 4, 100);
        assert_eq!(s.len(), 100);
        assert!(s.starts_with("headLorem") && s.ends_with("tail"));
        let mut u = String::from("aé");
        truncate_at_char(&mut u, 2);
        assert_eq!(u, "a");
    }
}
