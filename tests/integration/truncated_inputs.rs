//! Files cut off mid-write (ncu killed by a job time limit): keet keeps every launch that is
//! complete before the cut, says where the file ends early and which block (or line) was
//! incomplete, and `keet inspect` prints what it recovered but exits 2.
//!
//! Which launches are complete is worked out here independently of the reader: a small walk over
//! the report's framing (u32 length + `BlockHeader`, then u32 length + message per record) gives
//! the byte offset where each profile result ends. Reports are truncated at 10%, 50% and 90% of
//! their bytes, then at random lengths (a bounded, seeded stand-in for `cargo fuzz`, which is
//! not installed everywhere). Copies are made in a temporary directory, never in the repository.
//!
//! One exception to "the same metrics as the full read": names a later block adds to the string
//! table are lost when the file ends before that block; the recovered profile's note says so.

use keet::profile::ncu_rep::proto::BlockHeader;
use keet::profile::{self, At, Profile, ProfileError};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::Command;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

fn reports() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .expect("../shared/corpus")
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).into_iter().flatten())
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("ncu-rep"))
        .collect();
    out.sort();
    assert!(out.len() >= 9, "{out:?}");
    out
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// The offset just past each profile result's message, in file order (independent framing walk).
fn result_ends(b: &[u8]) -> Vec<usize> {
    let mut off = 4 + 4 + u32_at(b, 4);
    let mut ends = Vec::new();
    while off < b.len() {
        let n = u32_at(b, off);
        let h = BlockHeader::decode(&b[off + 4..off + 4 + n]).unwrap();
        off += 4 + n;
        let mut p = off;
        for _ in 0..h.num_sources {
            p += 4 + u32_at(b, p);
        }
        for _ in 0..h.num_results {
            p += 4 + u32_at(b, p);
            ends.push(p);
        }
        off += h.payload_size as usize;
    }
    ends
}

fn summary(p: &Profile) -> Vec<(u64, String, usize)> {
    p.launches.iter().map(|l| (l.id, l.name.clone(), l.metrics.len())).collect()
}

/// `p` holds the first `complete` launches of `full`, with the same metrics, except that names
/// lost with the blocks after the cut (noted) may be missing.
fn same_launches(p: &Profile, full: &Profile, complete: usize, ctx: &str) {
    if p.notes.iter().any(|n| n.contains("outside the string table")) {
        let ids = |p: &Profile| p.launches.iter().map(|l| (l.id, l.name.clone())).collect::<Vec<_>>();
        assert_eq!(ids(p), ids(full)[..complete], "{ctx}");
        for (a, b) in p.launches.iter().zip(&full.launches) {
            assert!(a.metrics.len() <= b.metrics.len() && a.metrics.keys().all(|k| b.metrics.contains_key(k)), "{ctx}");
        }
    } else {
        assert_eq!(summary(p), summary(full)[..complete], "{ctx}");
    }
}

/// Reads `bytes` (a prefix of `full`) and checks it against the full read.
fn check_prefix(name: &str, bytes: &[u8], full: &Profile, ends: &[usize]) {
    let len = bytes.len();
    let complete = ends.iter().filter(|&&e| e <= len).count();
    let path = Path::new(name);
    match profile::read_bytes(path, bytes) {
        Ok(p) => {
            // Only a cut exactly between blocks leaves a report that looks whole.
            same_launches(&p, full, complete, &format!("{name}: prefix of {len} bytes"));
        }
        Err(e @ ProfileError::Truncated { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&format!("at byte {len}")) && text.contains("block "), "{text}");
            let ProfileError::Truncated { at, launches, recovered, .. } = e else { unreachable!() };
            assert_eq!(at, At::Byte(len as u64));
            assert_eq!(launches, complete, "{name}: prefix of {len} bytes: {text}");
            assert!(recovered.notes.iter().any(|n| n.contains("ends early")), "{:?}", recovered.notes);
            // A result may use names that a later block adds to the string table (fa2_fwd: three
            // names in blocks 8-10 used by the result in block 2). A cut between the two loses
            // those names; the note says so, and only then may a launch have fewer metrics.
            same_launches(&recovered, full, complete, &format!("{name}: prefix of {len} bytes"));
        }
        Err(e @ (ProfileError::Report { .. } | ProfileError::Empty { .. })) => {
            assert_eq!(complete, 0, "{name}: prefix of {len} bytes lost {complete} complete launch(es): {e}");
        }
        Err(e) => panic!("{name}: prefix of {len} bytes: unexpected error {e:?}"),
    }
}

