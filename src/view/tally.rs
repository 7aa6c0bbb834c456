//! The run-wide call figures — calls lost by problem, iteration, role, endpoint and kind,
//! answered calls per problem, tokens per role, judge calls — summed from the calls
//! stored since the last look, so that a viewer following a run reads each call once
//! (one pass over a large store costs seconds: these columns sit behind the replies).

use std::collections::{BTreeMap, HashMap};

use tmas_client::failure::FailureKind;

use crate::role::Role;
use crate::store::StoreReader;
use crate::store::browse::CallGroup;
use crate::store::read::{LostCallsRow, RoleUsageRow};

type GroupKey = (String, u32, String, Option<String>, bool, Option<String>);

#[derive(Debug, Default)]
pub struct CallTally {
    /// Calls up to this rowid are counted.
    upto: i64,
    calls: u64,
    groups: HashMap<GroupKey, CallGroup>,
}

impl CallTally {
    /// Counts the calls stored up to rowid `last`. Rows are only appended, except when a
    /// resume replaces a failed call by its new answer; then the count no longer matches
    /// the table's and everything is counted again.
    pub fn update(&mut self, reader: &StoreReader, last: i64) -> anyhow::Result<()> {
        if last < self.upto {
            *self = CallTally::default();
        }
        self.add(reader.call_groups(self.upto, last)?);
        self.upto = last;
        if self.calls != reader.call_count()? {
            *self = CallTally::default();
            self.add(reader.call_groups(0, last)?);
            self.upto = last;
        }
        Ok(())
    }

    fn add(&mut self, groups: Vec<CallGroup>) {
        for g in groups {
            self.calls += g.calls;
            let key = (
                g.problem_id.clone(),
                g.iteration,
                g.role.clone(),
                g.endpoint.clone(),
                g.ok,
                g.error_kind.clone(),
            );
            match self.groups.get_mut(&key) {
                Some(old) => {
                    old.calls += g.calls;
                    old.prompt_tokens += g.prompt_tokens;
                    old.completion_tokens += g.completion_tokens;
                    old.estimated_calls += g.estimated_calls;
                    if g.example > old.example {
                        old.example = g.example;
                    }
                }
                None => {
                    self.groups.insert(key, g);
                }
            }
        }
    }

    /// As [`StoreReader::lost_calls`].
    pub fn lost(&self) -> Vec<LostCallsRow> {
        let mut rows: Vec<LostCallsRow> = self
            .groups
            .values()
            .filter(|g| !g.ok)
            .map(|g| LostCallsRow {
                problem_id: g.problem_id.clone(),
                iteration: g.iteration,
                role: g.role.clone(),
                endpoint: g.endpoint.clone(),
                kind: FailureKind::from_name(g.error_kind.as_deref().unwrap_or("")),
                calls: g.calls,
                example: g.example.clone(),
            })
            .collect();
        rows.sort_by(|a, b| {
            (
                &a.problem_id,
                a.iteration,
                &a.role,
                &a.endpoint,
                a.kind.as_str(),
            )
                .cmp(&(
                    &b.problem_id,
                    b.iteration,
                    &b.role,
                    &b.endpoint,
                    b.kind.as_str(),
                ))
        });
        rows
    }

    /// As [`StoreReader::answered_calls`].
    pub fn answered(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for g in self.groups.values().filter(|g| g.ok) {
            *out.entry(g.problem_id.clone()).or_insert(0) += g.calls;
        }
        out
    }

    /// As [`StoreReader::usage_by_role`].
    pub fn usage(&self) -> Vec<RoleUsageRow> {
        let mut by_role: BTreeMap<&str, RoleUsageRow> = BTreeMap::new();
        for g in self.groups.values() {
            let row = by_role.entry(&g.role).or_insert_with(|| RoleUsageRow {
                role: g.role.clone(),
                calls: 0,
                failed: 0,
                prompt_tokens: 0,
                completion_tokens: 0,
                estimated_calls: 0,
            });
            row.calls += g.calls;
            row.failed += if g.ok { 0 } else { g.calls };
            row.prompt_tokens += g.prompt_tokens;
            row.completion_tokens += g.completion_tokens;
            row.estimated_calls += g.estimated_calls;
        }
        by_role.into_values().collect()
    }

    /// The LLM judge's calls (the first half of [`StoreReader::judge_use`]).
    pub fn judge_calls(&self) -> u64 {
        self.groups
            .values()
            .filter(|g| Role::from_label(&g.role) == Some(Role::Judge))
            .map(|g| g.calls)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use tmas_actors::strategy::CallFailure;

    use super::*;
    use crate::store::tests::{key, response, row};
    use crate::store::{Fact, RunStore};

    fn failure() -> tmas_actors::strategy::CallOutcome {
        Err(CallFailure {
            kind: FailureKind::Timeout,
            message: "timed out".into(),
            endpoint: Some("sim".into()),
        })
    }

    /// The tally, updated after each write, against the reader's own queries.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tally_equals_the_stores_totals_as_calls_arrive_and_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path()).unwrap();
        let reader = StoreReader::open_read_only(store.path()).unwrap();
        let mut tally = CallTally::default();
        let writes = [
            (key("p1", "solution", Some(0), None), Ok(response("a"))),
            (key("p1", "verification", Some(0), Some(0)), failure()),
            (key("p2", "solution", Some(0), None), Ok(response("b"))),
            (key("p2", "judge", Some(0), Some(0)), Ok(response("yes"))),
            // A resume answers the failed call: its row is replaced.
            (
                key("p1", "verification", Some(0), Some(0)),
                Ok(response("ok")),
            ),
        ];
        for (k, outcome) in writes {
            store
                .write(Fact::Call(Box::new(row(k, "prompt".into(), outcome))))
                .await
                .unwrap();
            let last = reader.change_token().unwrap().last_call;
            tally.update(&reader, last).unwrap();
            assert_eq!(tally.lost(), reader.lost_calls().unwrap());
            assert_eq!(tally.answered(), reader.answered_calls().unwrap());
            assert_eq!(tally.usage(), reader.usage_by_role().unwrap());
            assert_eq!(tally.judge_calls(), reader.judge_use().unwrap().0);
        }
        assert!(tally.lost().is_empty());
    }
}
