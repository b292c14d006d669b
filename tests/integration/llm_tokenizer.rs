//! The tokenizer built from GGUF metadata gives the same ids as an independent implementation
//! (tests/data/tokenizer_reference_smollm2.json, recorded by scripts/make_tokenizer_reference.py).

use crate::llm_support;

use keet::llm::loader::GgufFile;
use keet::llm::resolve::{resolve_model, ModelLocation};
use keet::llm::tokenizer::Tokenizer;

#[test]
fn tokenizer_ids_match_reference() {
    if llm_support::skip() {
        return;
    }
    let resolved =
        resolve_model(Some(llm_support::TEST_MODEL)).unwrap_or_else(|e| panic!("the tokenizer test needs the default model: {e}"));
    let path = match &resolved.location {
        ModelLocation::Gguf(p) => p.clone(),
        other => panic!("the tokenizer test needs the default GGUF model, found {other:?}"),
    };
    let gguf = GgufFile::open(&path).unwrap();
    let tk = Tokenizer::from_gguf(gguf.metadata()).unwrap();
    let reference: serde_json::Value = serde_json::from_str(include_str!("../data/tokenizer_reference_smollm2.json")).unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    let mut failures = Vec::new();
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let want: Vec<u32> = c["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let got = tk.encode(text).unwrap();
        if got != want {
            failures.push(format!("{text:?}\n  want {want:?}\n  got  {got:?}"));
        }
        // Decoding gives the text back (special tokens are left out of decoded text).
        if !text.contains("<|") {
            assert_eq!(tk.decode(&got), text, "round trip");
        }
    }
    assert!(failures.is_empty(), "tokenizer differs from the reference:\n{}", failures.join("\n"));
    // SmolLM2's end tokens.
    assert!(tk.end_ids.contains(&2) && tk.end_ids.contains(&0), "end ids {:?}", tk.end_ids);
}
