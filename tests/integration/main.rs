//! keet's integration tests, one test binary: each module is the test of one behaviour, driving
//! the `keet` binary or the library from outside. One binary links once (34 binaries of 170 MB each
//! filled the CI disk); `cargo test --test integration MODULE` runs one module.

mod llm_support;

mod batch_merge;
mod bench_llm;
mod cache_concurrency;
mod cache_merge_kill;
mod cache_show;
mod code_edit;
mod compare_cli;
mod context_format;
mod corpus_labels;
mod csv_corpus;
mod csv_encodings;
mod error_messages;
mod eval_cli;
mod eval_questions;
mod eval_reuse;
mod eval_sets;
mod explain_default_model;
mod explain_e2e;
mod explain_prose_gate;
mod grounded_grammar;
mod h100_labels;
mod inspect_cli;
mod llm_constrained;
mod llm_errors;
mod llm_generate;
mod llm_gguf_qwen;
mod llm_safetensors;
mod llm_synthetic;
mod llm_tokenizer;
mod mcp_stdio;
mod module_graph;
mod ncu_rep_corpus;
mod ncu_report_oracle;
mod private_files;
mod render_explain;
mod set_explanation;
mod sets;
mod slurm_batch;
mod truncated_inputs;
