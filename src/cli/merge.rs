//! `keet merge PART...`: one report from the JSON reports of a sharded batch (see [`crate::merge`]).

use crate::llm::engine::EngineOptions;
use crate::merge::{self, MergeOptions};
use crate::render::{self, Format};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The shard reports (`keet explain --shard K/N --format json -o part-K.json`), all N of them.
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// Output format: text (default), md, json (schema keet.explain/2) or html.
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
    /// Write the report to this file (atomically) instead of standard output.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Model for kernels no shard explained (default: the path the parts recorded; checked by SHA-256).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// cpu (default), cuda or cuda:N.
    #[arg(long)]
    pub device: Option<String>,
    /// CPU threads for the model.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Cache consulted for kernels no shard explained (default: keet's cache, as for explain).
    #[arg(long, env = "KEET_CACHE")]
    pub cache: Option<PathBuf>,
    /// Neither read nor write the analysis cache.
    #[arg(long)]
    pub no_cache: bool,
}

pub fn run(a: MergeArgs) -> anyhow::Result<i32> {
    let opts = MergeOptions {
        engine: EngineOptions { model: a.model.clone(), device: a.device.clone(), threads: a.threads },
        cache: if a.no_cache { None } else { Some(a.cache.clone().unwrap_or_else(crate::cache::default_cache_path)) },
    };
    let (report, _) = match merge::merge(&a.parts, &opts) {
        Ok(r) => r,
        Err(e @ merge::MergeError::Explain(_)) => return Err(e.into()),
        Err(e) => {
            // The parts themselves are bad input.
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let out = render::explain::render_explain(&report, a.format.unwrap_or(Format::Text))?;
    super::write_output(a.output.as_deref(), &out)?;
    for e in &report.errors {
        eprintln!("error: {}", e.message);
    }
    if report.kernels.is_empty() && report.errors.is_empty() {
        eprintln!("error: no kernel launches found in the inputs");
        return Ok(2);
    }
    Ok(if report.errors.is_empty() { 0 } else { 2 })
}
