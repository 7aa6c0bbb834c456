//! Store round trips: calls, banks, problems, records; the lock; newer schemas.

use std::sync::Arc;

use tmas_actors::strategy::{BankVersion, CallFailure, CallKey};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{
    CallTags, ChatMessage, ChatRequest, ChatResponse, EmbeddingRequest, ModelRequest, Sampling,
    Usage,
};

use super::*;

pub(crate) fn key(problem: &str, role: &str, c: Option<u32>, v: Option<u32>) -> CallKey {
    CallKey {
        problem: problem.into(),
        iteration: 1,
        role: role.into(),
        candidate: c,
        index: v,
        attempt: 0,
    }
}

pub(crate) fn row(
    key: CallKey,
    prompt: Arc<str>,
    outcome: tmas_actors::strategy::CallOutcome,
) -> CallRow {
    CallRow {
        key_text: key.to_string().into(),
        key,
        group: "default".into(),
        request: ModelRequest::Chat(ChatRequest {
            messages: vec![ChatMessage::user(prompt)],
            sampling: Sampling {
                temperature: 1.0,
                top_p: 0.95,
                max_tokens: 100,
                top_k: None,
            },
            tags: CallTags::default(),
            stream: false,
        }),
        outcome,
        asked_at_ms: 0,
        completed_at_ms: 1,
    }
}

