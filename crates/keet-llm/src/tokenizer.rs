//! Tokenizer: `tokenizer.json` when the model folder has one, otherwise a byte-level BPE built from
//! the GGUF `tokenizer.ggml.*` metadata (tokens, merges, token types, special ids).
//!
//! Besides encoding, the tokenizer knows every token's raw bytes, which is what the constraint engine
//! (toktrie / llguidance) needs and what decoding uses (concatenate bytes, then UTF-8).

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use super::model::LlmError;

/// GGUF token types (llama.cpp `llama_token_type`).
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// The Llama 3 pre-tokenizer regex (`tokenizer.ggml.pre = llama-bpe`).
const LLAMA3_REGEX: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen2 pre-tokenizer regex (`tokenizer.ggml.pre = qwen2`): like Llama 3 but single digits.
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The tokenizer of a model, without loading its weights (to count tokens against a budget): the
/// same choice [`crate::Engine`] makes (`tokenizer.json` beside a GGUF file or in a model
/// folder, else the GGUF metadata). Returns it with the model's display name.
pub fn for_model(model: Option<&str>) -> Result<(Tokenizer, String), LlmError> {
    use super::resolve::{self, ModelLocation};
    let resolved = resolve::resolve_model(model)?;
    let read_json = |p: &Path| -> Option<serde_json::Value> { serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok() };
    let path = resolved.location.path().to_path_buf();
    let dir = match &resolved.location {
        ModelLocation::Gguf(p) => p.parent().map(|d| d.to_path_buf()).unwrap_or_default(),
        ModelLocation::Safetensors(d) => d.clone(),
    };
    let tok_json = dir.join("tokenizer.json");
    let cfg = read_json(&dir.join("tokenizer_config.json"));
    let tokenizer = if tok_json.is_file() {
        Tokenizer::from_file(&tok_json, cfg.as_ref())?
    } else if let ModelLocation::Gguf(p) = &resolved.location {
        Tokenizer::from_gguf(super::loader::GgufFile::open(p)?.metadata())?
    } else {
        return Err(err(format!("{} has no tokenizer.json", dir.display())));
    };
    let name = resolved
        .manifest
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_else(|| path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
    Ok((tokenizer, name))
}

/// A tokenizer plus the per-token byte strings and special-token ids.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Raw bytes of every token id (special tokens: their text).
    token_bytes: Vec<Vec<u8>>,
    /// Ids that are special (control) tokens: never part of decoded text.
    special: Vec<bool>,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    pub pad_id: Option<u32>,
    /// The model's end-of-generation tokens (eos plus `<|im_end|>`, `<|eot_id|>`, `<|endoftext|>`, ...).
    pub end_ids: Vec<u32>,
    /// Whether the model wants a BOS token prepended (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
}

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// GPT-2's byte <-> printable-unicode mapping used by byte-level BPE vocabularies.
pub fn byte_level_char_to_byte() -> HashMap<char, u8> {
    let mut bs: Vec<u32> = Vec::new();
    bs.extend(u32::from(b'!')..=u32::from(b'~'));
    bs.extend(0xA1..=0xAC);
    bs.extend(0xAE..=0xFF);
    let mut cs: Vec<u32> = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.iter().zip(cs.iter()).map(|(&b, &c)| (char::from_u32(c).unwrap(), b as u8)).collect()
}

