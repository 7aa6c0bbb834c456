//! JSON string escaping for request bodies, byte for byte what `serde_json` writes, eight
//! bytes at a time.
//!
//! Encoding request bodies was ~4 % of the orchestrator's CPU in `tmas bench eval`
//! before it (docs/performance-log.md): the prompts are hundreds of KB of plain text and
//! `serde_json` inspects them one byte at a time. Almost no byte of a prompt needs an
//! escape, so this checks a whole 8-byte word with a few integer operations (SWAR) and
//! copies clean runs in one `extend_from_slice`. The tests compare the output with
//! `serde_json` on every byte value and on mixed text.

/// Bytes that `serde_json` escapes: `"` and `\` by a backslash, the named controls
/// (`\b \t \n \f \r`) by their letter, other controls below 0x20 as `\u00XX`. DEL and
/// non-ASCII UTF-8 pass through unchanged.
fn escape_of(byte: u8) -> Option<&'static [u8]> {
    match byte {
        b'"' => Some(b"\\\""),
        b'\\' => Some(b"\\\\"),
        0x08 => Some(b"\\b"),
        b'\t' => Some(b"\\t"),
        b'\n' => Some(b"\\n"),
        0x0c => Some(b"\\f"),
        b'\r' => Some(b"\\r"),
        0x00..=0x1f => Some(UNICODE_ESCAPES[usize::from(byte)]),
        _ => None,
    }
}

/// `\u00XX` for every control byte (only the ones without a letter are used).
const UNICODE_ESCAPES: [&[u8]; 32] = [
    b"\\u0000", b"\\u0001", b"\\u0002", b"\\u0003", b"\\u0004", b"\\u0005", b"\\u0006", b"\\u0007",
    b"\\u0008", b"\\u0009", b"\\u000a", b"\\u000b", b"\\u000c", b"\\u000d", b"\\u000e", b"\\u000f",
    b"\\u0010", b"\\u0011", b"\\u0012", b"\\u0013", b"\\u0014", b"\\u0015", b"\\u0016", b"\\u0017",
    b"\\u0018", b"\\u0019", b"\\u001a", b"\\u001b", b"\\u001c", b"\\u001d", b"\\u001e", b"\\u001f",
];

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Where the first byte of `word` (little-endian) that is below 0x20, `"` or `\` lies,
/// if any. Each test is the classic has-zero / has-less-than bit trick: a borrow can only
/// set false bits *above* a true match, so the lowest set bit is exact; bytes ≥ 0x80
/// never match.
fn first_escape(word: u64) -> Option<usize> {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let is_quote = quote.wrapping_sub(ONES) & !quote;
    let is_backslash = backslash.wrapping_sub(ONES) & !backslash;
    let mask = (below_space | is_quote | is_backslash) & HIGHS;
    (mask != 0).then(|| mask.trailing_zeros() as usize / 8)
}

/// Appends `text` to `out` as a JSON string literal, quotes included.
pub(crate) fn write_escaped(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    write_escaped_inner(out, text);
    out.push(b'"');
}

/// Appends `text` to `out` JSON-escaped, without quotes. Escaping works character by
/// character, so the escapes of two texts, concatenated, are the escape of their
/// concatenation: a prompt's segments can be escaped (and cached) one by one.
pub(crate) fn write_escaped_inner(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len());
    // `clean` is where the run of bytes not yet copied (and needing no escape) starts.
    let (mut clean, mut i) = (0, 0);
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        match first_escape(u64::from_le_bytes(word)) {
            None => i += 8,
            Some(at) => {
                let at = i + at;
                out.extend_from_slice(&bytes[clean..at]);
                out.extend_from_slice(escape_of(bytes[at]).unwrap_or_default());
                (clean, i) = (at + 1, at + 1);
            }
        }
    }
    // The last few bytes, one at a time.
    for at in i..bytes.len() {
        if let Some(escape) = escape_of(bytes[at]) {
            out.extend_from_slice(&bytes[clean..at]);
            out.extend_from_slice(escape);
            clean = at + 1;
        }
    }
    out.extend_from_slice(&bytes[clean..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        write_escaped(&mut out, text);
        out
    }

    fn serde(text: &str) -> Vec<u8> {
        serde_json::to_vec(text).unwrap()
    }

    #[test]
    fn every_ascii_byte_alone_and_inside_words_matches_serde_json() {
        for b in 0u8..=0x7f {
            let c = char::from(b);
            for text in [
                c.to_string(),
                format!("abcdefg{c}"),
                format!("{c}abcdefghijklmno"),
                format!("abc{c}defghijklmnop{c}{c}q"),
            ] {
                assert_eq!(ours(&text), serde(&text), "byte {b:#04x} in {text:?}");
            }
        }
    }

    #[test]
    fn unicode_and_mixed_text_match_serde_json() {
        let samples = [
            "",
            "plain ascii text that is longer than one word",
            "ünïcödé 数学 ∑_{k=1}^n k = n(n+1)/2 — \"quoted\" \\boxed{42}\n",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}",
            "tabs\tand\r\nnewlines\u{0}\u{1f}\u{8}\u{c} at odd offsets",
        ];
        for text in samples {
            assert_eq!(ours(text), serde(text), "{text:?}");
        }
        // Every offset of an escape relative to the 8-byte words.
        let long = "x".repeat(40);
        for at in 0..long.len() {
            for special in ["\"", "\\", "\n", "\u{1}", "é"] {
                let mut text = long.clone();
                text.insert_str(at, special);
                assert_eq!(ours(&text), serde(&text), "{special:?} at {at}");
            }
        }
    }

    #[test]
    fn the_word_test_finds_the_first_escapable_byte() {
        for b in 0u8..=0xff {
            for pos in 0..8 {
                let mut word = [b'a'; 8];
                word[pos] = b;
                let expected = escape_of(b).is_some().then_some(pos);
                assert_eq!(
                    first_escape(u64::from_le_bytes(word)),
                    expected,
                    "byte {b:#04x} at {pos}"
                );
                // A second escapable byte after it does not move the answer.
                if pos < 7 {
                    word[7] = b'"';
                    let expected = Some(if escape_of(b).is_some() { pos } else { 7 });
                    assert_eq!(first_escape(u64::from_le_bytes(word)), expected);
                }
            }
        }
    }
}
