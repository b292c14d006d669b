//! Command-line interface: argument parsing and dispatch to the stages. Exit codes: 0 success,
//! 1 a finding/regression threshold tripped or some inputs failed, 2 bad input or usage.

pub mod args;
pub mod bench;
pub mod bench_batch;
pub mod bench_explain;
pub mod bench_ingest;
pub mod bench_synthetic;
pub mod cache;
pub mod compare;
pub mod eval;
pub mod explain;
pub mod generate;
pub mod history;
pub mod inspect;
pub mod mcp;
pub mod merge;
pub mod model;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "keet", version, about = "Explains Nsight Compute profiles offline: why each kernel is slow and what to change")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Explain why the kernels that take the time are slow and what to change (validated findings).
    Explain(explain::ExplainArgs),
    /// Combine the JSON reports of a sharded batch (`explain --shard K/N`) into one report.
    Merge(merge::MergeArgs),
    /// Manage analysis caches (fold node-local caches into one).
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Compare two profiles: matched kernels, metric deltas, and an explanation of what changed.
    Compare(compare::CompareArgs),
    /// Score what keet's report is worth to a model: multiple-choice questions from the raw metrics,
    /// answered with the raw table, the context report, or the Markdown report.
    Eval(eval::EvalArgs),
    /// Print the facts and rule findings for every kernel launch.
    Inspect(inspect::InspectArgs),
    /// Run the local model on a prompt (optionally constrained by a JSON Schema).
    Generate(generate::GenerateArgs),
    /// Manage local models (install the default model, list what keet finds).
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Benchmarks that print numbers.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// List past analyses.
    History(history::HistoryArgs),
    /// Print one past analysis again.
    Show(history::ShowArgs),
    /// Serve keet's analyses to coding agents over the Model Context Protocol (stdio only, no network socket).
    Mcp(mcp::McpArgs),
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Explain(a) => explain::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Cache(c) => cache::run(c),
        Command::Compare(a) => compare::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Model(c) => model::run(c),
        Command::Bench(c) => bench::run(c),
        Command::History(a) => history::run_history(a),
        Command::Show(a) => history::run_show(a),
        Command::Mcp(a) => mcp::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit_code_for(&e)
        }
    }
}

/// Bad input (profile errors, usage) exits 2; everything else 1.
pub fn exit_code_for(e: &anyhow::Error) -> i32 {
    if e.chain().any(|c| c.downcast_ref::<crate::profile::ProfileError>().is_some()) {
        2
    } else {
        1
    }
}

/// Counts the tokens of a text.
pub type TokenCounter = Box<dyn Fn(&str) -> usize>;

/// Counts tokens with the tokenizer of `model` (or the default model), for `--max-tokens`. Only
/// the tokenizer is read, never the weights.
pub fn token_counter(model: Option<&str>) -> anyhow::Result<TokenCounter> {
    use anyhow::Context;
    let (tok, _name) = crate::llm::tokenizer::for_model(model).context("--max-tokens counts tokens with the model's tokenizer")?;
    Ok(Box::new(move |s: &str| tok.encode(s).map(|v| v.len()).unwrap_or(usize::MAX)))
}

/// Writes `text` to `path` atomically (temp file + rename, so no partial file is left behind; a new
/// file gets the mode the umask gives, see [`crate::files::write_atomic`]), or to standard output
/// when `path` is `None`.
pub fn write_output(path: Option<&std::path::Path>, text: &str) -> anyhow::Result<()> {
    write_output_with(path, |out| out.write_all(text.as_bytes()))
}

/// [`write_output`] with the content streamed by `write` (never held whole in memory).
pub fn write_output_with(
    path: Option<&std::path::Path>,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    match path {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match write(&mut out).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("writing to standard output"),
            }
        }
        Some(p) => crate::files::write_atomic_with(p, write).with_context(|| format!("writing {}", p.display())),
    }
}
