//! Each rule of the call plan as a table: events in, actions out. No sockets, no sleeps:
//! every instant is `T0` plus an offset.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use super::*;

static T0: LazyLock<Instant> = LazyLock::new(Instant::now);

/// `T0` plus `secs` seconds.
fn at(secs: f64) -> Instant {
    *T0 + Duration::from_secs_f64(secs)
}

/// Every endpoint's request timeout in these tables.
const TIMEOUT: Duration = Duration::from_secs(10);

fn policy() -> ResiliencePolicy {
    ResiliencePolicy {
        max_attempts: 3,
        max_malformed_attempts: 2,
        max_timeout_attempts: 3,
        timeout_growth: 2.0,
        outage_budget: Duration::from_secs(60),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_secs(2),
        ..ResiliencePolicy::default()
    }
}

type Plan<'p> = CallPlan<'p, &'static str>;
type A = Action<&'static str>;

fn acquired(ep: &'static str, secs: f64) -> Event<&'static str> {
    Event::Acquired {
        endpoint: ep,
        timeout: TIMEOUT,
        crash_confirmed: false,
        now: at(secs),
    }
}

/// A slot acquired after a crash seen on an endpoint still marked up: `went_down` tells
/// whether that endpoint has been marked down since.
fn acquired_after_crash(ep: &'static str, went_down: bool, secs: f64) -> Event<&'static str> {
    Event::Acquired {
        endpoint: ep,
        timeout: TIMEOUT,
        crash_confirmed: went_down,
        now: at(secs),
    }
}

fn answered(attempt: AttemptId, secs: f64) -> Event<&'static str> {
    Event::Finished {
        attempt,
        result: Ok(()),
        now: at(secs),
    }
}

/// A failure; `healthy`: the endpoint is still marked up (else it went down under the
/// attempt). The endpoint answered no other call meanwhile.
fn failed(attempt: AttemptId, error: ClientError, healthy: bool, secs: f64) -> Event<&'static str> {
    Event::Finished {
        attempt,
        result: Err(Failure {
            error,
            retry_after: None,
            healthy,
            went_down: !healthy,
            served: false,
        }),
        now: at(secs),
    }
}

/// A crash of an endpoint that went down under the attempt after answering other calls
/// while it ran.
fn crashed_while_serving(attempt: AttemptId, secs: f64) -> Event<&'static str> {
    Event::Finished {
        attempt,
        result: Err(Failure {
            error: crash(),
            retry_after: None,
            healthy: false,
            went_down: true,
            served: true,
        }),
        now: at(secs),
    }
}

fn crash() -> ClientError {
    ClientError::Connect {
        endpoint: "e".into(),
        message: "connection refused".into(),
    }
}

fn status(code: u16) -> ClientError {
    ClientError::Status {
        endpoint: "e".into(),
        status: code,
        body_snippet: String::new(),
    }
}

fn timeout() -> ClientError {
    ClientError::Timeout {
        endpoint: "e".into(),
        after: TIMEOUT,
    }
}

fn acquire(avoid: Option<&'static str>, exclude: Option<&'static str>) -> A {
    Action::Acquire { avoid, exclude }
}

fn launch(attempt: AttemptId, scale: f64) -> A {
    Action::Launch { attempt, scale }
}

fn hedge_at(secs: f64) -> A {
    Action::Hedge(Some(at(secs)))
}

/// A plan whose first attempt runs on `a` since 0 s (timeout 10 s, growth 2: hedged at
/// 10 s, allowed 30 s).
fn running_on_a(policy: &ResiliencePolicy, members: usize) -> Plan<'_> {
    let mut plan = Plan::new(policy, members, false, true);
    assert_eq!(plan.start(), vec![acquire(None, None)]);
    assert_eq!(
        plan.on(acquired("a", 0.0)),
        vec![launch(1, 3.0), hedge_at(10.0)]
    );
    plan
}

