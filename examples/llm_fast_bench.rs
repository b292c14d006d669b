//! Throughput of keet's fast llama path (`keet::llm::fast`) beside candle-transformers'
//! `quantized_llama` on the same GGUF and prompt, measured like
//! `/work/shared/bench/llama_cpp_peer.py` (one forward over the whole prompt, then greedy decode
//! of `--tokens` tokens with the end-of-sequence token banned).
//!
//!   cargo run --release --example llm_fast_bench -- MODEL.gguf PROMPT.txt --threads 2 --tokens 200 \
//!       [--chat] [--engine fast|candle|both] [--runs N]
//!
//! Prints one JSON object per engine and run. `--chat` wraps the text in the model's ChatML turn
//! (SmolLM2's template with its default system message), as the peer's `--chat` does.

use std::path::PathBuf;
use std::time::Instant;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use keet::llm::fast::FastLlama;
use keet::llm::model::CausalLm;
use keet::llm::tokenizer::Tokenizer;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut pos = Vec::new();
    let (mut threads, mut tokens, mut chat, mut engine, mut runs) = (2usize, 200usize, false, "both".to_string(), 1usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => threads = args.next().and_then(|v| v.parse().ok()).expect("--threads N"),
            "--tokens" => tokens = args.next().and_then(|v| v.parse().ok()).expect("--tokens N"),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--engine" => engine = args.next().expect("--engine fast|candle|both"),
            "--chat" => chat = true,
            _ => pos.push(a),
        }
    }
    assert!(
        pos.len() == 2,
        "usage: llm_fast_bench MODEL.gguf PROMPT.txt [--threads N] [--tokens N] [--chat] [--engine fast|candle|both] [--runs N]"
    );
    let model = PathBuf::from(&pos[0]);
    // candle's CPU pools read these once, at their first use.
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());

    let mut text = std::fs::read_to_string(&pos[1]).expect("read prompt");
    if chat {
        text = format!(
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        );
    }
    let mut f = std::fs::File::open(&model).expect("open model");
    let ct = gguf_file::Content::read(&mut f).expect("read gguf");
    let eos = ct.metadata.get("tokenizer.ggml.eos_token_id").and_then(|v| v.to_u32().ok());
    let tok = Tokenizer::from_gguf(&ct.metadata).expect("tokenizer");
    let ids = tok.encode(&text).expect("encode");

    for _ in 0..runs {
        if engine == "fast" || engine == "both" {
            let t = Instant::now();
            let mut m = FastLlama::load_gguf(&model, threads).expect("load fast");
            let load_s = t.elapsed().as_secs_f64();
            let r = bench(&mut |toks, p| m.forward(toks, p).expect("forward"), &ids, tokens, eos);
            report("keet-fast", threads, load_s, ids.len(), tokens, r, &tok);
        }
        if engine == "candle" || engine == "both" {
            let t = Instant::now();
            let mut f = std::fs::File::open(&model).expect("open model");
            let ct = gguf_file::Content::read(&mut f).expect("read gguf");
            let mut m = ModelWeights::from_gguf(ct, &mut f, &Device::Cpu).expect("load candle");
            let load_s = t.elapsed().as_secs_f64();
            let r = bench(
                &mut |toks, p| {
                    let x = Tensor::new(toks, &Device::Cpu).unwrap().unsqueeze(0).unwrap();
                    m.forward(&x, p).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
                },
                &ids,
                tokens,
                eos,
            );
            report("candle-quantized_llama", threads, load_s, ids.len(), tokens, r, &tok);
        }
    }
}

struct Run {
    prompt_s: f64,
    decode_s: f64,
    prompt_cpu_s: f64,
    decode_cpu_s: f64,
    out: Vec<u32>,
}

/// CPU time of this process (all threads), from /proc/self/stat (Linux; 0 elsewhere). On a busy
/// machine, tokens per CPU-second with `--threads 1` estimate the speed on an idle core.
fn cpu_s() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let Some(rest) = s.rsplit(')').next() else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn bench(fwd: &mut dyn FnMut(&[u32], usize) -> Vec<f32>, ids: &[u32], n: usize, eos: Option<u32>) -> Run {
    let (t, c) = (Instant::now(), cpu_s());
    let mut logits = fwd(ids, 0);
    let prompt_s = t.elapsed().as_secs_f64();
    let prompt_cpu_s = cpu_s() - c;
    let c = cpu_s();
    let mut out = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        if let Some(e) = eos {
            logits[e as usize] = f32::NEG_INFINITY;
        }
        let next = logits.iter().enumerate().fold((0usize, f32::NEG_INFINITY), |b, (j, &v)| if v > b.1 { (j, v) } else { b }).0 as u32;
        out.push(next);
        logits = fwd(&[next], ids.len() + i);
    }
    Run { prompt_s, decode_s: t.elapsed().as_secs_f64(), prompt_cpu_s, decode_cpu_s: cpu_s() - c, out }
}

fn report(engine: &str, threads: usize, load_s: f64, n_prompt: usize, n_gen: usize, r: Run, tok: &Tokenizer) {
    let text: String = tok.decode(&r.out).chars().take(120).collect();
    println!(
        "{}",
        serde_json::json!({
            "engine": engine,
            "threads": threads,
            "load_s": (load_s * 1000.0).round() / 1000.0,
            "prompt_tokens": n_prompt,
            "prompt_tok_s": (n_prompt as f64 / r.prompt_s * 10.0).round() / 10.0,
            "gen_tokens": n_gen,
            "decode_tok_s": (n_gen as f64 / r.decode_s * 10.0).round() / 10.0,
            "prompt_tok_per_cpu_s": (n_prompt as f64 / r.prompt_cpu_s.max(0.01) * 10.0).round() / 10.0,
            "decode_tok_per_cpu_s": (n_gen as f64 / r.decode_cpu_s.max(0.01) * 10.0).round() / 10.0,
            "output_start": text,
        })
    );
}
