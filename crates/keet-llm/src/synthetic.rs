//! Synthetic models: random weights, seeded, in the exact shapes of real models (Llama-3-8B,
//! Qwen2.5-7B, and a tiny one for CI), built in memory with no file and run through the same
//! implementations keet picks for real models, so their speed is what a real model of that shape
//! and format would get.
//!
//! * Quantized formats (`-q4` = Q4_0, `-q4_1`, `-q8` = Q8_0) are a GGUF model in an anonymous
//!   memory map (the tensor table, metadata and blocks of a real GGUF file) handed to
//!   [`loader::load_gguf_model`]: keet's fast CPU Llama on the CPU, candle-transformers'
//!   quantized Llama / Qwen2 elsewhere. Every matrix is in the chosen format (the embedding and
//!   output layer too); norms and biases are f32, as in llama.cpp's files.
//! * `bf16` (no suffix) is candle-transformers' Llama / Qwen2 over a `VarBuilder` that generates
//!   each tensor as the model asks for it ([`loader::load_varbuilder_model`]), in bf16 on a GPU and
//!   in f32 on the CPU (the dtype keet loads safetensors models in there).
//!
//! Values: matrices uniform with standard deviation about 0.02 (a constant block scale for the
//! quantized formats), norms 1, biases small; a seeded generator per tensor, so the same name and
//! seed give the same weights on any thread count. There is no tokenizer: benchmarks feed token ids.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{self, Content, TensorInfo, Value, VersionedMagic};
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Shape, Tensor};
use rayon::prelude::*;

use super::footprint::ggml_bytes;
use super::loader::{self, Arch, GgufFile, LoadOptions};
use super::model::{CausalLm, LlmError};

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// The hyper-parameters that fix a model's tensors.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ModelShape {
    pub name: &'static str,
    /// `llama` or `qwen2` (candle-transformers family; also the GGUF architecture).
    pub family: &'static str,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub rope_theta: f64,
    pub rms_eps: f64,
    /// Biases on the Q, K and V projections (Qwen2).
    pub qkv_bias: bool,
    /// Output layer shares the embedding table.
    pub tied_embeddings: bool,
    pub context: usize,
}

/// Meta-Llama-3-8B (`config.json`: hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate
/// 14336, vocab 128256, rope theta 500000, rms eps 1e-5, untied, 8192 positions).
pub const LLAMA3_8B: ModelShape = ModelShape {
    name: "llama3-8b",
    family: "llama",
    hidden: 4096,
    layers: 32,
    heads: 32,
    kv_heads: 8,
    intermediate: 14336,
    vocab: 128256,
    rope_theta: 500000.0,
    rms_eps: 1e-5,
    qkv_bias: false,
    tied_embeddings: false,
    context: 8192,
};

/// Qwen2.5-7B(-Instruct) (`config.json`: hidden 3584, 28 layers, 28 heads, 4 KV heads,
/// intermediate 18944, vocab 152064, rope theta 1e6, rms eps 1e-6, QKV bias, untied, 32768 positions).
pub const QWEN25_7B: ModelShape = ModelShape {
    name: "qwen2.5-7b",
    family: "qwen2",
    hidden: 3584,
    layers: 28,
    heads: 28,
    kv_heads: 4,
    intermediate: 18944,
    vocab: 152064,
    rope_theta: 1e6,
    rms_eps: 1e-6,
    qkv_bias: true,
    tied_embeddings: false,
    context: 32768,
};

/// A small Llama for tests and CI: 4 layers, hidden 256 (8 heads of 32, 4 KV heads), vocab 32000.
pub const TINY: ModelShape = ModelShape {
    name: "tiny",
    family: "llama",
    hidden: 256,
    layers: 4,
    heads: 8,
    kv_heads: 4,
    intermediate: 768,
    vocab: 32000,
    rope_theta: 10000.0,
    rms_eps: 1e-5,
    qkv_bias: false,
    tied_embeddings: false,
    context: 4096,
};

/// The shapes `--synthetic` knows.
pub const SHAPES: [ModelShape; 3] = [LLAMA3_8B, QWEN25_7B, TINY];

/// How the weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// bf16 on a GPU, f32 on the CPU (as keet loads safetensors models).
    Bf16,
    Q4_0,
    Q4_1,
    Q8_0,
}