/// `running_on_a`, then hedged at 10 s onto `b` (attempt 2: rung 20 s, allowed 60 s).
fn hedged_onto_b(policy: &ResiliencePolicy) -> Plan<'_> {
    let mut plan = running_on_a(policy, 2);
    assert_eq!(
        plan.on(Event::HedgeDue),
        vec![
            Action::SetAside {
                attempt: 1,
                hedged: true
            },
            acquire(Some("a"), None),
        ]
    );
    assert_eq!(
        plan.on(acquired("b", 10.0)),
        vec![launch(2, 6.0), hedge_at(30.0)]
    );
    plan
}

#[test]
fn the_first_answer_ends_the_call() {
    let p = policy();
    let mut plan = running_on_a(&p, 1);
    assert_eq!(
        plan.on(answered(1, 3.0)),
        vec![Action::Succeed { attempt: 1 }]
    );
    assert_eq!(plan.on(Event::HedgeDue), vec![], "nothing after the end");
}

#[test]
fn an_attempt_past_its_timeout_is_hedged_and_the_first_answer_wins() {
    let p = policy();
    let mut plan = hedged_onto_b(&p);
    // The older attempt answers first: it wins; the hedge is dropped with the call.
    assert_eq!(
        plan.on(answered(1, 12.0)),
        vec![Action::Succeed { attempt: 1 }]
    );
    let mut plan = hedged_onto_b(&p);
    assert_eq!(
        plan.on(answered(2, 12.0)),
        vec![Action::Succeed { attempt: 2 }]
    );
}

#[test]
fn streams_and_embeddings_are_never_hedged() {
    let p = policy();
    for (stream, hedge) in [(true, true), (false, false)] {
        let mut plan = Plan::new(&p, 2, stream, hedge);
        plan.start();
        assert_eq!(
            plan.on(acquired("a", 0.0)),
            vec![launch(1, 1.0), Action::Hedge(None)],
            "stream {stream}, hedge {hedge}"
        );
    }
    let single = ResiliencePolicy {
        max_timeout_attempts: 1,
        ..policy()
    };
    let mut plan = Plan::new(&single, 2, false, true);
    plan.start();
    assert_eq!(
        plan.on(acquired("a", 0.0)),
        vec![launch(1, 1.0), Action::Hedge(None)],
        "one timeout attempt: nothing to hedge with"
    );
}

#[test]
fn with_no_timeout_left_an_attempt_is_given_up_at_its_timeout() {
    let p = ResiliencePolicy {
        max_timeout_attempts: 2,
        ..policy()
    };
    let mut plan = hedged_onto_b(&p);
    // The hedge spent the last timeout but one: the hedge attempt is not hedged again.
    assert_eq!(
        plan.on(Event::HedgeDue),
        vec![Action::GiveUp {
            attempt: 2,
            after: Duration::from_secs(20)
        }]
    );
    // Its timeout spends the budget, but the older attempt may still answer.
    assert_eq!(plan.on(failed(2, timeout(), true, 30.0)), vec![]);
    assert_eq!(
        plan.on(answered(1, 31.0)),
        vec![Action::Succeed { attempt: 1 }],
        "the attempt set aside is the call's last chance"
    );
}

#[test]
fn a_spent_budget_fails_once_the_last_chance_fails_too() {
    let p = ResiliencePolicy {
        max_timeout_attempts: 2,
        ..policy()
    };
    let mut plan = hedged_onto_b(&p);
    plan.on(Event::HedgeDue);
    assert_eq!(plan.on(failed(2, timeout(), true, 30.0)), vec![]);
    assert_eq!(
        plan.on(failed(1, timeout(), true, 30.0)),
        vec![Action::Fail {
            error: timeout(),
            exhausted: true
        }]
    );
}

