//! The safetensors path (config.json + model.safetensors + tokenizer.json), for each supported family
//! (Llama, Qwen2, Qwen3), on tiny models with made-up weights written here: loading, the tokenizer.json
//! tokenizer (it must tokenize like the GGUF one), deterministic greedy generation with prefix reuse,
//! and constrained output that parses.

use crate::llm_support;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use keet::llm::loader::GgufFile;
use keet::llm::resolve::resolve_model;
use keet::llm::tokenizer::Tokenizer;
use keet::llm::{ChatMessage, Engine, EngineOptions, GenerateOptions};
use serde_json::json;

const VOCAB: usize = 49152;
const HIDDEN: usize = 32;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const FFN: usize = 64;
const LAYERS: usize = 2;

/// Deterministic small weights.
fn weights(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect()
}

fn write_model(dir: &Path, family: &str) {
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let mut seed = 1;
    let mut add = |name: String, shape: &[usize], ones: bool| {
        let n: usize = shape.iter().product();
        seed += 1;
        let data = if ones { vec![1.0f32; n] } else { weights(n, seed) };
        t.insert(name, Tensor::from_vec(data, shape, &Device::Cpu).unwrap());
    };
    add("model.embed_tokens.weight".into(), &[VOCAB, HIDDEN], false);
    add("model.norm.weight".into(), &[HIDDEN], true);
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        add(format!("{p}.self_attn.q_proj.weight"), &[HEADS * HEAD_DIM, HIDDEN], false);
        add(format!("{p}.self_attn.k_proj.weight"), &[KV_HEADS * HEAD_DIM, HIDDEN], false);
        add(format!("{p}.self_attn.v_proj.weight"), &[KV_HEADS * HEAD_DIM, HIDDEN], false);
        add(format!("{p}.self_attn.o_proj.weight"), &[HIDDEN, HEADS * HEAD_DIM], false);
        add(format!("{p}.mlp.gate_proj.weight"), &[FFN, HIDDEN], false);
        add(format!("{p}.mlp.up_proj.weight"), &[FFN, HIDDEN], false);
        add(format!("{p}.mlp.down_proj.weight"), &[HIDDEN, FFN], false);
        add(format!("{p}.input_layernorm.weight"), &[HIDDEN], true);
        add(format!("{p}.post_attention_layernorm.weight"), &[HIDDEN], true);
        if family == "qwen2" {
            add(format!("{p}.self_attn.q_proj.bias"), &[HEADS * HEAD_DIM], false);
            add(format!("{p}.self_attn.k_proj.bias"), &[KV_HEADS * HEAD_DIM], false);
            add(format!("{p}.self_attn.v_proj.bias"), &[KV_HEADS * HEAD_DIM], false);
        }
        if family == "qwen3" {
            add(format!("{p}.self_attn.q_norm.weight"), &[HEAD_DIM], true);
            add(format!("{p}.self_attn.k_norm.weight"), &[HEAD_DIM], true);
        }
    }
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
    let arch = match family {
        "llama" => "LlamaForCausalLM",
        "qwen2" => "Qwen2ForCausalLM",
        _ => "Qwen3ForCausalLM",
    };
    let cfg = json!({
        "architectures": [arch], "model_type": family,
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM, "attention_bias": false,
        "max_position_embeddings": 2048, "sliding_window": 2048, "max_window_layers": LAYERS,
        "use_sliding_window": false, "tie_word_embeddings": true, "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "bfloat16"
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        json!({
            "bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
            "chat_template": keet::llm::template::CHATML_TEMPLATE
        })
        .to_string(),
    )
    .unwrap();
}

#[test]
fn safetensors_models_of_each_family_run() {
    if llm_support::skip() {
        return;
    }
    let resolved = resolve_model(Some(llm_support::TEST_MODEL)).unwrap_or_else(|e| panic!("this test needs the default model: {e}"));
    let gguf_tok = Tokenizer::from_gguf(GgufFile::open(resolved.location.path()).unwrap().metadata()).unwrap();
    for family in ["llama", "qwen2", "qwen3"] {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), family);
        gguf_tok.inner().save(dir.path().join("tokenizer.json"), false).unwrap();

        let opts = EngineOptions { model: Some(dir.path().to_string_lossy().into()), device: Some("cpu".into()), threads: Some(1) };
        let mut e = Engine::load(&opts).unwrap_or_else(|err| panic!("{family}: {err}"));
        assert_eq!(e.info.architecture, family);
        // tokenizer.json tokenizes like the GGUF tokenizer and knows the special tokens.
        for s in ["Hello, world! 1234 <|im_end|>", "  __syncthreads();\n\tnaïve 🚀"] {
            assert_eq!(e.tokenizer().encode(s).unwrap(), gguf_tok.encode(s).unwrap(), "{family}: {s:?}");
        }
        assert!(e.tokenizer().end_ids.contains(&2), "{family}: end ids {:?}", e.tokenizer().end_ids);

        let sys = ChatMessage::system("You are a GPU performance engineer. ".repeat(8));
        let q1 = [sys.clone(), ChatMessage::user("What limits this kernel?")];
        let q2 = [sys.clone(), ChatMessage::user("Why is occupancy low?")];
        let g = GenerateOptions { max_tokens: 6, ..Default::default() };
        let a = e.generate(&q1, &g, None).unwrap();
        let b = e.generate(&q2, &g, None).unwrap();
        assert!(b.timings.reused_tokens >= 32, "{family}: prefix not reused {:?}", b.timings);
        let a2 = e.generate(&q1, &g, None).unwrap();
        assert_eq!(a.tokens, a2.tokens, "{family}: not deterministic / reuse changed output");
        e.reset();
        let b_cold = e.generate(&q2, &g, None).unwrap();
        assert_eq!(b.tokens, b_cold.tokens, "{family}: prefix reuse changed the output");

        let schema = json!({"type": "object", "properties": {
            "ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
            "required": ["ok", "n"], "additionalProperties": false});
        let c = e.generate(&q1, &GenerateOptions { max_tokens: 64, ..Default::default() }, Some(&schema)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&c.text).unwrap_or_else(|err| panic!("{family}: {err}: {}", c.text));
        llm_support::validate(&v, &schema, "#").unwrap();
    }
}
