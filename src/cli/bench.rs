//! `keet bench`: benchmarks that print numbers (ingest, llm, explain).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde_json::{json, Value};

use super::args::ModelArgs;
use super::bench_synthetic::peak_rss_mb;
use crate::llm::{ChatMessage, Engine, GenerateOptions};

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Ingest throughput (CSV MB/s, report ms) beside Python's csv module.
    Ingest(super::bench_ingest::IngestBenchArgs),
    /// Batch memory and throughput: `explain --no-llm` over N profiles for two or more N, side by side.
    Batch(super::bench_batch::BatchBenchArgs),
    /// Explain on one profile: time to first finding, kernels per minute, warm-cache time.
    Explain(super::bench_explain::ExplainBenchArgs),
    /// LLM engine: prompt and decode tokens/s, constraint-mask time, load time, peak memory,
    /// prefix-reuse saving, decode against the memory-bandwidth limit; optionally beside llama.cpp
    /// (`--peer`) on the same prompt, or a random-weight model of a real shape (`--synthetic`).
    Llm(LlmBenchArgs),
}

/// The ~600-token prompt shared with the llama.cpp peer benchmark.
pub const BENCH_PROMPT: &str = include_str!("../../tests/data/llm_bench_prompt.txt");

#[derive(clap::Args, Debug)]
pub struct LlmBenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text file (default: the built-in ~600-token prompt, tests/data/llm_bench_prompt.txt).
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// Tokens to decode (greedy, end tokens banned so every run decodes the same count).
    #[arg(long, default_value_t = 200)]
    pub tokens: usize,
    /// Wrap the prompt in the model's chat template as the user message (as the peer's --chat).
    #[arg(long)]
    pub chat: bool,
    /// Also run llama.cpp (../shared/bench/xllamacpp_peer.py, the prebuilt xllamacpp wheel) on the
    /// same model, prompt and threads.
    #[arg(long)]
    pub peer: bool,
    /// Path of the peer script.
    #[arg(long, default_value = "../shared/bench/xllamacpp_peer.py")]
    pub peer_script: PathBuf,
    /// Python interpreter of the peer (a venv with `pip install xllamacpp==2026.10.11549`, or
    /// llama-cpp-python for llama_cpp_peer.py) [default: KEET_PEER_PYTHON, else python3].
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// Measure load, prompt and decode this many times, alternating with the peer, and report each
    /// engine's median (every round's figures are printed too): one run on a shared machine can be
    /// off by 30% either way.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50), conflicts_with = "synthetic")]
    pub rounds: u32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Instead of a model file, a random-weight model built in memory in the exact shape of a real
    /// one: tiny, llama3-8b or qwen2.5-7b, optionally with -q4 (Q4_0), -q4_1 or -q8 (Q8_0); no
    /// suffix is bf16 (f32 on cpu). Measures prompt and decode speed only (no tokenizer).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["model", "peer", "chat", "prompt_file"])]
    pub synthetic: Option<String>,
    /// With --synthetic: prompt length in tokens (deterministic token ids).
    #[arg(long, default_value_t = 512, requires = "synthetic")]
    pub prompt_tokens: usize,
    /// With --synthetic: seed of the random weights.
    #[arg(long, default_value_t = 0, requires = "synthetic")]
    pub seed: u64,
    /// Buffer of the copy-bandwidth measurement (bytes, or with KiB/MiB/GiB).
    #[arg(long, default_value = "1GiB", value_parser = super::bench_synthetic::parse_size)]
    pub copy_bytes: u64,
    /// Instead of the usual figures: decode speed of N answers (greedy, `--tokens` each at most)
    /// generated one at a time and decoded together (batched, N slots), for each N of this list
    /// (e.g. 1,2,4,8), as tokens/s summed over the answers.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64), conflicts_with_all = ["synthetic", "peer"])]
    pub concurrency: Vec<u32>,
}

