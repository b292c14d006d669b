//! `keet eval` end to end with the default model: questions from a real profile, answered in two
//! context formats under the one-letter grammar, tallied per kind; and the questions-only JSONL.

mod llm_support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

#[test]
fn eval_answers_every_question_in_every_format_asked() {
    if llm_support::skip() {
        return;
    }
    let f = corpus("rtxa2000-sample/addConstDouble.ncu-rep");
    let o = Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(["eval", f.to_str().unwrap(), "--formats", "raw,context", "--threads", "1", "--seed", "5", "-f", "json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/eval-v1.schema.json")).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(&r).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "keet.eval/1 schema: {errors:?}");
    assert_eq!(r["schema"], "keet.eval/1");
    assert_eq!(r["seed"], 5);
    assert_eq!(r["conditions"], serde_json::json!(["raw", "context"]));
    assert_eq!(r["model"]["name"], "smollm2-135m-instruct");
    let n = r["questions"].as_u64().unwrap();
    assert!(n >= 3, "{r}");
    let answers = r["answers"].as_array().unwrap();
    assert_eq!(answers.len() as u64, n);
    let mut correct = [0u64; 2];
    for a in answers {
        for (i, c) in ["raw", "context"].iter().enumerate() {
            let g = a["given"][c].as_str().unwrap();
            assert!(["A", "B", "C", "D"].contains(&g), "the grammar admits one letter, got {g:?}");
            correct[i] += (g == a["answer"].as_str().unwrap()) as u64;
        }
    }
    assert_eq!(r["overall"]["questions"].as_u64(), Some(n));
    assert_eq!(r["overall"]["correct"], serde_json::json!(correct));
    let kinds: u64 = r["by_kind"].as_array().unwrap().iter().map(|k| k["questions"].as_u64().unwrap()).sum();
    assert_eq!(kinds, n, "every question is in one kind's row");
}

#[test]
fn questions_only_jsonl_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.jsonl");
    let f = corpus("h200-moe/decode_c1.ncu-rep");
    let o = Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(["eval", f.to_str().unwrap(), "--no-llm", "--questions-out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "--no-llm prints no table");
    let lines: Vec<Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 5);
    for q in &lines {
        assert_eq!(q["options"].as_array().unwrap().len(), 4);
        assert!(["A", "B", "C", "D"].contains(&q["answer"].as_str().unwrap()));
        assert!(!q["basis"].as_array().unwrap().is_empty());
        for c in ["raw", "context", "md"] {
            assert!(q["contexts"][c].as_str().unwrap().len() > 100, "{c} context missing");
        }
    }
    // A profile with no question to ask: a clear error.
    let o = Command::new(env!("CARGO_BIN_EXE_keet")).args(["eval", corpus("cc86-esmm/metrics.csv").to_str().unwrap(), "--no-llm"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no questions"));
}
