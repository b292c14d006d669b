//! 50 JSON-Schema-constrained generations on the real default model, over varied prompts and
//! schemas: every output parses and validates against its schema.

use crate::llm_support;

use keet::llm::constraint::max_tokens_bound;
use keet::llm::{ChatMessage, GenerateOptions, StopReason};
use serde_json::{json, Value};

fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {
            "bottleneck": {"type": "string", "enum": ["memory", "compute", "latency", "occupancy"]},
            "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
            "required": ["bottleneck", "confidence"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "summary": {"type": "string", "minLength": 1, "maxLength": 24},
            "severity": {"type": "string", "enum": ["low", "medium", "high"]}},
            "required": ["summary", "severity"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "fixes": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "maxLength": 16}},
            "memory_bound": {"type": "boolean"}},
            "required": ["fixes", "memory_bound"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "metric": {"type": "string", "maxLength": 20},
            "value": {"type": "number", "minimum": 0, "maximum": 1000},
            "unit": {"type": ["string", "null"], "maxLength": 8}},
            "required": ["metric", "value", "unit"], "additionalProperties": false}),
        json!({"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
            "change": {"type": "string", "maxLength": 16},
            "gain_pct": {"type": "integer", "minimum": 0, "maximum": 99}},
            "required": ["change", "gain_pct"], "additionalProperties": false}}),
    ]
}

const PROMPTS: &[&str] = &[
    "A GEMM kernel reaches 81% of peak memory throughput and 38% of compute. What limits it?",
    "Shared-memory loads show 4.2 bank conflicts per request. Describe the problem.",
    "Global loads use 12.5 sectors per request instead of 4. What should change?",
    "Achieved occupancy is 31% because each thread uses 128 registers.",
    "The kernel spends most cycles stalled on barriers (__syncthreads).",
    "DRAM throughput is 92% of peak and L2 hit rate is 12%.",
    "A reduction kernel launches 64 blocks on an 80-SM GPU.",
    "Warp execution efficiency is 41% because of divergent branches.",
    "FP32 pipe utilisation is 85% while memory throughput is 20%.",
    "The kernel runs 3 microseconds; launch overhead dominates.",
];