pub fn run(c: BenchCommand) -> anyhow::Result<i32> {
    match c {
        BenchCommand::Llm(a) => bench_llm(a),
        BenchCommand::Ingest(a) => super::bench_ingest::run(a),
        BenchCommand::Explain(a) => super::bench_explain::run(a),
        BenchCommand::Batch(a) => super::bench_batch::run(a),
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let idx = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[idx.min(s.len() - 1)]
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// A schema shaped like keet's explanation output, used to time the constraint mask.
fn bench_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string", "maxLength": 160},
            "bottleneck": {"type": "string", "enum": ["memory", "compute", "latency", "occupancy", "other"]},
            "fixes": {"type": "array", "maxItems": 3, "items": {
                "type": "object",
                "properties": {
                    "change": {"type": "string", "maxLength": 120},
                    "metric": {"type": "string", "maxLength": 60},
                    "expected_gain_pct": {"type": "integer", "minimum": 0, "maximum": 100}
                },
                "required": ["change", "metric", "expected_gain_pct"],
                "additionalProperties": false
            }}
        },
        "required": ["summary", "bottleneck", "fixes"],
        "additionalProperties": false
    })
}

fn bench_llm(a: LlmBenchArgs) -> anyhow::Result<i32> {
    if let Some(name) = a.synthetic.clone() {
        return super::bench_synthetic::run(&super::bench_synthetic::SyntheticRun {
            name,
            model: a.model.clone(),
            prompt_tokens: a.prompt_tokens,
            tokens: a.tokens,
            seed: a.seed,
            copy_bytes: a.copy_bytes,
            json: a.json,
        });
    }
    if a.tokens == 0 {
        anyhow::bail!("--tokens must be at least 1 (decode speed needs decoded tokens)");
    }
    if !a.concurrency.is_empty() {
        return bench_concurrency(&a);
    }
    let threads = crate::llm::threads::configure(a.model.threads);
    let text = match &a.prompt_file {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => BENCH_PROMPT.to_string(),
    };
    let Rounds { runs, peer_runs, mut engine, prompt_tokens } = measure_rounds(&a, &text)?;
    let peer = a.peer.then(|| peer_summary(&peer_runs));
    let weights = engine.model_mut().weight_bytes();
    engine.reset();
    let mask = measure_mask(&mut engine, &text)?;
    engine.reset();
    let reuse = measure_prefix_reuse(&mut engine, &text)?;
    let mut keet = keet_json(&engine, &a, &runs, prompt_tokens, &mask, &reuse);
    // The memory ceiling of decode, measured after the peak memory is read (its two copy buffers
    // would count as the model's).
    let bw = {
        let device = crate::llm::device::parse_device(a.model.device_or_cpu())?;
        super::bench_synthetic::copy_bandwidth(&device, a.copy_bytes, threads)?
    };
    let limit = super::bench_synthetic::decode_limit(weights, &bw, EngineRun::medians(&runs).decode_tok_s);
    super::bench_synthetic::merge(&mut keet, &limit);

    if a.json {
        let mut out = json!({ "keet": keet });
        if let Some(p) = &peer {
            out["peer"] = p.clone().unwrap_or_else(|e| json!({ "unavailable": e }));
        }
        println!("{out}");
        return Ok(0);
    }
    print_table(&a, &engine, &keet, &runs, peer.as_ref(), &mask, &reuse);
    Ok(0)
}

/// keet's engine after the measured rounds, with each round's figures and the peer's.
struct Rounds {
    runs: Vec<EngineRun>,
    peer_runs: Vec<Result<Value, String>>,
    /// The last round's engine, kept for the constraint and prefix-reuse measurements.
    engine: Engine,
    /// Tokens of the measured prompt.
    prompt_tokens: usize,
}

