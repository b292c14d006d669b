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
    let s: serde_json::Value = serde_json::from_str(include_str!("../../docs/schema/inspect-v1.schema.json")).expect("schema is JSON");
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
    // A 1.95 us launch that fills no wave: launch-bound.
    assert_eq!(l["facts"]["bound"]["kind"], "launch");
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

#[test]
fn all_metrics_lists_every_stored_metric() {
    // The report whose later blocks add names to the string table: every launch has all its metrics.
    let p = corpus().join("h800-sglang/fa2_fwd.ncu-rep");
    let out = keet(&["inspect", "--all-metrics", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<String> = schema().iter_errors(&doc).map(|e| format!("{e} at {}", e.instance_path())).take(10).collect();
    assert!(errors.is_empty(), "schema errors: {errors:#?}");
    let launches = doc["files"][0]["launches"].as_array().unwrap();
    // Counted independently (Python protobuf walk and ncu_report): records with a value per launch.
    let counts: Vec<usize> = launches.iter().map(|l| l["metrics"].as_array().unwrap().len()).collect();
    assert_eq!(counts, [958, 956, 960, 960, 824]);
    for l in launches {
        let rows = l["metrics"].as_array().unwrap();
        assert_eq!(rows.len() as u64, l["metric_count"].as_u64().unwrap());
        let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "not sorted");
        // Names a later block adds to the string table.
        assert!(names.contains(&"lts__gcomp_input_sectors.sum"), "{}", l["name"]);
    }
    let notes = doc["files"][0]["notes"].as_array().unwrap();
    assert!(!notes.iter().any(|n| n.as_str().unwrap().contains("outside the string table")), "{notes:?}");
    // (The FlashAttention launch, 4, stores NaN here: value null, raw value "NaN".)
    let nan = launches[4]["metrics"].as_array().unwrap().iter().find(|r| r["name"] == "gpu__time_duration.sum").unwrap();
    assert_eq!((&nan["value"], nan["raw_value"].as_str()), (&serde_json::Value::Null, Some("NaN")));
    let d = launches[0]["metrics"].as_array().unwrap().iter().find(|r| r["name"] == "gpu__time_duration.sum").unwrap();
    assert_eq!(d["unit"], "ns");
    assert_eq!(d["raw_unit"], "");
    assert_eq!(d["value"].as_f64().unwrap().to_string(), d["raw_value"].as_str().unwrap());

    // A raw page: values normalised, raw value and unit as written.
    let p = corpus().join("rtx3060-sassscope/raw.csv");
    let out = keet(&["inspect", "--all-metrics", "--format", "json", p.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["files"][0]["launches"][0]["metrics"].as_array().unwrap();
    let d = rows.iter().find(|r| r["name"] == "gpu__time_duration.sum").unwrap();
    assert_eq!((d["value"].as_f64(), d["unit"].as_str()), (Some(1952.0), Some("ns")), "{d}");
    assert!(!d["raw_unit"].as_str().unwrap().is_empty(), "{d}");

    // Text: a table sorted by name, one row per metric; without the flag, no table.
    let out = keet(&["inspect", "--all-metrics", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let head = text.lines().position(|l| l.starts_with("metric ") && l.contains("raw unit")).expect("table header");
    let body: Vec<&str> = text.lines().skip(head + 1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(body.len(), rows.len());
    assert!(body.iter().any(|l| l.starts_with("gpu__time_duration.sum ") && l.contains(" ns ")), "{body:?}");
    let plain = keet(&["inspect", p.to_str().unwrap()]);
    assert!(!String::from_utf8(plain.stdout).unwrap().contains("raw unit"));
}
