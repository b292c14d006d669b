//! The Slurm batch on a real Slurm, not a mock: starts a single-node cluster on this machine
//! (`scripts/slurm-local.sh`: Debian's slurm-wlm and munge, this host as the only node), submits
//! `scripts/slurm-batch.sh` over the corpus with 4 array tasks and the dependent merge step, waits,
//! and checks that the merged report equals an unsharded `keet explain --no-llm` of the same files
//! (same kernels, same order, same findings, same errors) and that the caches were folded.
//!
//! Where the cluster cannot start (no packages, not root), the test writes a `SKIP` line to the
//! real stderr (not the captured one) and returns; set `KEET_REQUIRE_SLURM=1` to make that a
//! failure instead.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Stops the daemons when the test ends, however it ends.
struct Cluster {
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/slurm-local.sh")).arg("stop").arg(&self.dir).status();
    }
}

fn skip(why: &str) {
    if std::env::var_os("KEET_REQUIRE_SLURM").is_some_and(|v| v == "1") {
        panic!("Slurm required (KEET_REQUIRE_SLURM=1) but {why}");
    }
    let _ = writeln!(std::io::stderr(), "SKIP slurm_batch: {why}");
}

fn sh(cmd: &mut Command) -> (i32, String) {
    let o = cmd.output().expect("runs");
    (o.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// A kernel as compared: everything but where its cache entry lives.
fn comparable(report: &serde_json::Value) -> serde_json::Value {
    let mut r = report.clone();
    for k in r["kernels"].as_array_mut().unwrap() {
        let o = k.as_object_mut().unwrap();
        o.remove("cached");
        o.remove("cache_id");
    }
    r
}

#[test]
fn slurm_array_and_merge_equal_the_unsharded_report() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("slurm");
    let (rc, log) = sh(Command::new(repo().join("scripts/slurm-local.sh")).arg("start").arg(&state));
    if rc == 3 {
        return skip(log.trim());
    }
    let _cluster = Cluster { dir: state.clone() };
    assert_eq!(rc, 0, "slurm-local.sh start: {log}");
    let conf = state.join("slurm.conf");

    let keet = env!("CARGO_BIN_EXE_keet");
    let corpus = repo().join("../shared/corpus");
    let out = tmp.path().join("out");
    let shared = tmp.path().join("shared/cache.sqlite3");
    let (rc, submitted) = sh(Command::new(repo().join("scripts/slurm-batch.sh"))
        .arg(&corpus)
        .arg(&out)
        .arg(&shared)
        .arg("--no-llm")
        .env("SLURM_CONF", &conf)
        .env("KEET", keet)
        .env("KEET_SHARDS", "4")
        .env("KEET_SBATCH_OPTS", "--cpus-per-task=1 --mem=1G --time=00:10:00"));
    assert_eq!(rc, 0, "slurm-batch.sh: {submitted}");
    // "array job A (4 tasks) -> merge job M -> ..."
    let words: Vec<&str> = submitted.split_whitespace().collect();
    let array = words[words.iter().position(|w| *w == "array").unwrap() + 2];
    let merge = words[words.iter().position(|w| *w == "merge").unwrap() + 2];

    // Wait for the merge job to leave the queue.
    let t0 = Instant::now();
    let state_of = |job: &str| {
        let (_, s) = sh(Command::new("scontrol").args(["show", "job", job]).env("SLURM_CONF", &conf));
        s.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or("UNKNOWN").to_string()
    };
    let final_state = loop {
        let s = state_of(merge);
        if !matches!(s.as_str(), "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING") {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "merge job {merge} still {s} after 300 s");
        std::thread::sleep(Duration::from_millis(500));
    };
    let logs = |pat: &str| -> String {
        let mut s = String::new();
        for e in std::fs::read_dir(out.join("logs")).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with(pat) {
                s += &format!("--- {}\n{}", e.file_name().to_string_lossy(), std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        s
    };
    let ctld = std::fs::read_to_string(state.join("log/slurmctld.log")).unwrap_or_default();
    let ctld_jobs: Vec<&str> = ctld.lines().filter(|l| l.contains("_job_complete") || l.contains("sched: Allocate")).collect();
    assert_eq!(
        final_state,
        "COMPLETED",
        "merge job {merge}: {final_state}\n{}\n{}\n{}",
        logs("explain"),
        logs("merge"),
        ctld_jobs.join("\n")
    );
    for k in 0..4 {
        assert_eq!(state_of(&format!("{array}_{k}")), "COMPLETED", "task {k}");
    }

    // The unsharded run of the same files.
    let full = tmp.path().join("full.json");
    let (rc, err) = sh(Command::new(keet)
        .arg("explain")
        .arg(&corpus)
        .args(["--no-llm", "--no-cache", "--top", "20", "--format", "json", "-o"])
        .arg(&full));
    assert!(rc == 0 || rc == 2, "{err}");
    let full: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&full).unwrap()).unwrap();
    let merged: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let names = |r: &serde_json::Value| {
        r["kernels"].as_array().unwrap().iter().map(|k| k["kernel"]["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert!(names(&full).len() >= 5);
    assert_eq!(names(&merged), names(&full), "same kernels, same order");
    let (a, b) = (comparable(&full), comparable(&merged));
    for k in 0..a["kernels"].as_array().unwrap().len() {
        assert_eq!(a["kernels"][k]["findings"], b["kernels"][k]["findings"], "findings of kernel {k}");
    }
    // Everything, the input paths aside (the batch script made them absolute).
    for field in ["kernels", "errors", "total_duration_ns", "skipped_kernels", "settings"] {
        let norm = |v: &serde_json::Value| {
            v.to_string()
                .replace(&std::fs::canonicalize(&corpus).unwrap().display().to_string(), "CORPUS")
                .replace(&corpus.display().to_string(), "CORPUS")
        };
        assert_eq!(norm(&a[field]), norm(&b[field]), "{field}");
    }
    assert!(std::fs::read_to_string(out.join("report.txt")).unwrap().contains(&names(&full)[0][..20]));
    assert!(out.join("report.html").is_file());
    // The caches were folded into the shared one: every explained kernel is there.
    let cache = keet::cache::Cache::open_existing(&shared).unwrap().expect("shared cache written");
    assert!(cache.len().unwrap() >= names(&full).len(), "{} entries", cache.len().unwrap());
    assert!(merged["kernels"].as_array().unwrap().iter().all(|k| k["cache_id"].is_i64()), "merged kernels point into the shared cache");

    let (_, version) = sh(Command::new("sbatch").arg("--version").env("SLURM_CONF", &conf));
    let excerpt: Vec<&str> = ctld_jobs.iter().rev().take(8).rev().copied().collect();
    let _ = writeln!(
        std::io::stderr(),
        "slurm_batch: real Slurm ({}) on {}: array {array} (4 tasks) + merge {merge}: COMPLETED\n{}\n{}",
        version.trim(),
        String::from_utf8_lossy(&Command::new("hostname").output().unwrap().stdout).trim(),
        excerpt.join("\n"),
        logs("merge").trim()
    );
}
