//! Errors read as keet's, not as its dependencies' internals: with `RUST_BACKTRACE=1` (common on
//! developers' machines) a truncated model file or a bad profile gives keet's message and the fix,
//! and no stack trace. candle puts the backtrace it captures inside its error's message; the binary
//! turns library backtraces off (`RUST_LIB_BACKTRACE=0` unless set) and keet-llm strips candle's.

use std::path::Path;
use std::process::{Command, Output};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

/// Runs the keet binary as a developer's shell would, with `RUST_BACKTRACE=1` and no
/// `RUST_LIB_BACKTRACE`.
fn keet(args: &[&str]) -> (Output, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env("RUST_BACKTRACE", "1").env_remove("RUST_LIB_BACKTRACE").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// Fails when `stderr` holds a stack trace: the header, numbered frames (`  12: name`) or their
/// source lines (`      at /path/file.rs:10:5`).
fn assert_no_backtrace(stderr: &str, what: &str) {
    assert!(!stderr.contains("stack backtrace"), "{what}: {stderr}");
    for line in stderr.lines() {
        let t = line.trim_start();
        let frame = t.split_once(": ").is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let source = t.starts_with("at ") && t.ends_with(|c: char| c.is_ascii_digit()) && t.contains(".rs:");
        assert!(!frame && !source, "{what}: a backtrace frame in stderr: {line:?}\n{stderr}");
    }
}

#[test]
fn a_truncated_model_file_is_one_clear_line_with_backtraces_on() {
    if crate::llm_support::skip() {
        return;
    }
    let src = keet::llm::resolve::resolve_model(Some(crate::llm_support::TEST_MODEL))
        .unwrap_or_else(|e| panic!("this test needs SmolLM2-135M: {e} (KEET_SKIP_MODEL_TESTS=1 skips it)"));
    let bytes = std::fs::read(src.location.path()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // 100 bytes: candle's header reader fails (the error that carried candle's backtrace);
    // 4096: inside the metadata; half: keet's own tensor-extent check.
    for (name, len) in [("cut-100.gguf", 100), ("cut-4096.gguf", 4096), ("cut-half.gguf", bytes.len() / 2)] {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes[..len]).unwrap();
        let (out, stderr) = keet(&["generate", "--model", p.to_str().unwrap(), "--prompt", "hi", "--threads", "1"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: model file") && first.contains(name) && first.contains("corrupt or incomplete"),
            "{name}: {stderr}"
        );
        assert!(first.contains("keet model install"), "{name}: the fix is on the first line: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert_no_backtrace(&stderr, name);
    }
}

#[test]
fn a_bad_profile_is_a_clear_error_with_backtraces_on() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.ncu-rep");
    std::fs::write(&garbage, b"this is not a profile\n").unwrap();
    let real = std::fs::read(Path::new(CORPUS).join("h200-moe/decode_c1.ncu-rep")).expect("../shared/corpus");
    let cut = dir.path().join("cut.ncu-rep");
    std::fs::write(&cut, &real[..30_000]).unwrap();
    for (p, expect) in [(&garbage, "no profile data"), (&cut, "the file ends early")] {
        for cmd in ["inspect", "explain"] {
            let what = format!("{cmd} {}", p.display());
            let (out, stderr) =
                if cmd == "explain" { keet(&[cmd, "--no-llm", p.to_str().unwrap()]) } else { keet(&[cmd, p.to_str().unwrap()]) };
            assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
            assert!(stderr.contains(&format!("error: {}", p.display())) && stderr.contains(expect), "{what}: {stderr}");
            assert_no_backtrace(&stderr, &what);
        }
    }
}
