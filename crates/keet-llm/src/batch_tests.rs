//! Batched generation against each request generated alone: on a tiny synthetic Qwen2 model with
//! a byte-level tokenizer (no model file: always runs) and on the installed SmolLM2-135M (the fast
//! CPU engine's Llama path; skips with a message when the model is not installed). The check of
//! the batched step itself is `fast::tests_qwen::batched_slots_equal_each_sequence_alone`.

use std::path::Path;

use candle_core::quantized::gguf_file::Value as MetaValue;
use serde_json::json;

use crate::batch::Request;
use crate::engine::{Engine, EngineOptions, GenerateOptions, Generation};
use crate::fast::tests_qwen::{synthetic_qwen_gguf_with, VOCAB};
use crate::shared::{Generate, SharedEngine};
use crate::template::ChatMessage;

/// GPT-2's byte-to-character map: the token text of each byte in a byte-level vocabulary.
fn byte_level_chars() -> Vec<String> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut unprintable = 0;
    (0..256u32)
        .map(|b| {
            let code = if printable(b) {
                b
            } else {
                unprintable += 1;
                255 + unprintable
            };
            char::from_u32(code).expect("a character").to_string()
        })
        .collect()
}

/// The synthetic Qwen2 model of `fast::tests_qwen` with a byte-level tokenizer (tokens 0-255 the
/// bytes, the rest control tokens, the last one the end token), written into `dir` and loaded.
fn synthetic_engine(dir: &Path) -> Engine {
    let mut tokens = byte_level_chars();
    tokens.extend((256..VOCAB).map(|i| format!("<|control_{i}|>")));
    let types = (0..VOCAB).map(|i| MetaValue::I32(if i < 256 { 1 } else { 3 })).collect();
    let metadata = vec![
        ("tokenizer.ggml.model".to_string(), MetaValue::String("gpt2".into())),
        ("tokenizer.ggml.tokens".to_string(), MetaValue::Array(tokens.into_iter().map(MetaValue::String).collect())),
        ("tokenizer.ggml.token_type".to_string(), MetaValue::Array(types)),
        ("tokenizer.ggml.eos_token_id".to_string(), MetaValue::U32(VOCAB as u32 - 1)),
    ];
    let path = dir.join("tiny-qwen2.gguf");
    std::fs::write(&path, synthetic_qwen_gguf_with("qwen2", metadata)).unwrap();
    let opts = EngineOptions { model: Some(path.to_string_lossy().into_owned()), device: None, threads: Some(2) };
    let engine = Engine::load(&opts).expect("the synthetic model loads");
    assert_eq!(engine.info.implementation, "fast", "the fast CPU engine runs the synthetic model");
    engine
}

fn smollm2() -> Option<Engine> {
    let Some(path) = crate::fast::tests::test_model_path() else {
        eprintln!("SKIP: SmolLM2-135M-Instruct.Q4_1.gguf not installed (or set KEET_TEST_MODEL)");
        return None;
    };
    let opts = EngineOptions { model: Some(path.to_string_lossy().into_owned()), device: None, threads: Some(2) };
    let engine = Engine::load(&opts).expect("SmolLM2 loads");
    assert_eq!(engine.info.implementation, "fast", "the fast CPU engine runs SmolLM2");
    Some(engine)
}

