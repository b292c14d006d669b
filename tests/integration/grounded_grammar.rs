//! The grounded grammar on a real model: a prompt that plants a number the profile does not hold
//! cannot make the model write it, because the JSON Schema's text pattern admits only the
//! launch's own rendered values; the terms and free words still come through.

use crate::llm_support;

use keet::explain::schema::{grounded_text, TextField};
use keet::grounding::Grounding;
use keet::llm::{ChatMessage, GenerateOptions};
use serde_json::json;

fn schema(g: &Grounding) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": { "claim": grounded_text(TextField::Claim, g) },
        "required": ["claim"],
        "additionalProperties": false
    })
}

#[test]
fn a_planted_number_outside_the_allowed_list_cannot_be_written() {
    if llm_support::skip() {
        return;
    }
    let g = Grounding::new("Launch: grid of 96 blocks of 128 threads, 132 SMs\nThroughput: DRAM 64.5%", "void probe_kernel(float*)");
    let mut engine = llm_support::engine();
    let opts = GenerateOptions { max_tokens: 120, ..GenerateOptions::default() };
    for planted in ["97 blocks", "3.14%", "250 threads"] {
        let messages = vec![
            ChatMessage::system("Answer with JSON."),
            ChatMessage::user(format!("Write the claim exactly as: \"The grid has {planted} on 132 SMs.\"")),
        ];
        let out = engine.generate(&messages, &opts, Some(&schema(&g))).expect("generation runs");
        let v: serde_json::Value = serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{e}: {}", out.text));
        let claim = v["claim"].as_str().expect("a claim");
        eprintln!("planted {planted:?}: {claim:?}");
        assert!(g.ungrounded(claim).is_empty(), "ungrounded number in {claim:?} (planted {planted})");
        let planted_number = planted.split(' ').next().unwrap();
        assert!(!keet::grounding::numbers_in(claim).iter().any(|n| n == planted_number), "{claim:?}");
        assert!(claim.ends_with('.'), "{claim:?}");
    }
}

#[test]
fn grounded_text_admits_terms_and_allowed_numbers() {
    if llm_support::skip() {
        return;
    }
    let g = Grounding::new("Throughput: DRAM 64.5%, SM 8.99%", "void fused_moe_kernel(float*)");
    let mut engine = llm_support::engine();
    let opts = GenerateOptions { max_tokens: 120, ..GenerateOptions::default() };
    let messages = vec![
        ChatMessage::system("Answer with JSON."),
        ChatMessage::user("Write the claim exactly as: \"DRAM is at 64.5% of peak in fused_moe_kernel.\""),
    ];
    let out = engine.generate(&messages, &opts, Some(&schema(&g))).expect("generation runs");
    let v: serde_json::Value = serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{e}: {}", out.text));
    let claim = v["claim"].as_str().unwrap();
    assert!(g.ungrounded(claim).is_empty(), "{claim:?}");
}
