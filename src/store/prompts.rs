//! Writing and reading prompts in the chunked tables (`prompt_chunks`, `prompts`).
//!
//! The writer stores a prompt as its chunk list plus each chunk it has not stored yet
//! ([`super::chunks`]). A prompt is a list of shared segments ([`PromptText`]), and it is
//! chunked segment by segment: the ~350 KB of rollouts that the N refine prompts and both
//! bank prompts of an iteration quote are the same `Arc<str>` segments in each of them,
//! so [`PromptCache`] cuts and hashes each segment once and a prompt costs a lookup per
//! segment and a hash of its chunk digests. The database stays the truth: every insert
//! is `INSERT OR IGNORE`, so an empty cache (a resumed run) is only slower.

use std::collections::HashSet;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tmas_client::wire::{ChatMessage, prompt_text};

use super::by_allocation::ByAllocation;
use super::chunks::{self, Digest, PromptIdHasher};

/// A segment's chunks as the writer needs them again for every prompt that quotes it.
struct SegmentChunks {
    digests: Box<[Digest]>,
    /// The chunk hashes as they appear in `prompts.chunks`: `"h1","h2",…`.
    list: String,
}

/// What the writer knows is committed (or in the open transaction).
#[derive(Default)]
pub struct PromptCache {
    /// Each segment's chunks by its allocation, for as long as anyone holds the text. A
    /// fixed number of recent entries was not enough: with long-tailed latencies the M
    /// verifications of one candidate finish seconds apart, thousands of other calls in
    /// between, so their shared prompt was split and hashed again.
    segments: ByAllocation<Arc<SegmentChunks>>,
    prompts: HashSet<Digest>,
    chunks: HashSet<Digest>,
}

impl PromptCache {
    /// The chunks of `segment`: cut, hashed and stored the first time this allocation is
    /// seen, looked up after.
    fn segment(
        &mut self,
        tx: &Transaction<'_>,
        segment: &Arc<str>,
    ) -> rusqlite::Result<Arc<SegmentChunks>> {
        if let Some(known) = self.segments.get(segment) {
            return Ok(known.clone());
        }
        let pieces = chunks::cut(segment);
        let mut list = String::with_capacity(pieces.len() * 35);
        let mut stmt =
            tx.prepare_cached("INSERT OR IGNORE INTO prompt_chunks (hash, text) VALUES (?1, ?2)")?;
        for (i, chunk) in pieces.iter().enumerate() {
            if i > 0 {
                list.push(',');
            }
            list.push('"');
            chunks::push_hex(&mut list, &chunk.digest);
            list.push('"');
            if self.chunks.insert(chunk.digest) {
                stmt.execute(params![chunk.hash_hex(), chunk.text])?;
            }
        }
        let entry = Arc::new(SegmentChunks {
            digests: pieces.iter().map(|c| c.digest).collect(),
            list,
        });
        self.segments.insert(segment, entry.clone());
        Ok(entry)
    }

    #[cfg(test)]
    fn holds(&self, text: &Arc<str>) -> bool {
        self.segments.get(text).is_some()
    }
}

/// Stores the prompt made of `segments` (if new) in the open transaction and returns its
/// prompt id ([`chunks::segmented_id`] of the segments).
pub fn insert_segments(
    tx: &Transaction<'_>,
    segments: &[Arc<str>],
    cache: &mut PromptCache,
) -> rusqlite::Result<String> {
    let mut parts = Vec::with_capacity(segments.len());
    let mut ids = PromptIdHasher::new();
    let mut bytes = 0;
    for segment in segments {
        let part = cache.segment(tx, segment)?;
        ids.add_all(&part.digests);
        bytes += segment.len();
        parts.push(part);
    }
    let id = ids.finish();
    let id_hex = chunks::hex(&id);
    if cache.prompts.insert(id) {
        let mut list =
            String::with_capacity(2 + parts.iter().map(|p| p.list.len() + 1).sum::<usize>());
        list.push('[');
        for part in parts.iter().filter(|p| !p.list.is_empty()) {
            if list.len() > 1 {
                list.push(',');
            }
            list.push_str(&part.list);
        }
        list.push(']');
        tx.prepare_cached("INSERT OR IGNORE INTO prompts (id, bytes, chunks) VALUES (?1, ?2, ?3)")?
            .execute(params![id_hex, bytes as i64, list])?;
    }
    Ok(id_hex)
}

