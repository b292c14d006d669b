//! The kernel's code (issue 37) end to end without a model: `keet explain` finds the explained
//! kernel in the sources a report embeds or in `--source FILE|DIR` and says so, says why when it
//! does not, warns about a source file it cannot read and goes on; `keet eval --twins` turns real
//! before/after fixes into questions with the slow kernel's source in every format.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared").join(rel)
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).output().unwrap()
}

fn explain_json(args: &[&str]) -> Value {
    let mut all = vec!["explain", "--no-llm", "--no-cache", "-f", "json"];
    all.extend_from_slice(args);
    let o = keet(&all);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("json")
}

#[test]
fn the_kernel_is_found_in_the_sources_the_report_embeds() {
    let f = shared("corpus/rtx4090-lashi/smemSquare.ncu-rep");
    let r = explain_json(&["--top", "2", f.to_str().unwrap()]);
    let code = &r["kernels"][0]["code"];
    assert_eq!(code["kernel"]["name"], "setColReadCol", "{code}");
    assert_eq!(code["kernel"]["origin"], "embedded");
    assert_eq!((code["kernel"]["start_line"].as_u64(), code["kernel"]["end_line"].as_u64()), (Some(81), Some(90)));
    assert!(code["kernel"]["path"].as_str().unwrap().ends_with("csrc/smemSquare.cu"), "{code}");
    assert!(code["edit"].is_null() && code["no_edit"].as_str().unwrap().contains("no model"), "{code}");
    let text = keet(&["explain", "--no-llm", "--no-cache", "--top", "1", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("code: /workspaces/CudaProgramming/csrc/smemSquare.cu:81-90, setColReadCol (embedded in the report)"), "{text}");
    let off = explain_json(&["--top", "1", "--no-edit", f.to_str().unwrap()]);
    assert!(off["kernels"][0]["code"].is_null(), "--no-edit looks for no code");
}

#[test]
fn a_source_directory_is_searched_first_and_unreadable_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.cu"),
        "#define N 32\n__global__ void setColReadCol(int *out)\n{\n    __shared__ int tile[N][N];\n    tile[threadIdx.x][threadIdx.y] = 1;\n    out[threadIdx.x] = tile[threadIdx.x][threadIdx.y];\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("latin1.cu"), b"// caf\xe9\n__global__ void other(int *x) { x[0] = 1; }\n").unwrap();
    let f = shared("corpus/rtx4090-lashi/smemSquare.ncu-rep");
    let o = keet(&[
        "explain",
        "--no-llm",
        "--no-cache",
        "-f",
        "json",
        "--top",
        "1",
        "--source",
        dir.path().to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("warning") && stderr.contains("latin1.cu") && stderr.contains("UTF-8"), "{stderr}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let kernel = &r["kernels"][0]["code"]["kernel"];
    assert_eq!(kernel["origin"], "user", "{kernel}");
    assert!(kernel["path"].as_str().unwrap().ends_with("mine.cu"), "{kernel}");
    assert_eq!((kernel["start_line"].as_u64(), kernel["end_line"].as_u64()), (Some(2), Some(7)));
}

#[test]
fn a_profile_without_source_says_why_the_code_is_missing() {
    let f = shared("corpus/rtx4090-lashi/reduceInteger.csv");
    let r = explain_json(&["--top", "1", f.to_str().unwrap()]);
    let missing = r["kernels"][0]["code"]["missing"].as_str().expect("missing").to_string();
    assert!(missing.contains("embeds no source") && missing.contains("--import-source yes"), "{missing}");
}

#[test]
fn twins_become_questions_with_the_slow_kernels_source() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.jsonl");
    let twins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/twins.toml");
    let o = keet(&["eval", "--twins", twins.to_str().unwrap(), "--no-llm", "--questions-out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 8, "4 twins x seeds 0 and 1");
    for q in &lines {
        assert_eq!(q["kind"], "twin-fix", "{q}");
        assert_eq!(q["options"].as_array().unwrap().len(), 4);
        let none = q["contexts"]["none"].as_str().unwrap();
        let raw = q["contexts"]["raw"].as_str().unwrap();
        assert!(none.contains("The kernel's source") && raw.starts_with("The kernel's source"), "{q}");
    }
    let keys: Vec<&str> = lines.iter().map(|q| q["answer_key"].as_str().unwrap()).collect();
    assert_eq!(keys.iter().filter(|k| **k == "bank").count(), 4, "{keys:?}");
    assert_eq!(keys.iter().filter(|k| **k == "coalesce").count(), 4, "{keys:?}");
    let bank = lines.iter().find(|q| q["answer_key"] == "bank").unwrap();
    assert!(bank["contexts"]["none"].as_str().unwrap().contains("__shared__ int tile[BDIMX][BDIMY];"), "{bank}");
}

#[test]
fn a_bad_twin_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twins.toml");
    std::fs::write(&path, "[[twin]]\nprofile = \"x.ncu-rep\"\nkernel = \"k\"\ngood_kernel = \"g\"\ncategory = \"faster\"\n").unwrap();
    let o = keet(&["eval", "--twins", path.to_str().unwrap(), "--no-llm"]);
    assert_ne!(o.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("twins.toml") && stderr.contains("\"faster\""), "{stderr}");
}