#[test]
fn reports_cut_at_10_50_90_percent_keep_exactly_the_complete_launches() {
    let mut recovered_some = 0;
    for path in reports() {
        let full_bytes = std::fs::read(&path).unwrap();
        let full = profile::read_bytes(&path, &full_bytes).unwrap();
        let ends = result_ends(&full_bytes);
        assert_eq!(ends.len(), full.launches.len(), "{}", path.display());
        for pct in [10, 50, 90] {
            let len = full_bytes.len() * pct / 100;
            check_prefix(&path.display().to_string(), &full_bytes[..len], &full, &ends);
            recovered_some += (ends.iter().filter(|&&e| e <= len).count() > 0) as usize;
        }
    }
    // The corpus has multi-launch reports: some cuts must actually recover launches.
    assert!(recovered_some >= 5, "only {recovered_some} cut(s) recovered launches");
}

#[test]
fn random_truncations_never_lose_a_complete_launch() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for path in reports() {
        let full_bytes = std::fs::read(&path).unwrap();
        let full = profile::read_bytes(&path, &full_bytes).unwrap();
        let ends = result_ends(&full_bytes);
        let name = path.display().to_string();
        // Random cuts, plus the bytes around each result's end (the boundary cases).
        let mut cuts: Vec<usize> = (0..25).map(|_| (next() as usize) % full_bytes.len()).collect();
        for &e in &ends {
            cuts.extend([e - 1, e, e + 1].into_iter().filter(|&c| c < full_bytes.len()));
        }
        for len in cuts {
            check_prefix(&name, &full_bytes[..len], &full, &ends);
        }
    }
}

#[test]
fn inspect_and_explain_print_what_was_recovered_and_exit_2() {
    let src = Path::new(CORPUS).join("h200-moe/decode_c1.ncu-rep");
    let bytes = std::fs::read(&src).unwrap();
    let ends = result_ends(&bytes);
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.ncu-rep");
    let len = bytes.len() / 2;
    std::fs::write(&cut, &bytes[..len]).unwrap();
    let complete = ends.iter().filter(|&&e| e <= len).count();
    assert!(complete > 0);

    let keet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_keet")).args(args).output().unwrap();
    let out = keet(&["inspect", "--format", "json", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["files"][0]["launches"].as_array().unwrap().len(), complete);
    let msg = doc["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("at byte {len}: the file ends early")) && msg.contains("block "), "{msg}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the file ends early"), "{stderr}");

    let out = keet(&["inspect", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!out.stdout.is_empty());

    let cache = dir.path().join("cache.sqlite3");
    let out = keet(&["explain", "--no-llm", "--format", "json", "--cache", cache.to_str().unwrap(), cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert!(!doc["kernels"].as_array().unwrap().is_empty(), "{doc}");
    assert!(doc["errors"][0]["message"].as_str().unwrap().contains("the file ends early"));
}

#[test]
fn csv_page_cut_inside_a_quoted_field_keeps_complete_rows() {
    let src = Path::new(CORPUS).join("h200-moe/sglang_short_decode_raw.csv");
    let text = std::fs::read_to_string(&src).unwrap();
    let full = profile::read_path(&src).unwrap();
    // Cut in the middle of the 5th data row (lines 1-2 are the header and the units row).
    let line_starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let row5 = line_starts[6];
    let cut_at = row5 + text[row5..].find("\",\"").unwrap() + 5;
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.csv");
    std::fs::write(&cut, &text[..cut_at]).unwrap();
    match profile::read_path(&cut) {
        Err(ProfileError::Truncated { at, recovered, message, .. }) => {
            assert_eq!(at, At::Line(7), "{message}");
            assert_eq!(summary(&recovered), summary(&full)[..4]);
        }
        other => panic!("{other:?}"),
    }
    let out = Command::new(env!("CARGO_BIN_EXE_keet")).args(["inspect", "--format", "json", cut.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["files"][0]["launches"].as_array().unwrap().len(), 4);
    assert!(doc["errors"][0]["message"].as_str().unwrap().contains("cut.csv: line 7: the file ends early"), "{doc}");
}
