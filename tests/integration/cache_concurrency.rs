//! The analysis cache shared between processes: four writer processes at once against one file
//! lose nothing (while `keet history` processes read it), and a writer killed with SIGKILL —
//! in the middle of a transaction, or at a random point of a stream of writes — leaves a file
//! that opens, passes SQLite's integrity check and holds only complete entries.
//!
//! The writers are this test binary re-executed (`current_exe() --exact <test> --nocapture`)
//! with `KEET_CACHE_TEST_ROLE` telling it which part to play; without that variable the role
//! tests return at once.

use keet::cache::{sha256_hex, Cache, CacheKey, EntryMeta, KeyParts};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ROLE: &str = "KEET_CACHE_TEST_ROLE";
const PATH: &str = "KEET_CACHE_TEST_PATH";
const WRITER: &str = "KEET_CACHE_TEST_WRITER";
const START_AT_MS: &str = "KEET_CACHE_TEST_START_AT_MS";

const WRITERS: usize = 4;
const PER_WRITER: usize = 50;
const SHARED: usize = 10;

fn key(facts: &str) -> CacheKey {
    CacheKey::new(&KeyParts {
        facts_json: facts,
        model_sha256: "model",
        prompt_templates_sha256: "prompts",
        decoding_json: "{}",
        keet_version: "test",
    })
}

/// A report whose payload is checked by its own hash, so a torn entry cannot pass for a whole one.
fn report(writer: usize, label: &str, payload_len: usize) -> String {
    let payload: String = (0..payload_len).map(|i| char::from(b'a' + ((i * 7 + writer * 13 + label.len()) % 26) as u8)).collect();
    serde_json::json!({ "writer": writer, "label": label, "sha256": sha256_hex(&payload), "payload": payload }).to_string()
}

/// Checks a stored report's self-hash; returns (writer, label).
fn verify(report_json: &str) -> (usize, String) {
    let v: serde_json::Value = serde_json::from_str(report_json).expect("stored report is complete JSON");
    let payload = v["payload"].as_str().unwrap();
    assert_eq!(v["sha256"].as_str().unwrap(), sha256_hex(payload), "payload hash");
    (v["writer"].as_u64().unwrap() as usize, v["label"].as_str().unwrap().to_string())
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()
}