/// Six requests of different lengths: greedy, seeded sampling (two seeds), a JSON schema greedy
/// and sampled (its long second key is a run of forced tokens longer than a batched step takes,
/// which goes through the model alone), and a plain text prompt.
fn requests() -> Vec<Request> {
    let schema = json!({
        "type": "object",
        "properties": {
            "bound": {"type": "string", "enum": ["memory", "compute", "latency"]},
            "reason_in_one_short_sentence_for_the_developer": {"type": "string", "maxLength": 24}
        },
        "required": ["bound", "reason_in_one_short_sentence_for_the_developer"],
        "additionalProperties": false
    });
    // the schema's bound as budget: that answer is always complete JSON
    let bound = crate::constraint::max_tokens_bound(&schema).unwrap();
    let ask = |text: &str| vec![ChatMessage::system("You explain GPU kernel profiles."), ChatMessage::user(text)];
    let greedy = GenerateOptions { max_tokens: 20, ..Default::default() };
    let sampled = |seed| GenerateOptions { max_tokens: 20, temperature: 0.8, top_p: 0.9, seed, ..Default::default() };
    let long = "The kernel reads 2 GB from global memory, its DRAM throughput is 91 % of peak and the SM \
                busy time 12 %. What limits it?";
    vec![
        Request::messages(ask("Why is a kernel with 95 % DRAM throughput memory bound?"), greedy.clone(), None),
        Request::messages(ask(long), sampled(7), None),
        Request::messages(ask("Name one way to raise occupancy."), sampled(42), None),
        Request::messages(ask(long), GenerateOptions { max_tokens: bound, ..greedy.clone() }, Some(schema.clone())),
        Request::messages(ask("Is a kernel at 10 % of peak compute bound?"), sampled(3), Some(schema)),
        Request { prompt: crate::batch::Prompt::Text("Shared memory bank conflicts happen when".into()), options: greedy, schema: None },
    ]
}

fn assert_same(alone: &Generation, together: &Generation, what: &str) {
    assert_eq!(alone.tokens, together.tokens, "{what}: tokens differ");
    assert_eq!(alone.text, together.text, "{what}: text differs");
    assert_eq!(alone.stop_reason, together.stop_reason, "{what}: stop reason differs");
}

/// Every request batched (3 slots for 6 requests: continuous batching) gives the tokens, text and
/// stop reason it gets alone (`Engine::generate`, with its prompt-lookup drafts), greedy, sampled
/// and under a schema; run twice, the second time reusing the slots' prompt prefixes.
fn check_batched_equals_alone(engine: &mut Engine) {
    let alone: Vec<Generation> = requests().iter().map(|r| engine.generate_request(r).unwrap()).collect();
    assert!(alone.iter().any(|g| g.tokens.len() >= 10), "some answers are long enough to test decoding");
    for round in 0..2 {
        let together = engine.generate_batch(requests(), 3);
        for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
            assert_same(a, b.as_ref().unwrap(), &format!("round {round}, request {i}"));
        }
        let reused: Vec<usize> = together.iter().map(|g| g.as_ref().unwrap().timings.reused_tokens).collect();
        eprintln!("round {round}: prompt tokens reused {reused:?}");
        if round == 1 {
            // the chat requests share the system prompt with what their slot held before
            assert!(reused.iter().filter(|&&n| n > 0).count() >= 4, "slots' prompts reused: {reused:?}");
        }
    }
    let json: serde_json::Value = serde_json::from_str(&alone[3].text).expect("the schema's answer is JSON");
    assert!(json["bound"].is_string(), "{json}");
}

