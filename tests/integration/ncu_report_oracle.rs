//! NVIDIA's own reader as the oracle for keet's `.ncu-rep` reader.
//!
//! Every `.ncu-rep` in `../shared/corpus` is read by `ncu_report` (PyPI wheel `ncu-report`, run
//! through `tests/oracle/ncu_report_oracle.py`) and by `keet inspect --all-metrics --format json`,
//! and the two must agree on: the launch count and order, each launch's names, every metric name
//! `ncu_report` lists with a value, and every value (text exactly, integers exactly, floating
//! point to 1e-6 relative). keet may list more (derived quantities), never fewer or different.
//! Metrics `ncu_report` lists without a value (instance-only series such as `pmsampling:*`) are
//! counted, and keet's note must say how many it left out and why.
//!
//! When the wheel cannot be imported the test fails under CI (`CI=true`; `.ci/run` installs it)
//! and is skipped with the reason printed elsewhere.

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus")
}

fn reports() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in std::fs::read_dir(corpus()).expect("../shared/corpus is readable") {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().and_then(|e| e.to_str()) == Some("ncu-rep") {
                out.push(f);
            }
        }
    }
    out.sort();
    out
}

/// `Some(reason)` when the oracle cannot run here.
fn oracle_unavailable() -> Option<String> {
    match Command::new("python3").args(["-c", "import ncu_report"]).output() {
        Err(e) => Some(format!("python3 cannot be run: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "python3 cannot import ncu_report (pip install ncu-report): {}",
            String::from_utf8_lossy(&o.stderr).trim().lines().last().unwrap_or("")
        )),
        Ok(_) => None,
    }
}

fn oracle(files: &[PathBuf]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/ncu_report_oracle.py");
    let out = Command::new("python3").arg(script).args(files).output().expect("python3 runs");
    assert!(out.status.success(), "oracle failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("oracle prints JSON")
}

fn keet(files: &[PathBuf]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(["inspect", "--all-metrics", "--format", "json"])
        .args(files)
        .output()
        .expect("keet runs");
    assert_eq!(out.status.code(), Some(0), "keet inspect: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("keet prints JSON")
}

/// Compares one stored value; `None` when equal, else why not.
fn differs(kind: &str, want: &Value, row: &Value) -> Option<String> {
    let raw = row["raw_value"].as_str().unwrap_or_default();
    match kind {
        "string" => (want.as_str() != Some(raw) || row["value"].as_str() != Some(raw))
            .then(|| format!("text {want} != keet {raw:?} / {}", row["value"])),
        "uint32" | "uint64" => {
            let w = want.as_u64()?;
            (raw.parse::<u64>().ok() != Some(w)).then(|| format!("integer {w} != keet {raw:?}"))
        }
        _ => {
            // Non-finite values come as text ("nan", "inf"), which Rust parses too.
            let w = want.as_f64().or_else(|| want.as_str()?.parse().ok()).unwrap_or(f64::NAN);
            let k: f64 = raw.parse().unwrap_or(f64::NAN);
            let close = (w == k) || (w - k).abs() <= 1e-6 * w.abs().max(k.abs()) || (w.is_nan() && k.is_nan());
            (!close).then(|| format!("number {w} != keet {raw:?}"))
        }
    }
}

#[test]
fn keet_reads_every_stored_metric_like_ncu_report() {
    if let Some(reason) = oracle_unavailable() {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("CI: the ncu_report oracle must run, but {reason}");
        }
        eprintln!("SKIPPED keet_reads_every_stored_metric_like_ncu_report: {reason}");
        return;
    }
    let files = reports();
    assert!(files.len() >= 9, "expected the corpus reports, found {files:?}");
    let want = oracle(&files);
    let got = keet(&files);
    let got_files: HashMap<&str, &Value> = got["files"].as_array().unwrap().iter().map(|f| (f["path"].as_str().unwrap(), f)).collect();
    let mut problems: Vec<String> = Vec::new();
    let mut summary = String::new();
    for (path, w) in files.iter().zip(want["files"].as_array().unwrap()) {
        let name = path.strip_prefix(corpus()).unwrap().display().to_string();
        let Some(k) = got_files.get(path.to_str().unwrap()) else {
            problems.push(format!("{name}: keet did not read it"));
            continue;
        };
        let (wl, kl) = (w["launches"].as_array().unwrap(), k["launches"].as_array().unwrap());
        if wl.len() != kl.len() {
            problems.push(format!("{name}: ncu_report has {} launches, keet {}", wl.len(), kl.len()));
        }
        let (mut compared, mut valueless, mut with_instances, mut extra) = (0usize, 0usize, 0usize, 0usize);
        for (i, (wl, kl)) in wl.iter().zip(kl).enumerate() {
            let at = format!("{name} launch {i}");
            if kl["mangled_name"] != wl["mangled"] {
                problems.push(format!("{at}: mangled name {} != keet {}", wl["mangled"], kl["mangled_name"]));
            }
            let kname = kl["name"].as_str().unwrap();
            if kname != wl["demangled"] && kname != wl["name"] {
                problems.push(format!("{at}: name {} / {} != keet {kname:?}", wl["demangled"], wl["name"]));
            }
            let rows: HashMap<&str, &Value> = kl["metrics"]
                .as_array()
                .unwrap_or_else(|| panic!("{at}: no metrics array"))
                .iter()
                .map(|r| (r["name"].as_str().unwrap(), r))
                .collect();
            let wm = wl["metrics"].as_object().unwrap();
            for (metric, wv) in wm {
                if wv["has_value"] != true {
                    valueless += 1;
                    with_instances += (wv["instances"].as_u64().unwrap_or(0) > 0) as usize;
                    continue;
                }
                compared += 1;
                match rows.get(metric.as_str()) {
                    None => problems.push(format!("{at}: keet misses {metric}")),
                    Some(row) => {
                        if let Some(why) = differs(wv["kind"].as_str().unwrap(), &wv["value"], row) {
                            problems.push(format!("{at}: {metric}: {why}"));
                        }
                    }
                }
            }
            extra += rows.keys().filter(|n| !wm.contains_key(**n)).count();
        }
        let notes: Vec<&str> = k["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
        let expected = format!(
            "{valueless} metric(s) are stored without a value ({with_instances} with instance values only, e.g. \
             pmsampling:* series; {} empty)",
            valueless - with_instances
        );
        if valueless > 0 && !notes.iter().any(|n| n.starts_with(&expected)) {
            problems.push(format!("{name}: keet's notes do not say {expected:?}: {notes:?}"));
        }
        if let Some(n) = notes.iter().find(|n| n.contains("outside the string table")) {
            problems.push(format!("{name}: {n}"));
        }
        summary.push_str(&format!(
            "{name}: {} launch(es), {compared} values compared, {valueless} listed without a value ({with_instances} with \
             instance values), {extra} extra in keet\n",
            wl.len()
        ));
    }
    eprintln!("{summary}");
    assert!(
        problems.is_empty(),
        "{} difference(s) from ncu_report, first ones:\n{}",
        problems.len(),
        problems.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
    );
}
