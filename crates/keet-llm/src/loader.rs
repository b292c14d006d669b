//! Loading models: GGUF (quantized Llama family and Qwen2/2.5/3) and safetensors folders (bf16/f16,
//! same families), with the architecture taken from the file's metadata / `config.json`.
//!
//! [`load_model`] is the single place that picks the implementation of [`CausalLm`]: the fast CPU
//! implementation (`crates/keet-llm/src/fast/`) is selected here for Llama, Qwen2 and Qwen3 GGUF on CPU.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{llama, quantized_llama, quantized_qwen2, quantized_qwen3, qwen2, qwen3};

use super::model::{CausalLm, LlmError, WeightBytes};

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

pub use super::device::parse_device;

pub use super::gguf::GgufFile;
pub use super::model::{chunk_size, CHUNK};

/// The model families keet runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
}

impl Arch {
    pub fn from_gguf(name: &str) -> Result<Self, LlmError> {
        match name {
            "llama" => Ok(Arch::Llama),
            "qwen2" => Ok(Arch::Qwen2),
            "qwen3" => Ok(Arch::Qwen3),
            other => Err(err(format!("GGUF architecture `{other}` is not supported (supported: llama, qwen2, qwen3)"))),
        }
    }

    pub fn from_config(cfg: &serde_json::Value) -> Result<Self, LlmError> {
        let arch = cfg
            .get("architectures")
            .and_then(|a| a.get(0))
            .and_then(|a| a.as_str())
            .map(|s| s.to_string())
            .or_else(|| cfg.get("model_type").and_then(|m| m.as_str()).map(|s| s.to_string()))
            .unwrap_or_default();
        let a = arch.to_ascii_lowercase();
        if a.starts_with("qwen3") {
            Ok(Arch::Qwen3)
        } else if a.starts_with("qwen2") {
            Ok(Arch::Qwen2)
        } else if a.starts_with("llama") || a.starts_with("mistral") {
            Ok(Arch::Llama)
        } else {
            Err(err(format!("config.json architecture `{arch}` is not supported (supported: Llama, Qwen2, Qwen3)")))
        }
    }
}

/// Options for [`load_gguf_model`].
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Use keet's own CPU implementation (`crates/keet-llm/src/fast/`) for Llama / Qwen2 / Qwen3 GGUF on CPU,
    /// falling back to candle (with a note) when it cannot load the file. Default: `KEET_LLM_IMPL=fast`.
    pub prefer_fast: bool,
    /// CPU threads for the fast implementation.
    pub threads: usize,
}

impl LoadOptions {
    /// From the environment: `KEET_LLM_IMPL=fast|candle` (default fast: keet's own CPU engine for
    /// Llama / Qwen2 / Qwen3, see `crates/keet-llm/src/fast`; candle-transformers on other devices).
    pub fn from_env(threads: usize) -> Self {
        let prefer_fast = !std::env::var("KEET_LLM_IMPL").map(|v| v.eq_ignore_ascii_case("candle")).unwrap_or(false);
        LoadOptions { prefer_fast, threads }
    }
}

/// Loads a GGUF model: the one place an implementation is chosen ([`load_gguf_fast`] when it
/// applies, else [`load_gguf_candle`]). Returns the model and the name of the implementation
/// (`fast` or `candle`).
pub fn load_gguf_model(gguf: GgufFile, device: &Device, opts: &LoadOptions) -> Result<(Box<dyn CausalLm>, &'static str), LlmError> {
    match load_gguf_fast(&gguf, device, opts)? {
        Some(m) => Ok((m, "fast")),
        None => Ok((load_gguf_candle(gguf, device)?, "candle")),
    }
}

/// keet's own CPU implementation (crates/keet-llm/src/fast/) for Llama / Qwen2 / Qwen3 GGUF on CPU, when the
/// options allow it; `None` when it does not apply or cannot load this file (then candle does).
pub fn load_gguf_fast(gguf: &GgufFile, device: &Device, opts: &LoadOptions) -> Result<Option<Box<dyn CausalLm>>, LlmError> {
    let arch = Arch::from_gguf(&gguf.architecture())?;
    if matches!(arch, Arch::Llama | Arch::Qwen2 | Arch::Qwen3) && device.is_cpu() && opts.prefer_fast {
        match super::fast::FastLlama::from_gguf_mapped(&gguf.content, gguf.shared_map(), opts.threads.max(1)) {
            Ok(m) => return Ok(Some(Box::new(m))),
            Err(e) => eprintln!("keet: fast CPU implementation unavailable for {} ({e}); using candle", gguf.path.display()),
        }
    }
    Ok(None)
}

