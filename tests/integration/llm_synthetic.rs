//! `keet bench llm --synthetic`: a random-weight model of a given shape is built in memory, decodes
//! tokens on the CPU, and the JSON output carries the speeds, the parameter count of the shape and
//! the bandwidth limit; shapes that do not fit and devices that are not there are clear errors.

use std::process::Command;

use keet::llm::loader::LoadOptions;
use keet::llm::synthetic::{self, SyntheticSpec, TINY};
use serde_json::Value;

fn keet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env("KEET_THREADS", "1").output().expect("keet runs")
}

fn bench_json(name: &str) -> Value {
    let out = keet(&["bench", "llm", "--synthetic", name, "--prompt-tokens", "40", "--tokens", "4", "--copy-bytes", "16MiB", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: exit {:?}\n{stderr}", out.status.code());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{name}: {e}\n{stdout}"));
    v["keet"].clone()
}

#[test]
fn tiny_decodes_in_every_format_with_its_numbers() {
    // q4: keet's fast CPU Llama; bf16: candle-transformers' Llama in f32 on the CPU.
    for (name, implementation, bytes_per_param) in [("tiny-q4", "fast", 18.0 / 32.0), ("tiny", "candle", 4.0)] {
        let k = bench_json(name);
        assert_eq!(k["engine"], format!("keet ({implementation})"), "{name}: {k}");
        assert_eq!(k["device"], "cpu");
        assert_eq!(k["prompt_tokens"], 40);
        assert_eq!(k["gen_tokens"], 4);
        assert!(k["prompt_tok_s"].as_f64().unwrap() > 0.0, "{name}: {k}");
        assert!(k["decode_tok_s"].as_f64().unwrap() > 0.0, "{name}: {k}");
        assert_eq!(k["logits_finite"], true, "{name}: {k}");
        // The parameter count of the shape, from the formula and from the tensors as loaded.
        assert_eq!(k["synthetic"]["params_from_shape"], 19_532_032u64);
        assert_eq!(k["weights"]["params"], 19_532_032u64, "{name}: {k}");
        // Per decoded token: every matrix once, one embedding row.
        let per_token = k["weight_bytes_per_token"].as_u64().unwrap() as f64;
        let matrices = (19_532_032 - TINY.vocab * TINY.hidden) as f64;
        assert!(per_token > matrices * bytes_per_param && per_token < matrices * bytes_per_param * 1.02, "{name}: {k}");
        // The limit is the measured bandwidth over those bytes.
        let gbps = k["copy_bandwidth_gbps"].as_f64().unwrap();
        assert!(gbps > 0.0 && k["copy_bandwidth"]["buffer_bytes"] == 16u64 << 20, "{name}: {k}");
        // (from the unrounded copy time: the printed GB/s is rounded to 0.1)
        let copy_s = k["copy_bandwidth"]["copy_s"].as_f64().unwrap();
        let bytes_s = 2.0 * (16u64 << 20) as f64 / copy_s;
        let limit = k["decode_limit_tok_s"].as_f64().unwrap();
        assert!((limit - bytes_s / per_token).abs() <= 0.051, "{name}: {k}");
        assert!(k["decode_pct_of_limit"].as_f64().unwrap() > 0.0, "{name}: {k}");
    }
}

#[test]
fn the_table_names_the_limit() {
    let out = keet(&["bench", "llm", "--synthetic", "tiny-q8", "--prompt-tokens", "8", "--tokens", "2", "--copy-bytes", "8MiB"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for want in
        ["synthetic tiny-q8_0", "19532032 parameters", "decode tok/s", "weight GB/token", "copy bandwidth GB/s", "decode % of limit"]
    {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
}

#[test]
fn the_same_seed_gives_the_same_model() {
    let spec = SyntheticSpec::parse("tiny-q4_1").unwrap();
    let opts = LoadOptions { prefer_fast: true, threads: 1 };
    let ids = synthetic::prompt_ids(20, TINY.vocab);
    let logits = |seed| {
        let mut m = synthetic::build(&spec, &candle_core::Device::Cpu, seed, &opts).unwrap();
        assert_eq!(m.implementation, "fast");
        m.model.forward(&ids, 0).unwrap()
    };
    let (a, b, c) = (logits(1), logits(1), logits(2));
    assert_eq!(a.len(), TINY.vocab);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn refusals_are_clear() {
    // bf16 Llama-3-8B is 32 GB in f32 on the CPU: refused before any allocation, with the numbers.
    let out = keet(&["bench", "llm", "--synthetic", "llama3-8b", "--copy-bytes", "8MiB"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let available = keet::llm::device::host_available_bytes().unwrap_or(0);
    if available < 34_000_000_000 {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("needs about") && stderr.contains("are available") && stderr.contains("host memory"), "{stderr}");
    }
    let out = keet(&["bench", "llm", "--synthetic", "gpt2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown synthetic model `gpt2`"));
    // --prompt-tokens belongs to --synthetic.
    let out = keet(&["bench", "llm", "--prompt-tokens", "4"]);
    assert_eq!(out.status.code(), Some(2));
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_without_the_feature_is_a_clear_error() {
    let out = keet(&["bench", "llm", "--synthetic", "tiny", "--device", "cuda"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("built without CUDA") && !stderr.contains("panicked"), "{stderr}");
    // explain checks the device before any work (even when every answer would come from the cache).
    let dir = tempfile::tempdir().unwrap();
    let out = keet(&["explain", "--device", "cuda", "--no-cache", dir.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("built without CUDA") && !stderr.contains("panicked"), "{stderr}");
}
