//! `keet inspect`: the facts and rule findings for every launch in every file.

use crate::analysis::{self, FileError, InspectDocument, INSPECT_SCHEMA};
use crate::render::{self, Format};
use anyhow::Context;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// `.ncu-rep` files, ncu CSV exports, or directories (searched recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format (text by default; JSON follows the documented `keet.inspect/1` schema).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
    /// Write to this file instead of standard output (written atomically).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Parse files in parallel with this many threads (default: all cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
}

/// Builds the template context: the document plus each launch's facts as a flat list.
pub fn template_context(doc: &InspectDocument) -> serde_json::Value {
    let mut facts_list = BTreeMap::new();
    for f in &doc.files {
        for l in &f.launches {
            facts_list.insert(format!("{}#{}", f.path.display(), l.id), l.facts.all());
        }
    }
    let mut v = serde_json::to_value(doc).expect("analysis serialises");
    v["facts_list"] = serde_json::to_value(facts_list).expect("facts serialise");
    v
}

pub fn run(a: InspectArgs) -> anyhow::Result<i32> {
    let files = crate::profile::expand_inputs(&a.paths).context("listing inputs")?;
    if files.is_empty() {
        anyhow::bail!("no .ncu-rep or .csv files found in {}", a.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(a.jobs.unwrap_or(0)).build().context("thread pool")?;
    let results: Vec<_> = pool.install(|| {
        use rayon::prelude::*;
        files.par_iter().map(|p| crate::profile::read_path(p).map(|prof| analysis::analyse_profile(&prof))).collect()
    });
    let mut doc = InspectDocument { schema: INSPECT_SCHEMA, keet_version: env!("CARGO_PKG_VERSION"), files: vec![], errors: vec![] };
    let mut bad_input = false;
    for (path, r) in files.iter().zip(results) {
        match r {
            Ok(f) => doc.files.push(f),
            Err(e) => {
                bad_input = true;
                doc.errors.push(FileError { path: path.clone(), message: e.to_string() });
            }
        }
    }
    let format = a.format.unwrap_or(Format::Text);
    let out = match format {
        Format::Json => render::json(&doc)?,
        Format::Md => render::render("inspect.md", &template_context(&doc))?,
        Format::Text | Format::Html => render::render("inspect.txt", &template_context(&doc))?,
    };
    super::write_output(a.output.as_deref(), &out)?;
    for e in &doc.errors {
        eprintln!("error: {}", e.message);
    }
    if bad_input {
        // Bad input: exit 2 as documented (other files were still reported).
        return Ok(2);
    }
    let _ = std::io::stdout().is_terminal();
    Ok(0)
}