#[test]
fn fifty_constrained_generations_parse_and_validate() {
    if llm_support::skip() {
        return;
    }
    let mut e = llm_support::engine();
    // A long shared system prompt (its KV cache is reused) and short user messages keep this fast.
    let sys = ChatMessage::system(
        "You analyse CUDA kernel profiles from NVIDIA Nsight Compute. For each question, decide what \
         limits the kernel (memory bandwidth, latency, occupancy, instruction throughput, shared-memory \
         bank conflicts, uncoalesced global accesses, warp divergence or launch overhead), how sure you \
         are, and which change would help most. Reply only with one JSON value in the requested shape, \
         with short strings and no commentary before or after it.",
    );
    let mut n = 0;
    let mut failures = Vec::new();
    let mut mask_us = Vec::new();
    for (si, schema) in schemas().iter().enumerate() {
        let budget = max_tokens_bound(schema).expect("test schemas are bounded");
        for (pi, p) in PROMPTS.iter().enumerate() {
            let opts = GenerateOptions { max_tokens: budget, ..Default::default() };
            let user = ChatMessage::user(format!("{p} Reply with JSON."));
            let g = e.generate(&[sys.clone(), user], &opts, Some(schema)).unwrap();
            n += 1;
            mask_us.extend_from_slice(&g.timings.mask_us);
            if g.stop_reason == StopReason::MaxTokens {
                failures.push(format!("schema {si} prompt {pi}: ran out of its {budget}-token bound: {}", g.text));
                continue;
            }
            match serde_json::from_str::<Value>(&g.text) {
                Ok(v) => {
                    if let Err(why) = llm_support::validate(&v, schema, "#") {
                        failures.push(format!("schema {si} prompt {pi}: {why}: {}", g.text));
                    }
                }
                Err(err) => failures.push(format!("schema {si} prompt {pi}: does not parse ({err}): {}", g.text)),
            }
        }
    }
    assert_eq!(n, 50);
    let mean = mask_us.iter().sum::<f64>() / mask_us.len().max(1) as f64;
    eprintln!("50 constrained generations, {} masked tokens, mask mean {mean:.0} us", mask_us.len());
    assert!(failures.is_empty(), "{} of 50 failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn unbounded_schemas_are_reported() {
    assert!(max_tokens_bound(&json!({"type": "string"})).unwrap_err().contains("maxLength"));
    assert!(max_tokens_bound(&json!({"type": "array", "items": {"type": "integer"}})).unwrap_err().contains("maxItems"));
    assert!(max_tokens_bound(&json!({"type": "object", "properties": {}})).unwrap_err().contains("additionalProperties"));
    assert_eq!(max_tokens_bound(&json!({"type": "string", "maxLength": 10})).unwrap(), 42);
}

/// What the grammar forces (keys, a constant metric name, the closing brackets) is appended without
/// sampling and run through the model as one batch with the token before it; the output still
/// validates, and the forced tokens are most of a mostly-constant value.
#[test]
fn forced_tokens_are_appended_not_sampled() {
    if llm_support::skip() {
        return;
    }
    let mut e = llm_support::engine();
    let metric = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed";
    let schema = json!({"type": "object", "properties": {
        "metric": {"const": metric},
        "unit": {"type": "string", "enum": ["percent of peak sustained elapsed", "bytes per second"]},
        "note": {"type": "string", "maxLength": 20}},
        "required": ["metric", "unit", "note"], "additionalProperties": false});
    let opts = GenerateOptions { max_tokens: max_tokens_bound(&schema).unwrap(), ..Default::default() };
    let g = e.generate(&[ChatMessage::user("DRAM throughput is 92% of peak. Reply with JSON.")], &opts, Some(&schema)).unwrap();
    let v: Value = serde_json::from_str(&g.text).unwrap_or_else(|err| panic!("does not parse ({err}): {}", g.text));
    llm_support::validate(&v, &schema, "#").unwrap();
    assert_eq!(v["metric"], metric);
    let t = &g.timings;
    assert!(
        t.forced_tokens >= 10 && t.forced_tokens < t.generated_tokens,
        "forced {} of {}: {}",
        t.forced_tokens,
        t.generated_tokens,
        g.text
    );
    assert_eq!(g.tokens.len(), t.generated_tokens);
}

/// Prompt lookup: decoding with drafts copied from the prompt writes exactly what it writes without
/// them, greedy or sampled (the drafts are checked with the logits one-token-at-a-time decoding
/// computes, and each position's choice uses the same random draw), and
/// a sentence the answer copies from the prompt is mostly drafted tokens that decoding then chose.
#[test]
fn drafted_tokens_change_nothing_and_pay_on_copies() {
    if llm_support::skip() {
        return;
    }
    let mut e = llm_support::engine();
    let sentence = "Every warp of this kernel waits on global memory loads that miss in the L2 cache.";
    let schema = json!({"type": "object", "properties": {"sentence": {"type": "string", "maxLength": 120}},
        "required": ["sentence"], "additionalProperties": false});
    let prompt = format!("Copy this sentence into the JSON field \"sentence\", word for word: {sentence}");
    let messages = [ChatMessage::user(prompt)];
    let plain = GenerateOptions { max_tokens: 60, lookahead: 0, ..Default::default() };
    let drafting = GenerateOptions { lookahead: 8, ..plain.clone() };
    let a = e.generate(&messages, &plain, Some(&schema)).unwrap();
    let b = e.generate(&messages, &drafting, Some(&schema)).unwrap();
    assert_eq!(a.tokens, b.tokens, "drafts changed the output:\n{}\n{}", a.text, b.text);
    assert_eq!(a.timings.drafted_tokens, 0);
    // sampling: each position draws from the same logits with the same random numbers
    let sampled = GenerateOptions { temperature: 0.9, top_p: 0.95, seed: 5, ..plain.clone() };
    let c = e.generate(&messages, &sampled, Some(&schema)).unwrap();
    let d = e.generate(&messages, &GenerateOptions { lookahead: 8, ..sampled }, Some(&schema)).unwrap();
    assert_eq!(c.tokens, d.tokens, "drafts changed the sampled output:\n{}\n{}", c.text, d.text);
    let t = &b.timings;
    assert!(t.draft_hits <= t.drafted_tokens && t.draft_hits < t.generated_tokens);
    if b.text.contains(&sentence[..40]) {
        assert!(t.draft_hits >= 8, "a copied sentence but {} of {} drafts taken: {}", t.draft_hits, t.drafted_tokens, b.text);
    }
}
