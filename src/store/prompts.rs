//! Writing and reading prompts in the chunked tables (`prompt_chunks`, `prompts`).
//!
//! The writer stores a prompt as its chunk list plus each chunk it has not stored yet
//! ([`super::chunks`]). [`PromptCache`] keeps it from redoing work: the M verification
//! calls of a candidate share one `Arc<str>` (split and hashed once), and chunk and prompt
//! digests already in the store are not inserted again. The database stays the truth:
//! every insert is `INSERT OR IGNORE`, so an empty cache (a resumed run) is only slower.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::chunks::{self, Digest};

/// What the writer knows is committed (or in the open transaction).
#[derive(Default)]
pub struct PromptCache {
    /// Prompt ids by the address of the shared text, for as long as anyone holds the
    /// text. A fixed number of recent entries was not enough: with long-tailed latencies
    /// the M verifications of one candidate finish seconds apart, thousands of other calls
    /// in between, so their shared prompt was split and hashed again. The entry holds a
    /// `Weak`: it keeps the allocation (so its address cannot be reused by another text
    /// while the entry exists) but never keeps the text alive. A strong reference here
    /// would make liveness depend on every other cache of the same text: the body
    /// encoder's escape cache also keys segments by address, and two caches that each
    /// count the other's reference as a user kept every such text until the run ended.
    live: HashMap<usize, (Weak<str>, String)>,
    /// Entries added since [`Self::sweep`] last ran.
    added_since_sweep: usize,
    prompts: HashSet<Digest>,
    chunks: HashSet<Digest>,
}

impl PromptCache {
    /// Forgets everything: after a failed (rolled back) transaction the cache may name
    /// rows that were never committed.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    fn address(text: &Arc<str>) -> usize {
        Arc::as_ptr(text).cast::<u8>() as usize
    }

    fn recent(&self, text: &Arc<str>) -> Option<String> {
        self.live
            .get(&Self::address(text))
            .filter(|(t, _)| std::ptr::addr_eq(t.as_ptr(), Arc::as_ptr(text)))
            .map(|(_, id)| id.clone())
    }

    fn remember(&mut self, text: &Arc<str>, id: &str) {
        // Sweeping after a quarter more entries keeps the texts held only by this cache
        // to a fraction of the live ones, at a constant cost per entry.
        if self.added_since_sweep >= self.live.len() / 4 + 64 {
            self.sweep();
        }
        self.live
            .insert(Self::address(text), (Arc::downgrade(text), id.to_owned()));
        self.added_since_sweep += 1;
    }

    /// Drops the entries whose text nobody holds any more: no later call can share them
    /// (a copy of the text is a different allocation).
    fn sweep(&mut self) {
        self.live.retain(|_, (text, _)| text.strong_count() > 0);
        self.added_since_sweep = 0;
    }

    #[cfg(test)]
    fn holds(&self, text: &Arc<str>) -> bool {
        self.recent(text).is_some()
    }
}

/// Stores `text` (if new) in the open transaction and returns its prompt id.
pub fn insert(
    tx: &Transaction<'_>,
    text: &Arc<str>,
    cache: &mut PromptCache,
) -> rusqlite::Result<String> {
    if let Some(id) = cache.recent(text) {
        return Ok(id);
    }
    let split = chunks::split(text);
    let id = split.id_hex();
    if !cache.prompts.contains(&split.id) {
        let added = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO prompts (id, bytes, chunks) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![id, text.len() as i64, split.chunk_list_json()])?;
        // A prompt already stored (by an earlier session) has all its chunks.
        if added > 0 {
            let mut stmt = tx.prepare_cached(
                "INSERT OR IGNORE INTO prompt_chunks (hash, text) VALUES (?1, ?2)",
            )?;
            for chunk in &split.chunks {
                if cache.chunks.insert(chunk.digest) {
                    stmt.execute(params![chunk.hash_hex(), chunk.text])?;
                }
            }
        }
        cache.prompts.insert(split.id);
    }
    cache.remember(text, &id);
    Ok(id)
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
        cache.clear();
        insert(&tx, &again, &mut cache).unwrap();
        tx.commit().unwrap();
        assert_eq!(count(&conn), before);
        assert_eq!(
            read(&conn, &chunks::prompt_id(&p)).unwrap().as_deref(),
            Some(&*p)
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
            cache.live.len() < 1_000,
            "dropped one-off prompts are swept: {} entries",
            cache.live.len()
        );
        let last = last_one_off.unwrap();
        drop(shared);
        cache.sweep();
        assert_eq!(cache.live.len(), 1, "only the prompt still held elsewhere");
        assert!(cache.holds(&last));
    }

    /// The body encoder's escape cache keys the same segments by address: if either cache
    /// held a strong reference, each would see the other's as a live user and neither
    /// would ever let go of the text.
    #[test]
    fn the_cache_never_keeps_a_text_alive_even_beside_the_escape_cache() {
        let mut conn = db();
        let mut cache = PromptCache::default();
        let escapes = tmas_actors::client::EscapeCache::new();
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
        cache.sweep();
        assert!(cache.live.is_empty());
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
