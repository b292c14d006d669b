//! The arguments several commands share, declared once so that every command spells, documents
//! and defaults them the same way: the model ([`ModelArgs`]), the analysis cache ([`CacheArgs`],
//! [`CacheFileArg`] for the commands that only read it), where the output goes ([`OutputArgs`])
//! and the parsing threads ([`JobsArgs`]). Commands flatten them (`#[command(flatten)]`).

use std::path::{Path, PathBuf};

use crate::llm::EngineOptions;

/// The model to load and where it runs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// Model: a .gguf file, a model folder, or a manifest name (default: KEET_MODEL, then the
    /// installed default model, then the local Hugging Face cache).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Device: cpu (default), cuda or cuda:N.
    #[arg(long)]
    pub device: Option<String>,
    /// CPU threads for the model (default: KEET_THREADS, else cores - 1 reduced by the current
    /// load, at least 1).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl ModelArgs {
    pub fn engine_options(&self) -> EngineOptions {
        EngineOptions { model: self.model.clone(), device: self.device.clone(), threads: self.threads }
    }

    /// The device named, `cpu` when none is.
    pub fn device_or_cpu(&self) -> &str {
        self.device.as_deref().unwrap_or("cpu")
    }
}

/// The cache file, for the commands that only read it (`keet history`, `keet show`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CacheFileArg {
    /// The analysis cache file (default: KEET_CACHE, else keet's cache dir:
    /// `~/.cache/keet/analyses.sqlite3`).
    #[arg(long, env = "KEET_CACHE", value_name = "PATH")]
    pub cache: Option<PathBuf>,
}

impl CacheFileArg {
    /// The file named, else keet's default cache file.
    pub fn path(&self) -> PathBuf {
        self.cache.clone().filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(crate::cache::default_cache_path)
    }
}

/// The analysis cache of the commands that read and write it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CacheArgs {
    #[command(flatten)]
    pub file: CacheFileArg,
    /// Neither read nor write the analysis cache.
    #[arg(long)]
    pub no_cache: bool,
}

impl CacheArgs {
    /// The cache file to use; `None` with `--no-cache`.
    pub fn path(&self) -> Option<PathBuf> {
        (!self.no_cache).then(|| self.file.path())
    }
}

/// Where the report goes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Write to this file instead of standard output (atomically; a new file gets the mode your
    /// umask gives, as with `>`).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

impl OutputArgs {
    pub fn path(&self) -> Option<&Path> {
        self.output.as_deref()
    }

    /// Writes `text` to the file (see [`super::write_output`]) or to standard output.
    pub fn write(&self, text: &str) -> anyhow::Result<()> {
        super::write_output(self.path(), text)
    }

    /// Writes `data` as pretty JSON with a trailing newline (as [`crate::render::json`]),
    /// streamed to the file or standard output.
    pub fn write_json<T: serde::Serialize>(&self, data: &T) -> anyhow::Result<()> {
        super::write_output_with(self.path(), |out| {
            serde_json::to_writer_pretty(&mut *out, data).map_err(std::io::Error::from)?;
            out.write_all(b"\n")
        })
    }
}

/// Threads for reading the profiles and deriving facts.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JobsArgs {
    /// Threads for parsing and facts (0: all cores).
    #[arg(long, short = 'j', default_value_t = 0)]
    pub jobs: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Probe {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        cache: CacheArgs,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        jobs: JobsArgs,
    }

    #[test]
    fn shared_arguments_parse_and_default() {
        let p =
            Probe::try_parse_from(["keet", "-m", "m.gguf", "--device", "cuda:1", "--threads", "3", "--no-cache", "-o", "r.txt", "-j", "2"])
                .unwrap();
        assert_eq!(p.model.engine_options().device.as_deref(), Some("cuda:1"));
        assert_eq!((p.model.model.as_deref(), p.model.threads), (Some("m.gguf"), Some(3)));
        assert_eq!(p.cache.path(), None);
        assert_eq!(p.output.path(), Some(Path::new("r.txt")));
        assert_eq!(p.jobs.jobs, 2);
        let p = Probe::try_parse_from(["keet", "--cache", "/x/c.sqlite3"]).unwrap();
        assert_eq!(p.model.device_or_cpu(), "cpu");
        assert_eq!(p.cache.path(), Some(PathBuf::from("/x/c.sqlite3")));
        assert_eq!((p.output.path(), p.jobs.jobs), (None, 0));
    }
}