/// Each round runs the peer, then loads keet's engine and measures its prompt and decode. The
/// first round's peer runs while this process is small: a child reports the larger of its own
/// peak memory and its parent's at the time it started (Linux keeps ru_maxrss across exec), so
/// the peer's peak memory is taken from that round alone.
fn measure_rounds(a: &LlmBenchArgs, text: &str) -> anyhow::Result<Rounds> {
    let peer_model = if a.peer { Some(crate::llm::resolve::resolve_model(a.model.model.as_deref())?) } else { None };
    let mut peer_runs: Vec<Result<Value, String>> = Vec::new();
    let mut runs: Vec<EngineRun> = Vec::new();
    let mut loaded = None;
    for _ in 0..a.rounds {
        if let Some(m) = &peer_model {
            peer_runs.push(run_peer(a, &m.location.path().to_string_lossy(), text));
        }
        // The previous round's engine goes before the next one loads (one model in memory).
        drop(loaded.take());
        let t0 = Instant::now();
        let mut engine = Engine::load(&a.model.engine_options())?;
        let load_s = t0.elapsed().as_secs_f64();
        let ids = if a.chat { engine.prompt_tokens(&[ChatMessage::user(text.to_string())])? } else { engine.tokenizer().encode(text)? };
        let (pp_s, dec_s) = prompt_and_decode(&mut engine, &ids, a.tokens)?;
        runs.push(EngineRun { load_s, prompt_tok_s: ids.len() as f64 / pp_s, decode_tok_s: a.tokens as f64 / dec_s });
        loaded = Some((engine, ids.len()));
    }
    let (engine, prompt_tokens) = loaded.expect("at least one round");
    Ok(Rounds { runs, peer_runs, engine, prompt_tokens })
}

/// The constraint mask's cost over one constrained generation.
struct MaskTiming {
    setup_s: f64,
    /// Mask time per token, microseconds.
    per_token_us: Vec<f64>,
    /// Whether the constrained output parses as JSON.
    output_parses: bool,
}

/// Times the constraint mask over one constrained generation of [`bench_schema`].
fn measure_mask(engine: &mut Engine, text: &str) -> anyhow::Result<MaskTiming> {
    let setup_s = engine.prepare_constraints()?;
    let schema = bench_schema();
    // The schema's hard bound as budget: the output is always complete (it ends long before).
    let bound = crate::llm::constraint::max_tokens_bound(&schema).map_err(anyhow::Error::msg)?;
    let opts = GenerateOptions { max_tokens: bound, ..Default::default() };
    let g = engine.generate(&[ChatMessage::user(format!("{text}\n\nAnswer as JSON."))], &opts, Some(&schema))?;
    Ok(MaskTiming { setup_s, output_parses: serde_json::from_str::<Value>(&g.text).is_ok(), per_token_us: g.timings.mask_us })
}

/// One prompt's (prompt tokens, reused tokens, prompt seconds).
type PromptTime = (usize, usize, f64);

/// Prefix reuse: the first prompt (cold) against the last (warm, its prefix cached).
struct PrefixReuse {
    cold: PromptTime,
    warm: PromptTime,
}

/// The same system prompt and instructions with a different kernel each time.
fn measure_prefix_reuse(engine: &mut Engine, text: &str) -> anyhow::Result<PrefixReuse> {
    let system = "You are a GPU performance engineer. Explain Nsight Compute profiles precisely and briefly.";
    let (instructions, _) = text.split_at(text.find("Kernel:").unwrap_or(text.len() / 2));
    let kernels = ["gemm_tiled<float, 32, 32, 8>", "reduce_sum<256>", "softmax_fwd<half>", "transpose_naive"];
    let mut prompt_times = Vec::new();
    let short = GenerateOptions { max_tokens: 1, ..Default::default() };
    for k in kernels.iter() {
        let msg = format!("{instructions}Kernel: {k}\nDuration: 1.20 ms. Memory throughput 80 % of peak, compute 20 %.");
        let g = engine.generate(&[ChatMessage::system(system), ChatMessage::user(msg)], &short, None)?;
        prompt_times.push((g.timings.prompt_tokens, g.timings.reused_tokens, g.timings.prompt_s));
    }
    Ok(PrefixReuse { cold: prompt_times[0], warm: *prompt_times.last().unwrap() })
}