/// Stores `text` as a prompt of one segment (if new) and returns its prompt id
/// ([`chunks::prompt_id`]).
pub fn insert(
    tx: &Transaction<'_>,
    text: &Arc<str>,
    cache: &mut PromptCache,
) -> rusqlite::Result<String> {
    insert_segments(tx, std::slice::from_ref(text), cache)
}

/// Stores the prompt of a request (if new) and returns its id ([`id_of_messages`]).
pub fn insert_messages(
    tx: &Transaction<'_>,
    messages: &[ChatMessage],
    cache: &mut PromptCache,
) -> rusqlite::Result<String> {
    match messages {
        [only] => insert_segments(tx, only.content.segments(), cache),
        many => insert(tx, &prompt_text(many), cache),
    }
}

/// The prompt id the writer gives a request's prompt: one message is chunked by its
/// segments, several as their JSON array (one segment).
pub fn id_of_messages(messages: &[ChatMessage]) -> String {
    match messages {
        [only] => chunks::segmented_id(only.content.segments().iter().map(|s| &**s)),
        many => chunks::prompt_id(&prompt_text(many)),
    }
}

/// Why a stored prompt cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum PromptReadError {
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error("prompt {id}: {reason}")]
    Corrupt { id: String, reason: String },
}

/// The full text of prompt `id` (`None` if there is no such prompt), assembled from its
/// chunks and checked against the stored length.
pub fn read(conn: &Connection, id: &str) -> Result<Option<String>, PromptReadError> {
    let row: Option<(i64, String)> = conn
        .prepare_cached("SELECT bytes, chunks FROM prompts WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((bytes, list)) = row else {
        return Ok(None);
    };
    let corrupt = |reason: String| PromptReadError::Corrupt {
        id: id.to_owned(),
        reason,
    };
    let hashes: Vec<String> = serde_json::from_str(&list)
        .map_err(|e| corrupt(format!("prompts.chunks is not a JSON array of hashes: {e}")))?;
    let mut text = String::with_capacity(usize::try_from(bytes).unwrap_or(0));
    let mut stmt = conn.prepare_cached("SELECT text FROM prompt_chunks WHERE hash = ?1")?;
    for hash in &hashes {
        let part: Option<String> = stmt.query_row([hash], |r| r.get(0)).optional()?;
        let part = part.ok_or_else(|| corrupt(format!("chunk {hash} is missing")))?;
        text.push_str(&part);
    }
    if text.len() as i64 != bytes {
        return Err(corrupt(format!(
            "its chunks hold {} bytes, prompts.bytes says {bytes}",
            text.len()
        )));
    }
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use tmas_client::wire::PromptText;

    use super::*;

    fn db() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::ensure_schema_for_tests(&mut conn);
        conn
    }

    fn text(seed: u32, bytes: usize) -> String {
        // Varied text (every line differs), so chunks are not shared by accident.
        let mut out = String::new();
        let mut i = 0u32;
        while out.len() < bytes {
            out.push_str(&format!(
                "line {seed}.{i}: x{} ∑ y{}\n",
                i * 7919 % 1013,
                i * i
            ));
            i += 1;
        }
        out
    }

    fn via_view(conn: &Connection, id: &str) -> (i64, String) {
        conn.query_row(
            "SELECT bytes, text FROM prompt_texts WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }

    #[test]
    fn every_prompt_reads_back_byte_identical_through_the_view_and_the_reader() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let prompts: Vec<Arc<str>> = vec![
            "".into(),
            "short".into(),
            text(1, 50_000).into(),
            format!("é{}∎", text(2, 120_000)).into(),
        ];
        let tx = conn.transaction().unwrap();
        let ids: Vec<String> = prompts
            .iter()
            .map(|p| insert(&tx, p, &mut cache).unwrap())
            .collect();
        tx.commit().unwrap();
        for (p, id) in prompts.iter().zip(&ids) {
            assert_eq!(*id, chunks::prompt_id(p));
            assert_eq!(read(&conn, id).unwrap().as_deref(), Some(&**p));
            assert_eq!(via_view(&conn, id), (p.len() as i64, p.to_string()));
        }
        assert!(read(&conn, "no-such-id").unwrap().is_none());
    }

    #[test]
    fn a_solution_quoted_by_a_verification_and_a_bank_prompt_is_stored_about_once() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let solution = text(3, 40_000);
        let verification: Arc<str> = format!("Check this proof:\n{solution}\nScore:").into();
        let bank: Arc<str> = format!(
            "Update the experience bank.\n{}\n## Rollout 2\n{solution}\n## Rollout 3\n{}",
            text(4, 60_000),
            text(5, 30_000)
        )
        .into();
        let tx = conn.transaction().unwrap();
        let v = insert(&tx, &verification, &mut cache).unwrap();
        let b = insert(&tx, &bank, &mut cache).unwrap();
        tx.commit().unwrap();
        let stored: i64 = conn
            .query_row(
                "SELECT SUM(length(CAST(text AS BLOB))) FROM prompt_chunks",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let whole = (verification.len() + bank.len()) as i64;
        // Without sharing the chunks would hold both prompts whole; with it, the quoted
        // solution is stored once but for the chunks at its edges.
        assert!(
            stored < whole - solution.len() as i64 + 2 * chunks::MAX_CHUNK as i64,
            "stored {stored} of {whole}"
        );
        let shared: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM json_each((SELECT chunks FROM prompts WHERE id = ?1)) a \
                 WHERE a.value IN (SELECT value FROM json_each( \
                     (SELECT chunks FROM prompts WHERE id = ?2)))",
                [&v, &b],
                |r| r.get(0),
            )
            .unwrap();
        assert!(shared >= 2, "{shared} chunks shared");
        assert_eq!(read(&conn, &v).unwrap().as_deref(), Some(&*verification));
        assert_eq!(read(&conn, &b).unwrap().as_deref(), Some(&*bank));
    }

    #[test]
    fn a_cleared_cache_and_a_second_session_store_nothing_twice() {
        let mut conn = db();
        let p: Arc<str> = text(6, 30_000).into();
        let count = |conn: &Connection| -> (i64, i64) {
            conn.query_row(
                "SELECT (SELECT COUNT(*) FROM prompts), (SELECT COUNT(*) FROM prompt_chunks)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        let mut cache = PromptCache::default();
        let tx = conn.transaction().unwrap();
        insert(&tx, &p, &mut cache).unwrap();
        tx.commit().unwrap();
        let before = count(&conn);
        // The same text in a new Arc, and again with a cache that knows nothing.
        let again: Arc<str> = p.to_string().into();
        let tx = conn.transaction().unwrap();
        insert(&tx, &again, &mut cache).unwrap();
        cache = PromptCache::default();
        insert(&tx, &again, &mut cache).unwrap();
        tx.commit().unwrap();
        assert_eq!(count(&conn), before);
        assert_eq!(
            read(&conn, &chunks::prompt_id(&p)).unwrap().as_deref(),
            Some(&*p)
        );
    }

    fn stored_bytes(conn: &Connection) -> i64 {
        conn.query_row(
            "SELECT COALESCE(SUM(length(CAST(text AS BLOB))), 0) FROM prompt_chunks",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// The rollouts that N refine prompts and both bank prompts quote are the same
    /// segments in each: cut and hashed once, stored once with their edges, and every
    /// prompt reads back as its flat text.
    #[test]
    fn a_segment_quoted_by_several_prompts_is_cut_once_and_stored_once() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let rollout_a: Arc<str> = text(10, 40_000).into();
        let rollout_b: Arc<str> = text(11, 40_000).into();
        let heads: Vec<Arc<str>> = (0..4)
            .map(|i| Arc::from(format!("Refine prompt {i}.\n").repeat(20 + i)))
            .collect();
        let prompts: Vec<PromptText> = heads
            .iter()
            .map(|head| {
                PromptText::from_segments(vec![
                    head.clone(),
                    rollout_a.clone(),
                    "\n## Rollout 2\n".into(),
                    rollout_b.clone(),
                ])
            })
            .collect();
        let tx = conn.transaction().unwrap();
        let ids: Vec<String> = prompts
            .iter()
            .map(|p| insert_messages(&tx, &[ChatMessage::user(p.clone())], &mut cache).unwrap())
            .collect();
        tx.commit().unwrap();
        // 4 heads, 2 rollouts and 4 separators (each a fresh allocation).
        assert_eq!(cache.segments.len(), 4 + 2 + 4);
        let distinct: usize = heads.iter().map(|h| h.len()).sum::<usize>()
            + rollout_a.len()
            + rollout_b.len()
            + "\n## Rollout 2\n".len();
        assert_eq!(
            stored_bytes(&conn),
            distinct as i64,
            "each text stored exactly once"
        );
        for (p, id) in prompts.iter().zip(&ids) {
            assert_eq!(*id, id_of_messages(&[ChatMessage::user(p.clone())]));
            assert_eq!(read(&conn, id).unwrap().as_deref(), Some(&*p.to_string()));
            assert_eq!(via_view(&conn, id), (p.len() as i64, p.to_string()));
        }
        // A prompt of several messages is stored as their JSON array, one segment.
        let many = [
            ChatMessage::system("s"),
            ChatMessage::user(prompts[0].clone()),
        ];
        let tx = conn.transaction().unwrap();
        let id = insert_messages(&tx, &many, &mut cache).unwrap();
        tx.commit().unwrap();
        assert_eq!(id, id_of_messages(&many));
        assert_eq!(
            read(&conn, &id).unwrap().as_deref(),
            Some(&*prompt_text(&many))
        );
    }

    #[test]
    fn a_shared_prompt_stays_cached_while_held_elsewhere_and_is_dropped_after() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let shared: Arc<str> = text(8, 5_000).into();
        let tx = conn.transaction().unwrap();
        insert(&tx, &shared, &mut cache).unwrap();
        // Far more one-off prompts in between than any fixed window would keep.
        let mut last_one_off = None;
        for i in 0..2_000 {
            let one_off: Arc<str> = format!("one-off prompt {i}").into();
            insert(&tx, &one_off, &mut cache).unwrap();
            last_one_off = Some(one_off);
        }
        tx.commit().unwrap();
        assert!(
            cache.holds(&shared),
            "still held by the test, so still cached"
        );
        assert!(
            cache.segments.len() < 1_000,
            "dropped one-off prompts are swept: {} entries",
            cache.segments.len()
        );
        let last = last_one_off.unwrap();
        drop(shared);
        cache.segments.sweep();
        assert_eq!(
            cache.segments.len(),
            1,
            "only the prompt still held elsewhere"
        );
        assert!(cache.holds(&last));
    }

    /// The body encoder's escape cache keys the same segments by address: if either cache
    /// held a strong reference, each would see the other's as a live user and neither
    /// would ever let go of the text.
    #[test]
    fn the_cache_never_keeps_a_text_alive_even_beside_the_escape_cache() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let escapes = tmas_client::EscapeCache::new();
        let shared: Arc<str> = text(9, 5_000).into();
        let watch = Arc::downgrade(&shared);
        let tx = conn.transaction().unwrap();
        insert(&tx, &shared, &mut cache).unwrap();
        escapes.write(&mut Vec::new(), &shared);
        tx.commit().unwrap();
        assert!(cache.holds(&shared));
        drop(shared);
        assert!(
            watch.upgrade().is_none(),
            "the prompt cache and the escape cache together kept a dropped text alive"
        );
        cache.segments.sweep();
        assert!(cache.segments.is_empty());
    }

    #[test]
    fn a_missing_chunk_or_a_wrong_length_is_reported_not_returned() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let p: Arc<str> = text(7, 20_000).into();
        let tx = conn.transaction().unwrap();
        let id = insert(&tx, &p, &mut cache).unwrap();
        tx.commit().unwrap();
        conn.execute("UPDATE prompts SET bytes = bytes + 1 WHERE id = ?1", [&id])
            .unwrap();
        let err = read(&conn, &id).unwrap_err().to_string();
        assert!(err.contains("prompts.bytes says"), "{err}");
        conn.execute("DELETE FROM prompt_chunks WHERE rowid = 1", [])
            .unwrap();
        let err = read(&conn, &id).unwrap_err().to_string();
        assert!(err.contains("is missing"), "{err}");
    }
}