impl WeightFormat {
    /// The name suffixes: none / `-bf16`, `-q4` / `-q4_0`, `-q4_1`, `-q8` / `-q8_0`.
    fn from_suffix(s: &str) -> Option<Self> {
        match s {
            "" | "bf16" => Some(WeightFormat::Bf16),
            "q4" | "q4_0" => Some(WeightFormat::Q4_0),
            "q4_1" => Some(WeightFormat::Q4_1),
            "q8" | "q8_0" => Some(WeightFormat::Q8_0),
            _ => None,
        }
    }

    fn ggml(self) -> Option<GgmlDType> {
        match self {
            WeightFormat::Bf16 => None,
            WeightFormat::Q4_0 => Some(GgmlDType::Q4_0),
            WeightFormat::Q4_1 => Some(GgmlDType::Q4_1),
            WeightFormat::Q8_0 => Some(GgmlDType::Q8_0),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Q4_0 => "Q4_0",
            WeightFormat::Q4_1 => "Q4_1",
            WeightFormat::Q8_0 => "Q8_0",
        }
    }
}

/// A `--synthetic` name: a shape and a weight format.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticSpec {
    pub shape: ModelShape,
    pub format: WeightFormat,
}

/// What `--synthetic` accepts, for messages.
pub const NAMES_HELP: &str =
    "tiny, llama3-8b, qwen2.5-7b, each optionally with -q4 (Q4_0), -q4_1 or -q8 (Q8_0); no suffix (or -bf16) is bf16";

impl SyntheticSpec {
    /// Parses `llama3-8b`, `llama3-8b-q4`, `qwen2.5-7b-q8`, `tiny-q4_1`, ...
    pub fn parse(name: &str) -> Result<Self, LlmError> {
        let n = name.trim().to_ascii_lowercase();
        for shape in SHAPES {
            if let Some(rest) = n.strip_prefix(shape.name) {
                let suffix = rest.strip_prefix('-').unwrap_or(rest);
                if !rest.is_empty() && !rest.starts_with('-') {
                    continue;
                }
                return WeightFormat::from_suffix(suffix)
                    .map(|format| SyntheticSpec { shape, format })
                    .ok_or_else(|| err(format!("synthetic model `{name}`: unknown weight format `{suffix}` (known: {NAMES_HELP})")));
            }
        }
        Err(err(format!("unknown synthetic model `{name}` (known: {NAMES_HELP})")))
    }

    /// `llama3-8b-q4_0`-style canonical name.
    pub fn name(&self) -> String {
        match self.format {
            WeightFormat::Bf16 => self.shape.name.to_string(),
            f => format!("{}-{}", self.shape.name, f.label().to_ascii_lowercase()),
        }
    }
}

/// One weight tensor of a shape: GGUF name, dims (rows, cols for matrices) and whether it is a
/// vector (norm or bias, stored f32).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    pub gguf_name: String,
    pub dims: Vec<usize>,
    pub vector: bool,
    /// Norm weights start at 1 (the rest random).
    pub norm: bool,
}

impl ModelShape {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim()
    }

    /// Every weight tensor, in GGUF naming.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        let (h, kv, ffn) = (self.hidden, self.kv_dim(), self.intermediate);
        let m = |n: String, r: usize, c: usize| TensorSpec { gguf_name: n, dims: vec![r, c], vector: false, norm: false };
        let v = |n: String, len: usize, norm: bool| TensorSpec { gguf_name: n, dims: vec![len], vector: true, norm };
        let mut t = vec![m("token_embd.weight".into(), self.vocab, h), v("output_norm.weight".into(), h, true)];
        if !self.tied_embeddings {
            t.push(m("output.weight".into(), self.vocab, h));
        }
        for l in 0..self.layers {
            let p = format!("blk.{l}");
            t.push(v(format!("{p}.attn_norm.weight"), h, true));
            t.push(m(format!("{p}.attn_q.weight"), h, h));
            t.push(m(format!("{p}.attn_k.weight"), kv, h));
            t.push(m(format!("{p}.attn_v.weight"), kv, h));
            if self.qkv_bias {
                t.push(v(format!("{p}.attn_q.bias"), h, false));
                t.push(v(format!("{p}.attn_k.bias"), kv, false));
                t.push(v(format!("{p}.attn_v.bias"), kv, false));
            }
            t.push(m(format!("{p}.attn_output.weight"), h, h));
            t.push(v(format!("{p}.ffn_norm.weight"), h, true));
            t.push(m(format!("{p}.ffn_gate.weight"), ffn, h));
            t.push(m(format!("{p}.ffn_up.weight"), ffn, h));
            t.push(m(format!("{p}.ffn_down.weight"), h, ffn));
        }
        t
    }

    /// Parameters (weight elements), computed from the hyper-parameters alone.
    pub fn param_count(&self) -> u64 {
        let (h, kv, ffn, v) = (self.hidden as u64, self.kv_dim() as u64, self.intermediate as u64, self.vocab as u64);
        let bias = if self.qkv_bias { h + 2 * kv } else { 0 };
        let layer = 2 * h * h + 2 * kv * h + bias + 3 * h * ffn + 2 * h;
        let heads = if self.tied_embeddings { v * h } else { 2 * v * h };
        self.layers as u64 * layer + heads + h
    }

    /// The candle-transformers `config.json` of this shape.
    pub fn config_json(&self) -> serde_json::Value {
        let mut c = serde_json::json!({
            "architectures": [if self.family == "qwen2" { "Qwen2ForCausalLM" } else { "LlamaForCausalLM" }],
            "model_type": self.family,
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "vocab_size": self.vocab,
            "rope_theta": self.rope_theta,
            "rms_norm_eps": self.rms_eps,
            "max_position_embeddings": self.context,
            "tie_word_embeddings": self.tied_embeddings,
            "hidden_act": "silu",
        });
        if self.family == "qwen2" {
            c["sliding_window"] = self.context.into();
            c["max_window_layers"] = self.layers.into();
            c["use_sliding_window"] = false.into();
        }
        c
    }
}