#[test]
fn a_hedge_past_its_own_timeout_gives_the_older_attempt_up() {
    let p = policy();
    let mut plan = hedged_onto_b(&p);
    assert_eq!(
        plan.on(Event::HedgeDue),
        vec![
            Action::GiveUp {
                attempt: 1,
                after: Duration::from_secs(20)
            },
            Action::SetAside {
                attempt: 2,
                hedged: true
            },
            acquire(Some("b"), None),
        ]
    );
    // The given-up attempt's end changes nothing but the budget.
    assert_eq!(plan.on(failed(1, timeout(), true, 30.0)), vec![]);
    assert_eq!(
        plan.on(acquired("a", 30.0)),
        vec![launch(3, 12.0), hedge_at(70.0)],
        "the third rung: 40 s, allowed 120 s"
    );
}

#[test]
fn a_crash_of_one_of_two_attempts_starts_a_replacement_elsewhere_at_once() {
    let p = policy();
    let mut plan = hedged_onto_b(&p);
    // `a` crashes under the attempt set aside: the hedge on `b` is set aside in turn and a
    // replacement goes anywhere but `b` (`a` once re-admitted).
    assert_eq!(
        plan.on(failed(1, crash(), false, 15.0)),
        vec![
            Action::SetAside {
                attempt: 2,
                hedged: false
            },
            Action::Hedge(None),
            acquire(Some("b"), Some("b")),
        ]
    );
    // The replacement may run as long as any attempt of the call (the last hedged rung,
    // 20 s, beside its hedge: 20 + 40 = 60 s, 6 timeouts), and is not hedged while the
    // other runs.
    assert_eq!(
        plan.on(acquired("a", 16.0)),
        vec![launch(3, 6.0), Action::Hedge(None)]
    );
}

#[test]
fn with_one_endpoint_a_crash_beside_an_attempt_is_not_raced() {
    let p = policy();
    let mut plan = running_on_a(&p, 1);
    plan.on(Event::HedgeDue);
    plan.on(acquired("a", 10.0));
    // Nowhere else to race: the hedge goes on alone; its hedge timer is already armed.
    assert_eq!(plan.on(failed(1, crash(), false, 15.0)), vec![]);
}

#[test]
fn an_attempt_beside_a_racing_one_is_not_hedged_and_is_hedged_once_alone() {
    let p = policy();
    let mut plan = hedged_onto_b(&p);
    plan.on(failed(1, crash(), false, 15.0));
    plan.on(acquired("a", 16.0));
    // `b` crashes under attempt 2 (set aside): attempt 3 (racing) is set aside and races a
    // fourth, which is itself a race attempt.
    assert_eq!(
        plan.on(failed(2, crash(), false, 20.0)),
        vec![
            Action::SetAside {
                attempt: 3,
                hedged: false
            },
            Action::Hedge(None),
            acquire(Some("a"), Some("a")),
        ]
    );
    assert_eq!(
        plan.on(acquired("b", 21.0)),
        vec![launch(4, 6.0), Action::Hedge(None)]
    );
    // Attempt 4 fails on its own (a 500): the next attempt goes beside the racing attempt
    // 3 without racing it, so it is hedged at its timeout...
    let actions = plan.on(failed(4, status(500), true, 22.0));
    assert!(
        matches!(actions[..], [Action::Backoff { .. }]),
        "{actions:?}"
    );
    assert_eq!(plan.on(Event::BackoffOver), vec![acquire(Some("b"), None)]);
    assert_eq!(
        plan.on(acquired("b", 23.0)),
        vec![launch(5, 6.0), hedge_at(43.0)]
    );
    // ...except that a hedge would give the racing attempt up: it is not hedged.
    assert_eq!(plan.on(Event::HedgeDue), vec![Action::Hedge(None)]);
    // Once the racing attempt is gone, the one left alone is hedged at its timeout again.
    assert_eq!(
        plan.on(failed(3, status(500), true, 50.0)),
        vec![hedge_at(43.0)]
    );
}

