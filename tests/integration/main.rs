//! The integration tests, as one binary: each suite is a module (`cargo test cli_run::` runs
//! one suite, `cargo test NAME` one test), so CI links one executable instead of one per
//! suite. Shared helpers live in [`common`]. Suites with their own harness or global state
//! stay separate binaries: `eval_fixtures` (one test per fixture, `harness = false`) and
//! `fuzz_hlo` (installs a panic hook for the whole process).
//!
//! Expected-text goldens (`passes_golden`, `front_end`, `passes_corpus`) print a unified diff
//! on a mismatch; `HLOSIM_BLESS=1 cargo test --test integration` rewrites the expected files
//! instead, for review ([`common::golden`]).

mod common;

mod autocast;
mod cli_host;
mod cli_multi_device;
mod cli_profile;
mod cli_reliability;
mod cli_run;
mod cli_stats;
mod corpus_replicas;
mod device;
mod diff_against;
mod diff_cli;
mod diff_corpus;
mod diff_reduce;
mod diff_suite;
mod diff_sweep;
mod eval_corpus;
mod files_safety;
mod forms;
mod forms_async;
mod front_end;
mod limits;
mod multi_device;
mod npz_files;
mod parser_robustness;
mod pass_names;
mod passes_corpus;
mod passes_golden;
mod pictures;
mod thread_count;
mod timing;