/// Memory a synthetic model needs while it is built and run, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemoryNeed {
    /// Host memory: the in-memory GGUF and, on the CPU, the model itself.
    pub host_bytes: u64,
    /// GPU memory (0 on the CPU).
    pub device_bytes: u64,
}

/// Alignment of tensor data in the in-memory GGUF (GGUF's default).
const ALIGN: u64 = gguf_file::DEFAULT_ALIGNMENT;

impl SyntheticSpec {
    /// The element type the weights get on `device` (quantized formats: their block type).
    pub fn dtype_on(&self, device: &Device) -> &'static str {
        match (self.format, device.is_cpu()) {
            (WeightFormat::Bf16, true) => "f32",
            (f, _) => f.label(),
        }
    }

    /// Bytes of the in-memory GGUF (quantized formats), tensor data aligned as in a file.
    fn gguf_bytes(&self) -> u64 {
        let Some(q) = self.format.ggml() else { return 0 };
        self.shape.tensors().iter().map(|t| tensor_bytes(t, q).next_multiple_of(ALIGN)).sum()
    }

    /// An estimate of the memory needed to build and run the model for `positions` tokens on
    /// `device` (weights as loaded, the generation buffers, the KV cache, a margin for activations).
    pub fn memory_need(&self, device: &Device, positions: usize) -> MemoryNeed {
        let s = &self.shape;
        let embd = (s.vocab * s.hidden) as u64;
        let largest = s.tensors().iter().map(|t| t.dims.iter().product::<usize>() as u64).max().unwrap_or(0);
        let kv_elem = if device.is_cpu() { 4 } else { 2 };
        let kv = 2 * (s.layers * s.kv_dim() * positions) as u64 * kv_elem;
        let margin = 256 << 20;
        let cpu = device.is_cpu();
        let (host, dev) = match self.format {
            WeightFormat::Bf16 => {
                // Host: one tensor at a time in f32 (and its bf16 copy on the way to a GPU).
                let transient = largest * 6;
                if cpu {
                    (s.param_count() * 4 + largest * 4 + kv, 0)
                } else {
                    (transient, s.param_count() * 2 + kv)
                }
            }
            _ => {
                let file = self.gguf_bytes();
                // candle keeps the blocks and adds an f32 copy of the embedding; keet's fast
                // Llama (CPU) copies the blocks only.
                let fast = cpu && s.family == "llama";
                let model = if fast { file } else { file + embd * 4 };
                if cpu {
                    (file + model + kv, 0)
                } else {
                    (file + largest * 4, model + kv)
                }
            }
        };
        let with_margin = |b: u64| if b == 0 { 0 } else { b + b / 20 + margin };
        MemoryNeed { host_bytes: with_margin(host), device_bytes: with_margin(dev) }
    }
}

fn tensor_bytes(t: &TensorSpec, q: GgmlDType) -> u64 {
    let elems = t.dims.iter().product::<usize>();
    if t.vector {
        4 * elems as u64
    } else {
        ggml_bytes(q, elems)
    }
}

