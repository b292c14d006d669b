//! NVIDIA's own reader as the oracle for keet's `.ncu-rep` reader.
//!
//! Every `.ncu-rep` in `../shared/corpus`, `../shared/corpus-next` and `../shared/corpus-sets` is
//! read by `ncu_report` (PyPI wheel `ncu-report`, run
//! through `tests/oracle/ncu_report_oracle.py`) and by `keet inspect --all-metrics --format json`,
//! and the two must agree on: the launch count and order, each launch's names, every metric name
//! `ncu_report` lists with a value, and every value (text exactly, integers exactly, floating
//! point to 1e-6 relative). keet may list more (derived quantities), never fewer or different.
//! Metrics `ncu_report` lists without a value (instance-only series such as `pmsampling:*`) are
//! counted, and keet's note must say how many it left out and why.
//!
//! The source files embedded with `ncu --import-source yes` are compared too: for each launch,
//! the files `ncu_report` lists (`action.source_files()`) and keet's `Launch::source_files`, by
//! path, sha256 of the text and length, read through the library (`keet inspect` does not print
//! them). The reports known to embed sources must be among those compared.
//!
//! So are the source lines of the SASS counters: for every SASS row keet reads, the file and line
//! keet takes from the cubin's line table must be the ones `ncu_report` gives for that address
//! (`action.source_info(pc)`), and a row `ncu_report` maps to no line has none in keet either.
//!
//! When the wheel cannot be imported the test fails under CI (`CI=true`; `.ci/run` installs it)
//! and is skipped with the reason printed elsewhere.

use keet::profile::{self, Launch, Profile};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder that holds the corpora (`../shared`); report names are relative to it.
fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

const CORPORA: [&str; 3] = ["corpus", "corpus-next", "corpus-sets"];

/// Reports that embed their kernels' source files (`ncu --import-source yes`).
const EMBEDDING: &[&str] = &[
    "corpus/rtx4090-lashi/smemSquare.ncu-rep",
    "corpus/rtx4090-lashi/transpose.ncu-rep",
    "corpus/rtxa2000-sample/addConstDouble.ncu-rep",
    "corpus/rtx3060-sassscope/profile.ncu-rep",
    "corpus-sets/rtx3080-gemm-versions/gemm_v1_alter.ncu-rep",
    "corpus-sets/rtx3080-gemm-versions/gemm_v1_alter_1.ncu-rep",
    "corpus-sets/rtx3080-gemm-versions/gemm_v7_alter.ncu-rep",
    "corpus-sets/rtx3080-gemm-versions/gemm_v8_alter.ncu-rep",
    "corpus-sets/rtx3080-gemm-versions/gemm_v9_alter.ncu-rep",
];

/// Every `.ncu-rep` one folder below each corpus, sorted.
fn reports() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for corpus in CORPORA {
        let root = shared().join(corpus);
        for dir in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
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
    }
    out.sort();
    out
}

fn name(path: &Path) -> String {
    path.strip_prefix(shared()).unwrap().display().to_string()
}