/// candle-transformers' quantized Llama / Qwen2 / Qwen3 on any device.
pub fn load_gguf_candle(gguf: GgufFile, device: &Device) -> Result<Box<dyn CausalLm>, LlmError> {
    let arch = Arch::from_gguf(&gguf.architecture())?;
    let vocab = gguf
        .metadata()
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.to_vec().ok())
        .map(|v| v.len())
        .or_else(|| gguf.md_u32(&format!("{}.vocab_size", gguf.architecture())).map(|v| v as usize))
        .unwrap_or(0);
    let path = gguf.path.clone();
    let weights = super::footprint::gguf_candle(&gguf.content);
    let map = gguf.shared_map();
    let mut r = Cursor::new(&map[..]);
    let ctx = gguf.context_length();
    let wrap = |e: candle_core::Error| err(format!("loading {}: {e}", path.display()));
    let inner = match arch {
        Arch::Llama => Inner::QLlama(quantized_llama::ModelWeights::from_gguf(gguf.content, &mut r, device).map_err(wrap)?),
        Arch::Qwen2 => Inner::QQwen2(Box::new(quantized_qwen2::ModelWeights::from_gguf(gguf.content, &mut r, device).map_err(wrap)?)),
        Arch::Qwen3 => Inner::QQwen3(quantized_qwen3::ModelWeights::from_gguf(gguf.content, &mut r, device).map_err(wrap)?),
    };
    Ok(Box::new(CandleLm::new(inner, device.clone(), vocab, ctx, weights)))
}

/// Loads a safetensors model folder (`config.json` + `*.safetensors`).
pub fn load_safetensors_model(dir: &Path, device: &Device) -> Result<Box<dyn CausalLm>, LlmError> {
    let cfg_path = dir.join("config.json");
    let cfg_text = std::fs::read_to_string(&cfg_path).map_err(|e| err(format!("{}: {e}", cfg_path.display())))?;
    let cfg: serde_json::Value = serde_json::from_str(&cfg_text).map_err(|e| err(format!("{}: {e}", cfg_path.display())))?;
    let arch = Arch::from_config(&cfg)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| err(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().map(|x| x == "safetensors").unwrap_or(false))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(err(format!("no .safetensors files in {}", dir.display())));
    }
    let dtype = if device.is_cpu() {
        DType::F32
    } else {
        match cfg.get("torch_dtype").and_then(|v| v.as_str()) {
            Some("float16") => DType::F16,
            _ => DType::BF16,
        }
    };
    // SAFETY: the files are memory-mapped read-only and not modified while keet runs.
    let tensors = unsafe { candle_core::safetensors::MmapedSafetensors::multi(&files)? };
    load_varbuilder_model(arch, &cfg_text, &cfg_path.display().to_string(), Box::new(tensors), dtype, device)
}

