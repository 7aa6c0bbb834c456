//! Circuit breaking and outages: a killed endpoint's calls move to its sibling; a
//! single endpoint killed and restarted on the same port loses no call.

use std::time::Duration;

use crate::support::mock_server::{MockServer, Reply, config, endpoint, fast_policy, request};
use crate::support::wait_until;
use tmas_client::wire::ChatResponse;
use tmas_client::{ClientError, ModelClient};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_endpoint_is_marked_down_and_its_calls_finish_on_the_other() {
    let mut a = MockServer::start(Reply::delayed("from a", Duration::from_millis(50)));
    let b = MockServer::start(Reply::delayed("from b", Duration::from_millis(50)));
    let client = ModelClient::start(config(
        vec![
            endpoint("a", &a.base_url(), 8),
            endpoint("b", &b.base_url(), 8),
        ],
        16,
    ))
    .await
    .unwrap();

    // Warm up: both endpoints serve.
    let warm: Vec<_> = (0..16)
        .map(|i| client.chat("g", request(&format!("warm {i}"), false)))
        .collect();
    for r in futures::future::join_all(warm).await {
        r.expect("warm-up call");
    }
    assert!(
        a.chat_count() > 0 && b.chat_count() > 0,
        "routing should use both endpoints"
    );

    // Kill `a` with calls in flight and more queued behind them.
    let calls: Vec<_> = (0..60)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move { c.chat("g", request(&format!("call {i}"), false)).await })
        })
        .collect();
    wait_until("calls in flight at the first server", || {
        a.state
            .in_flight
            .now
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
    })
    .await;
    a.kill();

    let mut served_by_b = 0;
    for call in calls {
        let resp = call
            .await
            .expect("task")
            .expect("every call completes despite the kill");
        if &*resp.endpoint == "b" {
            served_by_b += 1;
        }
    }
    assert!(served_by_b > 0);
    let snap = client.snapshot();
    let a_snap = snap.endpoints.iter().find(|e| &*e.name == "a").unwrap();
    assert!(!a_snap.healthy, "a must be marked down: {a_snap:?}");
    assert_eq!(a_snap.breaker_trips, 1);

    // New calls go to b only.
    let before = b.chat_count();
    for i in 0..5 {
        let resp = client
            .chat("g", request(&format!("after {i}"), false))
            .await
            .unwrap();
        assert_eq!(&*resp.endpoint, "b");
    }
    assert_eq!(b.chat_count(), before + 5);
    let status = client.actor_status().await.unwrap();
    assert_eq!(status.live_endpoint_actors, 2);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_killed_and_restarted_is_readmitted_and_no_call_is_lost() {
    let mut server = MockServer::start(Reply::delayed("ok", Duration::from_millis(100)));
    let client = ModelClient::start(config(vec![endpoint("solo", &server.base_url(), 16)], 16))
        .await
        .unwrap();

    let calls: Vec<_> = (0..40)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move { c.chat("g", request(&format!("call {i}"), true)).await })
        })
        .collect();
    wait_until("calls reach the server", || server.chat_count() >= 8).await;
    server.kill();
    wait_until("the breaker opens after the kill", || {
        !client.snapshot().endpoints[0].healthy
    })
    .await;
    // Calls now wait (the outage budget is 60 s in the test policy); let their backoffs
    // grow for a while, then bring it back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    let back = std::time::Instant::now();
    wait_until("re-admitted", || client.snapshot().endpoints[0].healthy).await;

    for call in calls {
        let resp = call
            .await
            .expect("task")
            .expect("no call is lost across the restart");
        assert_eq!(&*resp.content, "ok");
    }
    // Waiting calls go as soon as the endpoint is re-admitted (probe_interval 50 ms ×
    // probe_successes 2), not after their backoff: 40 calls of 100 ms at 16 in flight
    // take ~300 ms once it is back. The bound is loose for a loaded CI machine.
    let resumed = back.elapsed();
    assert!(
        resumed < Duration::from_secs(3),
        "calls finished {resumed:?} after the restart"
    );
    let snap = client.snapshot();
    assert!(snap.endpoints[0].breaker_trips >= 1);
    assert_eq!(snap.global_in_flight, 0);
    client.shutdown().await;
}