/// keet's figures as `bench llm --json` prints them under `keet` (medians over the rounds).
fn keet_json(engine: &Engine, a: &LlmBenchArgs, runs: &[EngineRun], prompt_tokens: usize, mask: &MaskTiming, reuse: &PrefixReuse) -> Value {
    let EngineRun { load_s, prompt_tok_s, decode_tok_s } = EngineRun::medians(runs);
    let per_token = &mask.per_token_us;
    let mask_mean = if per_token.is_empty() { 0.0 } else { per_token.iter().sum::<f64>() / per_token.len() as f64 };
    let (cold, warm) = (reuse.cold, reuse.warm);
    let saving = if cold.2 > 0.0 { 1.0 - warm.2 / cold.2 } else { 0.0 };
    json!({
        "engine": format!("keet ({})", engine.info.implementation),
        "model": engine.info.path,
        "architecture": engine.info.architecture,
        "device": engine.info.device,
        "threads": engine.info.threads,
        "load_s": (load_s * 1000.0).round() / 1000.0,
        "prompt_tokens": prompt_tokens,
        "prompt_tok_s": r1(prompt_tok_s),
        "gen_tokens": a.tokens,
        "decode_tok_s": r1(decode_tok_s),
        "rounds": runs.iter().map(EngineRun::to_json).collect::<Vec<_>>(),
        "constraint_setup_s": (mask.setup_s * 1000.0).round() / 1000.0,
        "mask_us_mean": r1(mask_mean),
        "mask_us_p99": r1(percentile(per_token, 99.0)),
        "mask_tokens": per_token.len(),
        "constrained_output_parses": mask.output_parses,
        "prefix_reuse": {
            "cold_prompt_tokens": cold.0, "cold_prompt_s": (cold.2 * 1000.0).round() / 1000.0,
            "warm_prompt_tokens": warm.0, "warm_reused_tokens": warm.1,
            "warm_prompt_s": (warm.2 * 1000.0).round() / 1000.0,
            "saving_pct": r1(saving * 100.0),
        },
        "peak_rss_mb": peak_rss_mb().map(r1),
    })
}

/// The table `bench llm` prints: keet beside the peer where it ran.
fn print_table(
    a: &LlmBenchArgs,
    engine: &Engine,
    keet: &Value,
    runs: &[EngineRun],
    peer: Option<&Result<Value, String>>,
    mask: &MaskTiming,
    reuse: &PrefixReuse,
) {
    println!(
        "model          {} ({}, {} implementation, {} threads, {})",
        engine.info.path.display(),
        engine.info.architecture,
        engine.info.implementation,
        engine.info.threads,
        engine.info.device
    );
    let peer_ok = peer.and_then(|p| p.as_ref().ok());
    if a.rounds > 1 {
        print_rounds(a.rounds, runs, peer_ok);
    }
    if peer_ok.is_some() {
        println!("{:<26} {:>10}  {:>10}  {:>7}", "", "keet", "llama.cpp", "keet/peer");
    }
    let pg = |k: &str| peer_ok.and_then(|p| p.get(k));
    print_row("load s", &keet["load_s"], pg("load_s"), false);
    print_row("prompt tokens", &keet["prompt_tokens"], pg("prompt_tokens"), true);
    print_row("prompt tok/s", &keet["prompt_tok_s"], pg("prompt_tok_s"), true);
    print_row("decode tok/s", &keet["decode_tok_s"], pg("decode_tok_s"), true);
    print_row("peak RSS MiB", &keet["peak_rss_mb"], pg("peak_rss_mb"), false);
    println!("{:<26} {:>10}", "constraint setup s", keet["constraint_setup_s"]);
    println!(
        "{:<26} {:>10}  (p99 {} us over {} tokens; output parses: {})",
        "mask us/token mean", keet["mask_us_mean"], keet["mask_us_p99"], keet["mask_tokens"], mask.output_parses
    );
    println!(
        "{:<26} {:>10}  (cold {} tokens {} s -> warm {} tokens, {} reused, {} s)",
        "prefix reuse saving %",
        keet["prefix_reuse"]["saving_pct"],
        reuse.cold.0,
        keet["prefix_reuse"]["cold_prompt_s"],
        reuse.warm.0,
        reuse.warm.1,
        keet["prefix_reuse"]["warm_prompt_s"]
    );
    super::bench_synthetic::print_limit(keet);
    match peer {
        Some(Err(e)) => println!("llama.cpp peer unavailable: {e}"),
        None => println!("(add --peer to run llama.cpp on the same prompt)"),
        _ => {}
    }
}

