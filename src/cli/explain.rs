//! `keet explain`: validated explanations of the kernels that take the time.

use super::args::{CacheArgs, JobsArgs, ModelArgs, OutputArgs};
use crate::explain::{self, ExplainOptions, ReportSettings, RunOptions};
use crate::render::{self, Format};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// `.ncu-rep` files, ncu CSV exports, or directories (searched recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format: text (default), md, json (schema keet.explain/2), html (one self-contained
    /// page) or context (compact Markdown for an LLM's context window).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
    /// With `--format context`: at most this many tokens, counted with the model's tokenizer
    /// (`--model`, else the default); the least important kernels are cut first.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Explain at most this many kernels (and, with a model, at most this many sets).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Explain the kernels that make up this percentage of the profiled time.
    #[arg(long, default_value_t = 95.0)]
    pub coverage: f64,
    /// At most this many model findings per kernel.
    #[arg(long, default_value_t = 2)]
    pub max_findings: usize,
    /// The rule layer's report alone: no model is loaded.
    #[arg(long)]
    pub no_llm: bool,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Recompute cached analyses and replace them.
    #[arg(long)]
    pub refresh: bool,
    #[command(flatten)]
    pub jobs: JobsArgs,
    /// The kernels' code: a source file or a directory (CUDA .cu/.cuh/.cpp/.h, Triton or Numba .py).
    /// Findings point at its lines; with a model, the primary finding gets one checked edit of the
    /// kernel. Without it, keet uses the sources a report embeds (`ncu --import-source yes`).
    #[arg(long = "source", value_name = "FILE|DIR")]
    pub source: Vec<PathBuf>,
    /// Do not look for the kernels' code, and ask the model for no edit.
    #[arg(long)]
    pub no_edit: bool,
    /// Only the K-th of N shares of the input files (0-based, e.g. `--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT`).
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<(usize, usize)>,
    /// Print run statistics (times, cache hits, dropped findings) to stderr.
    #[arg(long)]
    pub stats: bool,
    /// How the model writes its sentences: free (for a capable model), guided (a worked example and
    /// the expert text's openings) or choose (among expert causes and fixes the facts support).
    #[arg(long, value_enum, default_value_t = explain::ProseMode::default())]
    pub prose: explain::ProseMode,
    /// Also show the model text that was dropped or replaced, with the reasons.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// No model summary of the whole profile (written when two or more kernels are explained), and no
    /// model explanation of the sets (their expert summaries stand).
    #[arg(long)]
    pub no_summary: bool,
    /// Read a varying value from each file's path for sets, e.g. `--vary 'N=n(\d+)'` (the first
    /// capture group, else the whole match); repeatable.
    #[arg(long, value_name = "KEY=REGEX")]
    pub vary: Vec<String>,
    /// Kernels whose names give the same capture of REGEX are one kernel in sets (instead of the
    /// same name up to template arguments).
    #[arg(long, value_name = "REGEX")]
    pub set_key: Option<String>,
    /// No sets: do not look for the same kernel (or its versions) across the inputs.
    #[arg(long)]
    pub no_sets: bool,
    /// Kernels the model answers at once: their answers are decoded together, one forward pass
    /// stepping all of them (more kernels per hour on a CPU; the report is the same for any value).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub concurrency: usize,
}

/// The run's options; sets are looked for unless `--no-sets` or `--shard` (a shard sees part of a set).
pub fn options(a: &ExplainArgs) -> Result<ExplainOptions, crate::sets::SetsError> {
    let sets = crate::sets::SetOptions {
        vary: crate::sets::parse_vary(&a.vary)?,
        key: crate::sets::parse_key(a.set_key.as_deref())?,
        jobs: a.jobs.jobs,
    };
    Ok(ExplainOptions {
        settings: ReportSettings {
            coverage_pct: a.coverage.clamp(0.0, 100.0),
            top: a.top.max(1),
            max_findings: a.max_findings.clamp(1, 4),
            no_llm: a.no_llm,
            repair_attempts: 1,
            source_files: a.source.clone(),
            shard: a.shard.map(|(k, n)| [k, n]),
            prose: a.prose,
            edit: !a.no_edit,
            ..ReportSettings::default()
        },
        // A shard's summary would speak for part of the batch only.
        summary: !a.no_summary && a.shard.is_none(),
        sets: (!a.no_sets && a.shard.is_none()).then_some(sets),
        model_ranks: None,
        run: RunOptions {
            engine: a.model.engine_options(),
            cache: a.cache.path(),
            refresh: a.refresh,
            jobs: a.jobs.jobs,
            progress: std::io::stderr().is_terminal(),
            concurrency: a.concurrency.max(1),
            ..RunOptions::default()
        },
    })
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s.split_once('/').ok_or_else(|| format!("expected K/N, got {s:?}"))?;
    let k: usize = k.trim().parse().map_err(|_| format!("K in {s:?} is not a number"))?;
    let n: usize = n.trim().parse().map_err(|_| format!("N in {s:?} is not a number"))?;
    if n == 0 || k >= n {
        return Err(format!("shard {s:?}: need 0 <= K < N"));
    }
    Ok((k, n))
}

pub fn run(a: ExplainArgs) -> anyhow::Result<i32> {
    let format = a.format.unwrap_or(Format::Text);
    let counter = match a.max_tokens {
        Some(_) if format != Format::Context => {
            eprintln!("error: --max-tokens applies to --format context only");
            return Ok(2);
        }
        Some(n) => Some((n, super::token_counter(a.model.model.as_deref())?)),
        None => None,
    };
    let opts = options(&a)?;
    let (mut report, stats) = explain::explain(&a.paths, &opts)?;
    if !a.verbose {
        report.hide_dropped_text();
    }
    if counter.is_none() && format == Format::Json {
        // Streamed: a batch's report (every set member of thousands of files) is never one string.
        a.output.write_json(&report)?;
        return finish(&a, &report, &stats);
    }
    let out = match &counter {
        Some((max_tokens, count)) => {
            let budget = render::context::TokenBudget { max_tokens: *max_tokens, count: count.as_ref() };
            match render::context::explain_context(&report, Some(&budget)) {
                Ok(s) => s,
                Err(e @ render::RenderError::Budget { .. }) => {
                    eprintln!("error: {e}");
                    return Ok(2);
                }
                Err(e) => return Err(e.into()),
            }
        }
        None => render::explain::render_explain(&report, format)?,
    };
    a.output.write(&out)?;
    finish(&a, &report, &stats)
}

/// After the report is written: the run's statistics (`--stats`), the files' errors, and the
/// exit code (2 when a file could not be read or no launch was found).
fn finish(a: &ExplainArgs, report: &crate::report::explain::ExplainReport, stats: &explain::RunStats) -> anyhow::Result<i32> {
    if a.stats {
        eprintln!("{}", serde_json::to_string(stats).unwrap_or_default());
    }
    for e in &report.errors {
        eprintln!("error: {}", e.message);
    }
    if report.kernels.is_empty() && report.errors.is_empty() {
        eprintln!("error: no kernel launches found in the inputs");
        return Ok(2);
    }
    Ok(if report.errors.is_empty() { 0 } else { 2 })
}
