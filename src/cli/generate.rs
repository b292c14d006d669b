//! `keet generate`: run the local model on one prompt (optionally constrained by a JSON Schema).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use super::args::ModelArgs;
use crate::llm::{ChatMessage, Engine, GenerateOptions};

#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The user message.
    #[arg(long, short = 'p', required_unless_present = "prompt_file")]
    pub prompt: Option<String>,
    /// Read the user message from a file.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// A system message (default: the model template's own).
    #[arg(long)]
    pub system: Option<String>,
    /// Use the prompt as the full model input (no chat template).
    #[arg(long)]
    pub raw: bool,
    /// Constrain the output to this JSON Schema (file).
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Sampling temperature (0 = greedy, deterministic).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Nucleus sampling threshold (with --temperature > 0).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Seed for sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Repeat penalty over the last 64 tokens (1.0 = off).
    #[arg(long, default_value_t = 1.1)]
    pub repeat_penalty: f32,
    /// Print timings and the stop reason (JSON) on stderr.
    #[arg(long)]
    pub stats: bool,
}

pub fn run(a: GenerateArgs) -> anyhow::Result<i32> {
    let prompt = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) => anyhow::bail!("give --prompt or --prompt-file"),
    };
    let schema = match &a.schema {
        Some(f) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            Some(serde_json::from_str::<serde_json::Value>(&text).with_context(|| format!("{} is not JSON", f.display()))?)
        }
        None => None,
    };
    if let Some(s) = &schema {
        match crate::llm::constraint::max_tokens_bound(s) {
            Ok(b) if b > a.max_tokens => eprintln!(
                "keet: warning: output valid against this schema can take up to {b} tokens; with --max-tokens {} it may be cut short",
                a.max_tokens
            ),
            Ok(_) => {}
            Err(why) => eprintln!("keet: warning: the schema is unbounded ({why}); output may be cut short by --max-tokens"),
        }
    }
    let mut engine = Engine::load(&a.model.engine_options())?;
    let opts = GenerateOptions {
        max_tokens: a.max_tokens,
        temperature: a.temperature,
        top_p: a.top_p,
        seed: a.seed,
        repeat_penalty: a.repeat_penalty,
        ..Default::default()
    };
    let g = if a.raw {
        engine.generate_text(&prompt, &opts, schema.as_ref())?
    } else {
        let mut messages = Vec::new();
        if let Some(s) = &a.system {
            messages.push(ChatMessage::system(s.clone()));
        }
        messages.push(ChatMessage::user(prompt));
        engine.generate(&messages, &opts, schema.as_ref())?
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", g.text)?;
    if a.stats {
        let t = &g.timings;
        let stats = serde_json::json!({
            "model": engine.info,
            "stop_reason": g.stop_reason,
            "prompt_tokens": t.prompt_tokens,
            "generated_tokens": t.generated_tokens,
            "forced_tokens": t.forced_tokens,
            "drafted_tokens": t.drafted_tokens,
            "draft_hits": t.draft_hits,
            "prompt_tok_s": round1(t.prompt_tok_s()),
            "decode_tok_s": round1(t.decode_tok_s()),
            "mask_us_mean": if t.mask_us.is_empty() { None } else { Some(round1(t.mask_us.iter().sum::<f64>() / t.mask_us.len() as f64)) },
        });
        eprintln!("{stats}");
    }
    Ok(0)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