#[tokio::test]
async fn when_the_outage_outlasts_the_budget_calls_fail_with_outage() {
    let mut server = MockServer::start(Reply::ok("ok"));
    let mut cfg = config(vec![endpoint("solo", &server.base_url(), 4)], 4);
    cfg.policy.outage_budget = Duration::from_millis(300);
    let client = ModelClient::start(cfg).await.unwrap();
    client.chat("g", request("first", false)).await.unwrap();
    server.kill();

    let err = client
        .chat("g", request("second", false))
        .await
        .unwrap_err();
    let ClientError::Outage { group, waited } = &err else {
        panic!("expected Outage, got {err:?}")
    };
    assert_eq!(&**group, "g");
    assert!(*waited >= Duration::from_millis(300));
    assert!(!client.snapshot().endpoints[0].healthy);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_queued_on_a_sibling_move_to_an_endpoint_that_comes_back() {
    use std::sync::atomic::Ordering::SeqCst;
    let broken = Reply::Status {
        code: 500,
        retry_after: None,
        body: "crashed".into(),
    };
    let a = MockServer::start(broken);
    a.state.health_mode.store(1, SeqCst); // not ready: stays down once marked down
    let b = MockServer::start(Reply::ok("from b"));
    let client = ModelClient::start(config(
        vec![
            endpoint("a", &a.base_url(), 2),
            endpoint("b", &b.base_url(), 2),
        ],
        8,
    ))
    .await
    .unwrap();
    // `a` fails the calls routed to it until it is marked down (they finish on `b`).
    for i in 0..20 {
        if !client.snapshot().endpoints[0].healthy {
            break;
        }
        client
            .chat("g", request(&format!("warm {i}"), false))
            .await
            .expect("answered by b");
    }
    assert!(!client.snapshot().endpoints[0].healthy, "a marked down");
    // Six calls go to `b`, whose two slots are taken by 3 s generations: four queue.
    b.set_default(Reply::delayed("from b", Duration::from_secs(3)));
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move { c.chat("g", request(&format!("call {i}"), false)).await })
        })
        .collect();
    wait_until("two calls running on b and four queued there", || {
        let snap = client.snapshot();
        let (ea, eb) = (&snap.endpoints[0], &snap.endpoints[1]);
        !ea.healthy && eb.in_flight == 2 && eb.queued == 4
    })
    .await;
    // `a` comes back: calls queued on `b` take its free slots (two, its limit) instead of
    // waiting 3 s for `b`'s.
    a.set_default(Reply::ok("from a"));
    a.state.health_mode.store(0, SeqCst);
    let mut by_a = 0;
    for call in calls {
        let resp = call.await.expect("task").expect("every call answered");
        if &*resp.endpoint == "a" {
            by_a += 1;
        }
    }
    assert!(by_a >= 2, "{by_a} of the four queued on b moved to a");
    client.shutdown().await;
}

#[tokio::test]
async fn a_down_endpoint_is_probed_via_health_then_models_and_readmitted() {
    use std::sync::atomic::Ordering::SeqCst;
    let server = MockServer::start(Reply::Status {
        code: 500,
        retry_after: None,
        body: "broken".into(),
    });
    let mut cfg = config(vec![endpoint("solo", &server.base_url(), 4)], 4);
    cfg.policy.breaker_min_calls = 3;
    let client = ModelClient::start(cfg).await.unwrap();
    server.state.health_mode.store(1, SeqCst); // /health: 503, not ready

    // Three 500s open the breaker (a window of three attempts, all failed); the call then
    // waits.
    server.set_default(Reply::Status {
        code: 500,
        retry_after: None,
        body: "broken".into(),
    });
    let call = {
        let c = client.clone();
        tokio::spawn(async move { c.chat("g", request("q", false)).await })
    };
    wait_until("the breaker opens", || {
        !client.snapshot().endpoints[0].healthy
    })
    .await;
    server.set_default(Reply::ok("recovered"));

    // While /health says 503 the endpoint stays down, whatever /models says.
    wait_until("four health probes", || {
        server.state.health_hits.load(SeqCst) >= 4
    })
    .await;
    assert!(
        !client.snapshot().endpoints[0].healthy,
        "a 503 from /health must not re-admit"
    );
    assert_eq!(server.state.models_hits.load(SeqCst), 0);

    // A server without /health (404) is probed through /models instead.
    server.state.health_mode.store(2, SeqCst);
    wait_until("re-admitted", || client.snapshot().endpoints[0].healthy).await;
    assert!(
        server.state.models_hits.load(SeqCst) >= 2,
        "probe_successes = 2 via /models"
    );
    let resp = call
        .await
        .unwrap()
        .expect("the waiting call completes after re-admission");
    assert_eq!(&*resp.content, "recovered");
    client.shutdown().await;
}