/// Builds candle-transformers' Llama / Qwen2 / Qwen3 from a `config.json` text and a tensor
/// source (`backend`: safetensors files, or generated tensors for a synthetic model), in `dtype`
/// on `device`. The tensors are recorded as they load, for [`CausalLm::weight_bytes`]. `cfg_label`
/// names the configuration in messages.
pub fn load_varbuilder_model(
    arch: Arch,
    cfg_text: &str,
    cfg_label: &str,
    backend: Box<dyn candle_nn::var_builder::SimpleBackend>,
    dtype: DType,
    device: &Device,
) -> Result<Box<dyn CausalLm>, LlmError> {
    let cfg: serde_json::Value = serde_json::from_str(cfg_text).map_err(|e| err(format!("{cfg_label}: {e}")))?;
    let recording = super::footprint::RecordingBackend::new(backend);
    let records = recording.records.clone();
    let vb = candle_nn::VarBuilder::from_backend(Box::new(recording), dtype, device.clone());
    let vocab = cfg.get("vocab_size").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
    let ctx = cfg.get("max_position_embeddings").and_then(|v| v.as_u64()).map(|v| v as usize);
    let bad = |e: serde_json::Error| err(format!("{cfg_label}: {e}"));
    let inner = match arch {
        Arch::Llama => {
            let lc: llama::LlamaConfig = serde_json::from_str(cfg_text).map_err(bad)?;
            let c = lc.into_config(false);
            let cache = llama::Cache::new(true, dtype, &c, device)?;
            let model = llama::Llama::load(vb, &c)?;
            Inner::Llama { model, cache: Box::new(cache.clone()), fresh: Box::new(cache) }
        }
        Arch::Qwen2 => {
            let c: qwen2::Config = serde_json::from_str(cfg_text).map_err(bad)?;
            Inner::Qwen2(qwen2::ModelForCausalLM::new(&c, vb)?)
        }
        Arch::Qwen3 => {
            let c: qwen3::Config = serde_json::from_str(cfg_text).map_err(bad)?;
            Inner::Qwen3(qwen3::ModelForCausalLM::new(&c, vb)?)
        }
    };
    let weights = super::footprint::recorded(&records);
    Ok(Box::new(CandleLm::new(inner, device.clone(), vocab, ctx, weights)))
}

/// The candle-transformers models keet wraps.
#[allow(clippy::large_enum_variant)]
enum Inner {
    QLlama(quantized_llama::ModelWeights),
    QQwen2(Box<quantized_qwen2::ModelWeights>),
    QQwen3(quantized_qwen3::ModelWeights),
    Llama { model: llama::Llama, cache: Box<llama::Cache>, fresh: Box<llama::Cache> },
    Qwen2(qwen2::ModelForCausalLM),
    Qwen3(qwen3::ModelForCausalLM),
}

impl Inner {
    fn forward(&mut self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        match self {
            Inner::QLlama(m) => m.forward(x, pos),
            Inner::QQwen2(m) => m.forward(x, pos),
            Inner::QQwen3(m) => m.forward(x, pos),
            Inner::Llama { model, cache, .. } => model.forward(x, pos, cache),
            Inner::Qwen2(m) => m.forward(x, pos),
            Inner::Qwen3(m) => m.forward(x, pos),
        }
    }

    fn clear(&mut self) {
        match self {
            Inner::QLlama(m) => m.clear_kv_cache(),
            Inner::QQwen2(m) => m.clear_kv_cache(),
            Inner::QQwen3(m) => m.clear_kv_cache(),
            Inner::Llama { cache, fresh, .. } => **cache = (**fresh).clone(),
            Inner::Qwen2(m) => m.clear_kv_cache(),
            Inner::Qwen3(m) => m.clear_kv_cache(),
        }
    }

    /// A copy of the model state that shares weights (Arc tensors) and whose KV cache does not change
    /// when the original runs on; `None` where that copy would not be cheap or not be independent.
    fn snapshot(&self, device: &Device) -> Option<Inner> {
        match self {
            // KV caches grown with Tensor::cat: a clone shares nothing mutable.
            Inner::QLlama(m) => Some(Inner::QLlama(m.clone())),
            Inner::Llama { model, cache, fresh } => Some(Inner::Llama { model: model.clone(), cache: cache.clone(), fresh: fresh.clone() }),
            Inner::Qwen2(m) => Some(Inner::Qwen2(m.clone())),
            Inner::Qwen3(m) => Some(Inner::Qwen3(m.clone())),
            // On GPU quantized Qwen3 uses a concatenating cache; on CPU a preallocated buffer (deep copy).
            Inner::QQwen3(m) if !device.is_cpu() => Some(Inner::QQwen3(m.clone())),
            // quantized_qwen2 is not Clone: prefix reuse falls back to recomputing.
            Inner::QQwen3(_) | Inner::QQwen2(_) => None,
        }
    }
}

/// Most KV-cache snapshots kept for prefix reuse.
const MAX_SNAPSHOTS: usize = 4;