/// One figure of keet beside the peer's, with keet's advantage as a ratio.
fn print_row(name: &str, keet: &Value, peer: Option<&Value>, higher_better: bool) {
    match (keet.as_f64(), peer.and_then(|p| p.as_f64())) {
        (Some(kv), Some(pv)) if pv > 0.0 => {
            let ratio = if higher_better { kv / pv } else { pv / kv };
            println!("{name:<26} {kv:>10}  {pv:>10}  {:>6.2}x", ratio)
        }
        _ => println!("{name:<26} {:>10}", keet),
    }
}

/// Every round's figures, keet's beside the peer's.
fn print_rounds(rounds: u32, runs: &[EngineRun], peer_ok: Option<&Value>) {
    println!("rounds         {} (keet and llama.cpp alternating; medians below)", rounds);
    for (i, r) in runs.iter().enumerate() {
        let p = peer_ok.and_then(|p| p["rounds"].get(i));
        let pf = |k: &str| p.and_then(|p| p[k].as_f64()).map_or("-".to_string(), |v| format!("{v:.1}"));
        println!(
            "  round {:<2} load s {:.3} / {}   prompt tok/s {:.1} / {}   decode tok/s {:.1} / {}",
            i + 1,
            r.load_s,
            p.and_then(|p| p["load_s"].as_f64()).map_or("-".to_string(), |v| format!("{v:.3}")),
            r.prompt_tok_s,
            pf("prompt_tok_s"),
            r.decode_tok_s,
            pf("decode_tok_s")
        );
    }
}

/// `--concurrency`: for each N, the decode speed of N different answers one at a time and
/// batched (N slots), in tokens/s over all N answers, whether the batched answers equal the
/// others, the load average around each run and the CPU (see `keet_llm::concurrency`).
fn bench_concurrency(a: &LlmBenchArgs) -> anyhow::Result<i32> {
    use crate::llm::concurrency;
    let mut engine = Engine::load(&a.model.engine_options())?;
    let sizes: Vec<usize> = a.concurrency.iter().map(|&n| n as usize).collect();
    let widest = sizes.iter().copied().max().unwrap_or(1);
    let requests = concurrency::kernel_questions(widest, a.tokens);
    let rows = concurrency::compare(&mut engine, &requests, &sizes)?;
    if a.json {
        let model = json!({ "path": engine.info.path, "implementation": engine.info.implementation, "threads": engine.info.threads });
        println!("{}", json!({ "model": model, "cpu": concurrency::cpu_model(), "concurrency": rows }));
        return Ok(0);
    }
    println!("model      {} ({} implementation, {} threads)", engine.info.path.display(), engine.info.implementation, engine.info.threads);
    println!("cpu        {}", concurrency::cpu_model());
    println!("answers    greedy, at most {} tokens each; one at a time through generate, batched through generate_batch", a.tokens);
    concurrency::print_rows(&rows);
    Ok(0)
}

/// One round of keet's own measurement.
struct EngineRun {
    load_s: f64,
    prompt_tok_s: f64,
    decode_tok_s: f64,
}