/// A small, fast, seedable generator (SplitMix64).
struct SplitMix(u64);

impl SplitMix {
    fn new(seed: u64, stream: &str, part: u64) -> Self {
        // FNV-1a of the stream name, mixed with the seed and the part number.
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for b in stream.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let mut s = SplitMix(seed ^ h ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        s.next();
        s
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let v = self.next().to_le_bytes();
        rest.copy_from_slice(&v[..rest.len()]);
    }

    /// Uniform in [-a, a).
    fn uniform(&mut self, a: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        (2.0 * u - 1.0) * a
    }
}

/// Standard deviation of the random weights.
const WEIGHT_STD: f32 = 0.02;
/// Half-width of a uniform distribution with standard deviation [`WEIGHT_STD`].
const UNIFORM_A: f32 = WEIGHT_STD * 1.732_050_8;
/// Blocks filled per task.
const BLOCKS_PER_TASK: usize = 1 << 16;

/// Fills `out` with GGUF blocks of type `q` with random quants and a constant scale that gives
/// weights of about [`WEIGHT_STD`].
fn fill_blocks(q: GgmlDType, out: &mut [u8], rng: &mut SplitMix) {
    let f16 = super::fast::kernels::f32_to_f16;
    let bs = q.type_size();
    rng.fill(out);
    // Q4: (q - 8) * d has std ~4.6 d; Q8: q * d with q uniform in -128..127 has std ~73.9 d.
    let (d, m) = match q {
        GgmlDType::Q4_0 => (f16(WEIGHT_STD / 4.61), None),
        GgmlDType::Q4_1 => {
            let d = WEIGHT_STD / 4.61;
            (f16(d), Some(f16(-7.5 * d)))
        }
        _ => (f16(WEIGHT_STD / 73.9), None),
    };
    for b in out.chunks_exact_mut(bs) {
        b[0..2].copy_from_slice(&d.to_le_bytes());
        if let Some(m) = m {
            b[2..4].copy_from_slice(&m.to_le_bytes());
        }
    }
}

/// The random f32 values of a vector tensor (norms 1, biases small).
fn vector_values(t: &TensorSpec, seed: u64) -> Vec<f32> {
    let n = t.dims.iter().product();
    if t.norm {
        return vec![1.0; n];
    }
    let mut rng = SplitMix::new(seed, &t.gguf_name, 0);
    (0..n).map(|_| rng.uniform(UNIFORM_A)).collect()
}

/// The in-memory GGUF of a quantized spec: header (metadata, tensor table) and tensor data in an
/// anonymous memory map, filled in parallel.
pub fn build_gguf(spec: &SyntheticSpec, seed: u64) -> Result<GgufFile, LlmError> {
    let q = spec.format.ggml().ok_or_else(|| err("build_gguf: a quantized format is needed"))?;
    let s = &spec.shape;
    let tensors = s.tensors();
    let mut infos = HashMap::new();
    let mut offset = 0u64;
    let mut layout = Vec::with_capacity(tensors.len());
    for t in &tensors {
        let dtype = if t.vector { GgmlDType::F32 } else { q };
        let len = tensor_bytes(t, q);
        infos.insert(t.gguf_name.clone(), TensorInfo { ggml_dtype: dtype, shape: Shape::from(t.dims.clone()), offset });
        layout.push((offset, len));
        offset += len.next_multiple_of(ALIGN);
    }
    let total = usize::try_from(offset).map_err(|_| err("synthetic model too large for this platform"))?;
    let mut map = memmap2::MmapMut::map_anon(total)
        .map_err(|e| err(format!("cannot allocate {total} bytes for synthetic model {}: {e}", spec.name())))?;
    // Split the map into one disjoint slice per task.
    let mut tasks: Vec<(&TensorSpec, u64, &mut [u8])> = Vec::new();
    let mut rest: &mut [u8] = &mut map[..];
    let mut pos = 0u64;
    for (t, &(off, len)) in tensors.iter().zip(&layout) {
        let (_, after) = std::mem::take(&mut rest).split_at_mut((off - pos) as usize);
        let (data, after) = after.split_at_mut(len as usize);
        rest = after;
        pos = off + len;
        if t.vector {
            tasks.push((t, 0, data));
        } else {
            let step = BLOCKS_PER_TASK * q.type_size();
            for (i, c) in data.chunks_mut(step).enumerate() {
                tasks.push((t, i as u64, c));
            }
        }
    }
    tasks.into_par_iter().for_each(|(t, part, out)| {
        if t.vector {
            for (o, v) in out.chunks_exact_mut(4).zip(vector_values(t, seed)) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        } else {
            fill_blocks(q, out, &mut SplitMix::new(seed, &t.gguf_name, part));
        }
    });
    let map = map.make_read_only().map_err(|e| err(format!("synthetic model map: {e}")))?;
    let f = s.family;
    let u = |v: usize| Value::U32(v as u32);
    let mut md = HashMap::new();
    md.insert("general.architecture".to_string(), Value::String(f.to_string()));
    md.insert("general.name".to_string(), Value::String(format!("synthetic {}", spec.name())));
    md.insert(format!("{f}.context_length"), u(s.context));
    md.insert(format!("{f}.embedding_length"), u(s.hidden));
    md.insert(format!("{f}.block_count"), u(s.layers));
    md.insert(format!("{f}.feed_forward_length"), u(s.intermediate));
    md.insert(format!("{f}.attention.head_count"), u(s.heads));
    md.insert(format!("{f}.attention.head_count_kv"), u(s.kv_heads));
    md.insert(format!("{f}.rope.dimension_count"), u(s.head_dim()));
    md.insert(format!("{f}.attention.layer_norm_rms_epsilon"), Value::F32(s.rms_eps as f32));
    md.insert(format!("{f}.rope.freq_base"), Value::F32(s.rope_theta as f32));
    md.insert(format!("{f}.vocab_size"), u(s.vocab));
    let content = Content { magic: VersionedMagic::GgufV3, metadata: md, tensor_infos: infos, tensor_data_offset: 0 };
    GgufFile::from_memory(&format!("synthetic:{}", spec.name()), content, map)
}

/// A `VarBuilder` source that makes each tensor when the model asks for it: constants where the
/// model's initialiser is a constant (norms), else seeded uniform values of std [`WEIGHT_STD`].
struct RandomTensors {
    seed: u64,
    tied: bool,
}

impl candle_nn::var_builder::SimpleBackend for RandomTensors {
    fn get(&self, s: Shape, name: &str, h: candle_nn::Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let n = s.elem_count();
        let values: Vec<f32> = match h {
            candle_nn::Init::Const(c) => vec![c as f32; n],
            _ => {
                // Parallel in parts of a fixed size, each with its own stream: the same values on
                // any thread count.
                const PART: usize = 1 << 20;
                let mut v = vec![0f32; n];
                v.par_chunks_mut(PART).enumerate().for_each(|(i, c)| {
                    let mut rng = SplitMix::new(self.seed, name, i as u64);
                    c.iter_mut().for_each(|x| *x = rng.uniform(UNIFORM_A));
                });
                v
            }
        };
        // Converted on the host, then copied: the device never holds an f32 copy.
        Tensor::from_vec(values, s, &Device::Cpu)?.to_dtype(dtype)?.to_device(dev)
    }

