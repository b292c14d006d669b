//! `keet bench llm --synthetic NAME`: prompt and decode speed of a random-weight model in the
//! exact shape of a real one (`crates/keet-llm/src/synthetic.rs`), built in memory, no file, no tokenizer; and,
//! for every `keet bench llm`, decode speed against its memory-bandwidth limit: weight bytes read
//! per decoded token (from the model's tensors as loaded) over a copy bandwidth measured on the
//! same device in the same run.
//!
//! Below `cli::bench` (which parses the arguments and calls in here): nothing here imports it back.

use std::time::Instant;

use anyhow::Context;
use candle_core::Device;
use serde_json::{json, Value};

use super::args::ModelArgs;
use crate::llm::device::{self, CopyBandwidth};
use crate::llm::loader::LoadOptions;
use crate::llm::synthetic::{self, SyntheticSpec};
use crate::llm::WeightBytes;

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// What `keet bench llm --synthetic NAME` runs: the shape, the sizes and the device.
#[derive(Debug, Clone)]
pub struct SyntheticRun {
    /// The shape's name (`tiny`, `llama3-8b`, `qwen2.5-7b`, with `-q4`, `-q4_1` or `-q8`).
    pub name: String,
    pub model: ModelArgs,
    pub prompt_tokens: usize,
    /// Tokens to decode.
    pub tokens: usize,
    /// Seed of the random weights.
    pub seed: u64,
    /// Buffer of the copy-bandwidth measurement, in bytes.
    pub copy_bytes: u64,
    /// One JSON object instead of a table.
    pub json: bool,
}