impl EngineRun {
    /// Each figure's median over the rounds.
    fn medians(runs: &[EngineRun]) -> EngineRun {
        let median_of = |f: fn(&EngineRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        EngineRun {
            load_s: median_of(|r| r.load_s),
            prompt_tok_s: median_of(|r| r.prompt_tok_s),
            decode_tok_s: median_of(|r| r.decode_tok_s),
        }
    }

    fn to_json(&self) -> Value {
        json!({ "load_s": (self.load_s * 1000.0).round() / 1000.0, "prompt_tok_s": r1(self.prompt_tok_s), "decode_tok_s": r1(self.decode_tok_s) })
    }
}

/// The median (the mean of the middle two for an even count); 0 for none.
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Prompt processing of `ids`, then `tokens` greedy steps with the end tokens banned (so every run
/// decodes the same count), straight on the model: (prompt seconds, decode seconds).
fn prompt_and_decode(engine: &mut Engine, ids: &[u32], tokens: usize) -> anyhow::Result<(f64, f64)> {
    let end_ids = engine.tokenizer().end_ids.clone();
    let model = engine.model_mut();
    let t = Instant::now();
    // the prompt path the engine runs prompts on (`Engine` prefills with `forward_prompt`)
    let mut logits = model.forward_prompt(ids, 0)?;
    let pp_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for pos in ids.len()..ids.len() + tokens {
        for &e in &end_ids {
            if let Some(l) = logits.get_mut(e as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
        let tok = logits.iter().enumerate().max_by(|x, y| x.1.total_cmp(y.1)).map(|(i, _)| i as u32).unwrap_or(0);
        logits = model.forward(&[tok], pos)?;
    }
    Ok((pp_s, t.elapsed().as_secs_f64()))
}

/// The peer's rounds as one result: the medians of its load, prompt and decode figures, peak
/// memory from the first round (see `measure_rounds`), and every round under `rounds`; the first
/// failure if any round failed.
fn peer_summary(runs: &[Result<Value, String>]) -> Result<Value, String> {
    let ok: Vec<&Value> = runs.iter().map(|r| r.as_ref()).collect::<Result<_, _>>().map_err(|e| e.clone())?;
    let first = (*ok.first().ok_or("no peer round ran")?).clone();
    let mut out = first;
    for key in ["load_s", "prompt_tok_s", "decode_tok_s"] {
        let v: Vec<f64> = ok.iter().filter_map(|r| r[key].as_f64()).collect();
        if v.len() == ok.len() {
            let m = median(&v);
            out[key] = json!(if key == "load_s" { (m * 1000.0).round() / 1000.0 } else { r1(m) });
        }
    }
    out["rounds"] = json!(ok
        .iter()
        .map(|r| json!({ "load_s": r["load_s"], "prompt_tok_s": r["prompt_tok_s"], "decode_tok_s": r["decode_tok_s"] }))
        .collect::<Vec<_>>());
    Ok(out)
}

/// Runs the llama.cpp peer script; Err says why it is unavailable.
fn run_peer(a: &LlmBenchArgs, model: &str, text: &str) -> Result<Value, String> {
    if !a.peer_script.is_file() {
        return Err(format!("{} not found", a.peer_script.display()));
    }
    let python = a
        .peer_python
        .clone()
        .or_else(|| std::env::var_os("KEET_PEER_PYTHON").filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let xllamacpp = a.peer_script.file_name().is_some_and(|n| n.to_string_lossy().contains("xllamacpp"));
    let (module, install) = if xllamacpp {
        ("xllamacpp", "pip install xllamacpp==2026.10.11549")
    } else {
        ("llama_cpp", "pip install llama-cpp-python==0.3.36")
    };
    let probe = std::process::Command::new(&python).args(["-c", &format!("import {module}")]).output();
    match probe {
        Ok(o) if o.status.success() => {}
        _ => {
            return Err(format!(
                "{} cannot import {module} ({install} in a venv, then --peer-python VENV/bin/python or KEET_PEER_PYTHON)",
                python.display()
            ))
        }
    }
    let dir = std::env::temp_dir().join(format!("keet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let prompt = dir.join("prompt.txt");
    std::fs::write(&prompt, text).map_err(|e| e.to_string())?;
    let threads = crate::llm::threads::configured().unwrap_or(1);
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(&a.peer_script).arg(model).arg(&prompt).args(["--threads", &threads.to_string(), "--tokens", &a.tokens.to_string()]);
    if a.chat {
        cmd.arg("--chat");
    }
    let out = cmd.output().map_err(|e| format!("running the peer: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    if !out.status.success() {
        return Err(format!("peer failed: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).ok_or("peer printed no JSON")?;
    serde_json::from_str(line).map_err(|e| format!("peer JSON: {e}"))
}