    fn get_unchecked(&self, name: &str, _dtype: DType, _dev: &Device) -> candle_core::Result<Tensor> {
        candle_core::bail!("synthetic model: tensor {name} asked for without a shape")
    }

    fn contains_tensor(&self, name: &str) -> bool {
        !(self.tied && name.ends_with("lm_head.weight"))
    }
}

/// A built synthetic model.
pub struct SyntheticModel {
    pub model: Box<dyn CausalLm>,
    /// `fast` or `candle`.
    pub implementation: &'static str,
}

/// Builds `spec` on `device` through keet's loaders (see the module docs). The caller checks the
/// memory first ([`SyntheticSpec::memory_need`]).
pub fn build(spec: &SyntheticSpec, device: &Device, seed: u64, opts: &LoadOptions) -> Result<SyntheticModel, LlmError> {
    match spec.format {
        WeightFormat::Bf16 => {
            let arch = if spec.shape.family == "qwen2" { Arch::Qwen2 } else { Arch::Llama };
            let dtype = if device.is_cpu() { DType::F32 } else { DType::BF16 };
            let cfg = spec.shape.config_json().to_string();
            let backend = RandomTensors { seed, tied: spec.shape.tied_embeddings };
            let label = format!("synthetic {} config", spec.name());
            let model = loader::load_varbuilder_model(arch, &cfg, &label, Box::new(backend), dtype, device)?;
            Ok(SyntheticModel { model, implementation: "candle" })
        }
        _ => {
            let gguf = build_gguf(spec, seed)?;
            let (model, implementation) = loader::load_gguf_model(gguf, device, opts)?;
            Ok(SyntheticModel { model, implementation })
        }
    }
}

/// `n` deterministic prompt token ids for a vocabulary of `vocab` (a fixed stride through it).
pub fn prompt_ids(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((1 + i * 7919) % vocab.max(1)) as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_match_the_published_models() {
        // Meta-Llama-3-8B: 8,030,261,248; Qwen2.5-7B: 7,615,616,512 (the counts their model cards give).
        assert_eq!(LLAMA3_8B.param_count(), 8_030_261_248);
        assert_eq!(QWEN25_7B.param_count(), 7_615_616_512);
        assert_eq!(TINY.param_count(), 19_532_032);
        for s in SHAPES {
            let from_tensors: u64 = s.tensors().iter().map(|t| t.dims.iter().product::<usize>() as u64).sum();
            assert_eq!(from_tensors, s.param_count(), "{}", s.name);
        }
    }

    #[test]
    fn names_parse_with_their_format() {
        let p = |n: &str| SyntheticSpec::parse(n).unwrap();
        assert_eq!(p("llama3-8b"), SyntheticSpec { shape: LLAMA3_8B, format: WeightFormat::Bf16 });
        assert_eq!(p("llama3-8b-q4").format, WeightFormat::Q4_0);
        assert_eq!(p("Llama3-8B-Q8_0").format, WeightFormat::Q8_0);
        assert_eq!(p("qwen2.5-7b-q4_1"), SyntheticSpec { shape: QWEN25_7B, format: WeightFormat::Q4_1 });
        assert_eq!(p("tiny-bf16").format, WeightFormat::Bf16);
        assert_eq!(p("tiny-q4").name(), "tiny-q4_0");
        let e = SyntheticSpec::parse("llama3-8b-q3").unwrap_err().to_string();
        assert!(e.contains("unknown weight format `q3`") && e.contains("-q4"), "{e}");
        let e = SyntheticSpec::parse("gpt2").unwrap_err().to_string();
        assert!(e.contains("unknown synthetic model `gpt2`") && e.contains("llama3-8b"), "{e}");
        assert!(SyntheticSpec::parse("tinyx").is_err());
    }

    #[test]
    fn memory_needs_are_about_the_weights() {
        let gb = |b: u64| b as f64 / 1e9;
        let cpu = Device::Cpu;
        // bf16 becomes f32 on the CPU: 8.03 G params x 4 bytes.
        let n = SyntheticSpec::parse("llama3-8b").unwrap().memory_need(&cpu, 700);
        assert!(gb(n.host_bytes) > 32.0 && gb(n.host_bytes) < 38.0, "{n:?}");
        // Q4_0 is 18 bytes per 32 weights: about 4.5 GB, held twice while loading on the CPU.
        let n = SyntheticSpec::parse("llama3-8b-q4").unwrap().memory_need(&cpu, 700);
        assert!(gb(n.host_bytes) > 9.0 && gb(n.host_bytes) < 10.5, "{n:?}");
        assert_eq!(n.device_bytes, 0);
    }

    #[test]
    fn tiny_gguf_is_deterministic_and_well_formed() {
        let spec = SyntheticSpec::parse("tiny-q8").unwrap();
        let a = build_gguf(&spec, 7).unwrap();
        let b = build_gguf(&spec, 7).unwrap();
        let c = build_gguf(&spec, 8).unwrap();
        assert_eq!(a.bytes(), b.bytes());
        assert_ne!(a.bytes(), c.bytes());
        assert_eq!(a.bytes().len() as u64, spec.gguf_bytes());
        assert_eq!(a.architecture(), "llama");
        // Every Q8_0 block's scale is the one chosen; the norms are 1.
        let ti = &a.content.tensor_infos["blk.0.attn_q.weight"];
        let d = super::super::fast::kernels::f32_to_f16(WEIGHT_STD / 73.9).to_le_bytes();
        let data = &a.bytes()[ti.offset as usize..][..ggml_bytes(GgmlDType::Q8_0, 256 * 256) as usize];
        assert!(data.chunks_exact(34).all(|b| b[..2] == d));
        let ti = &a.content.tensor_infos["output_norm.weight"];
        assert_eq!(&a.bytes()[ti.offset as usize..][..4], &1f32.to_le_bytes());
    }
}
