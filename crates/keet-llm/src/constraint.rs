//! JSON-schema-constrained decoding with llguidance: the schema becomes a grammar, and at every step
//! llguidance gives the set of tokens that keep the output a valid prefix; all others get -inf.
//!
//! The toktrie vocabulary is built directly from the token bytes (no toktrie_hf_tokenizers, whose
//! tokenizers version differs from candle's). Special tokens are marked with toktrie's 0xFF prefix so
//! the grammar never emits them as text.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{InferenceCapabilities, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use super::model::LlmError;
use super::tokenizer::Tokenizer;

struct KeetTokEnv {
    trie: TokTrie,
    tokenizer: Arc<Tokenizer>,
}

impl TokenizerEnv for KeetTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        // Greedy trie tokenization is the fallback for bytes that are not UTF-8.
        match std::str::from_utf8(s) {
            Ok(text) => self.tokenizer.encode(text).unwrap_or_else(|_| self.trie.greedy_tokenize(s)),
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

/// Compiles schemas into matchers for one tokenizer (built once per engine).
pub struct Constrainer {
    factory: ParserFactory,
    /// Size of the model's logits (may exceed the tokenizer's vocabulary).
    pub n_vocab: usize,
}

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

impl Constrainer {
    pub fn new(tokenizer: Arc<Tokenizer>, n_vocab: usize) -> Result<Self, LlmError> {
        let n = n_vocab.max(tokenizer.vocab_size());
        let mut words: Vec<Vec<u8>> = Vec::with_capacity(n);
        for i in 0..n {
            let id = i as u32;
            match tokenizer.token_bytes().get(i) {
                Some(b) if tokenizer.is_special(id) => {
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(b);
                    words.push(w);
                }
                Some(b) => words.push(b.clone()),
                None => words.push(Vec::new()),
            }
        }
        let eos = tokenizer.eos_id.or_else(|| tokenizer.end_ids.first().copied()).unwrap_or(0);
        let info = TokRxInfo {
            vocab_size: n as u32,
            tok_eos: eos,
            tok_bos: tokenizer.bos_id,
            tok_pad: tokenizer.pad_id,
            tok_unk: None,
            tok_end_of_turn: None,
        };
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(KeetTokEnv { trie, tokenizer });
        let mut factory =
            ParserFactory::new(&env, InferenceCapabilities::default(), &llguidance::earley::SlicedBiasComputer::general_slices())
                .map_err(|e| err(format!("constraint engine: {e}")))?;
        factory.quiet();
        Ok(Constrainer { factory, n_vocab: n })
    }

    /// A matcher for `schema`. Unless the schema says otherwise (`x-guidance`), JSON is compact:
    /// no free whitespace, `", "` and `": "` separators, and no `\\uXXXX` escapes.
    pub fn matcher(&self, schema: &Value) -> Result<Matcher, LlmError> {
        if !schema.is_object() {
            return Err(err("the JSON Schema must be an object"));
        }
        let mut schema = schema.clone();
        if schema.get("x-guidance").is_none() {
            schema.as_object_mut().unwrap().insert(
                "x-guidance".into(),
                serde_json::json!({
                    "whitespace_flexible": false,
                    "item_separator": ", ",
                    "key_separator": ": ",
                    // No \\uXXXX escapes: a character is then at most 4 bytes (see max_tokens_bound).
                    "json_allowed_escapes": "nrbtf\"\\",
                }),
            );
        }
        let grammar = TopLevelGrammar::from_json_schema(schema);
        let parser = self.factory.create_parser(grammar).map_err(|e| err(format!("JSON Schema not usable: {e}")))?;
        let m = Matcher::new(Ok(parser));
        if let Some(e) = m.get_error() {
            return Err(err(format!("JSON Schema not usable: {e}")));
        }
        Ok(m)
    }
}

/// A hard upper bound on the tokens a JSON value valid against `schema` can take (compact JSON as
/// keet's matcher produces it; every token is at least one byte, so bytes bound tokens). Set
/// `max_tokens` to at least this and constrained output can never be cut short. Errors name the
/// part of the schema that has no bound (a string without `maxLength`, an array without `maxItems`,
/// an object without `additionalProperties: false`, `$ref`, ...).
pub fn max_tokens_bound(schema: &Value) -> Result<usize, String> {
    bound(schema, "#")
}

fn bound(s: &Value, at: &str) -> Result<usize, String> {
    if s == &Value::Bool(true) {
        return Err(format!("{at}: `true` schema is unbounded"));
    }
    let o = s.as_object().ok_or_else(|| format!("{at}: not an object"))?;
    if let Some(e) = o.get("enum").and_then(|e| e.as_array()) {
        return Ok(e.iter().map(|v| v.to_string().len()).max().unwrap_or(0));
    }
    if let Some(c) = o.get("const") {
        return Ok(c.to_string().len());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = o.get(key).and_then(|a| a.as_array()) {
            let mut m = 0;
            for (i, a) in alts.iter().enumerate() {
                m = m.max(bound(a, &format!("{at}/{key}/{i}"))?);
            }
            return Ok(m);
        }
    }
    if o.contains_key("$ref") || o.contains_key("allOf") {
        return Err(format!("{at}: $ref/allOf are not bounded by keet"));
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(|t| t.as_str()).collect(),
        _ => return Err(format!("{at}: no `type`")),
    };
    let mut best = 0;
    for t in ty {
        let b = match t {
            "null" => 4,
            "boolean" => 5,
            "integer" => {
                let digits = |k: &str| o.get(k).and_then(|v| v.as_i64()).map(|v| v.to_string().len());
                match (digits("minimum"), digits("maximum")) {
                    (Some(a), Some(b)) => a.max(b),
                    _ => 20,
                }
            }
            // llguidance bounds neither digits nor exponent of a plain number; count generously.
            "number" => 32,
            "string" => {
                let n = o.get("maxLength").and_then(|v| v.as_u64()).ok_or_else(|| format!("{at}: string without maxLength"))?;
                // A character is at most 4 UTF-8 bytes; escapes are 2 (no \uXXXX, see `matcher`).
                2 + 4 * n as usize
            }
            "array" => {
                let n = o.get("maxItems").and_then(|v| v.as_u64()).ok_or_else(|| format!("{at}: array without maxItems"))? as usize;
                let item = match o.get("items") {
                    Some(i) => bound(i, &format!("{at}/items"))?,
                    None => return Err(format!("{at}: array without items")),
                };
                2 + n * (item + 2)
            }
            "object" => {
                if o.get("additionalProperties") != Some(&Value::Bool(false)) {
                    return Err(format!("{at}: object without additionalProperties: false"));
                }
                let mut sum = 2;
                if let Some(props) = o.get("properties").and_then(|p| p.as_object()) {
                    for (k, v) in props {
                        sum += Value::String(k.clone()).to_string().len() + 2 + 2 + bound(v, &format!("{at}/properties/{k}"))?;
                    }
                }
                sum
            }
            other => return Err(format!("{at}: unknown type {other}")),
        };
        best = best.max(b);
    }
    Ok(best)
}
