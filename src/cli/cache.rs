//! `keet cache merge SRC... --into DST`: folds node-local analysis caches into one (see
//! [`crate::cache::merge_into`]).

use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum CacheCommand {
    /// Fold caches (e.g. the node-local caches of a Slurm batch) into one cache file, in one
    /// transaction: entries are keyed by content, so duplicates are skipped and nothing is lost.
    Merge(CacheMergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct CacheMergeArgs {
    /// Cache files to read (never modified).
    #[arg(required = true, value_name = "SRC")]
    pub sources: Vec<PathBuf>,
    /// The cache to fold them into (created if missing).
    #[arg(long, value_name = "DST")]
    pub into: PathBuf,
}

pub fn run(c: CacheCommand) -> anyhow::Result<i32> {
    match c {
        CacheCommand::Merge(a) => {
            let stats = match crate::cache::merge_into(&a.into, &a.sources, |src, n| {
                eprintln!("merging {} ({n} entries)", src.display());
            }) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    eprintln!("{}: left as it was", a.into.display());
                    return Ok(2);
                }
            };
            eprintln!("{}: {} entries added, {} already there ({} now)", a.into.display(), stats.added, stats.present, stats.total);
            Ok(0)
        }
    }
}
