//! `keet cache merge` killed with SIGKILL in the middle of a merge (after the first source's
//! entries are written into the open transaction, while the second's are) leaves the destination
//! exactly as it was, whether it existed or not; the same merge run again then completes with
//! every entry of every source.

use keet::cache::{Cache, CacheKey, EntryMeta, KeyParts};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const PER_SOURCE: usize = 4000;

fn key(src: usize, i: usize) -> CacheKey {
    let facts = format!("{src}/{i}");
    CacheKey::new(&KeyParts {
        facts_json: &facts,
        model_sha256: "none",
        prompt_templates_sha256: "t",
        decoding_json: "{}",
        keet_version: "0",
    })
}

fn fill(path: &Path, src: usize, n: usize) {
    let c = Cache::open(path).unwrap();
    let big = "x".repeat(4000);
    for i in 0..n {
        let meta = EntryMeta { file: format!("f{src}"), kernel: format!("k{i}"), model: "rules only".into(), verdict: "v".into() };
        c.put(&key(src, i), &meta, "{}", &big).unwrap();
    }
}

/// Starts the merge, waits until it reports the second source, kills it with SIGKILL; returns
/// what it printed.
fn kill_mid_merge(sources: &[&Path], into: &Path) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(["cache", "merge"])
        .args(sources)
        .arg("--into")
        .arg(into)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let mut merging = 0;
    for l in lines.by_ref() {
        let l = l.unwrap();
        seen += &l;
        seen.push('\n');
        if l.starts_with("merging ") {
            merging += 1;
            if merging == 2 {
                break;
            }
        }
    }
    assert_eq!(merging, 2, "the merge ended before its second source: {seen}");
    assert!(child.try_wait().unwrap().is_none(), "still running when killed: {seen}");
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL, not finished: {status:?} {seen}");
    seen
}

#[test]
fn sigkill_mid_merge_leaves_the_destination_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let srcs: Vec<_> = (0..3).map(|s| dir.path().join(format!("node{s}.sqlite3"))).collect();
    for (s, p) in srcs.iter().enumerate() {
        fill(p, s, PER_SOURCE);
    }
    let dst = dir.path().join("shared.sqlite3");
    fill(&dst, 9, 10);
    let before = Cache::open(&dst).unwrap().history(None, None).unwrap();
    let refs: Vec<&Path> = srcs.iter().map(|p| p.as_path()).collect();

    let printed = kill_mid_merge(&refs, &dst);
    assert!(!printed.contains("entries added"), "the merge had committed: {printed}");
    let c = Cache::open(&dst).unwrap();
    assert_eq!(c.history(None, None).unwrap(), before, "destination changed by a killed merge");
    assert_eq!(c.integrity_check().unwrap(), "ok");
    drop(c);

    // A destination that did not exist is still absent (its temporary file aside).
    let fresh = dir.path().join("fresh.sqlite3");
    kill_mid_merge(&refs, &fresh);
    assert!(!fresh.exists(), "a killed merge left a destination behind");

    // Run again to the end: every entry of every source, plus the destination's own.
    let o = Command::new(env!("CARGO_BIN_EXE_keet")).args(["cache", "merge"]).args(&refs).arg("--into").arg(&dst).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = Cache::open(&dst).unwrap();
    assert_eq!(c.len().unwrap(), 10 + 3 * PER_SOURCE);
    for s in 0..3 {
        for i in (0..PER_SOURCE).step_by(97) {
            assert!(c.get(&key(s, i)).unwrap().is_some(), "entry {s}/{i} lost");
        }
    }
    assert_eq!(c.integrity_check().unwrap(), "ok");
}
