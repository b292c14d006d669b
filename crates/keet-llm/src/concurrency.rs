//! Measures what batching buys: the decode speed of N answers generated one at a time
//! ([`Engine::generate`]) against the same N decoded together ([`Engine::generate_batch`] with N
//! slots), in tokens/s summed over the answers, with the machine's load average and CPU (numbers
//! on a shared machine need both). Used by `keet bench llm --concurrency` and an ignored test.

use std::time::Instant;

use serde::Serialize;

use super::batch::Request;
use super::engine::{Engine, GenerateOptions, Generation};
use super::model::LlmError;
use super::template::ChatMessage;

/// One concurrency's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ConcurrencyRow {
    /// Answers decoded together.
    pub n: usize,
    /// Tokens generated over the N answers (batched).
    pub tokens: usize,
    /// Decode tokens/s over the N answers one at a time (each with its prompt-lookup drafts).
    pub alone_tok_s: f64,
    /// Decode tokens/s over the N answers decoded together (prefill time left out).
    pub batched_tok_s: f64,
    /// Whether every batched answer has the tokens of the same answer generated alone.
    pub same_tokens: bool,
    /// `/proc/loadavg`'s 1, 5 and 15 minute figures before and after the batched run.
    pub loadavg_before: String,
    pub loadavg_after: String,
}

/// `widest` different questions about CUDA kernels, greedy, at most `max_tokens` each.
pub fn kernel_questions(widest: usize, max_tokens: usize) -> Vec<Request> {
    let topics = ["shared memory bank conflicts", "uncoalesced global loads", "low occupancy from registers", "warp divergence"];
    (0..widest)
        .map(|i| {
            let topic = topics[i % topics.len()];
            let question = format!("Kernel {i}: explain in detail how {topic} slow down a CUDA kernel and how to fix it.");
            Request::messages(vec![ChatMessage::user(question)], GenerateOptions { max_tokens, ..Default::default() }, None)
        })
        .collect()
}

/// For each N of `concurrency` (at most `requests.len()`), the first N requests one at a time and
/// together (the one-at-a-time answers are generated once, for the widest N).
pub fn compare(engine: &mut Engine, requests: &[Request], concurrency: &[usize]) -> Result<Vec<ConcurrencyRow>, LlmError> {
    let widest = concurrency.iter().copied().max().unwrap_or(0).min(requests.len());
    let mut alone: Vec<Generation> = Vec::with_capacity(widest);
    for request in &requests[..widest] {
        engine.reset();
        alone.push(engine.generate_request(request)?);
    }
    let mut rows = Vec::new();
    for &n in concurrency.iter().filter(|&&n| n <= widest) {
        engine.reset();
        let loadavg_before = loadavg();
        let started = Instant::now();
        let together: Vec<Generation> = engine.generate_batch(requests[..n].to_vec(), n).into_iter().collect::<Result<_, _>>()?;
        let wall = started.elapsed().as_secs_f64();
        let prompt_s: f64 = together.iter().map(|g| g.timings.prompt_s).sum();
        let tokens: usize = together.iter().map(|g| g.tokens.len()).sum();
        let alone_tokens: usize = alone[..n].iter().map(|g| g.timings.generated_tokens).sum();
        let alone_s: f64 = alone[..n].iter().map(|g| g.timings.decode_s).sum();
        rows.push(ConcurrencyRow {
            n,
            tokens,
            alone_tok_s: alone_tokens as f64 / alone_s.max(1e-9),
            batched_tok_s: tokens as f64 / (wall - prompt_s).max(1e-9),
            same_tokens: together.iter().zip(&alone).all(|(b, a)| b.tokens == a.tokens),
            loadavg_before,
            loadavg_after: loadavg(),
        });
    }
    Ok(rows)
}

/// The first three fields of /proc/loadavg (1, 5 and 15 minutes), or `?`.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The CPU's model name from /proc/cpuinfo, or `?`.
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let line = info.lines().find(|l| l.starts_with("model name"));
    line.and_then(|l| l.split_once(':')).map_or("?".into(), |(_, v)| v.trim().to_string())
}

/// Prints `rows` as a table.
pub fn print_rows(rows: &[ConcurrencyRow]) {
    println!("{:>4}  {:>7}  {:>12}  {:>14}  {:>7}  {:>5}  load average", "N", "tokens", "alone tok/s", "batched tok/s", "speedup", "same");
    for r in rows {
        println!(
            "{:>4}  {:>7}  {:>12.1}  {:>14.1}  {:>6.2}x  {:>5}  {} -> {}",
            r.n,
            r.tokens,
            r.alone_tok_s,
            r.batched_tok_s,
            r.batched_tok_s / r.alone_tok_s.max(1e-9),
            r.same_tokens,
            r.loadavg_before,
            r.loadavg_after
        );
    }
}
