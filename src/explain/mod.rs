//! Explain stage: selects the kernels worth explaining, renders their prompts, asks the model for
//! findings under a per-kernel JSON Schema, validates them, and assembles the report.
//!
//! The steps, one module each: [`run`] takes each chosen kernel through known or cached → answered
//! by the model ([`concurrent`], [`answer`]) or the rule layer ([`rule_answer`]) → stored;
//! [`ask`] asks the model (schema, prompt, the shared ask loop of [`crate::llm::ask`], structure
//! check); [`gate`] puts every sentence through the validator and the [`crate::prose`] gate (a
//! failing sentence gets one constrained re-ask with the gate's reasons, then the expert text
//! stands); [`assemble`] builds the report; [`summary`] and [`set_summary`] ask the model for the
//! profile's summary and each set's explanation under the same checks. Every analysis is stored in the [`crate::cache`]; a warm
//! run never loads the model.

pub mod answer;
pub mod ask;
pub mod assemble;
pub mod code;
mod concurrent;
pub mod gate;
pub mod model;
pub mod prompt;
pub mod report;
pub mod rule_answer;
pub mod run;
pub mod schema;
pub mod set_summary;
pub mod source;
pub mod stats;
pub mod summary;

use crate::analysis::{self, FileError};
use crate::llm::engine::{EngineOptions, GenerateOptions};
use crate::profile::Profile;
use std::path::PathBuf;
use std::time::Instant;

pub use crate::report::batch::{ProseMode, ReportSettings};
pub use assemble::{build_report, kernel_times};
pub use model::ModelSource;
pub use rule_answer::from_rule;
pub use run::{cache_key, explain_table, KnownFindings, KnownKernel};
pub use stats::RunStats;

/// How to explain: what the result means, and how the run goes.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// What the result means, as the report records it. [`explain`] fills in
    /// `prompt_templates_sha256` and `input_files`.
    pub settings: ReportSettings,
    /// Ask the model for a summary of the whole report (with at least two kernels explained).
    pub summary: bool,
    /// Find the sets among the inputs with these options ([`set_summary`]); `None`: no sets (a
    /// shard's report, `--no-sets`). With a model and `summary`, the model explains the first `top`.
    pub sets: Option<crate::sets::SetOptions>,
    /// Only the kernels of these ranks (1-based) go to the model; the others keep the rule layer's
    /// findings and are not cached. `None`: every chosen kernel (`keet eval` asks only about some).
    pub model_ranks: Option<Vec<usize>>,
    /// How the run goes (the report is the same for any of these).
    pub run: RunOptions,
}

/// How a run goes: threads, progress, cache, engine and tracing. None of them changes the report.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub engine: EngineOptions,
    /// `None`: no cache (`--no-cache`).
    pub cache: Option<PathBuf>,
    /// Recompute and replace cached analyses.
    pub refresh: bool,
    /// Parallel parse/facts threads (0 = all cores).
    pub jobs: usize,
    /// Show progress on stderr (only when it is a terminal).
    pub progress: bool,
    /// Kernels asked about at once: their answers are decoded together, one forward pass stepping
    /// all of them (the report is the same for any value; 1 asks one after another).
    pub concurrency: usize,
    /// The prompt and every answer on stderr, for whoever tunes prompts and checks (by default
    /// when `KEET_TRACE` is set).
    pub trace: bool,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions { settings: ReportSettings::default(), summary: true, sets: None, model_ranks: None, run: RunOptions::default() }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            engine: EngineOptions::default(),
            cache: None,
            refresh: false,
            jobs: 0,
            progress: false,
            concurrency: 1,
            trace: std::env::var_os("KEET_TRACE").is_some(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("model: {0}")]
    // No `#[source]`: the message already carries the model error (a chain would print it twice).
    Llm(crate::llm::model::LlmError),
    #[error("cache: {0}")]
    Cache(#[from] crate::cache::CacheError),
    #[error("prompt template: {0}")]
    Prompt(#[from] minijinja::Error),
    #[error("{0}")]
    Io(String),
}

impl From<crate::llm::model::LlmError> for ExplainError {
    fn from(e: crate::llm::model::LlmError) -> Self {
        ExplainError::Llm(e)
    }
}

/// Decoding settings used for findings (part of the cache key).
pub fn decoding() -> GenerateOptions {
    GenerateOptions { repeat_penalty: 1.15, ..GenerateOptions::default() }
}

/// Runs `keet explain` over `inputs`: a streaming pass over the files ([`crate::batch::scan`]),
/// then [`explain_table`].
pub fn explain(inputs: &[PathBuf], opts: &ExplainOptions) -> Result<(report::ExplainReport, RunStats), ExplainError> {
    let t0 = Instant::now();
    if !opts.settings.no_llm {
        // A device that cannot run the model fails now, not after the scan (or never, when
        // every kernel's answer is cached).
        crate::llm::device::check_device(opts.run.engine.device.as_deref())?;
    }
    let mut files = crate::profile::expand_inputs(inputs).map_err(|e| ExplainError::Io(format!("listing inputs: {e}")))?;
    let input_files = files.len();
    if let Some([k, n]) = opts.settings.shard {
        files = files.into_iter().enumerate().filter(|(i, _)| i % n == k).map(|(_, f)| f).collect();
    }
    let crate::batch::Scan { table, errors, members } = crate::batch::scan(&files, opts.run.jobs, opts.run.progress, opts.sets.is_some());
    // Identify the model without loading it (the cache key needs its hash).
    let model = if opts.settings.no_llm {
        ModelSource::None
    } else {
        let r = crate::llm::resolve::resolve_model(opts.run.engine.model.as_deref())?;
        let sha = crate::llm::resolve::model_sha256(&r)?;
        ModelSource::Resolved(r, sha)
    };
    let settings = ReportSettings { prompt_templates_sha256: prompt::templates_sha256(), input_files, ..opts.settings.clone() };
    let opts = ExplainOptions { settings, ..opts.clone() };
    explain_table(run::Batch { inputs, table, errors, members, model, known: &KnownFindings::new(), started: t0 }, &opts)
}

/// Re-exported for the CLI: the kernels of one profile, analysed without the model.
pub fn analyse(p: &Profile) -> analysis::FileAnalysis {
    analysis::analyse_profile(p)
}

/// Errors of files that could not be read, for reports.
pub fn file_error(path: PathBuf, message: String) -> FileError {
    FileError { path, message }
}
