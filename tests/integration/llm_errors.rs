//! A corrupt, truncated or missing model file gives a clear error (what, where, how to install).

use keet::llm::{Engine, EngineOptions};
use std::io::Write;

fn load_err(model: &str) -> String {
    let opts = EngineOptions { model: Some(model.to_string()), device: Some("cpu".into()), threads: Some(1) };
    match Engine::load(&opts) {
        Ok(_) => panic!("loading {model} should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn garbage_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.gguf");
    std::fs::File::create(&p).unwrap().write_all(b"this is not a gguf file at all, just text\n").unwrap();
    let e = load_err(p.to_str().unwrap());
    assert!(e.contains("corrupt or incomplete") && e.contains("bad.gguf") && e.contains("keet model install"), "{e}");
}

#[test]
fn truncated_model_is_a_clear_error() {
    if std::env::var("KEET_SKIP_MODEL_TESTS").map(|v| v == "1").unwrap_or(false) {
        return;
    }
    let src = keet::llm::resolve::resolve_model(Some("smollm2-135m-instruct"))
        .unwrap_or_else(|e| panic!("this test needs the default model: {e} (KEET_SKIP_MODEL_TESTS=1 skips it)"));
    let bytes = std::fs::read(src.location.path()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, len) in [("cut-header.gguf", 4096), ("cut-tensors.gguf", bytes.len() / 2), ("cut-end.gguf", bytes.len() - 1)] {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes[..len]).unwrap();
        let e = load_err(p.to_str().unwrap());
        assert!(e.contains("corrupt or incomplete") && e.contains(name) && e.contains("keet model install"), "{name}: {e}");
    }
}

#[test]
fn missing_model_says_where_keet_looked() {
    let e = load_err("/nonexistent/model.gguf");
    assert!(e.contains("/nonexistent/model.gguf") && e.contains("keet model install"), "{e}");
}

/// A conversation longer than the model's context: `generate` says so in its own error, and the ask
/// loop turns it into a refusal with that reason (the caller's expert text stands) instead of ending
/// the run. SmolLM2-135M's context is 8,192 tokens; a small model's cut-off answer appended to a
/// re-ask once pushed `keet bench explain` past it and stopped the whole corpus run.
#[test]
fn a_conversation_longer_than_the_context_is_a_refusal_not_an_error() {
    if crate::llm_support::skip() {
        return;
    }
    use keet::llm::ask::{ask, Ask};
    use keet::llm::{ChatMessage, GenerateOptions, LlmError};
    let mut engine = crate::llm_support::engine();
    let context = engine.info.context_length;
    let long = "profile ".repeat(context + 100);
    let messages = vec![ChatMessage::system("Answer as JSON."), ChatMessage::user(long)];
    let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    let options = GenerateOptions::default();
    match engine.generate(&messages, &options, Some(&schema)) {
        Err(LlmError::PromptTooLong { prompt_tokens, context_tokens }) => {
            assert!(prompt_tokens > context_tokens && context_tokens == context, "{prompt_tokens} {context_tokens}")
        }
        other => panic!("expected PromptTooLong, got {other:?}"),
    }
    let question = Ask { messages, schema: &schema, options, reasks: 1 };
    let outcome = ask::<serde_json::Value, LlmError>(&mut engine, question, |_| Ok(()), |_| Ok(String::new()))
        .expect("too long is a refusal, not an error");
    assert!(outcome.accepted.is_none() && outcome.attempts == 0, "{outcome:?}");
    assert!(outcome.refusals[0][0].contains("does not fit the model's context"), "{:?}", outcome.refusals);
}