fn byte_level_bytes(token: &str, map: &HashMap<char, u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(token.len());
    for ch in token.chars() {
        match map.get(&ch) {
            Some(&b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

/// SentencePiece-style token text to bytes: `▁` is a space, `<0xNN>` is a raw byte.
fn sentencepiece_bytes(token: &str) -> Vec<u8> {
    if token.len() == 6 && token.starts_with("<0x") && token.ends_with('>') {
        if let Ok(b) = u8::from_str_radix(&token[3..5], 16) {
            return vec![b];
        }
    }
    token.replace('\u{2581}', " ").into_bytes()
}

const END_TOKEN_NAMES: &[&str] =
    &["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|end|>", "<end_of_turn>", "</s>", "<|eom_id|>"];

impl Tokenizer {
    /// Builds the tokenizer from GGUF metadata (`tokenizer.ggml.model = gpt2`, byte-level BPE).
    pub fn from_gguf(md: &HashMap<String, gguf_file::Value>) -> Result<Self, LlmError> {
        let get = |k: &str| md.get(k);
        let model = get("tokenizer.ggml.model").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
        if model != "gpt2" {
            return Err(err(format!(
                "GGUF tokenizer model `{model}` is not supported without a tokenizer.json (only byte-level BPE, \
                 `gpt2`, is built from GGUF metadata); put the model's tokenizer.json next to the .gguf file"
            )));
        }
        let tokens: Vec<String> = get("tokenizer.ggml.tokens")
            .ok_or_else(|| err("GGUF has no tokenizer.ggml.tokens"))?
            .to_vec()?
            .iter()
            .map(|v| v.to_string().cloned())
            .collect::<Result<_, _>>()?;
        let merges: Vec<(String, String)> = match get("tokenizer.ggml.merges") {
            Some(v) => v
                .to_vec()?
                .iter()
                .map(|m| {
                    let s = m.to_string()?;
                    s.split_once(' ')
                        .map(|(a, b)| (a.to_string(), b.to_string()))
                        .ok_or_else(|| candle_core::Error::Msg(format!("bad merge `{s}`")))
                })
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let types: Vec<i32> = match get("tokenizer.ggml.token_type") {
            Some(v) => v.to_vec()?.iter().map(|t| t.to_i32()).collect::<Result<_, _>>()?,
            None => vec![1; tokens.len()],
        };
        let id = |k: &str| get(k).and_then(|v| v.to_u32().ok());
        let pre = get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
        let add_bos = get("tokenizer.ggml.add_bos_token").and_then(|v| v.to_bool().ok()).unwrap_or(false);

        let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| err(format!("building BPE from GGUF: {e}")))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, false);
        let split = |re: &str| -> Result<PreTokenizerWrapper, LlmError> {
            Ok(Split::new(SplitPattern::Regex(re.to_string()), SplitDelimiterBehavior::Isolated, false)
                .map_err(|e| err(format!("pre-tokenizer regex: {e}")))?
                .into())
        };
        let pre_tok: PreTokenizerWrapper = match pre.as_str() {
            "llama-bpe" | "llama3" | "dbrx" | "smaug-bpe" => Sequence::new(vec![split(LLAMA3_REGEX)?, byte_level.into()]).into(),
            "qwen2" | "deepseek-r1-qwen" => Sequence::new(vec![split(QWEN2_REGEX)?, byte_level.into()]).into(),
            // smollm and starcoder-style vocabularies: single digits, then GPT-2's regex.
            "smollm" | "starcoder" | "refact" => {
                Sequence::new(vec![Digits::new(true).into(), ByteLevel::new(false, true, true).into()]).into()
            }
            _ => ByteLevel::new(false, true, true).into(),
        };
        inner.with_pre_tokenizer(Some(pre_tok));
        inner.with_decoder(Some(tokenizers::decoders::byte_level::ByteLevel::default()));
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(types.iter())
            .filter(|(_, &t)| t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_USER_DEFINED)
            .map(|(s, &t)| AddedToken::from(s.clone(), t == TOKEN_TYPE_CONTROL))
            .collect();
        inner.add_special_tokens(specials).map_err(|e| err(format!("adding special tokens: {e}")))?;

        let map = byte_level_char_to_byte();
        let mut special = vec![false; tokens.len()];
        let token_bytes = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let ty = types.get(i).copied().unwrap_or(1);
                if ty == TOKEN_TYPE_CONTROL {
                    special[i] = true;
                    t.as_bytes().to_vec()
                } else if ty == TOKEN_TYPE_USER_DEFINED {
                    t.as_bytes().to_vec()
                } else {
                    byte_level_bytes(t, &map)
                }
            })
            .collect();
        let mut tk = Tokenizer {
            inner,
            token_bytes,
            special,
            bos_id: id("tokenizer.ggml.bos_token_id"),
            eos_id: id("tokenizer.ggml.eos_token_id"),
            pad_id: id("tokenizer.ggml.padding_token_id"),
            end_ids: Vec::new(),
            add_bos,
        };
        tk.end_ids = tk.find_end_ids(&tokens);
        Ok(tk)
    }

    /// Loads a Hugging Face `tokenizer.json` (plus `tokenizer_config.json` for special ids, when present).
    pub fn from_file(path: &Path, config: Option<&serde_json::Value>) -> Result<Self, LlmError> {
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| err(format!("reading {}: {e}", path.display())))?;
        let n = inner.get_vocab_size(true);
        let mut names = vec![String::new(); n];
        for (s, i) in inner.get_vocab(true) {
            if (i as usize) < n {
                names[i as usize] = s;
            }
        }
        let mut special = vec![false; n];
        for (i, t) in inner.get_added_tokens_decoder() {
            if t.special && (i as usize) < n {
                special[i as usize] = true;
            }
        }
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?)
            .map_err(|e| err(format!("{}: {e}", path.display())))?;
        let byte_level = json.pointer("/decoder/type").and_then(|v| v.as_str()) == Some("ByteLevel")
            || json.pointer("/pre_tokenizer/type").and_then(|v| v.as_str()) == Some("ByteLevel")
            || json.to_string().contains("\"ByteLevel\"");
        let map = byte_level_char_to_byte();
        let token_bytes = names
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if special[i] {
                    t.as_bytes().to_vec()
                } else if byte_level {
                    byte_level_bytes(t, &map)
                } else {
                    sentencepiece_bytes(t)
                }
            })
            .collect();
        let tok_id = |key: &str| -> Option<u32> {
            let v = config?.get(key)?;
            let s = v.as_str().or_else(|| v.get("content").and_then(|c| c.as_str()))?;
            inner.token_to_id(s)
        };
        let bos_id = tok_id("bos_token");
        let eos_id = tok_id("eos_token");
        let pad_id = tok_id("pad_token");
        let add_bos = config.and_then(|c| c.get("add_bos_token")).and_then(|v| v.as_bool()).unwrap_or(false);
        let mut tk = Tokenizer { inner, token_bytes, special, bos_id, eos_id, pad_id, end_ids: Vec::new(), add_bos };
        tk.end_ids = tk.find_end_ids(&names);
        Ok(tk)
    }

    fn find_end_ids(&self, names: &[String]) -> Vec<u32> {
        let mut ends: Vec<u32> = self.eos_id.into_iter().collect();
        for (i, n) in names.iter().enumerate() {
            if END_TOKEN_NAMES.contains(&n.as_str()) && self.special.get(i).copied().unwrap_or(false) {
                ends.push(i as u32);
            }
        }
        ends.sort_unstable();
        ends.dedup();
        ends
    }

    /// Encodes text; `<|special|>` token texts in it become their special ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        let enc = self.inner.encode(text, false).map_err(|e| err(format!("tokenizing: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Decodes ids to text, leaving out special tokens (invalid UTF-8 becomes U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// The raw bytes of `ids`, special tokens left out.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &i in ids {
            if !self.is_special(i) {
                if let Some(b) = self.token_bytes.get(i as usize) {
                    out.extend_from_slice(b);
                }
            }
        }
        out
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    pub fn token_bytes(&self) -> &[Vec<u8>] {
        &self.token_bytes
    }

    /// Text of one token (special tokens included), for display.
    pub fn token_text(&self, id: u32) -> String {
        self.token_bytes.get(id as usize).map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
    }

    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.inner.token_to_id(text)
    }

    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}