/// `true` when the test may run; otherwise prints why it is skipped (a failure under CI).
fn oracle_runs(test: &str) -> bool {
    let Some(reason) = oracle_unavailable() else { return true };
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("CI: the ncu_report oracle must run, but {reason}");
    }
    eprintln!("SKIPPED {test}: {reason}");
    false
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
    if !oracle_runs("keet_reads_every_stored_metric_like_ncu_report") {
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
        let name = name(path);
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

/// A launch's embedded files as the oracle prints them: path, sha256 of the UTF-8 text, length.
fn keet_files(profile: &Profile, launch: &Launch) -> Vec<(String, String, u64)> {
    let mut out: Vec<_> = launch
        .source_files
        .iter()
        .map(|&i| {
            let file = &profile.source_files[i];
            (file.path.clone(), hex::encode(Sha256::digest(file.text.as_bytes())), file.text.len() as u64)
        })
        .collect();
    out.sort();
    out
}

fn oracle_files(launch: &Value) -> Result<Vec<(String, String, u64)>, String> {
    let Some(files) = launch["source_files"].as_array() else {
        return Err(format!("ncu_report gives no source files: {}", launch["source_files_error"]));
    };
    let field = |f: &Value, k: &str| f[k].as_str().unwrap_or_default().to_string();
    Ok(files.iter().map(|f| (field(f, "path"), field(f, "sha256"), f["length"].as_u64().unwrap_or(0))).collect())
}

#[test]
fn keet_reads_every_embedded_source_file_like_ncu_report() {
    if !oracle_runs("keet_reads_every_embedded_source_file_like_ncu_report") {
        return;
    }
    let files = reports();
    let want = oracle(&files);
    let mut problems: Vec<String> = Vec::new();
    let mut summary = String::new();
    for (path, w) in files.iter().zip(want["files"].as_array().unwrap()) {
        let name = name(path);
        let (profile, err) = profile::salvage(profile::read_path(path));
        let Some(profile) = profile else {
            problems.push(format!("{name}: keet cannot read it: {err:?}"));
            continue;
        };
        let wl = w["launches"].as_array().unwrap();
        if wl.len() != profile.launches.len() {
            problems.push(format!("{name}: ncu_report has {} launches, keet {}", wl.len(), profile.launches.len()));
        }
        let mut with_files = 0;
        for (i, (wl, kl)) in wl.iter().zip(&profile.launches).enumerate() {
            let (want, got) = (oracle_files(wl), keet_files(&profile, kl));
            match want {
                Err(why) => problems.push(format!("{name} launch {i}: {why}")),
                Ok(want) if want != got => problems.push(format!("{name} launch {i}: ncu_report {want:?} != keet {got:?}")),
                Ok(_) => {}
            }
            with_files += !got.is_empty() as usize;
        }
        if EMBEDDING.contains(&name.as_str()) && with_files == 0 {
            problems.push(format!("{name} embeds source files, keet found none"));
        }
        if with_files > 0 {
            summary.push_str(&format!(
                "{name}: {with_files} of {} launch(es) with embedded files, {} file(s) in the report\n",
                profile.launches.len(),
                profile.source_files.len()
            ));
        }
    }
    for missing in EMBEDDING.iter().filter(|e| !files.iter().any(|f| name(f) == **e)) {
        problems.push(format!("{missing}: not found among the corpus reports"));
    }
    eprintln!("{summary}");
    let first: Vec<String> = problems.iter().take(30).cloned().collect();
    assert!(problems.is_empty(), "{} difference(s) from ncu_report, first ones:\n{}", problems.len(), first.join("\n"));
}

/// Reports whose SASS counters `ncu_report` maps to source lines (compiled with `-lineinfo`).
const WITH_LINES: &[&str] = &[
    "corpus/rtxa2000-sample/addConstDouble.ncu-rep",
    "corpus/rtx3060-sassscope/profile.ncu-rep",
    "corpus-next/a40-indexspaces/bb.ncu-rep",
    "corpus-next/rtx4090-speedymatmul/naive.ncu-rep",
    "corpus-next/t4-wmma/wmma_smem.ncu-rep",
    "corpus-sets/rtx3080-gemm-versions/gemm_v1_alter.ncu-rep",
];

/// One launch's SASS rows against the oracle's lines: (rows compared, rows with a line, problems).
fn compare_lines(name: &str, index: usize, launch: &Launch, want: &Value) -> (usize, usize, Vec<String>) {
    let Some(view) = &launch.source else { return (0, 0, vec![]) };
    let (mut compared, mut with_line, mut problems) = (0, 0, Vec::new());
    for row in view.rows.iter().filter(|r| r.address.is_some()) {
        let address = row.address.as_deref().unwrap_or_default();
        let pc = u64::from_str_radix(address.trim_start_matches("0x"), 16).map(|pc| format!("{pc:#x}")).unwrap_or_default();
        let expected = want.get(&pc).and_then(|l| Some((l[0].as_str()?.to_string(), l[1].as_u64()?)));
        let got = row.file.clone().zip(row.line);
        compared += 1;
        with_line += got.is_some() as usize;
        if got != expected {
            problems.push(format!("{name} launch {index} {address}: ncu_report {expected:?} != keet {got:?}"));
        }
    }
    (compared, with_line, problems)
}

#[test]
fn keet_maps_sass_counters_to_source_lines_like_ncu_report() {
    if !oracle_runs("keet_maps_sass_counters_to_source_lines_like_ncu_report") {
        return;
    }
    let files = reports();
    let want = oracle(&files);
    let (mut problems, mut summary) = (Vec::<String>::new(), String::new());
    for (path, w) in files.iter().zip(want["files"].as_array().unwrap()) {
        let name = name(path);
        let Some(profile) = profile::salvage(profile::read_path(path)).0 else { continue };
        let (mut compared, mut with_line) = (0, 0);
        for (i, (wl, kl)) in w["launches"].as_array().unwrap().iter().zip(&profile.launches).enumerate() {
            let (c, l, p) = compare_lines(&name, i, kl, &wl["source_lines"]);
            (compared, with_line) = (compared + c, with_line + l);
            problems.extend(p);
        }
        if WITH_LINES.contains(&name.as_str()) && with_line == 0 {
            problems.push(format!("{name}: ncu_report maps its SASS counters to lines, keet mapped none"));
        }
        if compared > 0 {
            summary.push_str(&format!("{name}: {with_line} of {compared} SASS row(s) on a source line\n"));
        }
    }
    eprintln!("{summary}");
    let first: Vec<String> = problems.iter().take(30).cloned().collect();
    assert!(problems.is_empty(), "{} difference(s) from ncu_report, first ones:\n{}", problems.len(), first.join("\n"));
}
