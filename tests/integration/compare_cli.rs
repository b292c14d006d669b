//! `keet compare` end to end: the real binary on corpus files and synthetic AFTER profiles.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env("KEET_MODEL", "smollm2-135m-instruct").output().expect("run keet")
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}

/// Writes a copy of the esmm metrics CSV with every `gpu__time_duration.sum` scaled by `factor`,
/// then applies the plain-text `edits` (from, to).
fn esmm_variant(dir: &Path, factor: f64, edits: &[(&str, &str)]) -> PathBuf {
    let src = std::fs::read_to_string(corpus("cc86-esmm/metrics.csv")).unwrap();
    let mut out = String::new();
    for line in src.lines() {
        if line.contains("\"gpu__time_duration.sum\"") {
            let (head, last) = line.rsplit_once("\",\"").unwrap();
            let v: f64 = last.trim_end_matches('"').replace(',', "").parse().unwrap();
            out.push_str(&format!("{head}\",\"{}\"\n", (v * factor).round() as u64));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    for (from, to) in edits {
        assert!(out.contains(from), "edit target {from:?} not in the CSV");
        out = out.replace(from, to);
    }
    let path = dir.join("after.csv");
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn same_launch_in_two_exports_has_zero_deltas() {
    let o = keet(&[
        "compare",
        p(&corpus("rtx3060-sassscope/details.csv")),
        p(&corpus("rtx3060-sassscope/raw.csv")),
        "--no-llm",
        "--fail-on-regression",
        "1",
        "-f",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let d = json_of(&o);
    assert_eq!(d["schema"], "keet.compare/1");
    let m = d["matched"].as_array().unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0]["match_kind"], "exact");
    assert_eq!(m[0]["total_time"]["delta"], 0.0);
    assert_eq!(m[0]["direction"], "unchanged");
    assert!(!m[0]["metrics"].as_array().unwrap().is_empty(), "facts are compared");
    assert!(m[0]["metrics"].as_array().unwrap().iter().all(|x| x["changed"] == false && x["delta"] == 0.0));
    assert!(m[0]["metrics"][0]["metrics_before"].as_array().is_some_and(|a| !a.is_empty()), "provenance: raw metric names");
    assert!(m[0]["categories_appeared"].as_array().unwrap().is_empty());
    assert!(d["regressions"].as_array().unwrap().is_empty());
    assert_eq!(d["regression_threshold_pct"], 1.0);
    assert!(d["model"].is_null());
}

#[test]
fn report_and_details_csv_match_despite_different_name_spellings() {
    let o = keet(&[
        "compare",
        p(&corpus("h200-moe/decode_c1.ncu-rep")),
        p(&corpus("h200-moe/decode_c1_details.csv")),
        "--no-llm",
        "-f",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let d = json_of(&o);
    let m = d["matched"].as_array().unwrap();
    assert_eq!(m.len(), 10, "every kernel group matched");
    assert!(d["only_before"].as_array().unwrap().is_empty() && d["only_after"].as_array().unwrap().is_empty());
    // `flashinfer::norm::RMSNormKernel<(unsigned int)8, ...>` in the report is `norm::RMSNormKernel<8, ...>` in the CSV.
    assert!(m.iter().any(|k| k["match_kind"] == "normalized-name"));
    for k in m {
        assert_eq!(k["direction"], "unchanged", "{}: only the CSV's rounding differs", k["name"]);
        assert_eq!(k["before"]["launches"], k["after"]["launches"]);
        assert!(k["shape_change"].is_null());
    }
    // Sorted by absolute change in total time.
    let d: Vec<f64> = m.iter().map(|k| k["total_time"]["delta"].as_f64().unwrap().abs()).collect();
    assert!(d.windows(2).all(|w| w[0] >= w[1]), "{d:?}");
}

#[test]
fn regression_gate_names_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let after = esmm_variant(dir.path(), 1.3, &[]);
    let before = corpus("cc86-esmm/metrics.csv");
    let report = dir.path().join("report.json");
    let o = keet(&["compare", p(&before), p(&after), "--no-llm", "--fail-on-regression", "10", "-f", "json", "-o", p(&report)]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("regression: basic(int, int, int, const float *, const float *, float *)"), "{stderr}");
    assert!(o.stdout.is_empty(), "-o writes the file, not stdout");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let regs = d["regressions"].as_array().unwrap();
    assert_eq!(regs.len(), 8, "every kernel group got 30% slower");
    assert!(regs.iter().all(|r| (r["delta_pct"].as_f64().unwrap() - 30.0).abs() < 0.1));
    assert_eq!(d["matched"][0]["name"], "basic(int, int, int, const float *, const float *, float *)", "largest change first");
    assert_eq!(d["matched"][0]["direction"], "slower");
    // ampere_sgemm: two launches grouped on each side.
    let sgemm = d["matched"].as_array().unwrap().iter().find(|k| k["name"] == "ampere_sgemm_128x64_nn").unwrap();
    assert_eq!(sgemm["before"]["launches"], 2);
    assert!((sgemm["per_launch_time"]["before"].as_f64().unwrap() - 149120.0).abs() < 1.0);

    // Under the threshold: exit 0; text output says so.
    let o = keet(&["compare", p(&before), p(&after), "--no-llm", "--fail-on-regression", "50"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("no regression above 50%"), "{text}");
    assert!(text.contains("10.78 ms -> 14.01 ms"), "{text}");

    // The other way round is an improvement, and markdown renders.
    let o = keet(&["compare", p(&after), p(&before), "--no-llm", "--fail-on-regression", "10", "-f", "md"]);
    assert_eq!(o.status.code(), Some(0));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.starts_with("# keet compare"), "{md}");
    assert!(md.contains("Faster:"), "{md}");
    assert!(md.contains("passed"), "{md}");
}

#[test]
fn shape_changes_and_unmatched_kernels_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    // ampere_sgemm's grid changes; `basic` is renamed (paired by its role).
    let after = esmm_variant(
        dir.path(),
        1.0,
        &[("\"(128, 1, 1)\",\"(8, 16, 5)\"", "\"(128, 1, 1)\",\"(8, 16, 10)\""), ("\"basic(int, int, int", "\"basic_v2(int, int, int")],
    );
    let o = keet(&["compare", p(&corpus("cc86-esmm/metrics.csv")), p(&after), "--no-llm", "-f", "json", "--fail-on-regression", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let d = json_of(&o);
    let sgemm = d["matched"].as_array().unwrap().iter().find(|k| k["name"] == "ampere_sgemm_128x64_nn").expect("matched by name");
    assert_eq!(sgemm["match_kind"], "name-only");
    assert_eq!(sgemm["shape_change"], "grid (8, 16, 5) -> (8, 16, 10)");
    // The renamed kernel is paired by its role (issue 41), with the reason shown.
    let basic = d["matched"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["before"]["name"] == "basic(int, int, int, const float *, const float *, float *)")
        .expect("basic paired by role");
    assert_eq!(basic["match_kind"], "role");
    assert_eq!(basic["after"]["name"], "basic_v2(int, int, int, const float *, const float *, float *)");
    assert!(basic["match_reason"].as_str().unwrap().contains("name stem `basic`"), "{basic}");
    assert!(d["only_before"].as_array().unwrap().is_empty() && d["only_after"].as_array().unwrap().is_empty());
    let o = keet(&["compare", p(&corpus("cc86-esmm/metrics.csv")), p(&after), "--no-llm"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("shape changed: grid (8, 16, 5) -> (8, 16, 10)"), "{text}");
    assert!(text.contains("match: role (renamed: the same name stem `basic`"), "{text}");
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.ncu-rep");
    let o = keet(&["compare", p(&missing), p(&corpus("rtx3060-sassscope/raw.csv")), "--no-llm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.ncu-rep"));
    let garbage = dir.path().join("garbage.csv");
    std::fs::write(&garbage, "this is not a profile\n").unwrap();
    let o = keet(&["compare", p(&corpus("rtx3060-sassscope/raw.csv")), p(&garbage), "--no-llm"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = keet(&["compare", p(&empty), p(&corpus("rtx3060-sassscope/raw.csv")), "--no-llm"]);
    assert_eq!(o.status.code(), Some(2));
    let o = keet(&["compare", p(&corpus("rtx3060-sassscope/raw.csv"))]);
    assert_eq!(o.status.code(), Some(2), "usage error");
}

/// The model explains one small compare; the explanation is shown only when it validated,
/// otherwise it is reported as dropped with reasons.
#[test]
fn model_explanation_is_validated_or_dropped() {
    if std::env::var("KEET_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("KEET_SKIP_MODEL_TESTS=1: skipping a test that needs the model");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let after = esmm_variant(dir.path(), 1.3, &[]);
    let before = corpus("cc86-esmm/metrics.csv");
    let o = keet(&["compare", p(&before), p(&after), "--top", "1", "-f", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let d = json_of(&o);
    assert!(d["model"]["name"].is_string());
    let m = d["matched"].as_array().unwrap();
    let asked: Vec<&Value> = m.iter().filter(|k| k["explanation_status"] != "not-requested").collect();
    assert_eq!(asked.len(), 1, "--top 1");
    let k = asked[0];
    assert_eq!(k["name"], "basic(int, int, int, const float *, const float *, float *)");
    match k["explanation_status"].as_str().unwrap() {
        "validated" => {
            let e = &k["explanation"];
            // A repaired explanation keeps the reasons its first answer failed; a first-time one has none.
            assert_eq!(k["explanation_repaired"].as_bool().unwrap(), !k["dropped_reasons"].as_array().unwrap().is_empty());
            let summary = e["summary"].as_str().unwrap().to_lowercase();
            assert!(!summary.chars().any(|c| c.is_ascii_digit()));
            assert!(!summary.contains("faster") && !summary.contains("improvement"), "the kernel got slower: {summary}");
            for c in e["evidence"].as_array().unwrap() {
                if c["metric"] == "gpu__time_duration.sum" {
                    let want = if c["side"] == "before" { 10_776_576.0 } else { 14_009_549.0 };
                    assert_eq!(c["value"].as_f64().unwrap(), want);
                }
            }
            assert_eq!(d["explanations_validated"], 1);
        }
        "dropped" => {
            assert!(k["explanation"].is_null(), "a dropped explanation is never shown");
            assert!(!k["dropped_reasons"].as_array().unwrap().is_empty());
            assert_eq!(d["explanations_dropped"], 1);
        }
        s => panic!("unexpected status {s}"),
    }
}
