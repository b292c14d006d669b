//! `keet merge PART...`: one report from the JSON reports of a sharded batch (see [`crate::merge`]).

use super::args::{CacheArgs, ModelArgs, OutputArgs};
use crate::merge::{self, MergeOptions};
use crate::render::{self, Format};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(mut_arg("model", |a| a.help("Model for kernels no shard explained (default: the model the parts recorded; checked by SHA-256)")))]
#[command(mut_arg("cache", |a| a.help("Cache consulted for kernels no shard explained (default: KEET_CACHE, else keet's cache dir, as for explain)")))]
pub struct MergeArgs {
    /// The shard reports (`keet explain --shard K/N --format json -o part-K.json`), all N of them.
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// Output format: text (default), md, json (schema keet.explain/2) or html.
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
}

pub fn run(a: MergeArgs) -> anyhow::Result<i32> {
    let opts = MergeOptions { engine: a.model.engine_options(), cache: a.cache.path() };
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
    a.output.write(&out)?;
    for e in &report.errors {
        eprintln!("error: {}", e.message);
    }
    if report.kernels.is_empty() && report.errors.is_empty() {
        eprintln!("error: no kernel launches found in the inputs");
        return Ok(2);
    }
    Ok(if report.errors.is_empty() { 0 } else { 2 })
}