/// A candle-transformers model behind [`CausalLm`]. The models keep their KV cache internally and
/// cannot cut it, so truncation works with snapshots: `checkpoint()` keeps the model state (a cheap
/// clone: weights and KV tensors are shared, the caches grow by concatenation); `truncate_cache(n)`
/// restores the latest snapshot at or before `n` and replays the tokens between it and `n` on the
/// next `forward` (keeping a snapshot at `n` too).
pub struct CandleLm {
    inner: Inner,
    device: Device,
    vocab: usize,
    max_ctx: Option<usize>,
    weights: WeightBytes,
    /// Tokens the inner model has processed, in order.
    applied: Vec<u32>,
    /// Logical cache length (<= applied.len()).
    len: usize,
    /// (position, state, last use) snapshots.
    snapshots: Vec<(usize, Inner, u64)>,
    clock: u64,
}

impl CandleLm {
    fn new(inner: Inner, device: Device, vocab: usize, max_ctx: Option<usize>, weights: WeightBytes) -> Self {
        CandleLm { inner, device, vocab, max_ctx, weights, applied: Vec::new(), len: 0, snapshots: Vec::new(), clock: 0 }
    }

    fn run(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor, LlmError> {
        let mut out = None;
        let mut p = pos;
        for chunk in tokens.chunks(chunk_size()) {
            let x = Tensor::new(chunk, &self.device)?.unsqueeze(0)?;
            out = Some(self.inner.forward(&x, p)?);
            self.applied.extend_from_slice(chunk);
            p += chunk.len();
        }
        out.ok_or_else(|| err("forward with no tokens"))
    }

    fn take_snapshot(&mut self) {
        let pos = self.applied.len();
        self.clock += 1;
        if let Some(s) = self.snapshots.iter_mut().find(|s| s.0 == pos) {
            s.2 = self.clock;
            return;
        }
        if let Some(state) = self.inner.snapshot(&self.device) {
            if self.snapshots.len() >= MAX_SNAPSHOTS {
                let oldest = (0..self.snapshots.len()).min_by_key(|&i| self.snapshots[i].2).unwrap();
                self.snapshots.remove(oldest);
            }
            self.snapshots.push((pos, state, self.clock));
        }
    }

    /// Brings the inner model back to exactly `self.len` tokens.
    fn rewind(&mut self) -> Result<(), LlmError> {
        if self.len == self.applied.len() {
            return Ok(());
        }
        let target = self.len;
        let best = (0..self.snapshots.len()).filter(|&i| self.snapshots[i].0 <= target).max_by_key(|&i| self.snapshots[i].0);
        let history: Vec<u32> = self.applied[..target].to_vec();
        let from = match best {
            Some(i) => {
                self.clock += 1;
                self.snapshots[i].2 = self.clock;
                let pos = self.snapshots[i].0;
                self.inner = self.snapshots[i].1.snapshot(&self.device).expect("snapshots are cloneable");
                pos
            }
            None => {
                self.inner.clear();
                0
            }
        };
        self.applied.truncate(from);
        if target > from {
            self.run(&history[from..], from)?;
            self.take_snapshot();
        }
        Ok(())
    }
}

impl CausalLm for CandleLm {
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        if tokens.is_empty() {
            return Err(err("forward called with no tokens"));
        }
        if start_pos != self.len {
            if start_pos < self.len {
                self.len = start_pos;
            } else {
                return Err(err(format!("forward at position {start_pos} but the cache holds {}", self.len)));
            }
        }
        if let Some(max) = self.max_ctx {
            if start_pos + tokens.len() > max {
                return Err(err(format!("context overflow: {} tokens exceed the model's context length {max}", start_pos + tokens.len())));
            }
        }
        self.rewind()?;
        let logits = self.run(tokens, start_pos)?;
        self.len = self.applied.len();
        let v: Vec<f32> = logits.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?;
        let n = if self.vocab > 0 && v.len() >= self.vocab { self.vocab } else { v.len() };
        Ok(v[v.len() - n..].to_vec())
    }

    fn truncate_cache(&mut self, len: usize) {
        self.len = self.len.min(len);
        if self.len == 0 {
            self.applied.clear();
            self.inner.clear();
        }
    }

    fn cache_len(&self) -> usize {
        self.len
    }

    fn vocab_size(&self) -> usize {
        self.vocab
    }

    fn checkpoint(&mut self) {
        if self.rewind().is_ok() && self.len > 0 {
            self.take_snapshot();
        }
    }

    fn weight_bytes(&self) -> Option<WeightBytes> {
        Some(self.weights)
    }
}
