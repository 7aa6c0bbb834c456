//! The methods' key convention: which [`CallKey`] a role's call of a problem's iteration
//! has. The strategies name their calls by it, the run store finds a record's texts by it
//! (a candidate's solution is `PROBLEM/itT/solution/cC/a0`, verification `V`'s reply
//! `PROBLEM/itT/verification/cC/vV/aA`) and the judge names its repeats by it, so it is
//! spelled once, here.
//!
//! ```
//! use tmas::role::Role;
//! use tmas::method::call_key;
//!
//! let key = call_key(&"p7".into(), 2, Role::Verification, Some(3), Some(1), 0);
//! assert_eq!(key.to_string(), "p7/it2/verification/c3/v1/a0");
//! ```

use std::sync::Arc;

use tmas_actors::strategy::CallKey;

use crate::role::Role;

/// The key of `role`'s call for `problem`'s iteration `iteration`: for candidate
/// `candidate` (per-candidate roles), its sub-call `index` (a verification, a judge
/// repeat) and re-ask `attempt` (0 for the first try).
pub fn call_key(
    problem: &Arc<str>,
    iteration: u32,
    role: Role,
    candidate: Option<u32>,
    index: Option<u32>,
    attempt: u32,
) -> CallKey {
    CallKey {
        problem: problem.clone(),
        iteration,
        role: role.as_str().into(),
        candidate,
        index,
        attempt,
    }
}
