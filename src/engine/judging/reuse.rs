//! Never asking the judge the same question twice: judge requests of one problem with the
//! same rendered prompt and the same repeat index are one call, whose reply serves every
//! candidate that asks it (`judge.reuse`).
//!
//! Why the expected Pass@1 is unchanged: a verdict is a draw from the judge on its input,
//! and two candidates whose prompts are byte-identical give the judge the same input, so
//! the verdict a candidate gets has the distribution its own call would have had. What
//! changes is that the verdicts of candidates with the same prompt are no longer
//! independent draws (docs/judging.md).
//!
//! Resume-safe: a call is made under the key of the first candidate that asks it; the
//! store keeps it there with its prompt's id. A resumed run is seeded with every answered
//! judge call ([`JudgeReuse::seed`]), so the question is answered by replaying that call
//! whichever candidate asks it first this time, and nothing is sent twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::store::read::StoredJudgeCall;

/// The reply a question got (a failure is logged once, by the asker that made the call).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The judge's reply.
    Answered(Arc<str>),
    /// The call failed: no verdict from it (the candidate's score rests on the others).
    Failed,
    /// The call was cut by the run's stop: the judge was not asked, so the verdicts of
    /// its iteration are incomplete and a resume asks it.
    Cut,
}

impl Reply {
    /// The reply's content, if the judge answered.
    pub fn content(&self) -> Option<&str> {
        match self {
            Reply::Answered(content) => Some(content),
            Reply::Failed | Reply::Cut => None,
        }
    }
}

/// One question: the problem, the prompt's id ([`crate::store::prompts::id_of_messages`])
/// and the repeat index.
type Question = (Arc<str>, String, u32);

/// A candidate's place, whose call keys a question is asked under: (iteration, candidate).
pub type Asker = (u32, u32);

/// The questions asked in this process and the calls earlier sessions stored.
#[derive(Default)]
pub struct JudgeReuse {
    /// Answered calls of earlier sessions: where each question's reply is stored (the
    /// iteration and candidate of the key it was made under).
    stored: HashMap<Question, Asker>,
    asked: Mutex<HashMap<Question, Shared<BoxFuture<'static, Reply>>>>,
}

impl JudgeReuse {
    /// A cache that knows the answered judge calls of earlier sessions.
    pub fn seed(stored: Vec<StoredJudgeCall>) -> Self {
        let stored = stored
            .into_iter()
            .map(|c| {
                let question = (Arc::from(c.problem.as_str()), c.prompt_id, c.repeat);
                (question, (c.iteration, c.candidate))
            })
            .collect();
        Self {
            stored,
            ..Self::default()
        }
    }

    /// What answers `repeat` of the question `prompt_id` of `problem`, asked by the
    /// candidate at `own`: the call of the first asker of this process, else the stored
    /// call of an earlier session, else a call under `own`'s keys. `make` turns an asker
    /// into the call's reply; it runs at most once per question. Also says whether the
    /// reply comes from a call made for another candidate.
    pub fn answer(
        &self,
        problem: &str,
        prompt_id: String,
        repeat: u32,
        own: Asker,
        make: impl FnOnce(Asker) -> BoxFuture<'static, Reply>,
    ) -> (Shared<BoxFuture<'static, Reply>>, bool) {
        let question: Question = (problem.into(), prompt_id, repeat);
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reply) = asked.get(&question) {
            return (reply.clone(), true);
        }
        let asker = self.stored.get(&question).copied().unwrap_or(own);
        let reply = make(asker).shared();
        asked.insert(question, reply.clone());
        (reply, asker != own)
    }

    /// Forgets the questions of `problem` (it is judged and stored; nothing asks them
    /// again in this process).
    pub fn forget(&self, problem: &str) {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        asked.retain(|(p, _, _), _| &**p != problem);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    type Made = Arc<Mutex<Vec<Asker>>>;

    fn made(calls: &Made) -> impl Fn(Asker) -> BoxFuture<'static, Reply> {
        let calls = calls.clone();
        move |asker: Asker| {
            calls.lock().unwrap().push(asker);
            async move { Reply::Answered(Arc::from("\\boxed{yes}")) }.boxed()
        }
    }

    #[tokio::test]
    async fn each_question_and_repeat_is_made_once_and_serves_every_asker() {
        let reuse = JudgeReuse::default();
        let calls = Made::default();
        let make = made(&calls);
        let reused = AtomicUsize::new(0);
        for candidate in 0..4 {
            for repeat in 0..2 {
                let (reply, r) = reuse.answer("p", "same".into(), repeat, (1, candidate), &make);
                assert_eq!(reply.await.content(), Some("\\boxed{yes}"));
                reused.fetch_add(usize::from(r), Ordering::Relaxed);
            }
        }
        // Another prompt, and the same prompt of another problem, are questions of their own.
        let _ = reuse.answer("p", "other".into(), 0, (1, 0), &make).0.await;
        let _ = reuse.answer("q", "same".into(), 0, (1, 0), &make).0.await;
        assert_eq!(*calls.lock().unwrap(), [(1, 0), (1, 0), (1, 0), (1, 0)]);
        assert_eq!(reused.load(Ordering::Relaxed), 6, "8 asks, 2 made");
    }

    #[tokio::test]
    async fn a_stored_answer_is_replayed_under_its_stored_key_whoever_asks_first() {
        let reuse = JudgeReuse::seed(vec![StoredJudgeCall {
            problem: "p".into(),
            iteration: 0,
            candidate: 5,
            repeat: 1,
            prompt_id: "same".into(),
        }]);
        let calls = Made::default();
        let make = made(&calls);
        let (_, reused) = reuse.answer("p", "same".into(), 1, (0, 2), &make);
        assert!(reused, "the reply is candidate 5's");
        let (_, again) = reuse.answer("p", "same".into(), 1, (0, 2), &make);
        assert!(again);
        assert_eq!(*calls.lock().unwrap(), [(0, 5)]);
        // Its own stored call is no reuse.
        reuse.forget("p");
        let (_, reused) = reuse.answer("p", "same".into(), 1, (0, 5), &make);
        assert!(!reused);
    }
}
