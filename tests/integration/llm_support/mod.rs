//! Shared helpers for the tests that run the real default model (`tests/llm_*.rs`).
#![allow(dead_code)]

use keet::llm::{Engine, EngineOptions};
use serde_json::Value;

/// True when KEET_SKIP_MODEL_TESTS=1: the model tests then pass without running.
pub fn skip() -> bool {
    if std::env::var("KEET_SKIP_MODEL_TESTS").map(|v| v == "1").unwrap_or(false) {
        eprintln!("KEET_SKIP_MODEL_TESTS=1: skipping a test that needs the model");
        return true;
    }
    false
}

/// The model the engine-mechanics tests run: SmolLM2-135M (installed by `.ci/run` beside the
/// default); the default model's own tests are few (tests/integration/explain_default_model.rs).
pub const TEST_MODEL: &str = "smollm2-135m-instruct";

/// Loads [`TEST_MODEL`] through keet's normal resolution (1 thread: tests run side by side).
/// Fails with keet's own message (where it looked, how to install) when the model is absent.
pub fn engine() -> Engine {
    let opts = EngineOptions { model: Some(TEST_MODEL.into()), device: Some("cpu".into()), threads: Some(1) };
    match Engine::load(&opts) {
        Ok(e) => e,
        Err(e) => panic!("the LLM tests need the default model: {e}\n(set KEET_SKIP_MODEL_TESTS=1 to skip them)"),
    }
}

/// A JSON Schema checker for the keywords the tests use: type, properties, required,
/// additionalProperties, enum, const, minLength, maxLength, pattern-free strings, minimum, maximum,
/// items, minItems, maxItems, anyOf. Returns the first violation.
pub fn validate(v: &Value, s: &Value, at: &str) -> Result<(), String> {
    let o = match s.as_object() {
        Some(o) => o,
        None => return Ok(()),
    };
    if let Some(e) = o.get("enum").and_then(|e| e.as_array()) {
        if !e.contains(v) {
            return Err(format!("{at}: {v} not in enum"));
        }
    }
    if let Some(c) = o.get("const") {
        if c != v {
            return Err(format!("{at}: {v} != const {c}"));
        }
    }
    if let Some(alts) = o.get("anyOf").and_then(|a| a.as_array()) {
        if !alts.iter().any(|a| validate(v, a, at).is_ok()) {
            return Err(format!("{at}: matches no anyOf branch"));
        }
    }
    if let Some(t) = o.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "string" => v.is_string(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: {v} is not of type {t}"));
        }
    }
    if let Some(s) = v.as_str() {
        let n = s.chars().count() as u64;
        if let Some(max) = o.get("maxLength").and_then(|x| x.as_u64()) {
            if n > max {
                return Err(format!("{at}: string of {n} chars > maxLength {max}"));
            }
        }
        if let Some(min) = o.get("minLength").and_then(|x| x.as_u64()) {
            if n < min {
                return Err(format!("{at}: string of {n} chars < minLength {min}"));
            }
        }
    }
    if let Some(x) = v.as_f64() {
        if let Some(min) = o.get("minimum").and_then(|m| m.as_f64()) {
            if x < min {
                return Err(format!("{at}: {x} < minimum {min}"));
            }
        }
        if let Some(max) = o.get("maximum").and_then(|m| m.as_f64()) {
            if x > max {
                return Err(format!("{at}: {x} > maximum {max}"));
            }
        }
    }
    if let Some(a) = v.as_array() {
        if let Some(max) = o.get("maxItems").and_then(|x| x.as_u64()) {
            if a.len() as u64 > max {
                return Err(format!("{at}: {} items > maxItems {max}", a.len()));
            }
        }
        if let Some(min) = o.get("minItems").and_then(|x| x.as_u64()) {
            if (a.len() as u64) < min {
                return Err(format!("{at}: {} items < minItems {min}", a.len()));
            }
        }
        if let Some(items) = o.get("items") {
            for (i, x) in a.iter().enumerate() {
                validate(x, items, &format!("{at}/{i}"))?;
            }
        }
    }
    if let Some(obj) = v.as_object() {
        let props = o.get("properties").and_then(|p| p.as_object());
        if let Some(req) = o.get("required").and_then(|r| r.as_array()) {
            for r in req.iter().filter_map(|r| r.as_str()) {
                if !obj.contains_key(r) {
                    return Err(format!("{at}: missing required property {r}"));
                }
            }
        }
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(x, ps, &format!("{at}/{k}"))?,
                None => {
                    if o.get("additionalProperties") == Some(&Value::Bool(false)) {
                        return Err(format!("{at}: unexpected property {k}"));
                    }
                }
            }
        }
    }
    Ok(())
}
