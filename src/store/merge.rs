//! The SQL side of `tmas merge`: every row of N shard stores copied into one new store.
//!
//! Each shard is attached read-only (`mode=ro`), so merging never changes a shard. The
//! shards' tables are the same (one schema version, checked by the caller), their
//! problems are disjoint, and prompts and prompt chunks are keyed by content: so every
//! table is copied whole with `INSERT OR IGNORE`, a prompt two shards share is kept once,
//! and a table this build adds is copied without a change here. `meta` is left to the
//! caller, which writes the merged run's own.

use std::path::Path;

use rusqlite::{Connection, params};

use super::StoreError;

/// Copies every table but `meta` of each store in `shards` into the store at `out`, one
/// transaction per shard.
pub fn copy_shards(out: &Path, shards: &[&Path]) -> Result<(), StoreError> {
    let sql = |context: &'static str| move |e| StoreError::sql(out, context, e);
    let mut conn = Connection::open(out).map_err(sql("opening the merged store"))?;
    let tables: Vec<String> = {
        let mut stmt = conn
            // Tables that reference others last (`calls` after `prompts`): a row is
            // inserted after the row it references.
            .prepare(
                "SELECT name FROM sqlite_master AS m WHERE type = 'table' AND name <> 'meta' \
                 ORDER BY (SELECT COUNT(*) FROM pragma_foreign_key_list(m.name)), name",
            )
            .map_err(sql("listing the tables"))?;
        stmt.query_map([], |r| r.get(0))
            .map_err(sql("listing the tables"))?
            .collect::<Result<_, _>>()
            .map_err(sql("listing the tables"))?
    };
    for shard in shards {
        let uri = format!("file:{}?mode=ro", shard.display());
        conn.execute("ATTACH DATABASE ?1 AS shard", params![uri])
            .map_err(|e| StoreError::sql(shard, "attaching a shard read-only", e))?;
        let tx = conn.transaction().map_err(sql("starting the copy"))?;
        for table in &tables {
            // A table this build adds beside the schema version (`super::traces`) may be
            // missing from a shard written before it: nothing of it to copy.
            let in_shard: i64 = tx
                .query_row(
                    "SELECT COUNT(*) FROM shard.sqlite_master WHERE type = 'table' AND name = ?1",
                    [table],
                    |r| r.get(0),
                )
                .map_err(|e| StoreError::sql(shard, "listing a shard's tables", e))?;
            if in_shard == 0 {
                continue;
            }
            tx.execute(
                &format!("INSERT OR IGNORE INTO main.\"{table}\" SELECT * FROM shard.\"{table}\""),
                [],
            )
            .map_err(|e| StoreError::sql(shard, "copying a table of a shard", e))?;
        }
        tx.commit().map_err(sql("committing the copy"))?;
        conn.execute("DETACH DATABASE shard", [])
            .map_err(sql("detaching a shard"))?;
    }
    Ok(())
}
