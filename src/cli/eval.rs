//! `keet eval PATH...`: multiple-choice questions with known answers from the profiles' raw
//! metrics, answered by the local model in each context format; prints accuracy per question kind
//! and format, and can write the questions as JSONL for other models and tools.

use crate::eval::{self, Condition, EvalModel, EvalOptions};
use crate::llm::Engine;
use crate::render;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// `.ncu-rep` files, ncu CSV exports, or directories (searched recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Kernels per profile to ask about (those that take the most time).
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Seed for the order of the questions and of their options.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Context formats to ask in, comma-separated: raw (the metric table alone), context
    /// (`explain --format context`), md (the full Markdown report).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "raw,context,md")]
    pub formats: Vec<Condition>,
    /// Write the questions, their answers, the raw metrics each answer follows from, and the
    /// contexts, one JSON object per line.
    #[arg(long, value_name = "FILE")]
    pub questions_out: Option<PathBuf>,
    /// Only generate the questions (with --questions-out): no model is loaded.
    #[arg(long)]
    pub no_llm: bool,
    /// Output format: text (default) or json (schema keet.eval/1, with every answer).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<EvalFormat>,
    #[command(flatten)]
    pub output: super::args::OutputArgs,
    #[command(flatten)]
    pub model: super::args::ModelArgs,
    /// Threads for parsing (default: all cores).
    #[arg(long, short = 'j', default_value_t = 0)]
    pub jobs: usize,
}

pub fn run(a: EvalArgs) -> anyhow::Result<i32> {
    let mut formats = a.formats.clone();
    formats.sort();
    formats.dedup();
    let set = eval::build(&a.paths, &EvalOptions { top: a.top, seed: a.seed, jobs: a.jobs })?;
    for e in &set.errors {
        eprintln!("error: {}", e.message);
    }
    if let Some(p) = &a.questions_out {
        super::write_output(Some(p), &eval::jsonl(&set))?;
        eprintln!("wrote {} questions to {}", set.questions.len(), p.display());
    }
    if set.questions.is_empty() {
        eprintln!("error: no questions: the inputs' metrics answer none of keet eval's question kinds clearly (they need the SpeedOfLight, Occupancy, LaunchStats, WarpStateStats or MemoryWorkloadAnalysis sections)");
        return Ok(2);
    }
    if a.no_llm {
        return Ok(if set.errors.is_empty() { 0 } else { 2 });
    }
    let mut engine = Engine::load(&a.model.engine_options())
        .map_err(|e| anyhow::anyhow!("{e} (use --no-llm --questions-out FILE for the questions alone)"))?;
    let show = std::io::stderr().is_terminal();
    let mut progress = |done: usize, total: usize| {
        if show {
            eprint!("\ranswering {done}/{total}");
            if done == total {
                eprintln!();
            }
        }
    };
    let (answers, truncated) = eval::answer(&set, &mut engine, &formats, &mut progress)?;
    let model = EvalModel { name: engine.info.name.clone(), device: engine.info.device.clone() };
    let report = eval::report(&set, answers, &formats, Some(model), a.seed, truncated);
    let out = match a.format.unwrap_or(EvalFormat::Text) {
        EvalFormat::Json => render::json(&report)?,
        EvalFormat::Text => render::render("eval.txt", &report)?,
    };
    a.output.write(&out)?;
    Ok(if set.errors.is_empty() { 0 } else { 2 })
}