#[test]
fn a_long_generation_cut_by_a_crash_is_retried_and_raced_at_once() {
    let p = policy();
    let mut plan = running_on_a(&p, 2);
    // The only attempt, past its endpoint's timeout (its hedge timer not yet seen), is cut.
    assert_eq!(
        plan.on(failed(1, crash(), false, 11.0)),
        vec![
            Action::Hedge(None),
            Action::Backoff {
                delay: Duration::ZERO,
                server_given: false
            }
        ]
    );
    assert_eq!(plan.on(Event::BackoffOver), vec![acquire(Some("a"), None)]);
    // The retry is set aside as soon as it starts, and a second attempt races it from
    // another endpoint.
    assert_eq!(
        plan.on(acquired("b", 11.0)),
        vec![
            launch(2, 3.0),
            hedge_at(21.0),
            Action::SetAside {
                attempt: 2,
                hedged: false
            },
            Action::Hedge(None),
            acquire(Some("b"), Some("b")),
        ]
    );
    // A short generation cut by a crash is only retried.
    let mut plan = running_on_a(&p, 2);
    plan.on(failed(1, crash(), false, 5.0));
    plan.on(Event::BackoffOver);
    assert_eq!(
        plan.on(acquired("b", 5.0)),
        vec![launch(2, 3.0), hedge_at(15.0)]
    );
}

#[test]
fn a_permanent_error_ends_the_call_at_once() {
    let p = policy();
    let mut plan = running_on_a(&p, 2);
    assert_eq!(
        plan.on(failed(1, status(401), true, 1.0)),
        vec![
            Action::Hedge(None),
            Action::Fail {
                error: status(401),
                exhausted: false
            }
        ]
    );
}

#[test]
fn each_kind_of_failure_spends_its_own_budget() {
    let p = policy();
    // Three 500s spend `max_attempts`.
    let mut plan = running_on_a(&p, 1);
    for (attempt, secs) in [(1, 1.0), (2, 2.0)] {
        let actions = plan.on(failed(attempt, status(500), true, secs));
        assert!(
            matches!(actions[..], [_, Action::Backoff { .. }]),
            "{actions:?}"
        );
        plan.on(Event::BackoffOver);
        plan.on(acquired("a", secs));
    }
    assert_eq!(
        plan.on(failed(3, status(500), true, 3.0)),
        vec![
            Action::Hedge(None),
            Action::Fail {
                error: status(500),
                exhausted: true
            }
        ]
    );
    // Refused connections to an endpoint marked down spend nothing: the call waits for a
    // healthy endpoint instead (the outage budget, in the slot wait).
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=10 {
        let actions = plan.on(failed(attempt, crash(), false, 1.0));
        assert_eq!(
            actions.last(),
            Some(&Action::Backoff {
                delay: Duration::ZERO,
                server_given: false
            })
        );
        plan.on(Event::BackoffOver);
        plan.on(acquired("a", 1.0));
    }
    // Overload (429, 503) is bounded in time by the outage budget, not in attempts.
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=20 {
        let actions = plan.on(failed(attempt, status(503), true, 1.0));
        assert!(
            matches!(actions[..], [_, Action::Backoff { .. }]),
            "{actions:?}"
        );
        plan.on(Event::BackoffOver);
        plan.on(acquired("a", 1.0));
    }
    assert!(matches!(
        plan.on(failed(21, status(503), true, 62.0))[..],
        [
            _,
            Action::Fail {
                exhausted: true,
                ..
            }
        ]
    ));
}

