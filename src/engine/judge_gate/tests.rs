use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tmas_client::EndpointSnapshot;

use super::*;

fn endpoint(
    name: &str,
    max: usize,
    limit: usize,
    in_flight: usize,
    queued: usize,
) -> EndpointSnapshot {
    EndpointSnapshot {
        name: name.into(),
        in_flight,
        queued,
        max_in_flight: max,
        concurrency_limit: limit,
        healthy: true,
        calls: 0,
        errors: 0,
        retries: 0,
        breaker_trips: 0,
        overloads: 0,
        timeouts: 0,
        input_tokens: 0,
        output_tokens: 0,
    }
}

fn snapshot(endpoints: Vec<EndpointSnapshot>, global: (usize, usize)) -> ClientSnapshot {
    ClientSnapshot {
        endpoints,
        global_in_flight: global.0,
        global_max_in_flight: global.1,
    }
}

#[test]
fn on_a_shared_endpoint_of_a_few_slots_a_judge_call_takes_only_a_slot_no_method_call_waits_for() {
    let judge: Vec<Arc<str>> = vec!["shared".into()];
    let room = |ep, global| room_in(&snapshot(vec![ep], global), &judge);
    // Three slots, one busy, nobody waiting: the free slot is the judge's.
    assert!(room(endpoint("shared", 3, 3, 1, 0), (1, 100)));
    // A method call waits for the endpoint: the judge waits behind it.
    assert!(!room(endpoint("shared", 3, 3, 1, 1), (1, 100)));
    // Every slot busy.
    assert!(!room(endpoint("shared", 3, 3, 3, 0), (3, 100)));
    // The concurrency limit is below the cap (overload): that is the endpoint's size now.
    assert!(!room(endpoint("shared", 3, 1, 1, 0), (1, 100)));
    // The run's global cap is full: a method call would wait for the next global slot.
    assert!(!room(endpoint("shared", 3, 3, 1, 0), (100, 100)));
    // Room on an endpoint the judge does not use is no room for it.
    assert!(!room(endpoint("other", 3, 3, 0, 0), (0, 100)));
    // Any endpoint of the judge group with room will do.
    let two = snapshot(
        vec![
            endpoint("shared", 3, 3, 3, 2),
            endpoint("judge", 2, 2, 1, 0),
        ],
        (4, 100),
    );
    let both: Vec<Arc<str>> = vec!["shared".into(), "judge".into()];
    assert!(room_in(&two, &both));
}

/// A room the test opens and closes, whose load is the calls the fake executor runs.
#[derive(Default)]
struct TestRoom {
    open: AtomicBool,
    running: Arc<AtomicUsize>,
}

impl Room for TestRoom {
    fn has_room(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    fn load(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    fn shared(&self) -> bool {
        true
    }
}

/// An executor whose calls run until `release` gives them a permit, counting the most at
/// once.
struct Held {
    running: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    release: Arc<Semaphore>,
}

impl CallExecutor for Held {
    fn execute(&self, _group: Arc<str>, _request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        let (running, started, most, release) = (
            self.running.clone(),
            self.started.clone(),
            self.most.clone(),
            self.release.clone(),
        );
        Box::pin(async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            started.fetch_add(1, Ordering::SeqCst);
            most.fetch_max(now, Ordering::SeqCst);
            if let Ok(permit) = release.acquire().await {
                permit.forget();
            }
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(crate::store::tests::response("\\boxed{yes}"))
        })
    }

    fn execute_embeddings(
        &self,
        _key: &CallKey,
        _group: Arc<str>,
        _request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        unreachable!("the judge makes no embeddings call")
    }
}

fn request() -> ChatRequest {
    let sampling = crate::config::Config::default()
        .role(crate::role::Role::Judge)
        .sampling();
    crate::eval::judge::judge_request("q".into(), sampling, "p", 0)
}

/// Waits (up to 10 s) until `done` holds.
async fn until(done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_calls_go_only_when_there_is_room_and_never_more_than_the_judges_capacity() {
    let room = Arc::new(TestRoom::default());
    let held = Held {
        running: room.running.clone(),
        started: Arc::default(),
        most: Arc::default(),
        release: Arc::new(Semaphore::new(0)),
    };
    let (started, most, release) = (
        held.started.clone(),
        held.most.clone(),
        held.release.clone(),
    );
    let gate = Arc::new(JudgeGate::new(Arc::new(held), 3, room.clone()));
    let calls: Vec<_> = (0..5)
        .map(|_| tokio::spawn(gate.execute("judge".into(), request())))
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(started.load(Ordering::SeqCst), 0, "no room: nothing sent");
    room.open.store(true, Ordering::SeqCst);
    until(|| started.load(Ordering::SeqCst) == 3).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        3,
        "up to the judge's capacity"
    );
    // Room closes again (a method call waits): finished judge calls make way for no more.
    room.open.store(false, Ordering::SeqCst);
    release.add_permits(3);
    until(|| room.running.load(Ordering::SeqCst) == 0).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(started.load(Ordering::SeqCst), 3);
    room.open.store(true, Ordering::SeqCst);
    until(|| started.load(Ordering::SeqCst) == 5).await;
    release.add_permits(2);
    for call in calls {
        let reply = call.await.unwrap().unwrap();
        assert_eq!(&*reply.content, "\\boxed{yes}");
    }
    assert_eq!(started.load(Ordering::SeqCst), 5);
    assert_eq!(most.load(Ordering::SeqCst), 3);
}
