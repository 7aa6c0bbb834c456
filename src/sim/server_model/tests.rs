use super::*;

/// 4 bytes per token (the simulator's), blocks of 2 tokens = 8 bytes.
fn cache(capacity_tokens: u64) -> PrefixCache {
    PrefixCache::new(capacity_tokens, 2, 4)
}

#[test]
fn shared_prefixes_hit_and_partial_blocks_do_not() {
    let mut c = cache(1_000);
    // 20 bytes = 5 tokens: two full blocks and a partial one.
    let first = c.lookup_and_insert(b"AAAAAAAABBBBBBBBCCCC");
    assert_eq!(
        first,
        PrefixHit {
            cached_tokens: 0,
            computed_tokens: 5
        }
    );
    assert_eq!(c.len(), 2);
    // Same first block, different second: one block (2 tokens) hits.
    let second = c.lookup_and_insert(b"AAAAAAAAXXXXXXXXYYYYYYYY");
    assert_eq!(
        second,
        PrefixHit {
            cached_tokens: 2,
            computed_tokens: 4
        }
    );
    // The whole first prompt again: both full blocks hit, the partial one is computed.
    let third = c.lookup_and_insert(b"AAAAAAAABBBBBBBBCCCC");
    assert_eq!(
        third,
        PrefixHit {
            cached_tokens: 4,
            computed_tokens: 1
        }
    );
    // Equal second block behind a different first block: no hit (hashes are chained).
    let fourth = c.lookup_and_insert(b"ZZZZZZZZBBBBBBBB");
    assert_eq!(fourth.cached_tokens, 0);
}

#[test]
fn lru_evicts_the_least_recently_used_prompt_tail_first() {
    // Room for 3 blocks.
    let mut c = cache(6);
    c.lookup_and_insert(b"AAAAAAAABBBBBBBB"); // blocks A, AB
    c.lookup_and_insert(b"CCCCCCCC"); // block C; cache full
    // Touch A's prompt again: C is now the least recently used.
    assert_eq!(c.lookup_and_insert(b"AAAAAAAABBBBBBBB").cached_tokens, 4);
    c.lookup_and_insert(b"DDDDDDDD"); // evicts C
    assert_eq!(c.evicted_blocks(), 1);
    assert_eq!(c.len(), 3);
    assert_eq!(c.lookup_and_insert(b"AAAAAAAABBBBBBBB").cached_tokens, 4);
    // C comes back as a miss and evicts D; D then misses and evicts the older of A's
    // blocks, which is the tail AB (a prompt's blocks are stamped deepest first), so the
    // head A still hits.
    assert_eq!(c.lookup_and_insert(b"CCCCCCCC").cached_tokens, 0);
    assert_eq!(c.lookup_and_insert(b"DDDDDDDD").cached_tokens, 0);
    assert_eq!(c.lookup_and_insert(b"AAAAAAAAEEEEEEEE").cached_tokens, 2);
}

#[test]
fn a_zero_capacity_cache_never_hits() {
    let mut c = cache(0);
    c.lookup_and_insert(b"AAAAAAAABBBBBBBB");
    assert_eq!(c.lookup_and_insert(b"AAAAAAAABBBBBBBB").cached_tokens, 0);
    assert!(c.is_empty());
}

#[test]
fn service_time_is_prefill_plus_decode_slowed_by_the_batch() {
    let o = ServerModelOptions {
        prefill_tokens_per_s: 1_000.0,
        decode_us_per_token: 10_000.0,
        decode_us_per_running: 100.0,
        ..ServerModelOptions::default()
    };
    // 500 tokens prefill = 0.5 s; 100 tokens × 10 ms = 1 s.
    assert!((o.service_secs(500, 100, 1) - 1.5).abs() < 1e-9);
    // 11 running: 10 ms + 10 × 0.1 ms per token.
    assert!((o.service_secs(0, 100, 11) - 1.1).abs() < 1e-9);
    // A cached prompt costs no prefill.
    assert!(o.service_secs(0, 100, 1) < o.service_secs(500, 100, 1));
    let fast = ServerModelOptions { speedup: 10.0, ..o };
    assert_eq!(fast.wall(1.5), Duration::from_millis(150));
}

#[test]
fn output_length_is_reproducible_and_correlated_within_a_problem() {
    let o = ServerModelOptions {
        difficulty_sigma: 1.0,
        role_sigma: 0.0,
        call_sigma: 0.0,
        ..ServerModelOptions::default()
    };
    let a = o.output_tokens(7, "p1", "solution", 1, 1000);
    assert_eq!(a, o.output_tokens(7, "p1", "solution", 1, 1000));
    // Without role and call spread, every call of a problem has the same length …
    assert_eq!(a, o.output_tokens(7, "p1", "verification", 2, 1000));
    // … and problems differ.
    let lengths: std::collections::BTreeSet<u64> = (0..20)
        .map(|i| o.output_tokens(7, &format!("p{i}"), "solution", 1, 1000))
        .collect();
    assert!(lengths.len() > 10, "{lengths:?}");
    // Another seed draws other difficulties.
    let draw = |seed| -> Vec<u64> {
        (0..20)
            .map(|i| o.output_tokens(seed, &format!("p{i}"), "solution", 1, 1000))
            .collect()
    };
    assert_ne!(draw(7), draw(8));
}

#[test]
fn a_full_queue_rejects_and_counts() {
    let model = Arc::new(ServerModel::new(
        ServerModelOptions {
            max_running: 1,
            queue_capacity: 1,
            ..ServerModelOptions::default()
        },
        4,
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let w = model.enqueue().expect("a free slot");
        let running = model.run(w).await.expect("runs");
        assert_eq!(running.running_at_start, 1);
        let queued = model.enqueue().expect("room in the queue");
        assert!(model.enqueue().is_none(), "queue full");
        let s = model.stats();
        assert_eq!(
            (s.queue_depth, s.peak_queue_depth, s.rejected_queue_full),
            (1, 1, 1)
        );
        drop(running);
        let second = model.run(queued).await.expect("runs after the first");
        assert_eq!(model.stats().queue_depth, 0);
        drop(second);
        model.prefill(
            b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            false,
        );
        model.prefill(
            b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            true,
        );
        let s = model.stats();
        assert_eq!((s.prompt_tokens, s.cached_prompt_tokens), (32, 16));
        assert!((s.prefix_cache_hit_rate - 0.5).abs() < 1e-9);
        // Only the second call quotes a shared context; it was served from the cache.
        assert_eq!(
            (
                s.shared_context_prompt_tokens,
                s.shared_context_cached_tokens
            ),
            (16, 16)
        );
        model.reset();
        assert_eq!(model.stats().cached_blocks, 0);
    });
}

#[test]
fn validation_names_the_field() {
    ServerModelOptions::default()
        .validate()
        .expect("defaults are valid");
    let o = ServerModelOptions {
        prefill_tokens_per_s: 0.0,
        ..ServerModelOptions::default()
    };
    assert_eq!(
        o.validate().unwrap_err().field,
        "server_model.prefill_tokens_per_s"
    );
    let o = ServerModelOptions {
        max_running: 0,
        ..ServerModelOptions::default()
    };
    assert_eq!(o.validate().unwrap_err().field, "server_model.max_running");
}