/// A client whose group `g` routes by prefix affinity over `servers` (endpoints `e0`,
/// `e1`, …, each with `per_endpoint` slots) under a global cap of `global`.
async fn prefix_affinity_client(
    servers: &[MockServer],
    per_endpoint: usize,
    global: usize,
) -> ModelClient {
    let specs = servers
        .iter()
        .enumerate()
        .map(|(i, s)| endpoint(&format!("e{i}"), &s.base_url(), per_endpoint))
        .collect();
    let mut cfg = config(specs, global);
    cfg.routing = vec![("g".into(), tmas_client::Routing::PrefixAffinity)];
    ModelClient::start(cfg).await.unwrap()
}

/// A request of `problem` (its affinity key) saying `text`.
fn for_problem(problem: &str, text: &str) -> tmas_client::wire::ChatRequest {
    let mut r = request(text, false);
    r.tags.problem = problem.into();
    r
}

/// Prefix affinity: a problem's calls meet on one endpoint while it has room, and move
/// to the others when it dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_affinity_keeps_a_problem_on_one_endpoint_and_fails_over() {
    let mut servers: Vec<MockServer> = (0..4)
        .map(|i| MockServer::start(Reply::ok(&format!("from {i}"))))
        .collect();
    let client = prefix_affinity_client(&servers, 8, 32).await;
    let mut home = None;
    for i in 0..10 {
        let resp = client
            .chat("g", for_problem("p-7", &format!("call {i}")))
            .await
            .unwrap();
        let home = home.get_or_insert(resp.endpoint.clone());
        assert_eq!(&resp.endpoint, home, "call {i} left its problem's endpoint");
    }
    let mut used = std::collections::BTreeSet::new();
    for p in 0..24 {
        let resp = client
            .chat("g", for_problem(&format!("q-{p}"), "call 0"))
            .await
            .unwrap();
        used.insert(resp.endpoint.to_string());
    }
    assert!(used.len() >= 3, "problems should spread: {used:?}");

    let home = home.expect("served");
    let index: usize = home[1..].parse().unwrap();
    servers[index].kill();
    for i in 0..10 {
        let resp = client
            .chat("g", for_problem("p-7", &format!("call {}", 100 + i)))
            .await
            .expect("calls finish on the other endpoints");
        assert_ne!(resp.endpoint, home);
    }
    client.shutdown().await;
}

