//! Strategy tests: the state machine driven by canned replies, no actors or network.

mod branches;
mod embeddings;
mod flow;
mod harness;
mod released;
mod replies;
mod segments;
mod with_simulator;