pub(crate) fn response(text: &str) -> ChatResponse {
    ChatResponse {
        content: text.into(),
        reasoning: Some("thinking".into()),
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            estimated: false,
        },
        finish_reason: Some("stop".into()),
        latency_ms: 42,
        endpoint: "sim".into(),
        attempts: 2,
        max_tokens_sent: 100,
        embeddings: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_round_trip_and_a_shared_prompt_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    let prompt: Arc<str> = "x".repeat(10_000).into();
    for v in 0..3 {
        let k = key("p1", "verification", Some(0), Some(v));
        store
            .write(Fact::Call(Box::new(row(
                k,
                prompt.clone(),
                Ok(response(&format!("v{v}"))),
            ))))
            .await
            .unwrap();
    }
    let failed = key("p1", "solution", Some(1), None);
    let failure = CallFailure::new(FailureKind::Timeout, "no answer in 60 s");
    store
        .write(Fact::Call(Box::new(row(
            failed.clone(),
            "other".into(),
            Err(failure.clone()),
        ))))
        .await
        .unwrap();

    let (keys, v1, f, prompts, text) = store
        .read(move |r| {
            let prompts: i64 = r
                .conn_for_tests()
                .query_row("SELECT COUNT(*) FROM prompts", [], |row| row.get(0))
                .unwrap();
            let v1 = r.call("p1/it1/verification/c0/v1/a0")?;
            let text = match &v1 {
                Some(call) => r.prompt_text(&call.prompt_id)?,
                None => None,
            };
            Ok((
                r.call_keys()?,
                v1,
                r.call(&failed.to_string())?,
                prompts,
                text,
            ))
        })
        .await
        .unwrap();
    assert_eq!(text.as_deref(), Some(&*prompt));
    assert_eq!(keys.len(), 4);
    assert_eq!(prompts, 2, "three calls shared one prompt");
    let v1 = v1.unwrap();
    assert_eq!(v1.outcome.unwrap(), response("v1"));
    assert_eq!(v1.prompt_id, chunks::prompt_id(&prompt));
    assert_eq!(f.unwrap().outcome.unwrap_err(), failure);
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embeddings_call_round_trips_with_its_vectors_and_its_inputs_as_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    let k = key("p1", "embedding", None, None);
    let request = EmbeddingRequest {
        inputs: vec!["a1 = 7".into(), "avoid \"x\"".into()],
        tags: CallTags::default(),
    };
    let vectors: Vec<Vec<f32>> = vec![vec![0.1, -0.25, 1e-7], vec![3.5e-3, 0.0, -1.0]];
    let reply = ChatResponse {
        content: "".into(),
        reasoning: None,
        usage: Usage {
            prompt_tokens: 9,
            completion_tokens: 0,
            estimated: false,
        },
        finish_reason: None,
        latency_ms: 3,
        endpoint: "emb".into(),
        attempts: 1,
        max_tokens_sent: 0,
        embeddings: Some(vectors.clone().into()),
    };
    let prompt = request.prompt_text();
    store
        .write(Fact::Call(Box::new(CallRow {
            key_text: k.to_string().into(),
            key: k.clone(),
            group: "embedding".into(),
            request: ModelRequest::Embeddings(request),
            outcome: Ok(reply.clone()),
            asked_at_ms: 0,
            completed_at_ms: 1,
        })))
        .await
        .unwrap();
    let (stored, text, content, kind) = store
        .read(move |r| {
            let stored = r.call(&k.to_string())?.expect("stored");
            let text = r.prompt_text(&stored.prompt_id)?;
            let (content, kind): (String, String) = r
                .conn_for_tests()
                .query_row(
                    "SELECT content, json_extract(request_json, '$.kind') FROM calls",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .unwrap();
            Ok((stored, text, content, kind))
        })
        .await
        .unwrap();
    assert_eq!(
        stored.outcome.unwrap(),
        reply,
        "replayed as it was answered"
    );
    assert_eq!(stored.prompt_id, chunks::prompt_id(&prompt));
    assert_eq!(text.as_deref(), Some(r#"["a1 = 7","avoid \"x\""]"#));
    assert_eq!(kind, schema::EMBEDDINGS_KIND);
    assert_eq!(
        serde_json::from_str::<Vec<Vec<f32>>>(&content).unwrap(),
        vectors
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banks_problems_and_status_are_stored_and_a_second_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    store.send(Fact::Problems(vec![
        ProblemRow {
            problem_id: "b".into(),
            ordinal: 1,
            question: "q2".into(),
            reference_answer: "2".into(),
            reference_solution: None,
            grading_guidelines: None,
        },
        ProblemRow {
            problem_id: "a".into(),
            ordinal: 0,
            question: "q1".into(),
            reference_answer: "1".into(),
            reference_solution: Some("proof of q1".into()),
            grading_guidelines: Some("rubric of q1".into()),
        },
    ]));
    for (version, items) in [(0, vec![]), (1, vec!["g1".to_string()])] {
        store.send(Fact::Bank {
            problem_id: "a".into(),
            iteration: (version > 0).then_some(0),
            version: BankVersion {
                bank: "guideline".into(),
                version,
                items: items.into(),
                rejected: Vec::new(),
            },
        });
    }
    store.send(Fact::Status(StatusRow {
        problem_id: "b".into(),
        status: "failed",
        error: Some("boom".into()),
    }));
    store.flush().await.unwrap();
    let (problems, banks) = store
        .read(|r| Ok((r.problems()?, r.final_banks("a")?)))
        .await
        .unwrap();
    assert_eq!(
        problems
            .iter()
            .map(|p| p.problem_id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(problems[1].status, "failed");
    assert_eq!(problems[1].error.as_deref(), Some("boom"));
    // Proof material survives for resume; a row without it reads as none.
    assert_eq!(
        problems[0].reference_solution.as_deref(),
        Some("proof of q1")
    );
    assert_eq!(
        problems[0].grading_guidelines.as_deref(),
        Some("rubric of q1")
    );
    assert_eq!(problems[1].reference_solution, None);
    assert_eq!(problems[1].grading_guidelines, None);
    assert_eq!(banks["guideline"], vec!["g1".to_string()]);

    // Another opener of the same directory (as a second tmas would be) is refused.
    let err = RunStore::open(dir.path()).err().unwrap();
    assert!(err.to_string().contains("in use by another tmas"), "{err}");
    // Creating a run where one exists is refused once the first is closed.
    store.close().await.unwrap();
    drop(store);
    let err = RunStore::create(dir.path()).err().unwrap();
    assert!(err.to_string().contains("already holds a run"), "{err}");
    RunStore::open(dir.path()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x INTEGER); INSERT INTO future VALUES (7);")
            .unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let err = RunStore::open(dir.path()).err().unwrap();
    let text = err.to_string();
    assert!(text.contains("newer tmas"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    let err = StoreReader::open_read_only(&path).err().unwrap();
    assert!(err.to_string().contains("newer tmas"), "{err}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let x: i64 = conn
        .query_row("SELECT x FROM future", [], |r| r.get(0))
        .unwrap();
    assert_eq!(x, 7);
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'calls'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0, "nothing was created in the newer store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_after_close_fail_instead_of_vanishing() {
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    store.close().await.unwrap();
    let err = store
        .write(Fact::Meta(vec![("k".into(), "v".into())]))
        .await;
    assert!(err.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_store_exports_read_only_as_it_is_and_is_migrated_when_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    let long: String = (0..3000).map(|i| format!("claim {i} holds\n")).collect();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        migrate::tests::v1_store(&conn, &long);
        conn.execute(
            "INSERT INTO problems (problem_id, ordinal, question, reference_answer, \
             updated_at_ms) VALUES ('p', 0, 'q?', '42', 1)",
            [],
        )
        .unwrap();
    }
    // Export opens read-only and does not migrate: the tables it reads are unchanged.
    let reader = StoreReader::open_read_only(&path).unwrap();
    let mut out = Vec::new();
    export::write_jsonl(&reader, &mut out, false).unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["problem_id"], "p");
    assert_eq!(reader.usage_by_role().unwrap()[0].calls, 4);
    let before = reader.problems().unwrap();
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].reference_solution, None, "no proof columns yet");
    drop(reader);
    let version = |path: &std::path::Path| -> i64 {
        rusqlite::Connection::open(path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&path), 1, "export left the store as it was");

    // Resuming migrates; unchanged prompts are still recognised.
    let store = RunStore::open(dir.path()).unwrap();
    let (call, text) = store
        .read(|r| {
            let call = r.call("p/it0/verification/c0/v1/a0")?;
            let text = match &call {
                Some(c) => r.prompt_text(&c.prompt_id)?,
                None => None,
            };
            Ok((call, text))
        })
        .await
        .unwrap();
    let call = call.unwrap();
    assert_eq!(call.prompt_id, chunks::prompt_id(&long));
    assert_eq!(text.as_deref(), Some(long.as_str()));
    // The migrated problem keeps its row and reads without proof material.
    let problems = store.read(|r| r.problems()).await.unwrap();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].reference_answer, "42");
    assert_eq!(problems[0].grading_guidelines, None);
    store.close().await.unwrap();
    drop(store);
    assert_eq!(version(&path), SCHEMA_VERSION);
}

/// A version-2 store (no proof columns) reads read-only as it is, and resuming adds
/// the columns, keeping every problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_store_reads_as_it_is_and_gains_the_proof_columns_when_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        migrate::tests::v1_store(&conn, "a prompt");
        // A version-1 store migrated to exactly version 2, as that tmas left it.
        let tx = conn.transaction().unwrap();
        migrate::from_v1(&tx).unwrap();
        tx.pragma_update(None, "user_version", 2).unwrap();
        tx.commit().unwrap();
        conn.execute(
            "INSERT INTO problems (problem_id, ordinal, question, reference_answer, \
             updated_at_ms) VALUES ('p', 0, 'q?', '42', 1)",
            [],
        )
        .unwrap();
    }
    let reader = StoreReader::open_read_only(&path).unwrap();
    let problems = reader.problems().unwrap();
    assert_eq!(problems[0].question, "q?");
    assert_eq!(problems[0].reference_solution, None);
    drop(reader);
    let store = RunStore::open(dir.path()).unwrap();
    let columns: Vec<String> = store
        .read_now(|r| {
            Ok(r.conn_for_tests()
                .prepare("SELECT name FROM pragma_table_info('problems')")
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap())
        })
        .unwrap();
    assert!(
        columns.contains(&"reference_solution".to_owned())
            && columns.contains(&"grading_guidelines".to_owned()),
        "{columns:?}"
    );
    let problems = store.read(|r| r.problems()).await.unwrap();
    assert_eq!(
        (problems.len(), problems[0].reference_answer.as_str()),
        (1, "42")
    );
    store.close().await.unwrap();
}

/// A judged record is stored without the replies its calls hold: the solution (the same
/// allocation as the stored reply), a verification text (a think-stripped copy), but not
/// a summary that differs from its call's reply; it reads back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_record_is_stored_without_the_replies_its_calls_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    store.send(Fact::Problems(vec![ProblemRow {
        problem_id: "p".into(),
        ordinal: 0,
        question: "q?".into(),
        reference_answer: "42".into(),
        reference_solution: None,
        grading_guidelines: None,
    }]));
    let solution: Arc<str> = "the solution \\boxed{42}".repeat(100).into();
    let reply = |content: Arc<str>| ChatResponse {
        content,
        ..response("")
    };
    let call = |role: &str, v: Option<u32>, content: Arc<str>| {
        let mut k = key("p", role, Some(0), v);
        k.iteration = 0;
        Fact::Call(Box::new(row(k, "prompt".into(), Ok(reply(content)))))
    };
    store.send(call("solution", None, solution.clone()));
    store.send(call(
        "verification",
        Some(0),
        "<think>hmm</think> fine \\boxed{1}".into(),
    ));
    store.send(call("summary", None, "the summary as sent".into()));
    let mut record = record_texts::tests::small_record("p", "", &["fine \\boxed{1}"], "edited");
    record.outcome.iterations[0].candidates[0].solution = Some(solution.clone());
    let json = serde_json::to_string(&record).unwrap();
    store
        .write(Fact::Done {
            record: Arc::new(record.clone()),
            iterations: 1,
        })
        .await
        .unwrap();
    let (lean, texts, whole, back) = store
        .read(|r| {
            let (lean, texts): (String, String) = r
                .conn_for_tests()
                .query_row(
                    "SELECT record_json, record_texts FROM problems WHERE problem_id = 'p'",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .unwrap();
            Ok((lean, texts, r.record_json("p")?, r.done_record("p")?))
        })
        .await
        .unwrap();
    let refs = record_texts::decode(&texts).unwrap();
    assert_eq!(
        refs.iter().map(|r| r.3.as_str()).collect::<Vec<_>>(),
        ["p/it0/solution/c0/a0", "p/it0/verification/c0/v0/a0"]
    );
    assert!(!lean.contains("the solution"), "{lean}");
    assert!(lean.contains("edited"), "{lean}");
    assert_eq!(whole.as_deref(), Some(json.as_str()));
    assert_eq!(back.unwrap().outcome, record.outcome);
    store.close().await.unwrap();
}