#[test]
fn a_stream_cut_for_another_request_spends_time_not_attempts_and_is_not_raced() {
    use crate::error::Interruption;
    let p = policy();
    let cut = |how| ClientError::Interrupted {
        endpoint: "e".into(),
        message: String::new(),
        how,
    };
    // Cut while other calls of ours ran there: back-pressure, like a 503. Each cut backs
    // off and goes again wherever it can (no race, nothing excluded), for as long as the
    // outage budget lasts from the first.
    let mut plan = Plan::new(&p, 2, true, true);
    plan.start();
    plan.on(acquired("a", 0.0));
    for attempt in 1..=20 {
        let secs = f64::from(attempt) * 2.5;
        let actions = plan.on(failed(attempt, cut(Interruption::Preempted), true, secs));
        assert!(
            matches!(
                actions[..],
                [Action::Backoff {
                    server_given: false,
                    ..
                }]
            ),
            "{actions:?}"
        );
        assert_eq!(plan.on(Event::BackoffOver), vec![acquire(Some("a"), None)]);
        plan.on(acquired("a", secs));
    }
    assert!(matches!(
        plan.on(failed(21, cut(Interruption::Preempted), true, 62.0))[..],
        [Action::Fail {
            exhausted: true,
            ..
        }]
    ));
    // Ended while nothing else of ours ran there: `max_attempts`, as before.
    let mut plan = Plan::new(&p, 2, true, true);
    plan.start();
    plan.on(acquired("a", 0.0));
    for attempt in 1..=2 {
        let actions = plan.on(failed(attempt, cut(Interruption::Ended), true, 1.0));
        assert!(
            matches!(actions[..], [Action::Backoff { .. }]),
            "{actions:?}"
        );
        plan.on(Event::BackoffOver);
        plan.on(acquired("a", 1.0));
    }
    assert_eq!(
        plan.on(failed(3, cut(Interruption::Ended), true, 2.0)),
        vec![Action::Fail {
            error: cut(Interruption::Ended),
            exhausted: true
        }]
    );
}

#[test]
fn the_backoff_is_the_servers_or_none_for_a_down_endpoint_or_exponential() {
    let p = policy();
    let mut plan = running_on_a(&p, 1);
    let busy = Event::Finished {
        attempt: 1,
        result: Err(Failure {
            error: status(429),
            retry_after: Some(Duration::from_secs(7)),
            healthy: true,
            went_down: false,
            served: false,
        }),
        now: at(1.0),
    };
    assert_eq!(
        plan.on(busy),
        vec![
            Action::Hedge(None),
            Action::Backoff {
                delay: Duration::from_secs(7),
                server_given: true
            }
        ]
    );
    plan.on(Event::BackoffOver);
    plan.on(acquired("a", 8.0));
    let actions = plan.on(failed(2, status(500), true, 9.0));
    let Some(Action::Backoff {
        delay,
        server_given: false,
    }) = actions.last()
    else {
        panic!("{actions:?}");
    };
    assert!(
        (p.backoff_min..=p.backoff_max * 2).contains(delay),
        "{delay:?}"
    );
}

#[test]
fn an_attempt_set_aside_that_fails_ends_the_backoff_and_one_that_answers_ends_the_call() {
    let p = policy();
    let mut plan = hedged_onto_b(&p);
    let actions = plan.on(failed(2, status(500), true, 12.0));
    assert!(
        matches!(actions[..], [_, Action::Backoff { .. }]),
        "{actions:?}"
    );
    // The retry goes at once when the attempt set aside fails meanwhile...
    assert_eq!(
        plan.on(failed(1, status(502), true, 12.5)),
        vec![acquire(Some("b"), None)]
    );
    assert_eq!(plan.on(Event::BackoffOver), vec![], "already acquiring");
    let mut plan = hedged_onto_b(&p);
    plan.on(failed(2, status(500), true, 12.0));
    // ...and the call is answered if it answers.
    assert_eq!(
        plan.on(answered(1, 12.5)),
        vec![Action::Succeed { attempt: 1 }]
    );
}

#[test]
fn an_attempt_set_aside_that_fails_while_a_slot_is_sought_restarts_the_search() {
    let p = policy();
    let mut plan = running_on_a(&p, 2);
    plan.on(Event::HedgeDue);
    // The attempt on `a` is gone: the wait for a slot no longer needs to avoid it more
    // than the last failure's endpoint says.
    assert_eq!(
        plan.on(failed(1, status(500), true, 11.0)),
        vec![acquire(Some("a"), None)]
    );
}