/// Prefix affinity: a call queued for its preferred endpoint holds no global slot, so a
/// call that can go elsewhere is not held back by it. The global cap (2) is the sum of the
/// endpoints' limits (1 each): a hung call A and a call B of the same problem queued
/// behind it on one endpoint; a call C of another problem must still run on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_prefix_affinity_a_queued_call_leaves_its_global_slot_to_others() {
    let servers: Vec<MockServer> = (0..2).map(|_| MockServer::start(Reply::Hang)).collect();
    let client = prefix_affinity_client(&servers, 1, 2).await;
    let a = {
        let client = client.clone();
        tokio::spawn(async move { client.chat("g", for_problem("p-1", "p-1")).await })
    };
    // A hangs on its endpoint; the other one answers from now on.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let busy = loop {
        if let Some(i) = servers.iter().position(|s| s.chat_count() > 0) {
            break i;
        }
        assert!(std::time::Instant::now() < deadline, "A never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    servers[1 - busy].set_default(Reply::ok("elsewhere"));
    let b = {
        let client = client.clone();
        tokio::spawn(async move { client.chat("g", for_problem("p-1", "p-1")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = tokio::time::timeout(
        Duration::from_secs(10),
        client.chat("g", for_problem("q-2", "q-2")),
    )
    .await
    .expect("C waited for a global slot that a queued call held")
    .expect("C is answered");
    assert_eq!(&*c.content, "elsewhere");
    assert_eq!(&*c.endpoint, format!("e{}", 1 - busy));
    assert_eq!(servers[busy].chat_count(), 1, "B stays queued behind A");
    a.abort();
    b.abort();
    client.shutdown().await;
}

/// Whatever the routing, a call queued for a full endpoint holds no global slot, so a call
/// of another group with an idle endpoint of its own is not held back by it (a judge on
/// its own endpoint while the method's are full). The global cap (2) is the sum of the
/// endpoints' limits (1 each): in group `g` a hung call A and a call B queued behind it;
/// a call C of group `judge` must still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_queued_in_one_group_leaves_its_global_slot_to_another_group() {
    let method = MockServer::start(Reply::Hang);
    let judge = MockServer::start(Reply::ok("judged"));
    let mut cfg = config(
        vec![
            endpoint("m", &method.base_url(), 1),
            endpoint("j", &judge.base_url(), 1),
        ],
        2,
    );
    cfg.groups = vec![
        ("g".into(), vec!["m".into()]),
        ("judge".into(), vec!["j".into()]),
    ];
    let client = ModelClient::start(cfg).await.unwrap();
    let calls: Vec<_> = ["A", "B"]
        .into_iter()
        .map(|text| {
            let client = client.clone();
            tokio::spawn(async move { client.chat("g", request(text, false)).await })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while method.chat_count() == 0 || client.snapshot().endpoints.iter().all(|e| e.queued == 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "A never ran or B never queued"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let c = tokio::time::timeout(
        Duration::from_secs(10),
        client.chat("judge", request("C", false)),
    )
    .await
    .expect("C waited for a global slot that a queued call held")
    .expect("C is answered");
    assert_eq!(&*c.content, "judged");
    assert_eq!(method.chat_count(), 1, "B stays queued behind A");
    for call in calls {
        call.abort();
    }
    client.shutdown().await;
}

/// One call over endpoints `a` and `b` (picked first, all else equal) answering by their
/// scripts: the base timeout 100 ms, each hedge allowed 10 times longer.
async fn one_call_over_two(a_script: Vec<Reply>, b_script: Vec<Reply>) -> ChatResponse {
    one_call_over_two_with(a_script, b_script, 10.0, fast_policy().max_timeout_attempts).await
}

/// [`one_call_over_two`] with the call's `timeout_growth` and `max_timeout_attempts`.
async fn one_call_over_two_with(
    a_script: Vec<Reply>,
    b_script: Vec<Reply>,
    timeout_growth: f64,
    max_timeout_attempts: u32,
) -> ChatResponse {
    let a = MockServer::start(Reply::Hang);
    let b = MockServer::start(Reply::Hang);
    for reply in a_script {
        a.push(reply);
    }
    for reply in b_script {
        b.push(reply);
    }
    let mut cfg = config(
        vec![
            endpoint("a", &a.base_url(), 4),
            endpoint("b", &b.base_url(), 4),
        ],
        8,
    );
    for ep in &mut cfg.endpoints {
        ep.request_timeout = Duration::from_millis(100);
    }
    cfg.policy.timeout_growth = timeout_growth;
    cfg.policy.max_timeout_attempts = max_timeout_attempts;
    let client = ModelClient::start(cfg).await.unwrap();
    let resp = client
        .chat("g", request("a long generation", false))
        .await
        .expect("the long generation answers");
    client.shutdown().await;
    resp
}

#[tokio::test]
async fn a_crash_of_one_of_two_attempts_starts_a_replacement_on_another_endpoint_at_once() {
    // The first attempt, on `a`, passes its timeout at 100 ms and goes on beside a hedge
    // on `b` (a 1.5 s generation there; its own timeout 1 s). At 250 ms `a` crashes and
    // cuts it. Its replacement starts on `a` at once (it is still healthy) and answers in
    // 600 ms, at 850 ms. Waiting for the hedge's timeout instead, the replacement would
    // start at 1.1 s and answer at 1.7 s, after `b` (1.6 s).
    let resp = one_call_over_two(
        vec![
            Reply::cut_after(250),
            Reply::delayed("from a", Duration::from_millis(600)),
        ],
        vec![Reply::delayed("from b", Duration::from_millis(1500))],
    )
    .await;
    assert_eq!((&*resp.endpoint, &*resp.content), ("a", "from a"));
    assert_eq!(resp.attempts, 3);
}

#[tokio::test]
async fn the_retry_of_a_hedge_cut_by_a_crash_goes_where_the_attempt_it_races_is_not() {
    // The first attempt, on `a`, never answers; its hedge on `b` (from 100 ms) is cut at
    // 300 ms. The retry goes back to `b` (still healthy), where the generation takes
    // 200 ms: the third attempt answers. Sent beside the hanging attempt on `a`, it would
    // hang too, and only a fourth attempt, a second hedge at 1.3 s, would reach `b`.
    let resp = one_call_over_two(
        vec![],
        vec![
            Reply::cut_after(200),
            Reply::delayed("from b", Duration::from_millis(200)),
        ],
    )
    .await;
    assert_eq!((&*resp.endpoint, &*resp.content), ("b", "from b"));
    assert_eq!(resp.attempts, 3);
}

#[tokio::test]
async fn a_long_generations_only_attempt_cut_by_a_crash_is_retried_on_two_endpoints() {
    // The first attempt, on `a`, is hedged at 100 ms and answers a malformed body at
    // 200 ms; the hedge on `b` runs alone until `b` crashes at 400 ms. The retry goes to
    // `a` (a 600 ms generation there), and a second attempt goes back to `b` beside it (a
    // 300 ms generation there, which answers first). One attempt at a time, the retry on
    // `a` would answer, with three attempts in all.
    let malformed = Reply::After {
        delay: Duration::from_millis(200),
        then: Box::new(Reply::Raw {
            status: 200,
            body: "not json".into(),
        }),
    };
    let resp = one_call_over_two(
        vec![
            malformed,
            Reply::delayed("from a", Duration::from_millis(600)),
        ],
        vec![
            Reply::cut_after(300),
            Reply::delayed("from b", Duration::from_millis(300)),
        ],
    )
    .await;
    assert_eq!((&*resp.endpoint, &*resp.content), ("b", "from b"));
    assert_eq!(resp.attempts, 4);
}

#[tokio::test]
async fn an_attempt_racing_another_after_a_crash_may_run_as_long_as_any_attempt_of_the_call() {
    // Timeouts of 100, 200, 400 and 800 ms (`timeout_growth` 2, four timeout attempts):
    // the longest attempt may run 1.2 s. The first attempt, on `a`, is hedged at 100 ms
    // and cut at 250 ms; the attempt racing the hedge goes to `a` and needs 800 ms there.
    // Given only its rung's deadline (200 ms beside a 400 ms hedge: 600 ms) it would time
    // out, and `b`'s generation takes 3 s.
    let resp = one_call_over_two_with(
        vec![
            Reply::cut_after(250),
            Reply::delayed("from a", Duration::from_millis(800)),
        ],
        vec![Reply::delayed("from b", Duration::from_secs(3))],
        2.0,
        4,
    )
    .await;
    assert_eq!((&*resp.endpoint, &*resp.content), ("a", "from a"));
}

#[tokio::test]
async fn an_attempt_racing_another_is_hedged_at_its_timeout_once_it_runs_alone() {
    // Timeouts of 100, 200, 400, 800 and 1,600 ms (`timeout_growth` 2, five timeout
    // attempts): an attempt racing another after a crash may run 2.4 s. The first
    // attempt, on `a`, never answers and is hedged at 100 ms; the hedge on `b` is cut at
    // 150 ms, and its replacement on `b` (racing the first) never answers either. The
    // first attempt is given up at its deadline (300 ms); the replacement, alone from
    // then on, is hedged at its own timeout (200 ms after it started) and the hedge answers
    // from `a` within 100 ms. Left unhedged, the replacement would hold the call until its
    // 2.4 s deadline, as a hung request on a server that had just restarted did for 96 s
    // in a soak run.
    let started = std::time::Instant::now();
    let resp = one_call_over_two_with(
        vec![
            Reply::Hang,
            Reply::delayed("from a", Duration::from_millis(100)),
        ],
        vec![Reply::cut_after(50), Reply::Hang],
        2.0,
        5,
    )
    .await;
    let took = started.elapsed();
    assert_eq!((&*resp.endpoint, &*resp.content), ("a", "from a"));
    assert_eq!(resp.attempts, 4);
    assert!(
        took < Duration::from_millis(1500),
        "the lone racing attempt was not hedged: the call took {took:?}"
    );
}

#[tokio::test]
async fn an_attempt_racing_another_is_not_given_up_for_the_hedge_beside_it() {
    // Timeouts of 100, 200, 400, 800 and 1,600 ms: an attempt racing another may run
    // 2.4 s. The first attempt, on `a`, is hedged at 100 ms and cut at 250 ms; the attempt
    // racing the hedge goes to `a` and needs 1.6 s there. The hedge on `b` (a 3 s
    // generation) is given up at its deadline (700 ms, the call's second timeout), and the
    // racing attempt, alone and past its timeout, is hedged at once; that hedge, on `b`,
    // never answers. When it passes its own timeout (800 ms, at 1.5 s) it is not hedged
    // again, which would give up the racing attempt 350 ms before it answers: both run on,
    // and `a` answers at 1.85 s.
    let resp = one_call_over_two_with(
        vec![
            Reply::cut_after(250),
            Reply::delayed("from a", Duration::from_millis(1600)),
        ],
        vec![Reply::delayed("from b", Duration::from_secs(3))],
        2.0,
        5,
    )
    .await;
    assert_eq!((&*resp.endpoint, &*resp.content), ("a", "from a"));
    assert_eq!(resp.attempts, 4);
}
