//! Integration tests of `tmas`: one test binary whose modules are the former test files.
//!
//! One binary because each file in `tests/` is linked against the whole crate on its own;
//! on a 2-core CI machine two dozen such links cost more than the tests themselves. The
//! modules run as threads of one process, so nothing here may rely on process-wide state
//! of its own: tests that need a process of their own (an OTLP exporter and a metrics
//! recorder are installed once per process) run the `tmas` binary as a child process.
//!
//! Shared helpers live in [`support`].

mod support;

mod bench_eval;
mod bench_soak;
mod check_first;
mod cli_vocabulary;
mod cluster_recipes;
mod config_check;
mod eval_dataset;
mod eval_judging;
mod export_parquet;
mod interrupt_surfaces;
mod judge_as_you_go;
mod judge_cli;
mod judge_partial;
mod judge_reuse;
mod judge_table;
mod observability_content;
mod observability_trace;
mod observability_unreachable;
mod pass_at_1_failed;
mod resume_extend;
mod resume_kill;
mod rl_cli;
mod run_bank_meaning;
mod run_baselines_official;
mod run_cli;
mod run_engine;
mod run_failures;
mod run_prompts;
mod run_quality;
mod run_rse_embeddings;
mod run_stream_cuts;
mod run_usage_estimate;
mod serve_fairness;
mod serve_http;
mod serve_openai;
mod serve_store;
mod serve_trace;
mod shard_merge;
mod signals;
mod sim_cli;
mod sim_faults;
mod sim_http;
mod sim_task;
mod sim_throughput;
mod store_errors;
mod store_versions;
mod verl_hybrid;
mod view_browser;
mod view_pages;
mod view_traces;
