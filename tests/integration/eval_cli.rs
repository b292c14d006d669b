//! `keet eval` end to end: with the model, questions from a real profile answered in three context
//! formats and four rotations with one letter, tallied per kind with intervals and the paired test;
//! the questions-only JSONL; and the scoring of answers made elsewhere (`--answers`), in one rotation
//! or four (a planted always-B answerer), including bad answer files.

use crate::llm_support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env("KEET_MODEL", "smollm2-135m-instruct").output().unwrap()
}

fn schema_errors(r: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/eval-v3.schema.json")).unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    v.iter_errors(r).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn eval_answers_every_question_in_every_format_asked() {
    if llm_support::skip() {
        return;
    }
    let f = corpus("rtxa2000-sample/addConstDouble.ncu-rep");
    let o = keet(&[
        "eval",
        f.to_str().unwrap(),
        "--model",
        "smollm2-135m-instruct",
        "--formats",
        "raw,generic,context",
        "--threads",
        "1",
        "--seeds",
        "5,6",
        "-f",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let errors = schema_errors(&r);
    assert!(errors.is_empty(), "keet.eval/3 schema: {errors:?}");
    assert_eq!(r["schema"], "keet.eval/3");
    assert_eq!(r["seeds"], json!([5, 6]));
    assert_eq!(r["formats"], json!(["raw", "generic", "context"]));
    assert_eq!(r["rotations"], 4, "circular by default");
    assert_eq!(r["model"]["name"], "smollm2-135m-instruct");
    let n = r["questions"].as_u64().unwrap();
    assert!(n >= 6, "{r}");
    let answers = r["answers"].as_array().unwrap();
    assert_eq!(answers.len() as u64, n);
    let mut correct = [0u64; 3];
    for a in answers {
        for c in ["raw", "generic", "context"] {
            let g = a["given"][c].as_array().unwrap();
            assert_eq!(g.len(), 4, "one letter per rotation");
            assert!(g.iter().all(|l| ["A", "B", "C", "D"].contains(&l.as_str().unwrap())), "one letter, got {g:?}");
        }
    }
    // The tallies add up: per kind to overall, per seed to overall, letters to n.
    for (i, c) in r["overall"]["cells"].as_array().unwrap().iter().enumerate() {
        correct[i] = c["correct"].as_u64().unwrap();
        let by_kind: u64 = r["by_kind"].as_array().unwrap().iter().map(|k| k["cells"][i]["correct"].as_u64().unwrap()).sum();
        let by_seed: u64 = r["by_seed"].as_array().unwrap().iter().map(|k| k["cells"][i]["correct"].as_u64().unwrap()).sum();
        assert_eq!((by_kind, by_seed), (correct[i], correct[i]));
        let letters: u64 = r["letters"][i]["counts"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum();
        assert_eq!(letters, 4 * n, "a letter per question and rotation");
        // Circular: right in all four rotations, so never above the worst rotation.
        let worst = c["rotation_pct"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).fold(100.0, f64::min);
        assert!(c["accuracy_pct"].as_f64().unwrap() <= worst + 1e-9, "{c}");
    }
    let key = r["letters"].as_array().unwrap().iter().find(|l| l["of"] == "key").unwrap();
    assert_eq!(key["counts"], json!([n, n, n, n]), "over the rotations each letter is the key once per question");
    let kinds: u64 = r["by_kind"].as_array().unwrap().iter().map(|k| k["questions"].as_u64().unwrap()).sum();
    assert_eq!(kinds, n, "every question is in one kind's row");
    let vs = &r["overall"]["cells"][2]["vs_raw"];
    let delta = 100.0 * (correct[2] as f64 - correct[0] as f64) / n as f64;
    assert!((vs["delta_pts"].as_f64().unwrap() - delta).abs() < 1e-9);
    // Each context prefilled once per format: most prompt tokens come from the KV state, and each
    // rotation after the first runs less than the first (the default cloze form: nothing at all).
    for c in r["cost"].as_array().unwrap() {
        assert!(c["reused_tokens"].as_u64().unwrap() * 2 > c["prompt_tokens"].as_u64().unwrap(), "{c}");
        let by_rotation: Vec<u64> = c["run_tokens_by_rotation"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let run = c["prompt_tokens"].as_u64().unwrap() - c["reused_tokens"].as_u64().unwrap();
        assert_eq!(by_rotation.iter().sum::<u64>(), run, "{c}");
        assert!(by_rotation[1..].iter().all(|&t| t < by_rotation[0]), "{c}");
    }
}

fn write_questions(dir: &Path, profiles: &[PathBuf], seeds: &str) -> (PathBuf, Vec<Value>) {
    let out = dir.join("q.jsonl");
    let mut args = vec!["eval".to_string()];
    args.extend(profiles.iter().map(|p| p.to_str().unwrap().to_string()));
    args.extend(["--no-llm", "--seeds", seeds, "--questions-out", out.to_str().unwrap()].map(String::from));
    let o = Command::new(env!("CARGO_BIN_EXE_keet")).args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "--no-llm prints no table");
    let lines = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out, lines)
}

#[test]
fn questions_only_jsonl_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let (_, lines) = write_questions(dir.path(), &[corpus("h200-moe/decode_c1.ncu-rep")], "0,1");
    assert!(lines.len() >= 10);
    for q in &lines {
        assert_eq!(q["options"].as_array().unwrap().len(), 4);
        assert!(["A", "B", "C", "D"].contains(&q["answer"].as_str().unwrap()));
        assert!(!q["basis"].as_array().unwrap().is_empty());
        for c in ["raw", "generic", "context", "md"] {
            assert!(q["contexts"][c].as_str().unwrap().len() > 100, "{c} context missing");
        }
        assert!(q["contexts"]["none"].as_str().unwrap().len() < 300);
    }
    for seed in [0, 1] {
        assert!(lines.iter().any(|q| q["seed"] == seed && q["id"].as_str().unwrap().starts_with(&format!("s{seed}-"))));
    }
    // A profile with no question to ask: a clear error.
    let o = keet(&["eval", corpus("cc86-esmm/metrics.csv").to_str().unwrap(), "--no-llm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no questions"));
    // Beside one that gives questions, it is listed, not dropped.
    let o = keet(&[
        "eval",
        corpus("cc86-esmm/metrics.csv").to_str().unwrap(),
        corpus("rtxa2000-sample/addConstDouble.ncu-rep").to_str().unwrap(),
        "--no-llm",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cc86-esmm/metrics.csv: no question"), "{err}");
}

fn write_answers(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

fn score(questions: &Path, answers: &Path) -> Output {
    keet(&["eval", "--questions", questions.to_str().unwrap(), "--answers", answers.to_str().unwrap(), "-f", "json"])
}

#[test]
fn planted_answers_score_as_planted() {
    let dir = tempfile::tempdir().unwrap();
    let (qpath, qs) = write_questions(dir.path(), &[corpus("h200-moe/decode_c1.ncu-rep"), corpus("h800-sglang/fa2_fwd.ncu-rep")], "0,1");
    let n = qs.len();
    // Format "perfect" answers every key; "raw" always C.
    let mut lines = Vec::new();
    for q in &qs {
        lines.push(json!({"id": q["id"], "format": "perfect", "answer": q["answer"]}).to_string());
        lines.push(json!({"id": q["id"], "format": "raw", "answer": "C", "model": "always-c"}).to_string());
    }
    let a = write_answers(dir.path(), "a.jsonl", &lines);
    let o = score(&qpath, &a);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let errors = schema_errors(&r);
    assert!(errors.is_empty(), "keet.eval/3 schema: {errors:?}");
    assert_eq!(r["formats"], json!(["raw", "perfect"]), "the baseline first");
    assert_eq!(r["questions"].as_u64(), Some(n as u64));
    let c_keys = qs.iter().filter(|q| q["answer"] == "C").count();
    let overall = &r["overall"]["cells"];
    assert_eq!(overall[1]["accuracy_pct"].as_f64(), Some(100.0));
    assert_eq!(overall[0]["correct"].as_u64(), Some(c_keys as u64));
    assert!((overall[0]["accuracy_pct"].as_f64().unwrap() - 100.0 * c_keys as f64 / n as f64).abs() < 1e-9);
    // Paired: perfect wins every question raw missed and loses none.
    assert_eq!(overall[1]["vs_raw"]["wins"].as_u64(), Some((n - c_keys) as u64));
    assert_eq!(overall[1]["vs_raw"]["losses"].as_u64(), Some(0));
    for k in r["by_kind"].as_array().unwrap() {
        if k["questions"].as_u64().unwrap() > 0 {
            assert_eq!(k["cells"][1]["accuracy_pct"].as_f64(), Some(100.0), "{k}");
        }
    }
    assert_eq!(r["letters"][0]["counts"], json!([0, 0, n, 0]), "always C");
    let key = r["letters"].as_array().unwrap().iter().find(|l| l["of"] == "key").unwrap();
    assert_eq!(key["counts"][2].as_u64(), Some(c_keys as u64));
    // The text table states both.
    let o = keet(&["eval", "--questions", qpath.to_str().unwrap(), "--answers", a.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("100% [") || text.contains("100.0% ["), "{text}");
}

#[test]
fn answers_from_a_file_say_why_the_context_format_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (qpath, qs) = write_questions(dir.path(), &[corpus("h200-moe/decode_c1.ncu-rep")], "0");
    let lines: Vec<String> = qs.iter().map(|q| json!({"id": q["id"], "format": "context", "answer": "C"}).to_string()).collect();
    let o = score(&qpath, &write_answers(dir.path(), "a.jsonl", &lines));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(schema_errors(&r).is_empty());
    let overall = |rows: &Value| rows.as_array().unwrap().iter().find(|k| k["kind"] == "overall").cloned().unwrap();
    // The questions file carries keet's context: every key is classified, and every question the
    // always-C answerer got wrong.
    assert_eq!(overall(&r["context_states"])["questions"].as_u64(), Some(qs.len() as u64));
    let wrong = qs.iter().filter(|q| q["answer"] != "C").count() as u64;
    assert_eq!(overall(&r["wrong_answer_causes"])["questions"].as_u64(), Some(wrong));
}

/// The answers of a planted answerer that always says B, in all four rotations: on questions
/// whose keys are A, B, C and D equally often, 25% in every rotation and 0% circular; on any
/// questions, 25% over the rotations and 0% circular. The text table heads with circular accuracy.
#[test]
fn always_b_scores_a_quarter_per_rotation_and_nothing_circular() {
    let dir = tempfile::tempdir().unwrap();
    let (qpath, qs) = write_questions(dir.path(), &[corpus("h200-moe/decode_c1.ncu-rep"), corpus("h800-sglang/fa2_fwd.ncu-rep")], "0,1");
    // The same number of questions keyed A, B, C and D.
    let per_letter = ["A", "B", "C", "D"].map(|l| qs.iter().filter(|q| q["answer"] == l).count()).into_iter().min().unwrap();
    assert!(per_letter >= 2, "{per_letter}");
    let mut balanced: Vec<&Value> = Vec::new();
    for l in ["A", "B", "C", "D"] {
        balanced.extend(qs.iter().filter(|q| q["answer"] == l).take(per_letter));
    }
    let bpath = dir.path().join("balanced.jsonl");
    std::fs::write(&bpath, balanced.iter().map(|q| q.to_string() + "\n").collect::<String>()).unwrap();
    for (questions, all) in [(&bpath, balanced.clone()), (&qpath, qs.iter().collect())] {
        let lines: Vec<String> = all
            .iter()
            .flat_map(|q| (0..4).map(move |r| json!({"id": q["id"], "format": "raw", "rotation": r, "answer": "B"}).to_string()))
            .collect();
        let a = write_answers(dir.path(), "b.jsonl", &lines);
        let o = score(questions, &a);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let errors = schema_errors(&r);
        assert!(errors.is_empty(), "keet.eval/3 schema: {errors:?}");
        assert_eq!(r["rotations"], 4);
        let cell = &r["overall"]["cells"][0];
        assert_eq!((cell["correct"].as_u64(), cell["accuracy_pct"].as_f64()), (Some(0), Some(0.0)), "{cell}");
        assert_eq!(cell["rotation_mean_pct"].as_f64(), Some(25.0), "{cell}");
        if questions == &bpath {
            assert_eq!(cell["rotation_pct"], json!([25.0, 25.0, 25.0, 25.0]), "{cell}");
        }
        let n = all.len();
        assert_eq!(r["letters"][0]["counts"], json!([0, 4 * n, 0, 0]));
    }
    // The text table: circular accuracy under the `question kind` header, an `overall` row, then the rotations.
    let lines: Vec<String> = balanced
        .iter()
        .flat_map(|q| (0..4).map(move |r| json!({"id": q["id"], "format": "raw", "rotation": r, "answer": "B"}).to_string()))
        .collect();
    let a = write_answers(dir.path(), "b.jsonl", &lines);
    let o = keet(&["eval", "--questions", bpath.to_str().unwrap(), "--answers", a.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Circular accuracy") && text.contains("question kind") && text.contains("overall"), "{text}");
    assert!(text.contains("25 25 25 25 | 25.0%"), "{text}");
}

#[test]
fn bad_answer_files_name_the_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (qpath, qs) = write_questions(dir.path(), &[corpus("rtxa2000-sample/addConstDouble.ncu-rep")], "0");
    let good: Vec<String> = qs.iter().map(|q| json!({"id": q["id"], "format": "raw", "answer": "A"}).to_string()).collect();
    let id0 = qs[0]["id"].as_str().unwrap();
    // Every question in four rotations but the first question's last.
    let mut rotation_lines = Vec::new();
    for (i, q) in qs.iter().enumerate() {
        for r in 0..4 {
            if i > 0 || r < 3 {
                rotation_lines.push(json!({"id": q["id"], "format": "raw", "rotation": r, "answer": "A"}).to_string());
            }
        }
    }
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "unknown id",
            [good.clone(), vec![json!({"id": "s9-q9999", "format": "raw", "answer": "A"}).to_string()]].concat(),
            format!(":{}: unknown question id", good.len() + 1),
        ),
        (
            "duplicate",
            [good.clone(), vec![json!({"id": id0, "format": "raw", "answer": "B"}).to_string()]].concat(),
            format!(":{}: second answer to {id0} in format raw (first on line 1)", good.len() + 1),
        ),
        (
            "malformed",
            [vec![good[0].clone(), "{\"id\": \"s0-q0001\", ".to_string()], good[1..].to_vec()].concat(),
            ":2: expected a JSON object".to_string(),
        ),
        (
            "not a letter",
            [vec![json!({"id": id0, "format": "raw", "answer": "E"}).to_string()], good[1..].to_vec()].concat(),
            ":1: answer \"E\"".to_string(),
        ),
        ("missing", good[1..].to_vec(), format!("missing 1 (first: {id0})")),
        (
            "rotation out of range",
            [vec![json!({"id": id0, "format": "raw", "rotation": 4, "answer": "A"}).to_string()], good[1..].to_vec()].concat(),
            ":1: rotation 4".to_string(),
        ),
        (
            "two rotations",
            [good.clone(), vec![json!({"id": id0, "format": "raw", "rotation": 1, "answer": "A"}).to_string()]].concat(),
            "rotation 0 only, or all four".to_string(),
        ),
        ("a rotation missing", rotation_lines.clone(), format!("missing 1 (first: {id0} rotation 3)")),
    ];
    for (what, lines, expect) in cases {
        let a = write_answers(dir.path(), "bad.jsonl", &lines);
        let o = score(&qpath, &a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(&expect) && err.contains("bad.jsonl"), "{what}: expected {expect:?} in {err}");
        assert!(o.stdout.is_empty(), "{what}: no partial report");
    }
}

/// keet's context states each question's keyed answer in one line, in the question's terms, on every
/// corpus profile (`expert/eval.toml [statements]`): no key goes unstated, and keet's rule layer
/// and the keys disagree on at most a few library kernels whose key is the generic fix.
#[test]
fn the_context_states_every_questions_key() {
    let o = keet(&["eval", corpus("").to_str().unwrap(), "--no-llm", "--seeds", "0,1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let table: Vec<Vec<&str>> = err
        .lines()
        .skip_while(|l| !l.starts_with("question kind"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let overall = table.iter().find(|r| r[0] == "overall").unwrap_or_else(|| panic!("no overall row:\n{err}"));
    let count = |row: &[&str], col: usize| row[col].parse::<usize>().unwrap();
    let (n, option_words, not_stated, contradicts) = (count(overall, 1), count(overall, 2), count(overall, 4), count(overall, 5));
    assert!(n >= 200, "{err}");
    assert_eq!(not_stated, 0, "every key is stated:\n{err}");
    assert!(contradicts * 50 <= n, "the rule layer and the keys disagree on {contradicts} of {n}:\n{err}");
    assert!(option_words * 10 >= n * 8, "stated in the options' own words: {option_words} of {n}:\n{err}");
}

#[test]
fn a_bad_peer_context_file_names_its_line_before_any_model_runs() {
    let dir = tempfile::tempdir().unwrap();
    let peer = dir.path().join("peer.jsonl");
    std::fs::write(&peer, "{\"id\": \"s0-q9999\", \"context\": \"x\"}\n").unwrap();
    let f = corpus("rtxa2000-sample/addConstDouble.ncu-rep");
    let arg = format!("peer={}", peer.display());
    let o = keet(&["eval", f.to_str().unwrap(), "--formats", "context", "--context", &arg, "--model", "/nonexistent.gguf"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("peer.jsonl:1: question \"s0-q9999\" is not one of this run's questions"), "{err}");
    let o = keet(&["eval", f.to_str().unwrap(), "--context", "context=x.jsonl", "--no-llm"]);
    assert_eq!(o.status.code(), Some(2), "a peer may not take one of keet's names");
}
