//! The quantized GGUF path for the Qwen families (candle-transformers quantized_qwen2 / quantized_qwen3),
//! on tiny GGUF files with made-up Q8_0 weights and the default model's tokenizer metadata, written
//! here: architecture from `general.architecture`, deterministic greedy output, prefix reuse that
//! does not change the output (these models cannot snapshot their cache: keet replays), and
//! constrained output that parses.

use crate::llm_support;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use keet::llm::resolve::resolve_model;
use keet::llm::{ChatMessage, Engine, EngineOptions, GenerateOptions};
use serde_json::json;

const HIDDEN: usize = 32;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const FFN: usize = 64;
const LAYERS: usize = 2;

fn weights(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect()
}

fn write_gguf(path: &std::path::Path, arch: &str, source: &gguf_file::Content) {
    let vocab = source.metadata["tokenizer.ggml.tokens"].to_vec().unwrap().len();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut seed = 7;
    let mut add = |name: String, shape: &[usize], norm: bool| {
        let n: usize = shape.iter().product();
        seed += 1;
        let data = if norm { vec![1.0f32; n] } else { weights(n, seed) };
        let t = Tensor::from_vec(data, shape, &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, if norm { GgmlDType::F32 } else { GgmlDType::Q8_0 }).unwrap();
        tensors.push((name, q));
    };
    add("token_embd.weight".into(), &[vocab, HIDDEN], false);
    add("output_norm.weight".into(), &[HIDDEN], true);
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        add(format!("{p}.attn_q.weight"), &[HEADS * HEAD_DIM, HIDDEN], false);
        add(format!("{p}.attn_k.weight"), &[KV_HEADS * HEAD_DIM, HIDDEN], false);
        add(format!("{p}.attn_v.weight"), &[KV_HEADS * HEAD_DIM, HIDDEN], false);
        add(format!("{p}.attn_output.weight"), &[HIDDEN, HEADS * HEAD_DIM], false);
        add(format!("{p}.ffn_gate.weight"), &[FFN, HIDDEN], false);
        add(format!("{p}.ffn_up.weight"), &[FFN, HIDDEN], false);
        add(format!("{p}.ffn_down.weight"), &[HIDDEN, FFN], false);
        add(format!("{p}.attn_norm.weight"), &[HIDDEN], true);
        add(format!("{p}.ffn_norm.weight"), &[HIDDEN], true);
        if arch == "qwen2" {
            add(format!("{p}.attn_q.bias"), &[HEADS * HEAD_DIM], true);
            add(format!("{p}.attn_k.bias"), &[KV_HEADS * HEAD_DIM], true);
            add(format!("{p}.attn_v.bias"), &[KV_HEADS * HEAD_DIM], true);
        }
        if arch == "qwen3" {
            add(format!("{p}.attn_q_norm.weight"), &[HEAD_DIM], true);
            add(format!("{p}.attn_k_norm.weight"), &[HEAD_DIM], true);
        }
    }
    use gguf_file::Value as V;
    let mut md: Vec<(String, V)> = vec![
        ("general.architecture".into(), V::String(arch.into())),
        ("general.dtype".into(), V::U32(0)),
        (format!("{arch}.attention.head_count"), V::U32(HEADS as u32)),
        (format!("{arch}.attention.head_count_kv"), V::U32(KV_HEADS as u32)),
        (format!("{arch}.attention.key_length"), V::U32(HEAD_DIM as u32)),
        (format!("{arch}.embedding_length"), V::U32(HIDDEN as u32)),
        (format!("{arch}.feed_forward_length"), V::U32(FFN as u32)),
        (format!("{arch}.context_length"), V::U32(2048)),
        (format!("{arch}.block_count"), V::U32(LAYERS as u32)),
        (format!("{arch}.attention.layer_norm_rms_epsilon"), V::F32(1e-6)),
        (format!("{arch}.rope.freq_base"), V::F32(10000.0)),
    ];
    for (k, v) in &source.metadata {
        if k.starts_with("tokenizer.") {
            md.push((k.clone(), v.clone()));
        }
    }
    let md_refs: Vec<(&str, &V)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut f, &md_refs, &t_refs).unwrap();
}

#[test]
fn quantized_qwen2_and_qwen3_gguf_run() {
    if llm_support::skip() {
        return;
    }
    let resolved = resolve_model(Some(llm_support::TEST_MODEL)).unwrap_or_else(|e| panic!("this test needs the default model: {e}"));
    let mut f = std::fs::File::open(resolved.location.path()).unwrap();
    let source = gguf_file::Content::read(&mut f).unwrap();
    for arch in ["qwen2", "qwen3"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("tiny-{arch}.gguf"));
        write_gguf(&path, arch, &source);
        let opts = EngineOptions { model: Some(path.to_string_lossy().into()), device: Some("cpu".into()), threads: Some(1) };
        let mut e = Engine::load(&opts).unwrap_or_else(|err| panic!("{arch}: {err}"));
        assert_eq!(e.info.architecture, arch);
        let sys = ChatMessage::system("You are a GPU performance engineer. ".repeat(8));
        let q1 = [sys.clone(), ChatMessage::user("What limits this kernel?")];
        let q2 = [sys.clone(), ChatMessage::user("Why is occupancy low?")];
        let g = GenerateOptions { max_tokens: 6, ..Default::default() };
        let a = e.generate(&q1, &g, None).unwrap();
        assert_eq!(a.tokens.len(), 6, "{arch}: random weights should not pick an end token within 6 steps");
        let b = e.generate(&q2, &g, None).unwrap();
        assert!(b.timings.reused_tokens >= 32, "{arch}: {:?}", b.timings);
        let a2 = e.generate(&q1, &g, None).unwrap();
        assert_eq!(a.tokens, a2.tokens, "{arch}: not deterministic");
        e.reset();
        let b_cold = e.generate(&q2, &g, None).unwrap();
        assert_eq!(b.tokens, b_cold.tokens, "{arch}: prefix reuse changed the output");
        let schema = json!({"type": "object", "properties": {
            "ok": {"type": "boolean"}, "why": {"type": "string", "maxLength": 8}},
            "required": ["ok", "why"], "additionalProperties": false});
        let c = e.generate(&q1, &GenerateOptions { max_tokens: 64, ..Default::default() }, Some(&schema)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&c.text).unwrap_or_else(|err| panic!("{arch}: {err}: {}", c.text));
        llm_support::validate(&v, &schema, "#").unwrap();
    }
}
