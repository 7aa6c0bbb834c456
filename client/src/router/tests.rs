use super::*;

fn members(loads: &[usize]) -> Vec<Candidate> {
    loads
        .iter()
        .enumerate()
        .map(|(i, &load)| Candidate {
            hash: hash_str(&format!("ep{i}")),
            load,
            eligible: true,
            saturated: false,
        })
        .collect()
}

#[test]
fn a_key_keeps_its_endpoint_while_within_the_bound() {
    let m = members(&[0, 0, 0, 0]);
    let first = affinity_choice(hash_str("problem-7"), &m, AFFINITY_LOAD_BOUND).unwrap();
    for _ in 0..10 {
        assert_eq!(
            affinity_choice(hash_str("problem-7"), &m, AFFINITY_LOAD_BOUND),
            Some(first)
        );
    }
    // Keys spread over the members.
    let chosen: std::collections::BTreeSet<usize> = (0..64)
        .filter_map(|k| affinity_choice(hash_str(&format!("p{k}")), &m, AFFINITY_LOAD_BOUND))
        .collect();
    assert_eq!(chosen.len(), 4);
}

#[test]
fn the_load_bound_holds_even_when_every_call_has_the_same_key() {
    // 1,000 calls, all for one problem, assigned one by one (none finishing): no member
    // ever goes above ceil(1.25 × mean after the call).
    let mut m = members(&[0, 0, 0, 0]);
    for _ in 0..1000 {
        let i = affinity_choice(hash_str("hot"), &m, AFFINITY_LOAD_BOUND).expect("room");
        m[i].load += 1;
        let total: usize = m.iter().map(|c| c.load).sum();
        let cap = (AFFINITY_LOAD_BOUND * total as f64 / 4.0).ceil() as usize;
        assert!(m.iter().all(|c| c.load <= cap), "{m:?}");
    }
    // … with many keys too, the most loaded member stays within the bound.
    let mut m = members(&[0, 0, 0, 0]);
    for k in 0..4000 {
        let i = affinity_choice(hash_str(&format!("p{}", k % 37)), &m, AFFINITY_LOAD_BOUND)
            .expect("room");
        m[i].load += 1;
    }
    let max = m.iter().map(|c| c.load).max().unwrap_or(0);
    assert!(max as f64 <= AFFINITY_LOAD_BOUND * 1000.0 + 1.0, "{m:?}");
}

#[test]
fn a_down_or_saturated_preferred_endpoint_fails_over() {
    let m = members(&[0, 0, 0, 0]);
    let key = hash_str("problem-3");
    let preferred = affinity_choice(key, &m, AFFINITY_LOAD_BOUND).unwrap();
    let mut down = m.clone();
    down[preferred].eligible = false;
    let second = affinity_choice(key, &down, AFFINITY_LOAD_BOUND).unwrap();
    assert_ne!(second, preferred);
    // The key's second choice is stable too (its own ranking, not a neighbour's).
    assert_eq!(
        affinity_choice(key, &down, AFFINITY_LOAD_BOUND),
        Some(second)
    );
    let mut full = m.clone();
    full[preferred].saturated = true;
    assert_eq!(
        affinity_choice(key, &full, AFFINITY_LOAD_BOUND),
        Some(second)
    );
    // Nothing eligible or everything saturated: the caller falls back to least-load.
    let none: Vec<Candidate> = m
        .iter()
        .map(|c| Candidate {
            eligible: false,
            ..*c
        })
        .collect();
    assert_eq!(affinity_choice(key, &none, AFFINITY_LOAD_BOUND), None);
    let saturated: Vec<Candidate> = m
        .iter()
        .map(|c| Candidate {
            saturated: true,
            ..*c
        })
        .collect();
    assert_eq!(affinity_choice(key, &saturated, AFFINITY_LOAD_BOUND), None);
}

#[test]
fn least_load_compares_load_for_the_limit() {
    // Equal limits: the fewest calls.
    assert!(lighter((3, 10), (4, 10)));
    assert!(!lighter((4, 10), (4, 10)));
    // A 70-slot server with 50 calls is less loaded than a 30-slot one with 25.
    assert!(lighter((50, 70), (25, 30)));
    assert!(!lighter((25, 30), (50, 70)));
    // Idle endpoints tie whatever their limits (the rotor breaks the tie).
    assert!(!lighter((0, 70), (0, 30)) && !lighter((0, 30), (0, 70)));
    // A limit of 0 counts as 1 rather than dividing by zero.
    assert!(lighter((0, 0), (1, 0)));
}
