//! The default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) explains: `keet explain` on two corpus
//! profiles (the top kernel of one, the top two of the other) shows model text on each, and every
//! model sentence shown is checked again here, independently of the code path that let it
//! through: it passes the prose gate, every number in it is one of the kernel's own rendered
//! values (the grounding keet's prompt and grammar are built from) and sits next to what it
//! measures, and its comparisons agree with the facts. The two-kernel report also carries the
//! profile summary, whose numbers must be the report's own.
//!
//! The slowest test of the suite (tens of seconds per kernel on 2 cores), so it is the only one
//! that runs the default model; engine mechanics run on SmolLM2 elsewhere.

use keet::batch;
use keet::explain::{prompt, source};
use keet::validate::Context;
use std::path::Path;
use std::process::Command;

// Profiles whose top kernels have rule findings for the model to explain, and how many to explain.
const PROFILES: [(&str, &str); 2] = [("rtx3060-sassscope/details.csv", "1"), ("h200-moe/decode_c1.ncu-rep", "2")];

fn corpus(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel).display().to_string()
}

#[test]
fn default_model_text_is_shown_and_every_shown_sentence_is_grounded() {
    if std::env::var("KEET_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("KEET_SKIP_MODEL_TESTS=1: skipping a test that needs the model");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = keet::prose::gate();
    let mut failures = Vec::new();
    for (rel, top) in PROFILES {
        let path = corpus(rel);
        let out = Command::new(env!("CARGO_BIN_EXE_keet"))
            .args(["explain", "--format", "json", "--top", top, "--threads", "2", &path])
            .env("KEET_CACHE", dir.path().join("cache.sqlite3"))
            .env_remove("KEET_MODEL")
            .output()
            .expect("keet runs");
        assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
        assert!(doc["model"]["name"].as_str().unwrap().contains("qwen2.5-coder-1.5b"), "{}", doc["model"]);
        let profiles = vec![keet::profile::read_path(Path::new(&path)).unwrap()];
        let groups = batch::group_kernels(&profiles);
        let mut shown_here = 0;
        for k in doc["kernels"].as_array().unwrap() {
            let name = k["kernel"]["name"].as_str().unwrap();
            let g = groups.iter().find(|g| g.group.name == name).unwrap_or_else(|| panic!("kernel {name} not in {rel}"));
            let launch = g.launch(&profiles);
            let la = keet::analysis::analyse_launch_in(launch, Some(g.group.time_share_pct));
            let ctx = Context { launch, facts: &la.facts, rules: &la.findings };
            let lines = source::hot_lines(launch, &[]);
            let grounding = prompt::kernel_facts(&ctx, &la, &g.group, &lines).grounding;
            for f in k["findings"].as_array().unwrap() {
                let to = &f["text_origin"];
                if to.is_null() {
                    continue;
                }
                let category = keet::rules::Category::parse(f["category"].as_str().unwrap()).unwrap();
                let mut fields = vec![
                    (keet::prose::Field::Claim, &f["claim"], &to["claim"]),
                    (keet::prose::Field::Explanation, &f["explanation"], &to["explanation"]),
                ];
                for (i, (s, w)) in f["suggestions"].as_array().unwrap().iter().zip(to["suggestions"].as_array().unwrap()).enumerate() {
                    fields.push((keet::prose::Field::Suggestion(i), s, w));
                }
                for (field, text, writer) in fields {
                    if writer != "model" {
                        continue;
                    }
                    let text = text.as_str().unwrap();
                    println!("{rel} [{}] {text}", category.as_str());
                    shown_here += 1;
                    // The gate admits the words of the facts block the model was shown.
                    let mut reasons = gate.check_field_with(&ctx, category, field, text, &[], &grounding.fact_words);
                    reasons.extend(keet::validate::sentence_errors(&ctx, &grounding, category, field.kind(), text));
                    if !reasons.is_empty() {
                        failures.push(format!("{rel}: gate: {text:?}: {reasons:?}"));
                    }
                    let ungrounded = grounding.ungrounded(text);
                    if !ungrounded.is_empty() {
                        failures.push(format!("{rel}: ungrounded numbers {ungrounded:?} in {text:?}"));
                    }
                    let misplaced = grounding.misattributed(text);
                    if !misplaced.is_empty() {
                        failures.push(format!("{rel}: numbers next to the wrong quantity {misplaced:?} in {text:?}"));
                    }
                    let wrong = keet::validate::comparison_errors(&ctx, text);
                    if !wrong.is_empty() {
                        failures.push(format!("{rel}: comparisons {wrong:?} in {text:?}"));
                    }
                }
            }
        }
        assert!(shown_here > 0, "{rel}: no model sentence shown on its top {top} kernels: {}", doc["kernels"]);
        if top != "1" {
            let summary = &doc["summary"];
            let text = summary["text"].as_str().unwrap_or_else(|| panic!("{rel}: no profile summary: {summary}"));
            println!("{rel} summary [{}] {text}", summary["writer"]);
            assert!(text.split_whitespace().count() >= 5, "{rel}: summary {text:?}");
            // The same report in-process, from the cache the run filled: the summary's facts block,
            // and the summary checked against it (grounded numbers next to their meaning, words).
            let opts = keet::explain::ExplainOptions {
                settings: keet::explain::ReportSettings { top: 2, ..Default::default() },
                run: keet::explain::RunOptions {
                    cache: Some(dir.path().join("cache.sqlite3")),
                    engine: keet::llm::EngineOptions {
                        model: Some("qwen2.5-coder-1.5b-instruct".into()),
                        threads: Some(2),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            };
            let (report, _) = keet::explain::explain(&[Path::new(&path).to_path_buf()], &opts).expect("explain from the cache");
            let cached = report.summary.as_ref().expect("summary from the cache");
            assert_eq!(cached.text, text, "{rel}: the cached summary differs");
            let facts = keet::explain::summary::summary_facts(&report);
            if summary["writer"] == "model" {
                let reasons = keet::explain::summary::check(&facts, text);
                if !reasons.is_empty() {
                    failures.push(format!("{rel}: summary {text:?}: {reasons:?}"));
                }
            } else {
                assert_eq!(text, facts.expert, "{rel}: a summary not the model's is the expert summary");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