#[test]
fn a_hedged_attempt_that_a_crash_ends_gives_its_timeout_back() {
    // Two timeout attempts: one hedge. The hedged attempt is cut by a crash, so the hedge
    // attempt may still be hedged at its own timeout.
    let p = ResiliencePolicy {
        max_timeout_attempts: 2,
        ..policy()
    };
    let mut plan = running_on_a(&p, 1);
    plan.on(Event::HedgeDue);
    plan.on(acquired("a", 10.0));
    plan.on(failed(1, crash(), false, 15.0));
    let actions = plan.on(Event::HedgeDue);
    assert!(
        matches!(
            actions[..],
            [
                Action::SetAside {
                    attempt: 2,
                    hedged: true
                },
                _
            ]
        ),
        "{actions:?}"
    );
}

#[test]
fn shutdown_fails_the_call() {
    let p = policy();
    let mut plan = running_on_a(&p, 1);
    assert_eq!(
        plan.on(Event::Shutdown),
        vec![Action::Fail {
            error: ClientError::Shutdown,
            exhausted: false
        }]
    );
}

#[test]
fn a_crash_seen_before_the_endpoint_is_marked_down_is_charged_only_if_it_stays_up() {
    let p = policy();
    // Connections cut while the endpoint is still marked up: the breaker opens a moment
    // later. Each is charged when the next attempt starts, and not at all when the
    // endpoint was marked down meanwhile.
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=10 {
        let actions = plan.on(failed(attempt, crash(), true, 1.0));
        assert!(
            matches!(actions[..], [_, Action::Backoff { .. }]),
            "{actions:?}"
        );
        plan.on(Event::BackoffOver);
        let actions = plan.on(acquired_after_crash("a", true, 1.0));
        assert!(matches!(actions[0], Action::Launch { .. }), "{actions:?}");
    }
    // An endpoint that stays up while it refuses: the call's own failures.
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=2 {
        plan.on(failed(attempt, crash(), true, 1.0));
        plan.on(Event::BackoffOver);
        plan.on(acquired_after_crash("a", false, 1.0));
    }
    plan.on(failed(3, crash(), true, 1.0));
    plan.on(Event::BackoffOver);
    assert_eq!(
        plan.on(acquired_after_crash("a", false, 1.0)),
        vec![Action::Fail {
            error: crash(),
            exhausted: true
        }],
        "three attempts"
    );
}

#[test]
fn the_endpoints_crashes_spend_time_not_attempts() {
    let p = policy();
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=20 {
        let actions = plan.on(failed(attempt, crash(), false, f64::from(attempt)));
        assert!(
            matches!(actions[..], [_, Action::Backoff { .. }]),
            "{actions:?}"
        );
        plan.on(Event::BackoffOver);
        plan.on(acquired("a", f64::from(attempt)));
    }
    // The outage budget (60 s) from the first such crash's attempt, sent at 0 s.
    assert_eq!(
        plan.on(failed(21, crash(), false, 60.0)),
        vec![
            Action::Hedge(None),
            Action::Fail {
                error: crash(),
                exhausted: true
            }
        ]
    );
}

#[test]
fn a_request_in_flight_at_repeated_crashes_of_serving_endpoints_is_stopped_and_named() {
    let p = ResiliencePolicy {
        suspect_after_crashes: 3,
        ..policy()
    };
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=2 {
        let actions = plan.on(crashed_while_serving(attempt, 1.0));
        assert!(
            matches!(actions[..], [_, Action::Backoff { .. }]),
            "{actions:?}"
        );
        plan.on(Event::BackoffOver);
        plan.on(acquired("a", 1.0));
    }
    assert_eq!(
        plan.on(crashed_while_serving(3, 1.0)),
        vec![
            Action::Hedge(None),
            Action::Fail {
                error: ClientError::SuspectedCrash {
                    endpoint: "e".into(),
                    crashes: 3
                },
                exhausted: false
            }
        ]
    );
    // Crashes of endpoints that answered nothing else meanwhile (a server down for all)
    // are not the request's doing.
    let mut plan = running_on_a(&p, 1);
    for attempt in 1..=5 {
        plan.on(failed(attempt, crash(), false, 1.0));
        plan.on(Event::BackoffOver);
        let actions = plan.on(acquired("a", 1.0));
        assert!(matches!(actions[0], Action::Launch { .. }), "{actions:?}");
    }
}