fn spawn_role(test: &str, role: &str, path: &Path, writer: usize, start_at_ms: u128) -> Child {
    // Test names in the one integration binary are paths below the crate: `cache_concurrency::role_…`.
    let module = module_path!().split_once("::").map_or("", |(_, module)| module);
    let exact_name = format!("{module}::{test}");
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &exact_name, "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, role)
        .env(PATH, path)
        .env(WRITER, writer.to_string())
        .env(START_AT_MS, start_at_ms.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("re-executing the test binary")
}

fn role_env(role: &str) -> Option<(PathBuf, usize, u128)> {
    if std::env::var(ROLE).ok()?.as_str() != role {
        return None;
    }
    let path = PathBuf::from(std::env::var(PATH).unwrap());
    let writer = std::env::var(WRITER).unwrap().parse().unwrap();
    let start = std::env::var(START_AT_MS).unwrap().parse().unwrap();
    Some((path, writer, start))
}

/// Writer process: opens the (possibly not yet existing) cache at the agreed instant, writes its
/// distinct entries interleaved with the shared keys every writer also writes, reopening once
/// half-way.
#[test]
fn role_concurrent_writer() {
    let Some((path, w, start)) = role_env("writer") else { return };
    while now_ms() < start {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut cache = Cache::open(&path).expect("writer opens the cache");
    for i in 0..PER_WRITER {
        if i == PER_WRITER / 2 {
            drop(cache);
            cache = Cache::open(&path).expect("writer reopens the cache");
        }
        let label = format!("w{w}/e{i}");
        let meta = EntryMeta { file: format!("writer{w}.ncu-rep"), kernel: label.clone(), model: "model".into(), verdict: "ok".into() };
        cache.put(&key(&label), &meta, "{\"findings\":[]}", &report(w, &label, 2000 + i * 37)).expect("put");
        if i % (PER_WRITER / SHARED) == 0 {
            let label = format!("shared{}", i / (PER_WRITER / SHARED));
            let meta =
                EntryMeta { file: format!("writer{w}.ncu-rep"), kernel: label.clone(), model: "model".into(), verdict: "shared".into() };
            cache.put(&key(&label), &meta, "{\"findings\":[]}", &report(w, &label, 5000)).expect("put shared");
        }
        // Readers in the same process see their own writes at once.
        assert!(cache.get(&key(&label)).expect("get").is_some());
    }
    println!("WRITER-DONE {w}");
}

#[test]
fn four_processes_share_one_cache_file_and_lose_nothing() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The file does not exist yet: the writers also race to create it and its schema.
    let path = dir.path().join("nested/cache/analyses.sqlite3");
    let t0 = Instant::now();
    let start = now_ms() + 400;
    let mut writers: Vec<Child> = (0..WRITERS).map(|w| spawn_role("role_concurrent_writer", "writer", &path, w, start)).collect();

    // Meanwhile real `keet history` processes read the same file; each must succeed.
    let keet = env!("CARGO_BIN_EXE_keet");
    let mut reads = 0;
    let mut last_seen = 0usize;
    while writers.iter_mut().any(|c| c.try_wait().unwrap().is_none()) {
        let out = Command::new(keet).args(["history", "--format", "json", "--limit", "0", "--cache"]).arg(&path).output().unwrap();
        assert!(out.status.success(), "keet history failed during writes: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("keet history prints JSON");
        let n = v["analyses"].as_array().unwrap().len();
        // Distinct entries only grow; shared keys are replaced (one row each), so allow for them.
        assert!(n + SHARED >= last_seen, "history shrank from {last_seen} to {n}");
        last_seen = last_seen.max(n);
        reads += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    for (w, c) in writers.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.contains(&format!("WRITER-DONE {w}")), "writer {w} failed: {}\n{stdout}", out.status);
    }
    let elapsed = t0.elapsed();

    let cache = Cache::open(&path).unwrap();
    assert_eq!(cache.integrity_check().unwrap(), "ok");
    assert_eq!(cache.len().unwrap(), WRITERS * PER_WRITER + SHARED, "entries lost or duplicated");
    for w in 0..WRITERS {
        for i in 0..PER_WRITER {
            let label = format!("w{w}/e{i}");
            let e = cache.get(&key(&label)).unwrap().unwrap_or_else(|| panic!("{label} lost"));
            assert_eq!(verify(&e.report_json), (w, label.clone()));
            assert_eq!(e.meta.kernel, label);
            assert_eq!(e.findings_json, "{\"findings\":[]}");
        }
    }
    for s in 0..SHARED {
        let label = format!("shared{s}");
        let e = cache.get(&key(&label)).unwrap().unwrap_or_else(|| panic!("{label} lost"));
        let (w, l) = verify(&e.report_json);
        assert!(w < WRITERS && l == label);
        assert_eq!(e.meta.file, format!("writer{w}.ncu-rep"), "metadata and report come from the same write");
    }
    let history = cache.history(None, None).unwrap();
    assert_eq!(history.len(), WRITERS * PER_WRITER + SHARED);
    assert!(history.windows(2).all(|p| p[0].id > p[1].id), "newest first, ids distinct");
    eprintln!(
        "{WRITERS} writer processes x ({PER_WRITER} entries + {SHARED} shared keys): {} entries, all verified, in {:.2} s; {reads} concurrent `keet history` reads succeeded",
        WRITERS * PER_WRITER + SHARED,
        elapsed.as_secs_f64()
    );
}

/// Half-writer process: starts a write transaction on the cache file, inserts a large row (its
/// pages spill into the WAL before commit), says READY and waits to be killed.
#[test]
fn role_killed_mid_transaction() {
    let Some((path, _, _)) = role_env("mid-transaction") else { return };
    let cache = Cache::open(&path).unwrap();
    drop(cache);
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA cache_size = 16").unwrap(); // small page cache: force the spill to the WAL
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
    let big = report(9, "half", 4 << 20);
    tx.execute(
        "INSERT INTO analyses (key, created_utc, file, kernel, model, verdict, keet_version, findings_json, report_json)
         VALUES (?1, '2026-01-01T00:00:00Z', 'f', 'half', 'm', 'v', 'test', '{}', ?2)",
        rusqlite::params![key("half").as_str(), big],
    )
    .unwrap();
    println!("READY");
    std::thread::sleep(Duration::from_secs(60));
    tx.commit().unwrap();
}

/// Stream writer process: puts large entries as fast as it can until killed.
#[test]
fn role_stream_writer() {
    let Some((path, w, _)) = role_env("stream") else { return };
    let cache = Cache::open(&path).unwrap();
    for i in 0..100_000 {
        let label = format!("s{w}/e{i}");
        let meta = EntryMeta { file: "stream".into(), kernel: label.clone(), model: "m".into(), verdict: "v".into() };
        cache.put(&key(&label), &meta, "{\"findings\":[]}", &report(w, &label, 300_000 + (i % 7) * 10_000)).unwrap();
        if i == 0 {
            println!("STARTED");
        }
    }
}

fn wait_for_line(child: &mut Child, marker: &str) {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let marker = marker.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains(&marker) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("child reached its marker");
}

/// Opens the cache after a kill and checks every entry is whole.
fn check_after_kill(path: &Path) -> usize {
    let cache = Cache::open(path).expect("cache opens after the kill");
    assert_eq!(cache.integrity_check().unwrap(), "ok");
    let rows = cache.history(None, None).unwrap();
    for r in &rows {
        let e = cache.show(r.id).unwrap().unwrap();
        assert_eq!(verify(&e.report_json).1, e.meta.kernel, "entry {} is whole", r.id);
    }
    rows.len()
}

#[test]
fn killed_writer_leaves_only_complete_entries() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("analyses.sqlite3");
    {
        let cache = Cache::open(&path).unwrap();
        let meta = EntryMeta { file: "before".into(), kernel: "before".into(), model: "m".into(), verdict: "v".into() };
        cache.put(&key("before"), &meta, "{}", &report(0, "before", 1000)).unwrap();
    }

    // 1. Killed inside an open write transaction whose pages already reached the WAL.
    let mut child = spawn_role("role_killed_mid_transaction", "mid-transaction", &path, 0, 0);
    wait_for_line(&mut child, "READY");
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(wal_len > 1 << 20, "the uncommitted row should have spilled into the WAL ({wal_len} bytes)");
    assert_eq!(check_after_kill(&path), 1);
    {
        let cache = Cache::open(&path).unwrap();
        assert!(cache.get(&key("half")).unwrap().is_none(), "half-written entry visible");
        // The dead process's lock is gone: writing works at once.
        let t = Instant::now();
        let meta = EntryMeta { file: "after".into(), kernel: "after".into(), model: "m".into(), verdict: "v".into() };
        cache.put(&key("after"), &meta, "{}", &report(0, "after", 1000)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    // 2. Killed at arbitrary points of a stream of large puts (three rounds, different timings).
    let mut total = 2;
    for (round, delay_ms) in [(1usize, 150u64), (2, 333), (3, 71)].into_iter() {
        let mut child = spawn_role("role_stream_writer", "stream", &path, round, 0);
        wait_for_line(&mut child, "STARTED");
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let n = check_after_kill(&path);
        assert!(n > total, "round {round}: the writer stored something before the kill ({n} entries)");
        total = n;
    }
    eprintln!("after 1 mid-transaction kill and 3 stream kills: {total} entries, all whole, integrity ok");
}

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

/// The `--stats` line `keet explain` prints on standard error.
fn explain_stats(stderr: &[u8]) -> serde_json::Value {
    let s = String::from_utf8_lossy(stderr);
    let line = s.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no --stats line in: {s}"));
    serde_json::from_str(line).unwrap()
}

/// Four real `keet explain` processes (rule-only, so no model is needed) at once against one
/// cache file, three rounds (the last two with `--refresh`, so every round writes every entry).
/// Each explains its own profile plus one profile all four share, so they also race on the same
/// keys. Afterwards a serial run of each input set answers every kernel from the cache.
#[test]
fn four_keet_explain_processes_share_one_cache_file() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("analyses.sqlite3");
    let common = corpus("rtx4090-lashi/reduceInteger.csv");
    let own = [
        "rtx4090-lashi/smemSquare.ncu-rep",
        "h200-moe/decode_c1.ncu-rep",
        "rtx4090-lashi/simpleDivergence.ncu-rep",
        "rtx4090-lashi/transpose.ncu-rep",
    ];
    // Output goes to files (a full pipe would stall a child while its exit is polled for).
    let out_path = |i: usize, what: &str| dir.path().join(format!("p{i}.{what}"));
    let run = |i: usize, refresh: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_keet"));
        c.args(["explain", "--no-llm", "--top", "50", "--coverage", "100", "--format", "json", "--stats"])
            .arg(corpus(own[i]))
            .arg(&common)
            .env("KEET_CACHE", &cache)
            .stdout(std::fs::File::create(out_path(i, "stdout")).unwrap())
            .stderr(std::fs::File::create(out_path(i, "stderr")).unwrap());
        if refresh {
            c.arg("--refresh");
        }
        c
    };
    let output = |i: usize, mut c: Child| {
        let status = c.wait().unwrap();
        std::process::Output {
            status,
            stdout: std::fs::read(out_path(i, "stdout")).unwrap(),
            stderr: std::fs::read(out_path(i, "stderr")).unwrap(),
        }
    };
    let t0 = Instant::now();
    let mut overlapped_rounds = 0;
    let mut writes = 0u64;
    for round in 0..3 {
        let mut children: Vec<(Instant, Child)> = (0..4).map(|i| (Instant::now(), run(i, round > 0).spawn().unwrap())).collect();
        // Exit times to the millisecond (polling), to tell whether all four ran at once.
        let mut ended: Vec<Option<Instant>> = vec![None; 4];
        while ended.iter().any(Option::is_none) {
            for (i, (_, c)) in children.iter_mut().enumerate() {
                if ended[i].is_none() && c.try_wait().unwrap().is_some() {
                    ended[i] = Some(Instant::now());
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut spans = vec![];
        for (i, (started, c)) in children.into_iter().enumerate() {
            spans.push((started, ended[i].unwrap()));
            let out = output(i, c);
            assert!(out.status.success(), "round {round}, process {i}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
            let stats = explain_stats(&out.stderr);
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let kernels = report["kernels"].as_array().unwrap();
            assert!(!kernels.is_empty());
            assert_eq!(stats["kernels_explained"].as_u64().unwrap() as usize, kernels.len());
            writes += kernels.len() as u64 - stats["kernels_from_cache"].as_u64().unwrap();
            if round > 0 {
                assert_eq!(stats["kernels_from_cache"], 0, "--refresh recomputes");
            }
        }
        let last_start = spans.iter().map(|s| s.0).max().unwrap();
        let first_end = spans.iter().map(|s| s.1).min().unwrap();
        if last_start < first_end {
            overlapped_rounds += 1;
        }
    }
    let elapsed = t0.elapsed();

    // Nothing lost: every input set is answered entirely from the cache, and the cache holds
    // exactly the distinct analyses those runs name.
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..4 {
        let out = output(i, run(i, false).spawn().unwrap());
        assert!(out.status.success());
        let stats = explain_stats(&out.stderr);
        assert_eq!(stats["kernels_from_cache"], stats["kernels_explained"], "input set {i}: entries lost");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for k in report["kernels"].as_array().unwrap() {
            assert_eq!(k["cached"], true);
            ids.insert(k["cache_id"].as_i64().unwrap());
        }
    }
    let db = Cache::open(&cache).unwrap();
    assert_eq!(db.integrity_check().unwrap(), "ok");
    assert_eq!(db.len().unwrap(), ids.len(), "stray or duplicate entries");
    for id in &ids {
        let e = db.show(*id).unwrap().expect("listed id present");
        serde_json::from_str::<serde_json::Value>(&e.report_json).expect("stored report is whole JSON");
    }
    eprintln!(
        "4 keet explain processes x 3 rounds: {writes} cache writes, {} distinct analyses, none lost, in {:.2} s ({overlapped_rounds}/3 rounds with all 4 alive at once)",
        ids.len(),
        elapsed.as_secs_f64()
    );
}

/// Opener process: opens the cache at the agreed instant, writes one entry and exits.
#[test]
fn role_opener() {
    let Some((path, w, start)) = role_env("opener") else { return };
    while now_ms() < start {
        std::thread::sleep(Duration::from_millis(1));
    }
    let cache = Cache::open(&path).expect("opener opens the cache");
    let label = format!("opener{w}");
    let meta = EntryMeta { file: "f".into(), kernel: label.clone(), model: "m".into(), verdict: "v".into() };
    cache.put(&key(&label), &meta, "{}", &report(w, &label, 100)).expect("put");
    println!("OPENED {w}");
}

/// The first open of a new file is the racy moment (WAL switch, schema creation): 20 rounds of
/// four processes opening the same new file at the same instant must all succeed.
#[test]
fn four_processes_create_a_new_cache_at_once() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let path = dir.path().join(format!("round{round}/analyses.sqlite3"));
        let start = now_ms() + 150;
        let children: Vec<Child> = (0..WRITERS).map(|w| spawn_role("role_opener", "opener", &path, w, start)).collect();
        for (w, c) in children.into_iter().enumerate() {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: opener {w} failed: {}", out.status);
        }
        let cache = Cache::open(&path).unwrap();
        assert_eq!(cache.len().unwrap(), WRITERS, "round {round}");
    }
}
