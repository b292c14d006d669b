//! `keet bench llm --rounds N` on an installed model: every round's load, prompt and decode figures
//! are reported with their median, and a round count outside 1..=50 is a usage error.

use std::process::Command;

use serde_json::Value;

fn keet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env("KEET_THREADS", "1").output().expect("keet runs")
}

#[test]
fn rounds_report_each_round_and_their_median() {
    let prompt = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(prompt.path(), "Explain why a GPU kernel that reads each byte once is memory bound.").unwrap();
    let path = prompt.path().to_str().unwrap();
    let common = ["bench", "llm", "-m", "smollm2-135m-instruct", "--prompt-file", path, "--tokens", "3", "--copy-bytes", "8MiB"];
    let out = keet(&[&common[..], &["--rounds", "3", "--json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stderr}", out.status.code());
    let v: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("one JSON object");
    let k = &v["keet"];
    let rounds = k["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 3, "{k}");
    for key in ["load_s", "prompt_tok_s", "decode_tok_s"] {
        let mut each: Vec<f64> = rounds.iter().map(|r| r[key].as_f64().unwrap_or_else(|| panic!("{key}: {r}"))).collect();
        assert!(each.iter().all(|x| *x > 0.0), "{key}: {each:?}");
        each.sort_by(f64::total_cmp);
        // The reported figure is the middle round's (both are rounded the same way).
        assert_eq!(k[key].as_f64(), Some(each[1]), "{key}: {k}");
    }

    // The table prints one line per round.
    let out = keet(&[&common[..], &["--rounds", "2"]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("rounds         2") && stdout.contains("round 1") && stdout.contains("round 2"), "{stdout}");

    for bad in ["0", "51", "two"] {
        let out = keet(&[&common[..], &["--rounds", bad]].concat());
        assert_eq!(out.status.code(), Some(2), "--rounds {bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--rounds"), "--rounds {bad}");
    }
}
