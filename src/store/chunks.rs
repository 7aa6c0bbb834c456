//! Prompt text split into content-defined chunks, and the prompt id derived from them.
//!
//! TMAS prompts quote each other: a 40 KB solution appears in its verification prompt,
//! its summary prompt, the next iteration's refine prompts and both bank prompts. Storing
//! every distinct prompt whole made the `prompts` table most of a run store.
//! FastCDC (`fastcdc::v2020`) cuts a text where its content says so, so the same stretch
//! of text is cut the same way wherever it appears and its chunks are stored once.
//!
//! A chunk is keyed by its BLAKE3 digest (first 128 bits, hex). A prompt's id is the
//! BLAKE3 digest of its chunks' digests, so the prompt bytes are hashed once, by chunk,
//! and the id still names the exact text (two texts with the same id have the same chunk
//! list, hence the same bytes). Resume compares the id of the rebuilt prompt with the
//! stored one; the cut points are part of that definition, so the chunk sizes below must
//! not change without a new schema version.

use fastcdc::v2020::FastCDC;

/// Smallest chunk (except a text's last one). The sizes were chosen by measurement
/// (docs/run-store.md, "Prompt chunks"): a quoted text loses about one average chunk at
/// each of its edges, so smaller chunks share more, but each costs a row, a hash in the
/// prompt's chunk list and an insert.
pub const MIN_CHUNK: usize = 1024;
/// Target average chunk size.
pub const AVG_CHUNK: usize = 4 * 1024;
/// Largest chunk (a cut may move up to 3 bytes further to end on a character boundary).
pub const MAX_CHUNK: usize = 16 * 1024;

/// 128 bits of BLAKE3: plenty for content addressing within a run store.
pub type Digest = [u8; 16];

/// Domain prefix of a prompt id, so it can never equal a chunk digest of the same bytes.
const PROMPT_ID_DOMAIN: &[u8] = b"tmas prompt id v2\n";

/// One chunk of a text: a slice that starts and ends on character boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub digest: Digest,
    pub text: &'a str,
}

impl Chunk<'_> {
    /// The key of `prompt_chunks`.
    pub fn hash_hex(&self) -> String {
        hex(&self.digest)
    }
}

/// A text cut into chunks, with its prompt id.
#[derive(Debug, Clone)]
pub struct Chunked<'a> {
    pub id: Digest,
    pub chunks: Vec<Chunk<'a>>,
}

impl Chunked<'_> {
    /// The key of `prompts` and the value of `calls.prompt_id`.
    pub fn id_hex(&self) -> String {
        hex(&self.id)
    }

    /// The chunk list as stored in `prompts.chunks`: a JSON array of chunk hashes, in order.
    pub fn chunk_list_json(&self) -> String {
        let mut out = String::with_capacity(2 + self.chunks.len() * 35);
        out.push('[');
        for (i, c) in self.chunks.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            push_hex(&mut out, &c.digest);
            out.push('"');
        }
        out.push(']');
        out
    }
}

/// Cuts `text` into content-defined chunks and derives its prompt id. The chunks,
/// concatenated in order, are `text`; an empty text has no chunks.
pub fn split(text: &str) -> Chunked<'_> {
    let bytes = text.as_bytes();
    let cdc = FastCDC::new(bytes, MIN_CHUNK, AVG_CHUNK, MAX_CHUNK);
    let mut chunks = Vec::with_capacity(bytes.len() / AVG_CHUNK + 1);
    let mut ids = blake3::Hasher::new();
    ids.update(PROMPT_ID_DOMAIN);
    let mut start = 0;
    while start < bytes.len() {
        let (_, cut) = cdc.cut(start, bytes.len() - start);
        // FastCDC cuts bytes; a chunk is stored as TEXT, so it must hold whole characters.
        let mut end = cut.max(start + 1);
        while end < bytes.len() && !text.is_char_boundary(end) {
            end += 1;
        }
        let piece = &text[start..end];
        let digest = digest(piece.as_bytes());
        ids.update(&digest);
        chunks.push(Chunk {
            digest,
            text: piece,
        });
        start = end;
    }
    Chunked {
        id: truncate(ids.finalize()),
        chunks,
    }
}