/// Fails every call with the kind named by the call's role.
struct FailingAs;

impl tmas_actors::strategy::CallExecutor for FailingAs {
    fn execute(
        &self,
        _group: Arc<str>,
        request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, tmas_actors::strategy::CallOutcome> {
        let kind = FailureKind::from_name(&request.tags.role);
        Box::pin(async move { Err(CallFailure::new(kind, "failed on purpose")) })
    }

    fn execute_embeddings(
        &self,
        _key: &CallKey,
        _group: Arc<str>,
        _request: EmbeddingRequest,
    ) -> futures::future::BoxFuture<'static, tmas_actors::strategy::CallOutcome> {
        Box::pin(async { Err(CallFailure::new(FailureKind::Config, "no embeddings here")) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_not_stored_and_an_unknown_stored_kind_reads_as_unknown() {
    use tmas_actors::strategy::CallExecutor;
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::create(dir.path()).unwrap();
    let executor =
        executor::StoreExecutor::new(Arc::new(FailingAs), store.clone(), Default::default());
    for kind in FailureKind::ALL {
        let problem = format!("p-{kind}");
        let k = key(&problem, kind.as_str(), None, None);
        let request = ChatRequest {
            messages: vec![ChatMessage::user("q")],
            sampling: Sampling {
                temperature: 1.0,
                top_p: 0.95,
                max_tokens: 100,
                top_k: None,
            },
            tags: CallTags {
                role: kind.as_str().into(),
                ..CallTags::default()
            },
            stream: false,
        };
        let outcome = executor.execute_call(&k, "default".into(), request).await;
        assert_eq!(outcome.unwrap_err().kind, kind);
        let stored = store.read(move |r| r.call(&k.to_string())).await.unwrap();
        assert_eq!(stored.is_none(), kind.is_transient(), "{kind}");
        assert_eq!(executor.is_tainted(&problem), kind.is_transient(), "{kind}");
    }
    // A kind this build does not know (a newer build wrote it) reads as `unknown`.
    let k = key("p-newer", "solution", None, None);
    store
        .write(Fact::Call(Box::new(row(
            k.clone(),
            "q".into(),
            Err(CallFailure::new(FailureKind::Timeout, "no answer")),
        ))))
        .await
        .unwrap();
    let text = k.to_string();
    rusqlite::Connection::open(dir.path().join(DB_FILE))
        .unwrap()
        .execute(
            "UPDATE calls SET error_kind = 'overheated' WHERE call_key = ?1",
            [&text],
        )
        .unwrap();
    let (call, lost) = store
        .read(move |r| Ok((r.call(&text)?, r.lost_calls()?)))
        .await
        .unwrap();
    let failure = call.unwrap().outcome.unwrap_err();
    assert_eq!(
        (failure.kind, failure.message.as_str()),
        (FailureKind::Unknown, "no answer")
    );
    let newer: Vec<_> = lost.iter().filter(|l| l.problem_id == "p-newer").collect();
    assert_eq!(newer.len(), 1);
    assert_eq!(newer[0].kind, FailureKind::Unknown);
    store.close().await.unwrap();
}
