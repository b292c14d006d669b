//! `keet bench explain`: time to first finding, kernels explained per minute with the model, and
//! the warm-cache time of the same run, on one profile.

use crate::explain::{self, ExplainOptions};
use crate::llm::engine::EngineOptions;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct ExplainBenchArgs {
    /// Profile to explain (default: the H200 decode report of ../shared/corpus).
    pub profile: Option<PathBuf>,
    /// Kernels to explain.
    #[arg(long, default_value_t = 3)]
    pub top: usize,
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    #[arg(long)]
    pub device: Option<String>,
    #[arg(long)]
    pub threads: Option<usize>,
}

pub fn run(a: ExplainBenchArgs) -> anyhow::Result<i32> {
    let profile = a
        .profile
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/h200-moe/decode_c1.ncu-rep"));
    let dir = tempfile::tempdir()?;
    let opts = ExplainOptions {
        top: a.top,
        engine: EngineOptions { model: a.model.clone(), device: a.device.clone(), threads: a.threads },
        cache: Some(dir.path().join("bench.sqlite3")),
        ..ExplainOptions::default()
    };
    let inputs = vec![profile.clone()];
    let t = Instant::now();
    let (cold, s1) = explain::explain(&inputs, &opts)?;
    let cold_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (warm, s2) = explain::explain(&inputs, &opts)?;
    let warm_s = t.elapsed().as_secs_f64();
    let same = serde_json::to_value(&cold.kernels.iter().map(|k| &k.findings).collect::<Vec<_>>())?
        == serde_json::to_value(&warm.kernels.iter().map(|k| &k.findings).collect::<Vec<_>>())?;
    let gen_s = (cold_s - s1.model_load_s - s1.parse_s).max(1e-9);
    println!("profile: {}", profile.display());
    println!("model: {}", cold.model.as_ref().map(|m| format!("{} on {}", m.name, m.device)).unwrap_or_else(|| "none".into()));
    println!("kernels explained:          {}", s1.kernels_explained);
    println!("model load:                 {:.2} s", s1.model_load_s);
    println!("time to first finding:      {:.2} s", s1.first_finding_s.unwrap_or(0.0));
    println!("cold run total:             {:.2} s", cold_s);
    println!("kernels per minute (model): {:.2}", s1.kernels_explained as f64 * 60.0 / gen_s);
    println!("model findings shown / repaired / dropped: {} / {} / {}", s1.llm_findings_shown, s1.llm_findings_repaired, s1.llm_findings_dropped);
    println!("warm-cache run:             {:.3} s ({} of {} kernels from the cache, model loaded: {})", warm_s, s2.kernels_from_cache, s2.kernels_explained, s2.model_load_s > 0.0);
    println!("warm output identical:      {same}");
    Ok(0)
}