/// The prompt id of `text` in hex (what `calls.prompt_id` holds for a call sent with it).
pub fn prompt_id(text: &str) -> String {
    split(text).id_hex()
}

fn digest(bytes: &[u8]) -> Digest {
    truncate(blake3::hash(bytes))
}

fn truncate(hash: blake3::Hash) -> Digest {
    let mut out = [0u8; 16];
    out.copy_from_slice(&hash.as_bytes()[..16]);
    out
}

/// Lower-case hex of a digest (32 characters).
pub fn hex(d: &Digest) -> String {
    let mut out = String::with_capacity(32);
    push_hex(&mut out, d);
    out
}

fn push_hex(out: &mut String, d: &Digest) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in d {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random prose (no external data): words from a small list,
    /// some of them multi-byte, so cut points land inside characters.
    fn prose(seed: u64, bytes: usize) -> String {
        const WORDS: [&str; 12] = [
            "lemma",
            "hence",
            "∑",
            "x²",
            "proof",
            "we",
            "obtain",
            "ε-greedy",
            "bound",
            "é",
            "\\frac{a}{b}",
            "∎\n",
        ];
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut out = String::with_capacity(bytes + 16);
        while out.len() < bytes {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.push_str(WORDS[(state >> 33) as usize % WORDS.len()]);
            out.push(' ');
        }
        out
    }

    #[test]
    fn chunks_concatenate_to_the_text_and_respect_the_sizes() {
        for (seed, len) in [(1, 0), (2, 10), (3, 5_000), (4, 300_000)] {
            let text = prose(seed, len);
            let c = split(&text);
            let joined: String = c.chunks.iter().map(|c| c.text).collect();
            assert_eq!(joined, text);
            for (i, chunk) in c.chunks.iter().enumerate() {
                assert!(chunk.text.len() <= MAX_CHUNK + 3, "{}", chunk.text.len());
                if i + 1 < c.chunks.len() {
                    assert!(chunk.text.len() >= MIN_CHUNK, "{}", chunk.text.len());
                }
            }
            assert_eq!(c.chunks.is_empty(), text.is_empty());
        }
        // Multi-byte text with no ASCII at all still splits on character boundaries.
        let wide = "∑é".repeat(40_000);
        let joined: String = split(&wide).chunks.iter().map(|c| c.text).collect();
        assert_eq!(joined, wide);
    }

    #[test]
    fn a_quoted_text_shares_its_inner_chunks_whatever_surrounds_it() {
        let solution = prose(7, 40_000);
        let verification = format!("Verify this proof.\n{solution}\nScore it.");
        let bank = format!(
            "{}\nRollout 3:\n{solution}\nRollout 4:\n{}",
            prose(8, 120_000),
            prose(9, 90_000)
        );
        let a = split(&verification);
        let b = split(&bank);
        let in_b: std::collections::HashSet<Digest> = b.chunks.iter().map(|c| c.digest).collect();
        let shared: usize = a
            .chunks
            .iter()
            .filter(|c| in_b.contains(&c.digest))
            .map(|c| c.text.len())
            .sum();
        // All but the chunks at the two edges of the quoted solution are shared.
        assert!(
            shared + 2 * MAX_CHUNK >= solution.len() && shared > solution.len() / 2,
            "shared {shared} of {}",
            solution.len()
        );
    }

    #[test]
    fn the_prompt_id_names_the_exact_text() {
        let text = prose(11, 50_000);
        assert_eq!(prompt_id(&text), prompt_id(&text.clone()));
        let mut changed = text.clone();
        changed.push('.');
        assert_ne!(prompt_id(&text), prompt_id(&changed));
        assert_ne!(prompt_id(""), prompt_id(" "));
        let id = prompt_id(&text);
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        // A one-chunk text's id is not its chunk's hash.
        let short = split("short");
        assert_ne!(short.id, short.chunks[0].digest);
        assert_eq!(
            short.chunk_list_json(),
            format!("[\"{}\"]", short.chunks[0].hash_hex())
        );
    }
}
