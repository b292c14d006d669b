//! `keet merge` without Slurm: the shard reports of a batch merge into exactly the report an
//! unsharded `keet explain --no-llm` of the same files gives (kernels, order, findings, times,
//! errors, every byte of the JSON), also when kernels span shards and a globally chosen kernel
//! was chosen by no shard; and parts that do not belong together are refused with a clear error,
//! exit 2 and no output file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus")
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env_remove("KEET_CACHE").output().expect("keet runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Explains `input` unsharded and as `n` shards, merges the shards, and returns both reports.
fn unsharded_and_merged(input: &Path, out: &Path, n: usize, extra: &[&str], format: &str) -> (String, String) {
    let s = |p: &Path| p.display().to_string();
    let full = out.join(format!("full.{format}"));
    let mut args = vec!["explain", input.to_str().unwrap(), "--no-llm", "--no-cache", "--format", format, "-o"];
    let full_s = s(&full);
    args.push(&full_s);
    args.extend_from_slice(extra);
    let o = keet(&args);
    assert!(matches!(code(&o), 0 | 2), "explain: {}", stderr(&o));
    let mut parts = vec![];
    for k in 0..n {
        let part = s(&out.join(format!("part-{k}.json")));
        let shard = format!("{k}/{n}");
        let mut args =
            vec!["explain", input.to_str().unwrap(), "--no-llm", "--no-cache", "--format", "json", "--shard", &shard, "-o", &part];
        args.extend_from_slice(extra);
        let o = keet(&args);
        assert!(matches!(code(&o), 0 | 2), "shard {k}: {}", stderr(&o));
        parts.push(part);
    }
    let merged = out.join(format!("merged.{format}"));
    let merged_s = s(&merged);
    let mut args = vec!["merge", "--no-cache", "--format", format, "-o", &merged_s];
    args.extend(parts.iter().map(|p| p.as_str()));
    let o = keet(&args);
    assert!(matches!(code(&o), 0 | 2), "merge: {}", stderr(&o));
    (std::fs::read_to_string(full).unwrap(), std::fs::read_to_string(merged).unwrap())
}

fn names(json: &serde_json::Value) -> Vec<String> {
    json["kernels"].as_array().unwrap().iter().map(|k| k["kernel"]["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn four_shards_merge_to_the_unsharded_report() {
    let dir = tempfile::tempdir().unwrap();
    let (full, merged) = unsharded_and_merged(&corpus(), dir.path(), 4, &[], "json");
    let a: serde_json::Value = serde_json::from_str(&full).unwrap();
    let b: serde_json::Value = serde_json::from_str(&merged).unwrap();
    assert!(a["kernels"].as_array().unwrap().len() >= 5, "the corpus has kernels to rank");
    assert_eq!(names(&a), names(&b), "same kernels in the same order");
    assert_eq!(a["kernels"], b["kernels"], "same kernels, findings, times");
    assert!(!a["errors"].as_array().unwrap().is_empty(), "the corpus has a file that is not a profile");
    assert_eq!(a["errors"], b["errors"], "errors of every shard kept");
    assert_eq!(full, merged, "the whole report, byte for byte");
    // Parts and the merged report follow the published schema.
    let schema: serde_json::Value = serde_json::from_str(include_str!("../../docs/schema/explain-v2.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    for k in 0..4 {
        let part: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(format!("part-{k}.json"))).unwrap()).unwrap();
        let errs: Vec<String> = v.iter_errors(&part).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
        assert!(errs.is_empty(), "part {k}: {errs:?}");
    }
    let errs: Vec<String> = v.iter_errors(&b).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
    assert!(errs.is_empty(), "merged: {errs:?}");
    // Every shard saw only part of the files; the merge has all of them.
    let part: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("part-1.json")).unwrap()).unwrap();
    assert!(part["batch"]["files"].as_array().unwrap().len() < b["batch"]["files"].as_array().unwrap().len());
    assert_eq!(part["settings"]["shard"], serde_json::json!([1, 4]));

    // The text report too.
    let (full, merged) = unsharded_and_merged(&corpus(), dir.path(), 4, &[], "text");
    assert_eq!(full, merged);
}

#[test]
fn kernels_spanning_shards_are_deduplicated_and_ranked_over_the_batch() {
    // Several copies (symlinks) of a few profiles: every kernel appears in several shards, and
    // with a small --top a kernel can lead the batch without leading any shard.
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let srcs =
        ["rtx4090-lashi/transpose.ncu-rep", "rtx4090-lashi/simpleAOS.ncu-rep", "rtx4090-lashi/reduceInteger.csv", "cc86-esmm/metrics.csv"];
    let pattern = [0, 1, 2, 0, 3, 2, 1, 0, 3, 2, 0];
    for (i, &s) in pattern.iter().enumerate() {
        std::os::unix::fs::symlink(
            corpus().join(srcs[s]),
            inputs.join(format!("{i:02}-{}", Path::new(srcs[s]).file_name().unwrap().to_string_lossy())),
        )
        .unwrap();
    }
    for (n, extra) in [(4, vec!["--top", "2"]), (3, vec!["--top", "1"]), (4, vec!["--coverage", "50"]), (5, vec![])] {
        let out = dir.path().join(format!("out-{n}-{}", extra.join("")));
        std::fs::create_dir(&out).unwrap();
        let (full, merged) = unsharded_and_merged(&inputs, &out, n, &extra, "json");
        assert_eq!(full, merged, "{n} shards {extra:?}");
        let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
        let k = &v["kernels"][0]["kernel"];
        assert!(k["files"].as_array().unwrap().len() > 1, "a kernel found in several files is one kernel: {k}");
    }
}