/// Requests from several threads through handles of one shared engine (2 slots, 4 threads): each
/// answer is what the request gets alone, and the engine comes back.
fn check_shared_engine(mut engine: Engine) {
    let requests = requests();
    let alone: Vec<Generation> = requests.iter().take(4).map(|r| engine.generate_request(r).unwrap()).collect();
    let shared = SharedEngine::start(engine, 2).unwrap();
    let together: Vec<Generation> = std::thread::scope(|s| {
        let workers: Vec<_> = requests
            .iter()
            .take(4)
            .map(|r| {
                let mut handle = shared.handle();
                s.spawn(move || {
                    let crate::batch::Prompt::Messages(messages) = &r.prompt else { panic!("messages") };
                    handle.generate(messages, &r.options, r.schema.as_ref()).unwrap()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert_same(a, b, &format!("thread {i}"));
    }
    let mut engine = shared.stop().unwrap();
    let again = engine.generate_request(&requests[0]).unwrap();
    assert_same(&alone[0], &again, "the engine after the shared run");
}

#[test]
fn synthetic_batched_generation_equals_each_request_alone() {
    let dir = tempfile::tempdir().unwrap();
    check_batched_equals_alone(&mut synthetic_engine(dir.path()));
}

#[test]
fn synthetic_shared_engine_answers_threads_as_alone() {
    let dir = tempfile::tempdir().unwrap();
    check_shared_engine(synthetic_engine(dir.path()));
}

/// A model without several-sequence support (candle's quantized Qwen2 on the same synthetic file)
/// is served one request at a time, through the batch decoder and the shared engine alike, with
/// the answers `Engine::generate` gives.
#[test]
fn synthetic_candle_model_is_served_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = synthetic_engine(dir.path());
    let gguf = crate::loader::GgufFile::open(&dir.path().join("tiny-qwen2.gguf")).unwrap();
    engine.model = crate::loader::load_gguf_candle(gguf, &candle_core::Device::Cpu).unwrap();
    assert!(engine.model.sequences().is_none(), "candle's model decodes one sequence at a time");
    let requests: Vec<Request> = requests().into_iter().take(3).collect();
    let alone: Vec<Generation> = requests.iter().map(|r| engine.generate_request(r).unwrap()).collect();
    let together = engine.generate_batch(requests.clone(), 2);
    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert_same(a, b.as_ref().unwrap(), &format!("request {i}"));
    }
    let shared = SharedEngine::start(engine, 2).unwrap();
    let mut handle = shared.handle();
    let crate::batch::Prompt::Messages(messages) = &requests[1].prompt else { panic!("messages") };
    let answer = handle.generate(messages, &requests[1].options, None).unwrap();
    assert_same(&alone[1], &answer, "through the shared engine");
    shared.stop().unwrap();
}

#[test]
fn smollm2_batched_generation_equals_each_request_alone() {
    let Some(mut engine) = smollm2() else { return };
    check_batched_equals_alone(&mut engine);
}

#[test]
fn smollm2_shared_engine_answers_threads_as_alone() {
    let Some(engine) = smollm2() else { return };
    check_shared_engine(engine);
}

/// Decode speed one at a time against batched on the default model (Qwen2.5-Coder-1.5B Q4_K_M),
/// 2 threads: `cargo test -p keet-llm --lib concurrency_numbers -- --ignored --nocapture`
/// (`KEET_BENCH_CONCURRENCY`, default 1,2,4,8; `KEET_BENCH_TOKENS`, default 48). Also
/// `keet bench llm --concurrency 1,2,4,8`.
#[test]
#[ignore]
fn concurrency_numbers() {
    let path = crate::resolve::models_dir().join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    if !path.is_file() {
        eprintln!("SKIP concurrency_numbers: {} not installed", path.display());
        return;
    }
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.into());
    let concurrency: Vec<usize> = env("KEET_BENCH_CONCURRENCY", "1,2,4,8").split(',').filter_map(|v| v.trim().parse().ok()).collect();
    let tokens: usize = env("KEET_BENCH_TOKENS", "48").parse().unwrap();
    let opts = EngineOptions { model: Some(path.to_string_lossy().into_owned()), device: None, threads: Some(2) };
    let mut engine = Engine::load(&opts).unwrap();
    let widest = concurrency.iter().copied().max().unwrap_or(1);
    let requests = crate::concurrency::kernel_questions(widest, tokens);
    let rows = crate::concurrency::compare(&mut engine, &requests, &concurrency).unwrap();
    println!(
        "model {} ({}, {} threads), cpu {}",
        path.display(),
        engine.info.implementation,
        engine.info.threads,
        crate::concurrency::cpu_model()
    );
    crate::concurrency::print_rows(&rows);
    assert!(rows.iter().all(|r| r.same_tokens), "batched answers differ from the answers alone");
}