/// Peak resident memory of this process (VmHWM), MiB.
pub fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Parses a byte count: `1073741824`, `64KiB`/`64K`, `256MiB`/`256M`, `1GiB`/`1G` (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a size (e.g. 1GiB, 256MiB, 1048576)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit `{other}` in `{s}` (use KiB, MiB or GiB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size `{s}` is too large"))
}

/// Measures the copy bandwidth on `device` with a `buffer_bytes` buffer, after checking that the
/// two buffers (source and destination) fit in the memory free there.
pub fn copy_bandwidth(device: &Device, buffer_bytes: u64, threads: usize) -> anyhow::Result<CopyBandwidth> {
    if let Some(free) = device::free_bytes(device)? {
        if 2 * buffer_bytes > free {
            anyhow::bail!(
                "the copy-bandwidth measurement needs two buffers of {buffer_bytes} bytes ({}) but {free} bytes ({}) \
                 are free on {}: pass a smaller --copy-bytes",
                gib(2 * buffer_bytes),
                gib(free),
                device::device_name(device)
            );
        }
    }
    let n = usize::try_from(buffer_bytes).context("--copy-bytes too large for this platform")?;
    Ok(device::measure_copy_bandwidth(device, n, threads)?)
}

/// The memory-bandwidth limit of decode: tokens/s if every decode step only had to read the
/// weights once at the measured copy bandwidth, and the measured decode speed as a share of it.
pub fn decode_limit(w: Option<WeightBytes>, bw: &CopyBandwidth, decode_tok_s: f64) -> Value {
    let per_token = w.map(|w| w.per_token_bytes).filter(|&b| b > 0);
    let limit_tok_s = per_token.map(|b| bw.gbps * 1e9 / b as f64);
    json!({
        "weights": w.map(|w| json!({
            "params": w.params, "resident_bytes": w.resident_bytes, "per_token_bytes": w.per_token_bytes,
        })),
        "weight_bytes_per_token": per_token,
        "copy_bandwidth": {
            "buffer_bytes": bw.buffer_bytes,
            "copies": bw.copies,
            "copy_s": bw.copy_s,
            "gbps": r1(bw.gbps),
            "method": bw.method,
            "convention": "2 x buffer_bytes / copy_s (each byte read once and written once)",
        },
        "copy_bandwidth_gbps": r1(bw.gbps),
        "decode_limit_tok_s": limit_tok_s.map(r1),
        "decode_pct_of_limit": limit_tok_s.map(|l| r1(100.0 * decode_tok_s / l)),
    })
}

/// Adds the fields of `extra` (an object) to `obj`.
pub fn merge(obj: &mut Value, extra: &Value) {
    if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
}

/// Prints the limit rows of a bench object (see [`decode_limit`]).
pub fn print_limit(k: &Value) {
    let bw = &k["copy_bandwidth"];
    match k["weight_bytes_per_token"].as_u64() {
        Some(b) => println!("{:<26} {:>10.3}  ({b} bytes read per decoded token, weights as loaded)", "weight GB/token", b as f64 / 1e9),
        None => println!("{:<26} {:>10}", "weight GB/token", "unknown"),
    }
    println!(
        "{:<26} {:>10}  ({} buffer, {}, 2 x bytes / time)",
        "copy bandwidth GB/s",
        k["copy_bandwidth_gbps"],
        gib(bw["buffer_bytes"].as_u64().unwrap_or(0)),
        bw["method"].as_str().unwrap_or("")
    );
    println!("{:<26} {:>10}  (copy bandwidth / weight bytes per token)", "decode limit tok/s", k["decode_limit_tok_s"]);
    println!("{:<26} {:>10}", "decode % of limit", k["decode_pct_of_limit"]);
}

/// `keet bench llm --synthetic NAME`.
pub fn run(a: &SyntheticRun) -> anyhow::Result<i32> {
    let spec = SyntheticSpec::parse(a.name.as_str())?;
    if a.prompt_tokens == 0 || a.tokens == 0 {
        anyhow::bail!("--prompt-tokens and --tokens must be at least 1 (got {} and {})", a.prompt_tokens, a.tokens);
    }
    let positions = a.prompt_tokens + a.tokens;
    if positions > spec.shape.context {
        anyhow::bail!(
            "{} prompt + {} decoded tokens exceed {}'s context of {} positions",
            a.prompt_tokens,
            a.tokens,
            spec.shape.name,
            spec.shape.context
        );
    }
    let threads = crate::llm::threads::configure(a.model.threads);
    let dev = device::parse_device(a.model.device_or_cpu())?;
    let need = spec.memory_need(&dev, positions);
    check_memory(&spec, &dev, &need)?;

    let bw = copy_bandwidth(&dev, a.copy_bytes, threads)?;
    let measured = measure(&spec, &dev, a, threads)?;
    let mut keet = synthetic_json(&spec, &dev, a, threads, &need, &measured);
    merge(&mut keet, &decode_limit(measured.weights, &bw, measured.decode_tok_s()));

    if a.json {
        println!("{}", json!({ "keet": keet }));
        return Ok(0);
    }
    print_synthetic(&spec, &dev, a, threads, &measured, &keet);
    Ok(0)
}

/// Fails, saying what to pick instead, when the model would not fit in the host's or the
/// device's free memory.
fn check_memory(spec: &SyntheticSpec, dev: &Device, need: &synthetic::MemoryNeed) -> anyhow::Result<()> {
    let dev_name = device::device_name(dev);
    let fits = |what: &str, need_b: u64, free: Option<u64>, source: &str| -> anyhow::Result<()> {
        match free {
            Some(free) if need_b > free => anyhow::bail!(
                "synthetic model {} ({} weights as {} on {dev_name}) needs about {need_b} bytes ({}) of {what}, \
                 but {free} bytes ({}) are available ({source}); pick a smaller shape or format \
                 (e.g. tiny, {}-q4) or a device with more memory",
                spec.name(),
                spec.format.label(),
                spec.dtype_on(dev),
                gib(need_b),
                gib(free),
                spec.shape.name
            ),
            _ => Ok(()),
        }
    };
    fits("host memory", need.host_bytes, device::host_available_bytes(), "MemAvailable / cgroup limit")?;
    if !dev.is_cpu() {
        fits("GPU memory", need.device_bytes, device::free_bytes(dev)?, "cuMemGetInfo free")?;
    }
    Ok(())
}

/// What one synthetic run measured.
struct SyntheticMeasured {
    implementation: &'static str,
    load_s: f64,
    prompt_tokens: usize,
    prompt_s: f64,
    decoded_tokens: usize,
    decode_s: f64,
    /// Whether the last logits are all finite (random weights can overflow).
    logits_finite: bool,
    weights: Option<WeightBytes>,
}

impl SyntheticMeasured {
    fn decode_tok_s(&self) -> f64 {
        self.decoded_tokens as f64 / self.decode_s
    }
}

/// Builds the model, then times the prompt and `a.tokens` greedy decode steps; the model is
/// dropped before returning.
fn measure(spec: &SyntheticSpec, dev: &Device, a: &SyntheticRun, threads: usize) -> anyhow::Result<SyntheticMeasured> {
    let t0 = Instant::now();
    let built = synthetic::build(spec, dev, a.seed, &LoadOptions::from_env(threads))
        .with_context(|| format!("building synthetic model {}", spec.name()))?;
    let load_s = t0.elapsed().as_secs_f64();
    let mut model = built.model;
    let ids = synthetic::prompt_ids(a.prompt_tokens, spec.shape.vocab);

    let t = Instant::now();
    let mut logits = model.forward(&ids, 0)?;
    let prompt_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for pos in ids.len()..ids.len() + a.tokens {
        let tok = logits.iter().enumerate().max_by(|x, y| x.1.total_cmp(y.1)).map(|(i, _)| i as u32).unwrap_or(0);
        logits = model.forward(&[tok], pos)?;
    }
    let decode_s = t.elapsed().as_secs_f64();
    let logits_finite = logits.iter().all(|v| v.is_finite());
    let weights = model.weight_bytes();
    drop(model);
    Ok(SyntheticMeasured {
        implementation: built.implementation,
        load_s,
        prompt_tokens: ids.len(),
        prompt_s,
        decoded_tokens: a.tokens,
        decode_s,
        logits_finite,
        weights,
    })
}

/// The run as `--json` prints it under `keet` (before the decode limit is merged in).
fn synthetic_json(
    spec: &SyntheticSpec,
    dev: &Device,
    a: &SyntheticRun,
    threads: usize,
    need: &synthetic::MemoryNeed,
    m: &SyntheticMeasured,
) -> Value {
    json!({
        "engine": format!("keet ({})", m.implementation),
        "model": format!("synthetic:{}", spec.name()),
        "synthetic": {
            "name": spec.name(),
            "shape": spec.shape,
            "format": spec.format.label(),
            "dtype_on_device": spec.dtype_on(dev),
            "seed": a.seed,
            "params_from_shape": spec.shape.param_count(),
            "memory_estimate": need,
        },
        "architecture": spec.shape.family,
        "device": device::device_name(dev),
        "threads": threads,
        "load_s": r3(m.load_s),
        "prompt_tokens": m.prompt_tokens,
        "prompt_tok_s": r1(m.prompt_tokens as f64 / m.prompt_s),
        "gen_tokens": a.tokens,
        "decode_tok_s": r1(m.decode_tok_s()),
        "logits_finite": m.logits_finite,
        "peak_rss_mb": peak_rss_mb().map(r1),
    })
}

/// The table of one synthetic run.
fn print_synthetic(spec: &SyntheticSpec, dev: &Device, a: &SyntheticRun, threads: usize, m: &SyntheticMeasured, keet: &Value) {
    println!(
        "model          synthetic {} ({}, {} weights as {}, {} implementation, {} threads, {}, seed {})",
        spec.name(),
        spec.shape.family,
        spec.format.label(),
        spec.dtype_on(dev),
        m.implementation,
        threads,
        device::device_name(dev),
        a.seed
    );
    let s = &spec.shape;
    println!(
        "shape          hidden {}, {} layers, {} heads ({} KV), intermediate {}, vocab {}: {} parameters",
        s.hidden,
        s.layers,
        s.heads,
        s.kv_heads,
        s.intermediate,
        s.vocab,
        s.param_count()
    );
    let row = |name: &str, v: &Value| println!("{name:<26} {v:>10}");
    row("load s", &keet["load_s"]);
    row("prompt tokens", &keet["prompt_tokens"]);
    row("prompt tok/s", &keet["prompt_tok_s"]);
    row("decode tokens", &keet["gen_tokens"]);
    row("decode tok/s", &keet["decode_tok_s"]);
    row("peak RSS MiB", &keet["peak_rss_mb"]);
    if let Some(w) = m.weights {
        println!("{:<26} {:>10.3}  ({} parameters as loaded)", "weights GB resident", w.resident_bytes as f64 / 1e9, w.params);
    }
    print_limit(keet);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("64kib"), Ok(64 << 10));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert!(parse_size("1TB").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
    }

    #[test]
    fn the_limit_is_bandwidth_over_bytes_per_token() {
        let bw = CopyBandwidth { buffer_bytes: 1 << 30, copies: 10, copy_s: 0.01, gbps: 200.0, method: "test" };
        let w = WeightBytes { params: 10, resident_bytes: 4_000_000_000, per_token_bytes: 2_000_000_000 };
        let v = decode_limit(Some(w), &bw, 50.0);
        assert_eq!(v["decode_limit_tok_s"], 100.0);
        assert_eq!(v["decode_pct_of_limit"], 50.0);
        assert_eq!(v["weight_bytes_per_token"], 2_000_000_000u64);
        let v = decode_limit(None, &bw, 50.0);
        assert!(v["decode_limit_tok_s"].is_null() && v["copy_bandwidth_gbps"] == 200.0);
    }
}
