//! Generation on the real default model: deterministic greedy output, the chat template, prefix
//! reuse giving the same output as a cold run, end tokens and token budget.

use crate::llm_support;

use keet::llm::{ChatMessage, GenerateOptions, StopReason};

#[test]
fn greedy_generation_is_deterministic_and_prefix_reuse_is_exact() {
    if llm_support::skip() {
        return;
    }
    let mut e = llm_support::engine();
    let opts = GenerateOptions { max_tokens: 24, ..Default::default() };
    let sys = ChatMessage::system(
        "You are a GPU performance engineer. You read Nsight Compute measurements of CUDA kernels and \
         explain, in plain words, what limits each kernel: memory bandwidth, latency, occupancy, \
         instruction throughput, shared-memory bank conflicts, uncoalesced global accesses, divergence \
         or launch overhead. Answer in one short sentence and name the metric that shows the problem.",
    );
    let q1 = vec![sys.clone(), ChatMessage::user("What does a shared-memory bank conflict cost?")];
    let q2 = vec![sys.clone(), ChatMessage::user("Why does low occupancy hurt a memory-bound kernel?")];

    let a = e.generate(&q1, &opts, None).unwrap();
    assert!(!a.text.trim().is_empty(), "empty output");
    assert!(a.tokens.len() <= 24);
    assert!(matches!(a.stop_reason, StopReason::EndToken | StopReason::MaxTokens));
    assert_eq!(a.timings.reused_tokens, 0);

    // Same request again: identical tokens, and (almost) the whole prompt comes from the KV cache.
    let b = e.generate(&q1, &opts, None).unwrap();
    assert_eq!(a.tokens, b.tokens, "greedy decoding must be deterministic");
    assert!(b.timings.reused_tokens + 32 >= b.timings.prompt_tokens, "{:?}", b.timings);

    // A different user message with the same system prompt: the shared prefix is reused,
    // and the output equals a cold run of the same request.
    let c = e.generate(&q2, &opts, None).unwrap();
    assert!(c.timings.reused_tokens >= 32, "system prompt not reused: {:?}", c.timings);
    let d = e.generate(&q2, &opts, None).unwrap();
    e.reset();
    let cold = e.generate(&q2, &opts, None).unwrap();
    assert_eq!(cold.timings.reused_tokens, 0);
    assert_eq!(c.tokens, cold.tokens, "prefix reuse changed the output");
    assert_eq!(d.tokens, cold.tokens);
    // Back to the first question after others: still identical.
    let a2 = e.generate(&q1, &opts, None).unwrap();
    assert_eq!(a.tokens, a2.tokens);
}

#[test]
fn chat_template_and_budget() {
    if llm_support::skip() {
        return;
    }
    let mut e = llm_support::engine();
    // SmolLM2's template adds its default system prompt when none is given.
    let text = e.render(&[ChatMessage::user("hi")]).unwrap();
    assert!(text.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"), "{text}");
    assert!(text.ends_with("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), "{text}");
    let ids = e.prompt_tokens(&[ChatMessage::user("hi")]).unwrap();
    assert_eq!(ids[0], 1, "<|im_start|> is one special token");
    let g = e
        .generate(&[ChatMessage::user("Count from one to fifty in words.")], &GenerateOptions { max_tokens: 5, ..Default::default() }, None)
        .unwrap();
    assert_eq!(g.tokens.len(), 5);
    assert_eq!(g.stop_reason, StopReason::MaxTokens);
    // Seeded sampling is reproducible.
    let s = GenerateOptions { max_tokens: 8, temperature: 0.8, top_p: 0.9, seed: 42, ..Default::default() };
    let x = e.generate(&[ChatMessage::user("Name a GPU.")], &s, None).unwrap();
    let y = e.generate(&[ChatMessage::user("Name a GPU.")], &s, None).unwrap();
    assert_eq!(x.tokens, y.tokens);
}
