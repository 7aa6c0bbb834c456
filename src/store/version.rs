//! The version check run when a store is opened for writing: creates the schema in a new
//! database, upgrades an older one ([`super::migrate`]) and refuses a newer or unknown one.

use rusqlite::Connection;

use super::schema::{
    CALLS, CANDIDATE_SOLUTIONS_VIEW, CREATE, PAGE_SIZE, PROMPT_TABLES, PROMPT_TEXTS_VIEW,
    SCHEMA_VERSION, SchemaError,
};

/// Creates the schema in a new database or checks the version of an existing one.
pub fn ensure(conn: &mut Connection, path: &str) -> Result<(), SchemaError> {
    let sql = |context: &'static str| {
        move |source| SchemaError::Sql {
            path: path.to_owned(),
            context,
            source,
        }
    };
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql("reading the schema version"))?;
    if found > SCHEMA_VERSION {
        return Err(SchemaError::Newer {
            path: path.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    if found == 0 {
        let tables: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(sql("inspecting the database"))?;
        if tables == 0 {
            conn.pragma_update(None, "page_size", PAGE_SIZE)
                .map_err(sql("setting the page size"))?;
        }
    }
    let tx = conn
        .transaction()
        .map_err(sql("starting the schema transaction"))?;
    match found {
        0 => {
            for part in [
                CREATE,
                PROMPT_TABLES,
                CALLS,
                PROMPT_TEXTS_VIEW,
                CANDIDATE_SOLUTIONS_VIEW,
            ] {
                tx.execute_batch(part).map_err(sql("creating the tables"))?;
            }
        }
        1..=4 => {
            if found == 1 {
                super::migrate::from_v1(&tx).map_err(sql("migrating from schema version 1"))?;
            }
            if found <= 2 {
                super::migrate::from_v2(&tx).map_err(sql("migrating from schema version 2"))?;
            }
            if found <= 3 {
                super::migrate::from_v3(&tx).map_err(sql("migrating from schema version 3"))?;
            }
            super::migrate::from_v4(&tx).map_err(sql("migrating from schema version 4"))?;
        }
        other => {
            return Err(SchemaError::Unknown {
                path: path.to_owned(),
                found: other,
            });
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(sql("setting the schema version"))?;
    tx.commit().map_err(sql("committing the schema"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_database_gets_the_schema_and_a_newer_one_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        ensure(&mut conn, "mem").unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        // Idempotent.
        ensure(&mut conn, "mem").unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = ensure(&mut conn, "mem").unwrap_err();
        assert!(err.to_string().contains("newer tmas"), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("version {}", SCHEMA_VERSION + 1)),
            "{err}"
        );
    }

    #[test]
    fn a_new_database_gets_the_page_size_and_an_unknown_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("db")).unwrap();
        ensure(&mut conn, "db").unwrap();
        let size: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(size, PAGE_SIZE);
        let mut odd = Connection::open_in_memory().unwrap();
        odd.pragma_update(None, "user_version", -3).unwrap();
        let err = ensure(&mut odd, "odd").unwrap_err().to_string();
        assert!(
            err.contains("version -3") && err.contains("not a run store"),
            "{err}"
        );
    }
}
