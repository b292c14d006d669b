//! `keet inspect` end to end on the real corpus: JSON validates against the documented schema,
//! launches come in order with names and durations, bad input exits 2 with a clear message.

use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus")
}

fn keet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).output().expect("keet runs")
}

fn schema() -> jsonschema::Validator {
    let s: serde_json::Value =
        serde_json::from_str(include_str!("../docs/schema/inspect-v1.schema.json")).expect("schema is JSON");
    jsonschema::validator_for(&s).expect("schema compiles")
}

#[test]
fn whole_corpus_json_validates_and_bad_file_is_reported() {
    let out = keet(&["inspect", "--format", "json", corpus().to_str().unwrap()]);
    // The corpus holds one file with no data at all: exit 2, but every other file is reported.
    assert_eq!(out.status.code(), Some(2), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let v = schema();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| format!("{e} at {}", e.instance_path())).take(10).collect();
    assert!(errors.is_empty(), "schema errors: {errors:#?}");
    let errs = doc["errors"].as_array().unwrap();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0]["message"].as_str().unwrap().contains("long_prefill_prof_lines_only.csv"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("long_prefill_prof_lines_only.csv"), "{stderr}");
    let files = doc["files"].as_array().unwrap();
    assert!(files.len() >= 20, "only {} files parsed", files.len());
    for f in files {
        let launches = f["launches"].as_array().unwrap();
        assert!(!launches.is_empty() || f["kind"] == "source-csv", "{} has no launches", f["path"]);
        let ids: Vec<u64> = launches.iter().map(|l| l["id"].as_u64().unwrap()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "launches of {} are not in launch order", f["path"]);
    }
}

#[test]
fn details_page_facts_and_rules() {
    let p = corpus().join("rtx3060-sassscope/details.csv");
    let out = keet(&["inspect", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let l = &doc["files"][0]["launches"][0];
    assert_eq!(l["name"], "probe_timer_only");
    assert_eq!(l["duration_ns"], 1952.0);
    // 1 block on a 28-SM GPU, 1 thread per block: both launch-shape rules fire, and ncu's own
    // LaunchConfiguration rules are kept beside them.
    let cats: Vec<&str> = l["findings"].as_array().unwrap().iter().map(|f| f["category"].as_str().unwrap()).collect();
    assert!(cats.contains(&"grid-too-small") && cats.contains(&"block-size"), "{cats:?}");
    assert_eq!(l["facts"]["bound"]["kind"], "grid-too-small");
    let ncu: Vec<&str> = l["ncu_rules"].as_array().unwrap().iter().map(|r| r["rule"].as_str().unwrap()).collect();
    assert!(ncu.iter().any(|r| r.contains("LaunchConfiguration") || r.contains("LaunchStats")), "{ncu:?}");
    // Provenance: the duration fact names its raw metric and the value as written.
    let ev = &l["facts"]["duration_ns"]["evidence"][0];
    assert_eq!(ev["metric"], "gpu__time_duration.sum");
    assert_eq!(ev["raw_value"], "1,952");
}

#[test]
fn text_and_markdown_render() {
    let p = corpus().join("rtx4090-lashi/reduceInteger.csv");
    for fmt in ["text", "md"] {
        let out = keet(&["inspect", "--format", fmt, p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let s = String::from_utf8(out.stdout).unwrap();
        assert!(s.contains("reduceNeighbored"), "{fmt}: {s}");
    }
}

#[test]
fn missing_file_and_empty_file_exit_2() {
    let out = keet(&["inspect", "/nonexistent/profile.ncu-rep"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/profile.ncu-rep"));
    let p = corpus().join("h200-moe/long_prefill_prof_lines_only.csv");
    let out = keet(&["inspect", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("long_prefill_prof_lines_only.csv") && err.contains("no profile data"), "{err}");
}

#[test]
fn output_file_is_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out.json");
    let p = corpus().join("cc86-esmm/metrics.csv");
    let out = keet(&["inspect", "-f", "json", "-o", target.to_str().unwrap(), p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(doc["schema"], "keet.inspect/1");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "temporary files left behind");
}
