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
//!
//! Since schema version 4 a prompt is chunked segment by segment ([`segmented_id`]): a
//! prompt is a list of shared text segments (the question, each quoted solution and
//! summary, the template text between them), each segment is cut on its own, and the
//! prompt's chunk list is its segments' lists in order. A segment quoted by many prompts
//! is then cut and hashed once, not once per prompt. A prompt of one segment is cut as
//! the whole text was before, so it keeps its version 2–3 id; a prompt of several gets a
//! different id than its flat text would (its cuts also fall on segment boundaries), and
//! resume compares texts when ids differ (`super::read::StoreReader::prompt_matches`).

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
    let chunks = cut(text);
    let mut ids = PromptIdHasher::new();
    for c in &chunks {
        ids.add(&c.digest);
    }
    Chunked {
        id: ids.finish(),
        chunks,
    }
}

/// The content-defined chunks of `text`, in order, each with its digest.
pub fn cut(text: &str) -> Vec<Chunk<'_>> {
    let bytes = text.as_bytes();
    let cdc = FastCDC::new(bytes, MIN_CHUNK, AVG_CHUNK, MAX_CHUNK);
    let mut chunks = Vec::with_capacity(bytes.len() / AVG_CHUNK + 1);
    let mut start = 0;
    while start < bytes.len() {
        let (_, cut) = cdc.cut(start, bytes.len() - start);
        // FastCDC cuts bytes; a chunk is stored as TEXT, so it must hold whole characters.
        let mut end = cut.max(start + 1);
        while end < bytes.len() && !text.is_char_boundary(end) {
            end += 1;
        }
        let piece = &text[start..end];
        chunks.push(Chunk {
            digest: digest(piece.as_bytes()),
            text: piece,
        });
        start = end;
    }
    chunks
}

/// Folds chunk digests, in order, into a prompt id.
pub struct PromptIdHasher(blake3::Hasher);

impl PromptIdHasher {
    pub fn new() -> Self {
        let mut h = blake3::Hasher::new();
        h.update(PROMPT_ID_DOMAIN);
        Self(h)
    }

    pub fn add(&mut self, chunk: &Digest) {
        self.0.update(chunk);
    }

    /// [`Self::add`] of each digest in turn, in one update.
    pub fn add_all(&mut self, chunks: &[Digest]) {
        self.0.update(chunks.as_flattened());
    }

    pub fn finish(&self) -> Digest {
        truncate(self.0.finalize())
    }
}

impl Default for PromptIdHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// The prompt id of `text` as one segment, in hex (what `calls.prompt_id` holds for a
/// call whose prompt is that single segment, and for every prompt of a version 2–3 store).
pub fn prompt_id(text: &str) -> String {
    split(text).id_hex()
}

/// The prompt id of a prompt made of `segments`, each cut on its own (schema version 4),
/// in hex. For one segment it is [`prompt_id`] of it.
pub fn segmented_id<'a>(segments: impl IntoIterator<Item = &'a str>) -> String {
    let mut ids = PromptIdHasher::new();
    for segment in segments {
        for c in cut(segment) {
            ids.add(&c.digest);
        }
    }
    hex(&ids.finish())
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

/// Appends the lower-case hex of a digest to `out`.
pub fn push_hex(out: &mut String, d: &Digest) {
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

    /// The cut points and digests are part of every stored prompt id, so they may not
    /// drift: this pins them. (When these values were taken, the ids this code gives
    /// single-segment prompts — every judge prompt of a demo run — were checked equal to
    /// the ids a version-3 build had stored for the same texts.)
    #[test]
    fn prompt_ids_stay_those_stored_by_earlier_versions() {
        assert_eq!(
            prompt_id(&prose(41, 60_000)),
            "50a7e13f54e427874c781252d62e9b3f"
        );
        assert_eq!(prompt_id("short"), "8b873fdf6fde042bfa51f2f11200d38d");
    }

    #[test]
    fn a_prompt_of_segments_is_cut_segment_by_segment() {
        let a = prose(21, 30_000);
        let b = prose(22, 20_000);
        // One segment: the whole-text id of versions 2 and 3.
        assert_eq!(segmented_id([a.as_str()]), prompt_id(&a));
        assert_eq!(segmented_id(std::iter::empty()), prompt_id(""));
        // Several: each segment's chunks, in order.
        let mut ids = PromptIdHasher::new();
        for c in cut(&a).iter().chain(cut(&b).iter()) {
            ids.add(&c.digest);
        }
        let two = segmented_id([a.as_str(), b.as_str()]);
        assert_eq!(two, hex(&ids.finish()));
        // The same text as one segment is cut elsewhere around the boundary, so its id
        // differs: resume then compares texts.
        assert_ne!(two, prompt_id(&format!("{a}{b}")));
        assert_ne!(two, segmented_id([b.as_str(), a.as_str()]));
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