#[test]
fn a_source_page_in_another_shard_is_attached_by_the_merge() {
    // The details page and its source page land in different shards: the shard with the kernel
    // saw no source view; the merge must give what the unsharded run gives.
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    for f in ["details.csv", "source_cuda_sass.csv"] {
        std::os::unix::fs::symlink(corpus().join("rtx3060-sassscope").join(f), inputs.join(f)).unwrap();
    }
    let (full, merged) = unsharded_and_merged(&inputs, dir.path(), 2, &[], "json");
    // The analysis key covers the kernel's hot source lines: the shard's differs from the batch's,
    // so the merge did not take the shard's findings but explained the kernel again.
    let key =
        |v: &serde_json::Value| v["batch"]["groups"].as_array().unwrap().iter().find_map(|g| g["analysis_key"].as_str().map(String::from));
    let v: serde_json::Value = serde_json::from_str(&full).unwrap();
    let part: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("part-0.json")).unwrap()).unwrap();
    assert_eq!(part["batch"]["files"].as_array().unwrap().len(), 1, "{}", part["batch"]["files"]);
    assert!(key(&v).is_some() && key(&part).is_some());
    assert_ne!(key(&part), key(&v), "the shard alone had no source view");
    let m: serde_json::Value = serde_json::from_str(&merged).unwrap();
    assert_eq!(key(&m), key(&v));
    assert_eq!(full, merged);
}

/// Makes a 2-shard batch of two small profiles; returns the part paths.
fn two_parts(dir: &Path, extra: &[&str]) -> Vec<String> {
    let inputs = [corpus().join("rtx4090-lashi/transpose.ncu-rep"), corpus().join("cc86-esmm/metrics.csv")];
    (0..2)
        .map(|k| {
            let part = dir.join(format!("p{k}{}.json", extra.join(""))).display().to_string();
            let shard = format!("{k}/2");
            let mut args = vec![
                "explain",
                inputs[0].to_str().unwrap(),
                inputs[1].to_str().unwrap(),
                "--no-llm",
                "--no-cache",
                "--format",
                "json",
                "--shard",
                &shard,
                "-o",
                &part,
            ];
            args.extend_from_slice(extra);
            assert_eq!(code(&keet(&args)), 0);
            part
        })
        .collect()
}

fn refused(args: &[&str], out: &Path, expect: &[&str]) {
    let o = keet(&[&["merge", "--no-cache", "-o", out.to_str().unwrap()], args].concat());
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{args:?}: {err}");
    for e in expect {
        assert!(err.contains(e), "{args:?}: expected {e:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "no output file after a refused merge");
}

#[test]
fn parts_that_do_not_belong_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("merged.txt");
    let p = two_parts(d, &[]);
    // The good case works.
    let o = keet(&["merge", "--no-cache", "-o", out.to_str().unwrap(), &p[0], &p[1]]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    std::fs::remove_file(&out).unwrap();

    // A part listed twice, by the same name or as a copy.
    refused(&[&p[0], &p[1], &p[0]], &out, &["listed twice", &p[0]]);
    let copy = d.join("copy.json");
    std::fs::copy(&p[1], &copy).unwrap();
    refused(&[&p[0], &p[1], copy.to_str().unwrap()], &out, &["both shard 1/2", copy.to_str().unwrap()]);
    // A missing shard.
    refused(&[&p[0]], &out, &["shard 1 of 2 is missing"]);
    // Other settings.
    let q = two_parts(d, &["--top", "3"]);
    refused(&[&p[0], &q[1]], &out, &["settings", "\"top\":3", &q[1]]);
    // Another keet version, another model.
    let edit = |src: &str, name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
        f(&mut v);
        let path = d.join(name);
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        path.display().to_string()
    };
    let old = edit(&p[1], "old.json", &|v| v["keet_version"] = "0.0.1".into());
    refused(&[&p[0], &old], &out, &["keet version 0.0.1", &old]);
    let model =
        edit(&p[1], "model.json", &|v| v["model"] = serde_json::json!({"name": "m", "path": "/m.gguf", "sha256": "ab", "device": "cpu"}));
    refused(&[&p[0], &model], &out, &["model", "SHA-256 ab"]);
    // Not a report; another schema; no batch section (an older keet).
    let junk = d.join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a report\"").unwrap();
    refused(&[&p[0], junk.to_str().unwrap()], &out, &["junk.json", "not a keet explain JSON report"]);
    let other = edit(&p[1], "other.json", &|v| v["schema"] = "keet.inspect/1".into());
    refused(&[&p[0], &other], &out, &["keet.inspect/1", "expected \"keet.explain/2\""]);
    let nobatch = edit(&p[1], "nobatch.json", &|v| {
        v.as_object_mut().unwrap().remove("batch");
    });
    refused(&[&p[0], &nobatch], &out, &["no `batch` section"]);
    // A table that points past its file list.
    let bad = edit(&p[1], "bad.json", &|v| v["batch"]["groups"][0]["rep"]["file"] = 99.into());
    refused(&[&p[0], &bad], &out, &["bad.json", "past the part's"]);
    refused(&[&p[0], d.join("nope.json").to_str().unwrap()], &out, &["nope.json", "cannot read"]);
}
