//! The simulated OpenAI-compatible endpoint (under construction).

pub mod options;

pub use options::SimOptions;
