//! A fast CPU implementation of the Llama, Qwen2 and Qwen3 architectures for GGUF models, tuned
//! for small models (SmolLM2-135M Q4_1, Qwen2.5-Coder-1.5B Q4_K_M) on a few cores.
//!
//! Design:
//! * Weights stay in their GGUF block format (Q4_0 / Q4_1 / Q8_0, and the K-quants Q4_K / Q5_K /
//!   Q6_K; any other format is requantized to Q8_0 at load). Q, K and V are fused into one
//!   matrix, gate and up into another (per run of parts that share a format).
//! * Decode (few tokens per call): activations are quantized to 8 bits (per block of 32 for the
//!   32-weight formats, per block of 256 with sums of 16 for the K-quants, as llama.cpp's Q8_K)
//!   and multiplied with the 4/5/6/8-bit weights by AVX2 integer dot products, row chunks spread
//!   over the thread pool.
//! * Qwen2: biases on Q, K and V, rotary embedding on the two halves of each head (NeoX style);
//!   Qwen3: no biases, an RMS norm on each query and key head before the rotation.
//! * The embedding table (and the output layer) stays in its block format: a row is dequantized
//!   when its token is looked up.
//! * Prompt processing (many tokens): activations are kept feature-major (`[features][tokens]`).
//!   The 32-weight formats: each chunk of weight rows is dequantized once to f32 and multiplied
//!   with all tokens by an FMA micro-kernel (6 rows x 16 tokens). The K-quants stay quantized
//!   (Q8_K activations): on AVX-512 VNNI CPUs with the tokens across the vector lanes
//!   ([`vnni`]: 4 rows x 32 tokens, one `vpdpbusd` per 4 weights and 16 tokens), elsewhere by
//!   the AVX2 kernels of [`kquants`]. Either way the weights are read once per prompt chunk.
//! * Attention in f32 with an f16 KV cache; only the last token's logits are computed.
//! * Several sequences at once: each has its own KV cache (a slot, `KvCache`; slot 0 is the one
//!   [`CausalLm`] uses). [`FastLlama::forward_slots`] runs a decode step of several sequences on the
//!   token-major path: the weights' products are shared by all their tokens, while RoPE position,
//!   KV store and attention are each token's own sequence's, so every token's values are bit for
//!   bit those it gets alone ([`crate::model::Sequences`], used by [`crate::batch`]).
//! * Threads: [`pool::Pool`], which parks idle workers instead of spinning forever.

#![allow(clippy::too_many_arguments, clippy::manual_is_multiple_of)]

pub mod cpu;
pub mod kernels;
pub mod kquants;
pub mod pairs;
pub mod pool;
pub mod vnni;

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::Device;

pub use crate::model::SlotRun;
use crate::model::{CausalLm, LlmError, Sequences, WeightBytes};
use kernels::{QAct, QType, QK};
use kquants::{KType, QActK, QK_K};
use pool::{Pool, SyncPtr};

/// Calls with at most this many tokens use the token-major (decode) path, unless they are prompt
/// tokens; more use the batched GEMM path.
const SMALL_T: usize = 8;
// a token-major step's K-quant products take all its tokens at once
const _: () = assert!(SMALL_T <= kquants::MAX_DOT_TOKENS);

/// Most prompt tokens run in one batched forward (see `FastLlama::forward_prompt`):
/// 128, or `KEET_PREFILL_BATCH` (for experiments). Longer batches unpack the weights less often but
/// spill the activations out of L2 (measured on the default model, 2,162-token prompt: chunk-sized
/// batches of 32 tokens 61 tok/s, 64 and 128 70-72, 512 60).
fn prefill_batch() -> usize {
    static B: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *B.get_or_init(|| std::env::var("KEET_PREFILL_BATCH").ok().and_then(|v| v.parse().ok()).filter(|&n: &usize| n > 0).unwrap_or(128))
}

fn msg(s: impl Into<String>) -> LlmError {
    LlmError::Msg(s.into())
}

/// The bytes of a weight matrix: owned (keet's layout), or a range of the model file's map used
/// in place (formats keet reads as they are stored, so the weights are never copied and the
/// model's memory is the file's pages).
enum WeightData {
    Owned(Vec<u8>),
    Mapped { map: Arc<memmap2::Mmap>, start: usize, len: usize },
}

impl std::ops::Deref for WeightData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            WeightData::Owned(v) => v,
            WeightData::Mapped { map, start, len } => &map[*start..*start + *len],
        }
    }
}

impl WeightData {
    /// `data` in place when it lies inside `owner`'s map, else a copy.
    fn from_slice(data: &[u8], owner: Option<&Arc<memmap2::Mmap>>) -> WeightData {
        if let Some(map) = owner {
            let (base, p) = (map.as_ptr() as usize, data.as_ptr() as usize);
            if p >= base && p + data.len() <= base + map.len() {
                return WeightData::Mapped { map: map.clone(), start: p - base, len: data.len() };
            }
        }
        WeightData::Owned(data.to_vec())
    }
}

/// A weight matrix of `rows` x `cols` in a GGUF block format, rows contiguous.
pub struct QMat {
    fmt: QType,
    rows: usize,
    cols: usize,
    data: WeightData,
    /// Rows stored in the 8-row interleaved layout of [`kernels::interleave_x8`].
    x8: bool,
}

impl QMat {
    fn row_bytes(&self) -> usize {
        self.fmt.row_bytes(self.cols)
    }

    /// Stacks matrices with the same format and width along the rows into one, in the 8-row
    /// interleaved layout when the row counts allow. When every part has a multiple of 8 rows,
    /// each part is interleaved straight into its place (an 8-row group never spans two parts),
    /// so each byte is copied once, from the file map into the model; otherwise the parts are
    /// stacked first and the whole interleaved after, as [`QMat::interleaved`] does.
    fn fuse(parts: &[MatSrc<'_>]) -> Result<QMat, LlmError> {
        let Some(first) = parts.first() else { return Err(msg("fast engine: no matrix to fuse")) };
        let (fmt, cols) = (first.fmt, first.cols);
        if parts.iter().any(|p| p.fmt != fmt || p.cols != cols) {
            return Err(msg("fast engine: fused matrices differ in format or width"));
        }
        let rows = parts.iter().map(|p| p.rows).sum();
        let len = parts.iter().map(|p| p.data.len()).sum();
        if !fmt.interleavable() || !parts.iter().all(|p| p.rows % 8 == 0) {
            let mut data = Vec::with_capacity(len);
            for p in parts {
                data.extend_from_slice(&p.data);
            }
            return Ok(QMat { fmt, rows, cols, data: WeightData::Owned(data), x8: false }.interleaved());
        }
        let mut data = vec![0u8; len];
        let mut off = 0;
        for p in parts {
            let n = p.data.len();
            kernels::interleave_x8_into(fmt, &p.data, p.rows, cols, &mut data[off..off + n]);
            off += n;
        }
        Ok(QMat { fmt, rows, cols, data: WeightData::Owned(data), x8: true })
    }

    /// Switches to the 8-row interleaved layout (when the row count allows it).
    fn interleaved(mut self) -> QMat {
        if !self.x8 && self.rows % 8 == 0 && self.fmt.interleavable() {
            self.data = WeightData::Owned(kernels::interleave_x8(self.fmt, &self.data, self.rows, self.cols));
            self.x8 = true;
        }
        self
    }

    /// Dequantizes row `r` into `out` (`tmp`: scratch of one row's bytes, for the interleaved layout).
    fn dequant_row(&self, r: usize, out: &mut [f32], tmp: &mut Vec<u8>) {
        let rb = self.row_bytes();
        if self.x8 {
            tmp.resize(rb, 0);
            kernels::deinterleave_row_x8(self.fmt, &self.data, r, self.cols, tmp);
            kernels::dequant_row(self.fmt, tmp, out);
        } else {
            kernels::dequant_row(self.fmt, &self.data[r * rb..(r + 1) * rb], out);
        }
    }
}

/// A weight matrix as read from the file, before [`QMat::fuse`] puts it in keet's layout: the
/// bytes are borrowed from the file map, or owned when the format had to be requantized.
struct MatSrc<'b> {
    fmt: QType,
    rows: usize,
    cols: usize,
    data: Cow<'b, [u8]>,
}

/// Matrices applied to the same input with their outputs concatenated (Q, K, V; gate, up): one
/// fused [`QMat`] per run of consecutive parts in the same format (a Q4_K_M file keeps V in
/// Q6_K beside Q and K in Q4_K).
///
/// Formats without an interleaved layout (the K-quants) are not fused: each matrix stays a part of
/// its own, used in place in the file map when `owner` holds it (the parts of one set still run
/// in one parallel pass, see [`gemv`]).
fn fuse_parts(srcs: &[MatSrc<'_>], owner: Option<&Arc<memmap2::Mmap>>) -> Result<Vec<QMat>, LlmError> {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < srcs.len() {
        let src = &srcs[i];
        if !src.fmt.interleavable() {
            if src.cols != srcs[0].cols {
                return Err(msg("fast engine: fused matrices differ in width"));
            }
            let data = WeightData::from_slice(&src.data, owner);
            parts.push(QMat { fmt: src.fmt, rows: src.rows, cols: src.cols, data, x8: false });
            i += 1;
            continue;
        }
        let j = (i + 1..srcs.len()).find(|&j| srcs[j].fmt != srcs[i].fmt).unwrap_or(srcs.len());
        parts.push(QMat::fuse(&srcs[i..j])?);
        i = j;
    }
    Ok(parts)
}

fn set_rows(parts: &[QMat]) -> usize {
    parts.iter().map(|p| p.rows).sum()
}

/// One matmul input quantized in the forms its matrices take: 8 bits per block of 32 for the
/// 32-weight formats, Q8_K (per 256, with sums of 16) for the K-quants.
#[derive(Default)]
struct Acts {
    b32: QAct,
    k: QActK,
}

impl Acts {
    /// Quantizes the vectors of length `k` in `x` for the matrices `parts`.
    fn quantize(&mut self, x: &[f32], k: usize, parts: &[QMat]) {
        if parts.iter().any(|p| p.fmt.kind().is_none()) {
            self.b32.quantize(x, k);
        }
        if parts.iter().any(|p| p.fmt.kind().is_some()) {
            self.k.quantize(x);
        }
    }
}

/// The model families this implementation runs (the GGUF `general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Llama,
    Qwen2,
    Qwen3,
}

impl Family {
    fn from_gguf(name: &str) -> Option<Family> {
        match name {
            "llama" => Some(Family::Llama),
            "qwen2" => Some(Family::Qwen2),
            "qwen3" => Some(Family::Qwen3),
            _ => None,
        }
    }
}

/// Model hyper-parameters read from the GGUF metadata.
#[derive(Clone, Debug)]
pub struct Config {
    pub n_layer: usize,
    pub dim: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub eps: f32,
    pub rope_base: f32,
    pub family: Family,
    /// Rotary embedding on the two halves of a head (NeoX, Qwen) rather than on adjacent pairs
    /// (Llama GGUFs, whose Q and K rows the converter permuted for that).
    pub rope_neox: bool,
}

impl Config {
    /// Width of the query projection (`n_head * head_dim`; Qwen3 may differ from `dim`).
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }
    pub fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    /// Rows: q (q_dim), k (kv_dim), v (kv_dim).
    wqkv: Vec<QMat>,
    /// Biases of q, k and v (Qwen2), one vector like the rows of `wqkv`.
    bqkv: Option<Vec<f32>>,
    /// RMS norm weights of each query / key head (Qwen3), `head_dim` long.
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    wo: Vec<QMat>,
    /// Rows: gate (ffn), up (ffn).
    wgu: Vec<QMat>,
    wdown: Vec<QMat>,
}

/// One layer's part of a sequence's KV cache.
#[derive(Default)]
struct LayerKv {
    /// Keys, transposed in tiles of 16 positions: `[pos / 16][kv_dim][16]`, so the scores of 16
    /// keys are one GEMM tile reading 2 KiB contiguously (per 64-dim head). Half precision,
    /// like llama.cpp's default KV cache: it halves the cache's memory traffic in decode.
    kt: Vec<u16>,
    /// Values, `[pos][kv_dim]`, half precision.
    v: Vec<u16>,
}

impl LayerKv {
    fn reserve(&mut self, kv_dim: usize, n_pos: usize) {
        let need = n_pos.div_ceil(16) * kv_dim * 16;
        if self.kt.len() < need {
            self.kt.resize(need, 0);
        }
    }

    /// Stores the (roped) key and the value of position `pos`.
    fn store_kv(&mut self, pos: usize, k: &[f32], v: &[f32]) {
        let base = pos / 16 * k.len() * 16 + pos % 16;
        for (r, kv) in k.iter().enumerate() {
            self.kt[base + r * 16] = kernels::f32_to_f16(*kv);
        }
        self.v.truncate(pos * v.len());
        self.v.extend(v.iter().map(|x| kernels::f32_to_f16(*x)));
    }
}

/// One sequence's KV cache (a slot): every layer's keys and values of positions `0..len`.
#[derive(Default)]
struct KvCache {
    layers: Vec<LayerKv>,
    len: usize,
    /// Leading cache positions computed on the batched path from position 0 on: exactly what a
    /// cold prompt computes, whatever the calls were (see [`FastLlama::forward_prompt`]).
    exact: usize,
}

impl KvCache {
    fn new(n_layer: usize) -> KvCache {
        KvCache { layers: (0..n_layer).map(|_| LayerKv::default()).collect(), len: 0, exact: 0 }
    }

    /// Keeps the first `len` positions.
    fn truncate(&mut self, len: usize, kv_dim: usize) {
        self.exact = self.exact.min(len);
        if len < self.len {
            for l in &mut self.layers {
                l.v.truncate(len * kv_dim);
            }
            self.len = len;
        }
    }
}

/// The fast llama model; see the module documentation.
pub struct FastLlama {
    cfg: Config,
    embd: QMat,
    /// `None`: tied to `embd`.
    output: Option<Vec<QMat>>,
    out_norm: Vec<f32>,
    layers: Vec<Layer>,
    /// RoPE tables `[pos][head_dim / 2]`.
    cos: Vec<f32>,
    sin: Vec<f32>,
    inv_freq: Vec<f32>,
    /// The sequences' KV caches, one per slot; slot 0 is the one [`CausalLm`]'s methods use.
    caches: Vec<KvCache>,
    pool: Pool,
    simd: bool,
    /// Prompts of more than 8 tokens with f32 activations for every format (a reference).
    f32_prompt: bool,
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Loads a `general.architecture = llama / qwen2 / qwen3` GGUF file; `threads` threads are used
/// for compute.
pub fn load_gguf(path: &Path, threads: usize) -> Result<FastLlama, LlmError> {
    FastLlama::load_gguf(path, threads)
}

impl FastLlama {
    /// Maps the file and reads it (see [`FastLlama::from_gguf`]).
    pub fn load_gguf(path: &Path, threads: usize) -> Result<FastLlama, LlmError> {
        let gguf = crate::gguf::GgufFile::open(path)?;
        FastLlama::from_gguf_mapped(&gguf.content, gguf.shared_map(), threads)
    }

    /// Builds the model from a parsed GGUF header and the whole file's bytes (a memory map):
    /// tensors are copied from `bytes` into the model, the layers in parallel.
    pub fn from_gguf(ct: &gguf_file::Content, bytes: &[u8], threads: usize) -> Result<FastLlama, LlmError> {
        FastLlama::build(ct, bytes, None, threads)
    }

    /// Like [`FastLlama::from_gguf`] on the file's map, which the model keeps: matrices stored in a
    /// format used as it is (the K-quants) stay in the map, never copied.
    pub fn from_gguf_mapped(ct: &gguf_file::Content, map: Arc<memmap2::Mmap>, threads: usize) -> Result<FastLlama, LlmError> {
        FastLlama::build(ct, &map, Some(&map), threads)
    }

    fn build(ct: &gguf_file::Content, bytes: &[u8], owner: Option<&Arc<memmap2::Mmap>>, threads: usize) -> Result<FastLlama, LlmError> {
        let ct = &GgufBytes { ct, bytes };
        let md = |k: &str| ct.ct.metadata.get(k).ok_or_else(|| msg(format!("fast engine: missing metadata {k}")));
        let arch = md("general.architecture")?.to_string()?.clone();
        let family =
            Family::from_gguf(&arch).ok_or_else(|| msg(format!("fast engine: architecture {arch} is not llama, qwen2 or qwen3")))?;
        let key = |k: &str| format!("{arch}.{k}");
        let md_usize = |k: &str| -> Result<usize, LlmError> { Ok(md(&key(k))?.to_u32()? as usize) };
        if ct.ct.metadata.get(&key("expert_count")).and_then(|v| v.to_u32().ok()).unwrap_or(0) > 1 {
            return Err(msg("fast engine: mixture-of-experts models are not supported"));
        }
        let n_head = md_usize("attention.head_count")?;
        let dim = md_usize("embedding_length")?;
        let embd_info = ct.info("token_embd.weight")?;
        let head_dim = match ct.ct.metadata.get(&key("attention.key_length")) {
            Some(v) => v.to_u32()? as usize,
            None => dim / n_head.max(1),
        };
        let cfg = Config {
            n_layer: md_usize("block_count")?,
            dim,
            n_head,
            n_kv_head: md_usize("attention.head_count_kv")?,
            head_dim,
            ffn: md_usize("feed_forward_length")?,
            vocab: embd_info.shape.dims().first().copied().unwrap_or(0),
            eps: md(&key("attention.layer_norm_rms_epsilon"))?.to_f32()?,
            rope_base: ct.ct.metadata.get(&key("rope.freq_base")).and_then(|v| v.to_f32().ok()).unwrap_or(10000.0),
            family,
            rope_neox: family != Family::Llama,
        };
        if n_head == 0
            || cfg.n_kv_head == 0
            || cfg.dim % QK != 0
            || cfg.ffn % QK != 0
            || cfg.head_dim % 16 != 0
            || cfg.head_dim > 512
            || cfg.n_head % cfg.n_kv_head != 0
        {
            return Err(msg(format!("fast engine: unsupported shapes {cfg:?}")));
        }
        if let Some(v) = ct.ct.metadata.get(&key("attention.value_length")) {
            if v.to_u32()? as usize != cfg.head_dim {
                return Err(msg("fast engine: value heads wider or narrower than key heads are not supported"));
            }
        }
        if let Ok(rd) = md_usize("rope.dimension_count") {
            if rd != cfg.head_dim {
                return Err(msg("fast engine: partial rotary embeddings are not supported"));
            }
        }
        let embd = fuse_parts(&[matrix_src(ct, "token_embd.weight")?], owner)?.remove(0);
        let output = if ct.ct.tensor_infos.contains_key("output.weight") {
            Some(fuse_parts(&[matrix_src(ct, "output.weight")?], owner)?)
        } else {
            None
        };
        let out_norm = load_vec(ct, "output_norm.weight")?;
        let has = |n: &str| ct.ct.tensor_infos.contains_key(n);
        let load_layer = |l: usize| -> Result<Layer, LlmError> {
            let p = format!("blk.{l}");
            let attn_norm = load_vec(ct, &format!("{p}.attn_norm.weight"))?;
            let ffn_norm = load_vec(ct, &format!("{p}.ffn_norm.weight"))?;
            let m = |s: &str| matrix_src(ct, &format!("{p}.{s}.weight"));
            let wqkv = fuse_parts(&[m("attn_q")?, m("attn_k")?, m("attn_v")?], owner)?;
            let wo = fuse_parts(&[m("attn_output")?], owner)?;
            let wgu = fuse_parts(&[m("ffn_gate")?, m("ffn_up")?], owner)?;
            let wdown = fuse_parts(&[m("ffn_down")?], owner)?;
            let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
            let bqkv = if has(&format!("{p}.attn_q.bias")) {
                let mut b = load_vec(ct, &format!("{p}.attn_q.bias"))?;
                b.extend(load_vec(ct, &format!("{p}.attn_k.bias"))?);
                b.extend(load_vec(ct, &format!("{p}.attn_v.bias"))?);
                if b.len() != q_dim + 2 * kv_dim {
                    return Err(msg(format!(
                        "fast engine: layer {l} has Q/K/V biases of {} values, expected {}",
                        b.len(),
                        q_dim + 2 * kv_dim
                    )));
                }
                Some(b)
            } else {
                None
            };
            let head_norm = |s: &str| -> Result<Option<Vec<f32>>, LlmError> {
                let name = format!("{p}.{s}.weight");
                if !has(&name) {
                    return Ok(None);
                }
                let v = load_vec(ct, &name)?;
                if v.len() != cfg.head_dim {
                    return Err(msg(format!("fast engine: {name} has {} values, expected {}", v.len(), cfg.head_dim)));
                }
                Ok(Some(v))
            };
            let (q_norm, k_norm) = (head_norm("attn_q_norm")?, head_norm("attn_k_norm")?);
            let cols = |parts: &[QMat]| parts.first().map_or(0, |p| p.cols);
            if set_rows(&wqkv) != q_dim + 2 * kv_dim
                || cols(&wqkv) != cfg.dim
                || set_rows(&wo) != cfg.dim
                || cols(&wo) != q_dim
                || set_rows(&wgu) != 2 * cfg.ffn
                || cols(&wgu) != cfg.dim
                || cols(&wdown) != cfg.ffn
                || set_rows(&wdown) != cfg.dim
                || attn_norm.len() != cfg.dim
                || ffn_norm.len() != cfg.dim
            {
                return Err(msg(format!("fast engine: layer {l} has unexpected shapes")));
            }
            Ok(Layer { attn_norm, ffn_norm, wqkv, bqkv, q_norm, k_norm, wo, wgu, wdown })
        };
        let layers: Vec<Layer> = {
            use rayon::prelude::*;
            (0..cfg.n_layer).into_par_iter().map(load_layer).collect::<Result<_, _>>()?
        };
        if embd.cols != cfg.dim || out_norm.len() != cfg.dim || output.as_ref().is_some_and(|o| o[0].cols != cfg.dim) {
            return Err(msg("fast engine: embedding, output norm or output layer does not match the model width"));
        }
        let half = cfg.head_dim / 2;
        let inv_freq = (0..half).map(|i| 1f32 / cfg.rope_base.powf((2 * i) as f32 / cfg.head_dim as f32)).collect();
        let caches = vec![KvCache::new(cfg.n_layer)];
        Ok(FastLlama {
            cfg,
            embd,
            output,
            out_norm,
            layers,
            cos: Vec::new(),
            sin: Vec::new(),
            inv_freq,
            caches,
            pool: Pool::new(threads.max(1)),
            simd: kernels::has_avx2(),
            f32_prompt: false,
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The weights as this implementation holds them (its block buffers and f32 norms): a decode
    /// step reads every matrix once and one row of the embedding (all of it when it is also the
    /// output layer).
    pub fn weight_bytes(&self) -> WeightBytes {
        let mut w = WeightBytes::default();
        let mut mat = |m: &QMat, per_token: u64| {
            w.params += (m.rows * m.cols) as u64;
            w.resident_bytes += m.data.len() as u64;
            w.per_token_bytes += per_token;
        };
        match &self.output {
            Some(o) => {
                mat(&self.embd, self.embd.row_bytes() as u64);
                for m in o {
                    mat(m, m.data.len() as u64);
                }
            }
            None => mat(&self.embd, self.embd.data.len() as u64),
        }
        for l in &self.layers {
            for m in [&l.wqkv, &l.wo, &l.wgu, &l.wdown].into_iter().flatten() {
                mat(m, m.data.len() as u64);
            }
        }
        let vecs = std::iter::once(&self.out_norm).chain(self.layers.iter().flat_map(|l| {
            [Some(&l.attn_norm), Some(&l.ffn_norm), l.bqkv.as_ref(), l.q_norm.as_ref(), l.k_norm.as_ref()].into_iter().flatten()
        }));
        for v in vecs {
            w.params += v.len() as u64;
            w.resident_bytes += 4 * v.len() as u64;
            w.per_token_bytes += 4 * v.len() as u64;
        }
        w
    }

    /// Runs prompts of more than 8 tokens with f32 activations for the K-quants too (rows
    /// dequantized, f32 GEMM) instead of Q8_K ones: slower, a reference for tests.
    pub fn set_f32_prompt(&mut self, on: bool) {
        self.f32_prompt = on;
    }

    /// Forces the scalar kernels (for tests and comparisons).
    pub fn set_simd(&mut self, on: bool) {
        self.simd = on && kernels::has_avx2();
    }

    fn ensure_rope(&mut self, n_pos: usize) {
        let half = self.cfg.head_dim / 2;
        let have = self.cos.len() / half;
        for pos in have..n_pos {
            for &f in &self.inv_freq {
                let a = pos as f32 * f;
                self.cos.push(a.cos());
                self.sin.push(a.sin());
            }
        }
    }

    /// Rotates every head in `x` (heads of `head_dim`) for position `pos`: pairs (2i, 2i+1), or
    /// (i, i + head_dim/2) for NeoX-style models.
    fn rope(&self, x: &mut [f32], pos: usize) {
        let half = self.cfg.head_dim / 2;
        let c = &self.cos[pos * half..(pos + 1) * half];
        let s = &self.sin[pos * half..(pos + 1) * half];
        for h in x.chunks_exact_mut(self.cfg.head_dim) {
            if self.cfg.rope_neox {
                let (lo, hi) = h.split_at_mut(half);
                for i in 0..half {
                    let (a, b) = (lo[i], hi[i]);
                    lo[i] = a * c[i] - b * s[i];
                    hi[i] = a * s[i] + b * c[i];
                }
            } else {
                for i in 0..half {
                    let (a, b) = (h[2 * i], h[2 * i + 1]);
                    h[2 * i] = a * c[i] - b * s[i];
                    h[2 * i + 1] = a * s[i] + b * c[i];
                }
            }
        }
    }

    /// One token's fused Q/K/V row as the projection left it: adds the biases, normalizes the
    /// query and key heads (Qwen3), rotates them for position `pos`.
    fn finish_qkv(&self, l: &Layer, row: &mut [f32], pos: usize) {
        if let Some(b) = &l.bqkv {
            for (v, bv) in row.iter_mut().zip(b) {
                *v += bv;
            }
        }
        let (q_dim, kv_dim, hd) = (self.cfg.q_dim(), self.cfg.kv_dim(), self.cfg.head_dim);
        let mut tmp = [0f32; 512];
        for (norm, range) in [(&l.q_norm, 0..q_dim), (&l.k_norm, q_dim..q_dim + kv_dim)] {
            if let Some(w) = norm {
                for h in row[range].chunks_exact_mut(hd) {
                    let t = &mut tmp[..hd];
                    rms_norm(h, w, self.cfg.eps, t);
                    h.copy_from_slice(t);
                }
            }
        }
        self.rope(&mut row[..q_dim + kv_dim], pos);
    }

    fn embed(&self, tok: u32, out: &mut [f32]) -> Result<(), LlmError> {
        let t = tok as usize;
        if t >= self.embd.rows {
            return Err(msg(format!("token id {t} out of range")));
        }
        self.embd.dequant_row(t, out, &mut Vec::new());
        Ok(())
    }

    /// Runs `tokens` of slot `slot` on the batched path (`batched`) or the token-major one, and
    /// returns the last token's logits.
    fn run_slot(&mut self, slot: usize, tokens: &[u32], start: usize, batched: bool) -> Result<Vec<f32>, LlmError> {
        self.run_logits(&[SlotRun { slot, tokens, start }], batched, false)
    }

    /// Runs `runs` (token-major path; one run on the batched path, `batched`) and returns the
    /// logits of each run's last token, one vocabulary-long row per run; with `each` (token-major
    /// path only), the logits after every token of every run, run after run.
    fn run_logits(&mut self, runs: &[SlotRun<'_>], batched: bool, each: bool) -> Result<Vec<f32>, LlmError> {
        let hidden = self.advance(runs, batched, each)?;
        Ok(self.logits(&hidden))
    }

    /// Generated tokens of slot `slot` (a decode step, a run of forced tokens, however long) on the
    /// token-major path, `SMALL_T` at a time, and the logits after the last. Each token's values
    /// are those it gets in any other split (one at a time, with drafts, beside other sequences),
    /// so where the tokens are cut never changes an answer; the prompt path
    /// ([`FastLlama::forward_prompt_slot`]) is for prompts alone.
    fn run_generated(&mut self, slot: usize, tokens: &[u32], start: usize) -> Result<Vec<f32>, LlmError> {
        let Some((last, before)) = split_last_chunk(tokens, SMALL_T) else {
            return self.run_slot(slot, tokens, start, false); // no tokens: run_logits says so
        };
        for (i, chunk) in before.chunks(SMALL_T).enumerate() {
            self.advance(&[SlotRun { slot, tokens: chunk, start: start + i * SMALL_T }], false, false)?;
        }
        self.run_slot(slot, last, start + before.len(), false)
    }

    /// Runs `runs` as [`FastLlama::run_logits`] does and returns the hidden states it would take
    /// the logits of (the caches advanced).
    fn advance(&mut self, runs: &[SlotRun<'_>], batched: bool, each: bool) -> Result<Vec<f32>, LlmError> {
        self.check_runs(runs, batched)?;
        let kv_dim = self.cfg.kv_dim();
        let mut end = 0;
        for run in runs {
            let cache = &mut self.caches[run.slot];
            cache.truncate(run.start, kv_dim);
            for l in &mut cache.layers {
                l.reserve(kv_dim, run.start + run.tokens.len());
            }
            end = end.max(run.start + run.tokens.len());
        }
        self.ensure_rope(end);
        let dim = self.cfg.dim;
        let hidden = if batched {
            self.forward_batch(runs[0].slot, runs[0].tokens, runs[0].start)?
        } else {
            let all = self.forward_small(runs)?;
            if each {
                all
            } else {
                let mut last_rows = Vec::with_capacity(runs.len() * dim);
                let mut token_end = 0;
                for run in runs {
                    token_end += run.tokens.len();
                    last_rows.extend_from_slice(&all[(token_end - 1) * dim..token_end * dim]);
                }
                last_rows
            }
        };
        for run in runs {
            let cache = &mut self.caches[run.slot];
            cache.len = run.start + run.tokens.len();
            if batched && cache.exact == run.start {
                cache.exact = cache.len;
            }
        }
        Ok(hidden)
    }

    /// Checks that `runs` name distinct existing slots, each with tokens that continue (or rewrite
    /// the end of) its cache; the batched path takes one run.
    fn check_runs(&self, runs: &[SlotRun<'_>], batched: bool) -> Result<(), LlmError> {
        if runs.is_empty() || (batched && runs.len() != 1) {
            return Err(msg(format!("fast llama: {} runs for the {} path", runs.len(), if batched { "batched" } else { "token-major" })));
        }
        for (i, run) in runs.iter().enumerate() {
            let Some(cache) = self.caches.get(run.slot) else {
                return Err(msg(format!("fast llama: no KV cache slot {} ({} slots)", run.slot, self.caches.len())));
            };
            if run.tokens.is_empty() {
                return Err(msg("fast llama: forward called with no tokens"));
            }
            if run.start > cache.len {
                return Err(msg(format!("fast llama: start_pos {} beyond cache length {}", run.start, cache.len)));
            }
            if runs[..i].iter().any(|other| other.slot == run.slot) {
                return Err(msg(format!("fast llama: slot {} appears twice in one step", run.slot)));
            }
        }
        Ok(())
    }

    /// Final norm and output projection of each hidden state in `hidden` (rows of `dim`), the
    /// same per row whatever the others are.
    fn logits(&self, hidden: &[f32]) -> Vec<f32> {
        let dim = self.cfg.dim;
        let rows = hidden.len() / dim;
        let mut xn = vec![0f32; hidden.len()];
        for (h, n) in hidden.chunks_exact(dim).zip(xn.chunks_exact_mut(dim)) {
            rms_norm(h, &self.out_norm, self.cfg.eps, n);
        }
        let out = self.output_parts();
        let mut acts = Acts::default();
        acts.quantize(&xn, dim, out);
        let mut logits = vec![0f32; rows * set_rows(out)];
        gemv(&self.pool, out, &acts, rows, &mut logits, self.simd);
        logits
    }

    /// The output layer's matrices (the embedding table when tied).
    fn output_parts(&self) -> &[QMat] {
        self.output.as_deref().unwrap_or(std::slice::from_ref(&self.embd))
    }

    fn truncate(&mut self, len: usize) {
        let kv_dim = self.cfg.kv_dim();
        self.caches[0].truncate(len, kv_dim);
    }

    /// Token-major path for a few tokens (decode) of one or more sequences: `runs` name distinct
    /// slots, their caches reserved. Returns every token's hidden state, token after token, run
    /// after run; each token's arithmetic is the same whether it runs alone or with others (the
    /// weights' products are per token; RoPE, the KV store and attention use its own sequence's
    /// position and cache).
    fn forward_small(&mut self, runs: &[SlotRun<'_>]) -> Result<Vec<f32>, LlmError> {
        let c = self.cfg.clone();
        // (slot, position) of each token
        let at: Vec<(usize, usize)> = runs.iter().flat_map(|run| (0..run.tokens.len()).map(move |i| (run.slot, run.start + i))).collect();
        let t_n = at.len();
        let (qd, kv_dim) = (c.q_dim(), c.kv_dim());
        let nqkv = qd + 2 * kv_dim;
        let mut x = vec![0f32; t_n * c.dim];
        for (t, &tok) in runs.iter().flat_map(|run| run.tokens).enumerate() {
            self.embed(tok, &mut x[t * c.dim..(t + 1) * c.dim])?;
        }
        let mut xn = vec![0f32; t_n * c.dim];
        let mut qkv = vec![0f32; t_n * nqkv];
        let mut q = vec![0f32; t_n * qd];
        let mut att = vec![0f32; t_n * qd];
        let mut o = vec![0f32; t_n * c.dim];
        let mut gu = vec![0f32; t_n * 2 * c.ffn];
        let mut h = vec![0f32; t_n * c.ffn];
        let mut acts = Acts::default();
        for li in 0..c.n_layer {
            let l = &self.layers[li];
            for t in 0..t_n {
                rms_norm(&x[t * c.dim..(t + 1) * c.dim], &l.attn_norm, c.eps, &mut xn[t * c.dim..(t + 1) * c.dim]);
            }
            acts.quantize(&xn, c.dim, &l.wqkv);
            gemv(&self.pool, &l.wqkv, &acts, t_n, &mut qkv, self.simd);
            for (t, &(slot, pos)) in at.iter().enumerate() {
                let row = &mut qkv[t * nqkv..(t + 1) * nqkv];
                self.finish_qkv(&self.layers[li], row, pos);
                q[t * qd..(t + 1) * qd].copy_from_slice(&row[..qd]);
                self.caches[slot].layers[li].store_kv(pos, &row[qd..qd + kv_dim], &row[qd + kv_dim..]);
            }
            self.attend_small(runs, li, &q, &mut att);
            let l = &self.layers[li];
            acts.quantize(&att, qd, &l.wo);
            gemv(&self.pool, &l.wo, &acts, t_n, &mut o, self.simd);
            for (xv, ov) in x.iter_mut().zip(&o) {
                *xv += ov;
            }
            for t in 0..t_n {
                rms_norm(&x[t * c.dim..(t + 1) * c.dim], &l.ffn_norm, c.eps, &mut xn[t * c.dim..(t + 1) * c.dim]);
            }
            acts.quantize(&xn, c.dim, &l.wgu);
            gemv(&self.pool, &l.wgu, &acts, t_n, &mut gu, self.simd);
            for t in 0..t_n {
                let (g, u) = gu[t * 2 * c.ffn..(t + 1) * 2 * c.ffn].split_at_mut(c.ffn);
                kernels::silu_mul(g, u, self.simd);
                h[t * c.ffn..(t + 1) * c.ffn].copy_from_slice(g);
            }
            acts.quantize(&h, c.ffn, &l.wdown);
            gemv(&self.pool, &l.wdown, &acts, t_n, &mut o, self.simd);
            for (xv, ov) in x.iter_mut().zip(&o) {
                *xv += ov;
            }
        }
        Ok(x)
    }

    /// Attention of layer `li` for the token-major path: the queries `q` of every token of `runs`
    /// (token after token, run after run) against their own sequences' caches, into `att`.
    fn attend_small(&self, runs: &[SlotRun<'_>], li: usize, q: &[f32], att: &mut [f32]) {
        let c = &self.cfg;
        if c.n_head / c.n_kv_head <= 6 {
            let kv: Vec<(&LayerKv, usize)> = runs
                .iter()
                .flat_map(|run| (0..run.tokens.len()).map(move |i| (&self.caches[run.slot].layers[li], run.start + i)))
                .collect();
            attention_gqa(&self.pool, c, &kv, q, att, self.simd);
        } else {
            let qd = c.q_dim();
            let mut t0 = 0;
            for run in runs {
                let t_n = run.tokens.len();
                let kv = &self.caches[run.slot].layers[li];
                attention(&self.pool, c, kv, &q[t0 * qd..], t_n, run.start, &mut att[t0 * qd..], self.simd);
                t0 += t_n;
            }
        }
    }

    /// Feature-major path for many tokens (prompt) of slot `slot`. Returns the last token's hidden state.
    fn forward_batch(&mut self, slot: usize, tokens: &[u32], start: usize) -> Result<Vec<f32>, LlmError> {
        let c = self.cfg.clone();
        let t_n = tokens.len();
        let tp = t_n.div_ceil(16) * 16;
        let (qd, kv_dim) = (c.q_dim(), c.kv_dim());
        let nqkv = qd + 2 * kv_dim;
        // residual stream, [dim][tp]
        let mut xt = vec![0f32; c.dim * tp];
        {
            let mut e = vec![0f32; c.dim];
            for (t, &tok) in tokens.iter().enumerate() {
                self.embed(tok, &mut e)?;
                for (i, v) in e.iter().enumerate() {
                    xt[i * tp + t] = *v;
                }
            }
        }
        let mut xnt = vec![0f32; c.dim * tp];
        let mut qkvt = vec![0f32; nqkv * tp];
        let mut q = vec![0f32; t_n * qd];
        let mut att = vec![0f32; t_n * qd];
        let mut att_t = vec![0f32; qd * tp];
        let mut ot = vec![0f32; c.dim * tp];
        let mut gut = vec![0f32; 2 * c.ffn * tp];
        let mut qkv_row = vec![0f32; nqkv];
        for li in 0..c.n_layer {
            let l = &self.layers[li];
            rms_norm_t(&xt, &l.attn_norm, c.eps, t_n, tp, &mut xnt);
            gemm(&self.pool, &l.wqkv, &xnt, t_n, tp, &mut qkvt, self.simd, self.f32_prompt);
            for t in 0..t_n {
                for (i, v) in qkv_row.iter_mut().enumerate() {
                    *v = qkvt[i * tp + t];
                }
                self.finish_qkv(&self.layers[li], &mut qkv_row, start + t);
                q[t * qd..(t + 1) * qd].copy_from_slice(&qkv_row[..qd]);
                self.caches[slot].layers[li].store_kv(start + t, &qkv_row[qd..qd + kv_dim], &qkv_row[qd + kv_dim..]);
            }
            attention(&self.pool, &c, &self.caches[slot].layers[li], &q, t_n, start, &mut att, self.simd);
            let l = &self.layers[li];
            for t in 0..t_n {
                for i in 0..qd {
                    att_t[i * tp + t] = att[t * qd + i];
                }
            }
            gemm(&self.pool, &l.wo, &att_t, t_n, tp, &mut ot, self.simd, self.f32_prompt);
            for (xv, ov) in xt.iter_mut().zip(&ot) {
                *xv += ov;
            }
            rms_norm_t(&xt, &l.ffn_norm, c.eps, t_n, tp, &mut xnt);
            gemm(&self.pool, &l.wgu, &xnt, t_n, tp, &mut gut, self.simd, self.f32_prompt);
            {
                let (g, u) = gut.split_at_mut(c.ffn * tp);
                silu_mul_par(&self.pool, g, u, self.simd);
            }
            gemm(&self.pool, &l.wdown, &gut[..c.ffn * tp], t_n, tp, &mut ot, self.simd, self.f32_prompt);
            for (xv, ov) in xt.iter_mut().zip(&ot) {
                *xv += ov;
            }
        }
        Ok((0..c.dim).map(|i| xt[i * tp + t_n - 1]).collect())
    }
}

impl FastLlama {
    /// Runs prompt tokens on the batched path, in batches of up to `prefill_batch()` tokens. Its
    /// arithmetic is the same for every token whatever the batch holds (tokens lie in their own
    /// vector lanes, activations are quantized per token, and attention reads only each query's own
    /// keys), so a prompt's KV values and logits never depend on how it was split across calls: a
    /// prefix reused at any position gives exactly what a cold run computes.
    pub fn forward_prompt(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        self.forward_prompt_slot(0, tokens, start_pos)
    }

    /// [`FastLlama::forward_prompt`] on slot `slot`'s KV cache.
    pub fn forward_prompt_slot(&mut self, slot: usize, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        let batch = prefill_batch().max(2 * (SMALL_T + 1));
        let (mut pos, mut i, mut last) = (start_pos, 0, None);
        while i < tokens.len() {
            let rest = tokens.len() - i;
            let mut n = rest.min(batch);
            // no short last batch: those few tokens would pay for a whole tile of weights
            if (1..=SMALL_T).contains(&(rest - n)) {
                n = rest - (SMALL_T + 1);
            }
            last = Some(self.run_slot(slot, &tokens[i..i + n], pos, true)?);
            pos += n;
            i += n;
        }
        last.ok_or_else(|| LlmError::Msg("forward called with no tokens".into()))
    }

    /// Makes room for at least `n` sequences (slots `0..n`; slot 0 is [`CausalLm`]'s). Caches grow
    /// as their sequences do: an unused slot costs nothing.
    pub fn ensure_slots(&mut self, n: usize) {
        while self.caches.len() < n {
            self.caches.push(KvCache::new(self.cfg.n_layer));
        }
    }

    /// Positions held in slot `slot`'s cache (0 for a slot that does not exist yet).
    pub fn slot_len(&self, slot: usize) -> usize {
        self.caches.get(slot).map_or(0, |c| c.len)
    }

    /// Keeps the first `len` positions of slot `slot`'s cache.
    pub fn truncate_slot(&mut self, slot: usize, len: usize) {
        let kv_dim = self.cfg.kv_dim();
        if let Some(cache) = self.caches.get_mut(slot) {
            cache.truncate(len, kv_dim);
        }
    }

    /// [`CausalLm::reusable_prefix`] of slot `slot`: its positions computed on the prompt path.
    pub fn reusable_prefix_slot(&self, slot: usize, common: usize) -> usize {
        common.min(self.caches.get(slot).map_or(0, |c| c.exact))
    }

    /// One decode step of several sequences: each run's tokens appended to its slot's cache on the
    /// token-major path, the weights' products shared by all tokens (chunks of at most
    /// `SMALL_T` (8) tokens, the most the multi-token K-quant kernels take; a run may straddle two
    /// chunks). Each token's values are bit for bit those of [`CausalLm::forward`] on its sequence
    /// alone, a run of up to `SMALL_T` tokens at a time. Returns the logits after each run's last
    /// token, in the order of `runs`.
    pub fn forward_slots(&mut self, runs: &[SlotRun<'_>]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.check_runs(runs, false)?;
        let vocab = set_rows(self.output_parts());
        let mut last = vec![Vec::new(); runs.len()];
        for chunk in step_chunks(runs, SMALL_T) {
            let parts: Vec<SlotRun<'_>> = chunk.iter().map(|&(_, part)| part).collect();
            let logits = self.run_logits(&parts, false, false)?;
            for (&(ri, part), row) in chunk.iter().zip(logits.chunks_exact(vocab)) {
                if part.start + part.tokens.len() == runs[ri].start + runs[ri].tokens.len() {
                    last[ri] = row.to_vec();
                }
            }
        }
        Ok(last)
    }
}

/// `runs` cut into chunks of at most `max` tokens, in order, each part tagged with its run's index.
fn step_chunks<'a>(runs: &[SlotRun<'a>], max: usize) -> Vec<Vec<(usize, SlotRun<'a>)>> {
    let mut chunks = vec![Vec::new()];
    let mut room = max;
    for (ri, run) in runs.iter().enumerate() {
        let mut done = 0;
        while done < run.tokens.len() {
            if room == 0 {
                chunks.push(Vec::new());
                room = max;
            }
            let n = room.min(run.tokens.len() - done);
            let part = SlotRun { slot: run.slot, tokens: &run.tokens[done..done + n], start: run.start + done };
            chunks.last_mut().expect("a chunk").push((ri, part));
            done += n;
            room -= n;
        }
    }
    chunks
}

/// `tokens` as (the last chunk of at most `chunk` tokens, what comes before it), the chunks
/// aligned to the start; `None` when there are no tokens.
fn split_last_chunk(tokens: &[u32], chunk: usize) -> Option<(&[u32], &[u32])> {
    if tokens.is_empty() {
        return None;
    }
    let before = (tokens.len() - 1) / chunk * chunk;
    Some((&tokens[before..], &tokens[..before]))
}

impl CausalLm for FastLlama {
    /// Generated tokens (a decode step, a run of forced tokens) on the token-major path, in
    /// chunks of `SMALL_T`: their values do not depend on the split ([`FastLlama::run_generated`]).
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        self.run_generated(0, tokens, start_pos)
    }
    fn forward_prompt(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        FastLlama::forward_prompt(self, tokens, start_pos)
    }
    fn reusable_prefix(&self, common: usize) -> usize {
        self.reusable_prefix_slot(0, common)
    }
    fn reuse_granularity(&self) -> usize {
        1
    }
    fn max_lookahead(&self) -> usize {
        SMALL_T
    }
    fn forward_each(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>, LlmError> {
        if tokens.len() > SMALL_T {
            return Err(msg(format!("fast llama: forward_each takes at most {SMALL_T} tokens, got {}", tokens.len())));
        }
        let vocab = set_rows(self.output_parts());
        let logits = self.run_logits(&[SlotRun { slot: 0, tokens, start: start_pos }], false, true)?;
        Ok(logits.chunks_exact(vocab).map(<[f32]>::to_vec).collect())
    }
    fn truncate_cache(&mut self, len: usize) {
        self.truncate(len);
    }
    fn cache_len(&self) -> usize {
        self.slot_len(0)
    }
    fn vocab_size(&self) -> usize {
        set_rows(self.output_parts())
    }
    fn weight_bytes(&self) -> Option<WeightBytes> {
        Some(FastLlama::weight_bytes(self))
    }
    fn sequences(&mut self) -> Option<&mut dyn Sequences> {
        Some(self)
    }
}

impl Sequences for FastLlama {
    fn ensure_slots(&mut self, n: usize) {
        FastLlama::ensure_slots(self, n);
    }
    fn slot_len(&self, slot: usize) -> usize {
        FastLlama::slot_len(self, slot)
    }
    fn truncate_slot(&mut self, slot: usize, len: usize) {
        FastLlama::truncate_slot(self, slot, len);
    }
    fn reusable_prefix_slot(&self, slot: usize, common: usize) -> usize {
        FastLlama::reusable_prefix_slot(self, slot, common)
    }
    fn forward_slot(&mut self, slot: usize, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        self.run_generated(slot, tokens, start_pos)
    }
    fn forward_prompt_slot(&mut self, slot: usize, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        FastLlama::forward_prompt_slot(self, slot, tokens, start_pos)
    }
    fn max_step_tokens(&self) -> usize {
        SMALL_T
    }
    fn forward_step(&mut self, runs: &[SlotRun<'_>]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.forward_slots(runs)
    }
}

/// A parsed GGUF header with the file's bytes (memory-mapped).
struct GgufBytes<'a> {
    ct: &'a gguf_file::Content,
    bytes: &'a [u8],
}

impl<'a> GgufBytes<'a> {
    fn info(&self, name: &str) -> Result<&'a gguf_file::TensorInfo, LlmError> {
        self.ct.tensor_infos.get(name).ok_or_else(|| msg(format!("fast engine: missing tensor {name}")))
    }

    /// The `len` bytes of tensor `name`'s data, checked against the file.
    fn data(&self, name: &str, info: &gguf_file::TensorInfo, len: usize) -> Result<&'a [u8], LlmError> {
        let start = self.ct.tensor_data_offset.checked_add(info.offset).and_then(|s| usize::try_from(s).ok());
        start.and_then(|s| self.bytes.get(s..s.checked_add(len)?)).ok_or_else(|| {
            msg(format!(
                "read tensor {name}: its {len} bytes at byte offset {} run past the end of the file ({} bytes; truncated?)",
                self.ct.tensor_data_offset.saturating_add(info.offset),
                self.bytes.len()
            ))
        })
    }

    /// The tensor as candle reads it (for formats keet does not keep as they are).
    fn tensor(&self, name: &str) -> Result<candle_core::quantized::QTensor, LlmError> {
        Ok(self.ct.tensor(&mut std::io::Cursor::new(self.bytes), name, &Device::Cpu)?)
    }
}

fn load_vec(ct: &GgufBytes<'_>, name: &str) -> Result<Vec<f32>, LlmError> {
    let info = ct.info(name)?;
    if info.ggml_dtype == GgmlDType::F32 {
        let n = info.shape.elem_count();
        let data = ct.data(name, info, n * 4)?;
        return Ok(data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect());
    }
    let t = ct.tensor(name)?.dequantize(&Device::Cpu)?;
    Ok(t.flatten_all()?.to_vec1::<f32>()?)
}

/// A 2-D tensor's bytes: Q4_0/Q4_1/Q8_0 and Q4_K/Q5_K/Q6_K borrowed from the file map as they
/// are, other formats requantized to Q8_0.
fn matrix_src<'b>(ct: &GgufBytes<'b>, name: &str) -> Result<MatSrc<'b>, LlmError> {
    let info = ct.info(name)?;
    let dims = info.shape.dims();
    let fmt = match info.ggml_dtype {
        GgmlDType::Q4_0 => Some(QType::Q4_0),
        GgmlDType::Q4_1 => Some(QType::Q4_1),
        GgmlDType::Q8_0 => Some(QType::Q8_0),
        GgmlDType::Q4K => Some(QType::Q4K),
        GgmlDType::Q5K => Some(QType::Q5K),
        GgmlDType::Q6K => Some(QType::Q6K),
        _ => None,
    };
    let block = fmt.map_or(QK, QType::block_elems);
    if dims.len() != 2 || dims[1] % block != 0 || dims[1] % QK != 0 {
        return Err(msg(format!("fast engine: tensor {name} has unsupported shape {dims:?} for {:?}", info.ggml_dtype)));
    }
    let (rows, cols) = (dims[0], dims[1]);
    if let Some(fmt) = fmt {
        let data = ct.data(name, info, rows * fmt.row_bytes(cols))?;
        return Ok(MatSrc { fmt, rows, cols, data: Cow::Borrowed(data) });
    }
    let t = ct.tensor(name)?.dequantize(&Device::Cpu)?;
    let v = t.flatten_all()?.to_vec1::<f32>()?;
    Ok(MatSrc { fmt: QType::Q8_0, rows, cols, data: Cow::Owned(quantize_q8_0(&v)) })
}

/// f32 -> GGUF Q8_0 blocks (round to nearest; scale stored as f16).
fn quantize_q8_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / QK * 34);
    for b in x.chunks_exact(QK) {
        let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let dh = kernels::f32_to_f16(amax / 127.0);
        let d = kernels::f16_to_f32(dh);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&dh.to_le_bytes());
        out.extend(b.iter().map(|v| (v * id).round().clamp(-127.0, 127.0) as i8 as u8));
    }
    out
}

fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let ss: f32 = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let r = 1.0 / (ss + eps).sqrt();
    for ((o, v), wv) in out.iter_mut().zip(x).zip(w) {
        *o = v * r * wv;
    }
}

/// RMS norm of the first `t_n` columns of a feature-major `[dim][tp]` matrix.
fn rms_norm_t(xt: &[f32], w: &[f32], eps: f32, t_n: usize, tp: usize, out: &mut [f32]) {
    let dim = w.len();
    let mut ss = vec![0f32; tp];
    for i in 0..dim {
        for (s, v) in ss.iter_mut().zip(&xt[i * tp..(i + 1) * tp]) {
            *s += v * v;
        }
    }
    for (t, s) in ss.iter_mut().enumerate() {
        *s = if t < t_n { 1.0 / (*s / dim as f32 + eps).sqrt() } else { 0.0 };
    }
    for i in 0..dim {
        let wv = w[i];
        for ((o, v), s) in out[i * tp..(i + 1) * tp].iter_mut().zip(&xt[i * tp..(i + 1) * tp]).zip(&ss) {
            *o = v * s * wv;
        }
    }
}

fn silu_mul_par(pool: &Pool, g: &mut [f32], u: &[f32], simd: bool) {
    let n = g.len();
    let chunk = 4096;
    let gp = SyncPtr::new(g);
    pool.run(n.div_ceil(chunk), &|c| {
        let a = c * chunk;
        let len = chunk.min(n - a);
        // SAFETY: chunk `c` owns the disjoint range a..a+len of `g`, which outlives the run.
        let gs = unsafe { gp.slice(a, len) };
        kernels::silu_mul(gs, &u[a..a + len], simd);
    });
}

/// Rows per parallel chunk: about 8 chunks per thread, a multiple of `align`, at least `min`.
fn chunk_rows(rows: usize, threads: usize, align: usize, min: usize, max: usize) -> usize {
    let target = rows / (threads * 8).max(1);
    (target / align * align).clamp(min, max)
}

/// `out[t][r] = w[r] · x[t]` for the `t_n` quantized activation vectors in `acts`, `w` being the
/// rows of `parts` one after another. One parallel run over row chunks of every part.
fn gemv(pool: &Pool, parts: &[QMat], acts: &Acts, t_n: usize, out: &mut [f32], simd: bool) {
    let n = set_rows(parts);
    let k = parts.first().map_or(0, |p| p.cols);
    let (nb, nbk) = (k / QK, k / QK_K);
    assert!(out.len() >= t_n * n && parts.iter().all(|p| p.cols == k));
    // (part, first row, end row, row offset of the part in the output)
    let mut chunks = Vec::new();
    let mut off = 0;
    for (pi, p) in parts.iter().enumerate() {
        let cr = chunk_rows(p.rows, pool.threads(), 16, 16, 256);
        for r0 in (0..p.rows).step_by(cr) {
            chunks.push((pi, r0, (r0 + cr).min(p.rows), off));
        }
        off += p.rows;
    }
    let op = SyncPtr::new(out);
    pool.run(chunks.len(), &|ci| {
        let (pi, r0, r1, off) = chunks[ci];
        let w = &parts[pi];
        let rb = w.row_bytes();
        // A few tokens of a K-quant matrix: each block unpacked once for all of them, each token's
        // result bit for bit what it gets alone.
        if let (Some(kind), 2..=kquants::MAX_DOT_TOKENS) = (w.fmt.kind(), t_n) {
            let a = &acts.k;
            let rows = r1 - r0;
            let mut tmp = [0f32; 256 * kquants::MAX_DOT_TOKENS];
            let tmp = &mut tmp[..rows * t_n];
            kquants::dot_rows_tokens(kind, &w.data[r0 * rb..r1 * rb], rows, k, &a.qs, &a.d, &a.bsums, t_n, tmp, rows, simd);
            for (t, res) in tmp.chunks_exact(rows).enumerate() {
                // SAFETY: chunk `ci` writes only rows off+r0..off+r1 of each token; chunks are
                // disjoint and `out` (t_n * n long, checked above) outlives the run.
                unsafe { op.slice(t * n + off + r0, rows) }.copy_from_slice(res);
            }
            return;
        }
        for t in 0..t_n {
            // SAFETY: chunk `ci` writes only rows off+r0..off+r1 of token t; chunks are disjoint
            // and `out` (t_n * n long, checked above) outlives the run.
            let o = unsafe { op.slice(t * n + off + r0, r1 - r0) };
            let wd = &w.data[r0 * rb..r1 * rb];
            match w.fmt.kind() {
                Some(kind) => {
                    let a = &acts.k;
                    let (qs, d, bsums) =
                        (&a.qs[t * k..(t + 1) * k], &a.d[t * nbk..(t + 1) * nbk], &a.bsums[t * nbk * 16..(t + 1) * nbk * 16]);
                    kquants::dot_rows(kind, wd, k, qs, d, bsums, o, simd);
                }
                None => {
                    let a = &acts.b32;
                    let f = if w.x8 { kernels::dot_rows_x8 } else { kernels::dot_rows };
                    f(w.fmt, wd, k, &a.qs[t * k..(t + 1) * k], &a.d[t * nb..(t + 1) * nb], &a.s[t * nb..(t + 1) * nb], o, simd);
                }
            }
        }
    });
}

/// Feature-major GEMM over `parts` (output rows one after another, `out[r][t]`, `tp` columns of
/// which the first `t_n` are tokens): the 32-weight formats by [`gemm_one`] (rows dequantized to
/// f32, FMA micro-kernel); the K-quants in quantized form ([`kquants::gemm_rows`] on Q8_K
/// activations), all their row chunks in one parallel run.
///
/// `f32_acts`: every format through [`gemm_one`] (f32 activations; a reference for tests).
fn gemm(pool: &Pool, parts: &[QMat], xt: &[f32], t_n: usize, tp: usize, out: &mut [f32], simd: bool, f32_acts: bool) {
    let k = parts.first().map_or(0, |p| p.cols);
    assert!(out.len() >= set_rows(parts) * tp && xt.len() >= k * tp);
    let mut off = 0;
    let mut chunks = Vec::new();
    for (pi, p) in parts.iter().enumerate() {
        if p.fmt.kind().is_none() || f32_acts {
            gemm_one(pool, p, xt, tp, &mut out[off * tp..], simd);
        } else {
            let cr = chunk_rows(p.rows, pool.threads(), 1, 4, 64);
            for r0 in (0..p.rows).step_by(cr) {
                chunks.push((pi, r0, (r0 + cr).min(p.rows), off));
            }
        }
        off += p.rows;
    }
    if chunks.is_empty() {
        return;
    }
    // token-major activations, quantized to Q8_K: one task per 16 tokens (gather their columns a
    // cache line of `xt` at a time, quantize their blocks), the same values as quantizing the
    // transposed matrix at once
    let mut acts = QActK::default();
    acts.resize(t_n * k);
    {
        const GROUP: usize = 16;
        let nb = k / QK_K;
        let (qs, d, bsums) = (SyncPtr::new(&mut acts.qs), SyncPtr::new(&mut acts.d), SyncPtr::new(&mut acts.bsums));
        pool.run(t_n.div_ceil(GROUP), &|task| {
            let (t0, t1) = (task * GROUP, (task * GROUP + GROUP).min(t_n));
            let mut columns = vec![0f32; (t1 - t0) * k];
            for (kk, line) in xt.chunks_exact(tp).take(k).enumerate() {
                for (i, v) in line[t0..t1].iter().enumerate() {
                    columns[i * k + kk] = *v;
                }
            }
            for (i, column) in columns.chunks_exact(k).enumerate() {
                let t = t0 + i;
                // SAFETY: this task alone writes tokens t0..t1's values, blocks and sums (disjoint
                // ranges, in bounds of the sizes `resize` gave); the vectors outlive the run.
                let (qs, d, bsums) = unsafe { (qs.slice(t * k, k), d.slice(t * nb, nb), bsums.slice(t * nb * 16, nb * 16)) };
                for (b, xs) in column.chunks_exact(QK_K).enumerate() {
                    d[b] = kquants::quantize_block(xs, &mut qs[b * QK_K..(b + 1) * QK_K], &mut bsums[b * 16..(b + 1) * 16]);
                }
            }
        });
    }
    // the activations interleaved by tiles of 16 tokens (once for all rows): four bytes at a time
    // for the AVX-512 VNNI kernel, else two at a time for the AVX2 Q4_K kernel
    let tiles = (simd && vnni::available()).then(|| vnni::TokenTiles::build(&acts, t_n, k / QK_K));
    let pair_tiles = (simd && tiles.is_none() && pairs::available() && parts.iter().any(|p| p.fmt.kind() == Some(KType::Q4K)))
        .then(|| pairs::PairTiles::build(&acts, t_n, k / QK_K));
    let op = SyncPtr::new(out);
    pool.run(chunks.len(), &|ci| {
        let (pi, r0, r1, off) = chunks[ci];
        let w = &parts[pi];
        let rb = w.row_bytes();
        let kind = w.fmt.kind().expect("K-quant chunk");
        // SAFETY: chunk `ci` owns output rows off+r0..off+r1 (all tp columns), disjoint from the
        // other chunks and in bounds (asserted above); `out` outlives the run.
        let o = unsafe { op.slice((off + r0) * tp, (r1 - r0) * tp) };
        let wd = &w.data[r0 * rb..r1 * rb];
        match (&tiles, &pair_tiles) {
            (Some(tiles), _) => vnni::gemm_rows(kind, wd, r1 - r0, k, tiles, o, tp),
            (None, Some(pair_tiles)) if kind == KType::Q4K => pairs::gemm_rows_q4k(wd, r1 - r0, k, pair_tiles, o, tp),
            _ => kquants::gemm_rows(kind, wd, r1 - r0, k, &acts, t_n, o, tp, simd),
        }
        for row in o.chunks_exact_mut(tp) {
            row[t_n..].fill(0.0);
        }
    });
}

/// Feature-major GEMM: `out[r][t] = Σ_k w[r][k] * xt[k][t]` for all `tp` columns.
fn gemm_one(pool: &Pool, w: &QMat, xt: &[f32], tp: usize, out: &mut [f32], simd: bool) {
    let (n, k) = (w.rows, w.cols);
    assert!(xt.len() >= k * tp && out.len() >= n * tp && tp % 16 == 0);
    let cr = chunk_rows(n, pool.threads(), 6, 6, 48);
    // Repack the activations tile-major, `[tp / 16][k][16]`, so the micro-kernel streams each
    // 16-token tile contiguously instead of striding through `xt` (a strided walk stalls on loads).
    let mut packed = Vec::with_capacity(k * tp);
    for t0 in (0..tp).step_by(16) {
        for kk in 0..k {
            packed.extend_from_slice(&xt[kk * tp + t0..kk * tp + t0 + 16]);
        }
    }
    let op = SyncPtr::new(out);
    pool.run(n.div_ceil(cr), &|ci| {
        let r0 = ci * cr;
        let r1 = (r0 + cr).min(n);
        let nr = r1 - r0;
        // SAFETY: chunk `ci` owns rows r0..r1 of `out` (n * tp long, asserted), disjoint from the
        // other chunks; `out` outlives the run.
        let o = unsafe { op.slice(r0 * tp, nr * tp) };
        SCRATCH.with(|s| {
            let mut buf = s.borrow_mut();
            buf.resize(nr * k, 0.0);
            let mut tmp = Vec::new();
            for r in 0..nr {
                w.dequant_row(r0 + r, &mut buf[r * k..(r + 1) * k], &mut tmp);
            }
            for t0 in (0..tp).step_by(16) {
                for g in (0..nr).step_by(6) {
                    let mr = (nr - g).min(6);
                    kernels::gemm_tile(&buf[g * k..(g + mr) * k], k, mr, k, &packed[t0 * k..], 16, &mut o[g * tp + t0..], tp, simd);
                }
            }
        });
    });
}

thread_local! {
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Attention scores `S = Q Kᵀ` of `rows` (≤ 6) query rows of one head, `ldq` apart, against the
/// first `n_keys` keys of KV head `g` (keys transposed in 16-key tiles in `kt`): `sc[i][j]` for
/// `j < n_keys` rounded up to 16. Key tiles go two at a time where two remain.
#[allow(clippy::too_many_arguments)]
fn scores(
    q: &[f32],
    ldq: usize,
    rows: usize,
    hd: usize,
    kt: &[u16],
    kv_dim: usize,
    g: usize,
    n_keys: usize,
    sc: &mut [f32],
    ldc: usize,
    simd: bool,
) {
    let mut j0 = 0;
    while j0 < n_keys {
        let tile = &kt[(j0 / 16 * kv_dim + g * hd) * 16..];
        if j0 + 16 < n_keys {
            kernels::gemm_tile2_h(q, ldq, rows, hd, tile, kv_dim * 16, 16, &mut sc[j0..], ldc, simd);
            j0 += 32;
        } else {
            kernels::gemm_tile_h(q, ldq, rows, hd, tile, 16, &mut sc[j0..], ldc, simd);
            j0 += 16;
        }
    }
}

/// Softmax in place of the first `n_valid` scores of `row` after scaling them by `scale`; the
/// rest of the row (masked or padding) becomes 0.
fn softmax_row(row: &mut [f32], n_valid: usize, scale: f32, simd: bool) {
    let (valid, masked) = row.split_at_mut(n_valid);
    let max = kernels::scale_max(valid, scale, simd);
    let inv = 1.0 / kernels::exp_sub_sum(valid, max, simd);
    for x in valid.iter_mut() {
        *x *= inv;
    }
    masked.fill(0.0);
}

/// `O = P V` for `rows` rows of probabilities `p` (`ldp` apart, over `n_keys` keys) and the values
/// of KV head `g`: `emit(row, first column, values)` for each row and run of 16 or 32 columns of
/// the head (32 where two 16-column tiles remain).
#[allow(clippy::too_many_arguments)]
fn weighted_values(
    p: &[f32],
    ldp: usize,
    rows: usize,
    n_keys: usize,
    hd: usize,
    v: &[u16],
    kv_dim: usize,
    g: usize,
    simd: bool,
    emit: &mut dyn FnMut(usize, usize, &[f32]),
) {
    let mut tile = [0f32; 6 * 32];
    let mut d0 = 0;
    while d0 < hd {
        let width = if d0 + 32 <= hd { 32 } else { 16 };
        if width == 32 {
            kernels::gemm_tile2_h(p, ldp, rows, n_keys, &v[g * hd + d0..], 16, kv_dim, &mut tile, 32, simd);
        } else {
            kernels::gemm_tile_h(p, ldp, rows, n_keys, &v[g * hd + d0..], kv_dim, &mut tile, 32, simd);
        }
        for i in 0..rows {
            emit(i, d0, &tile[i * 32..i * 32 + width]);
        }
        d0 += width;
    }
}

/// Causal attention of `t_n` query rows `q` (`[t][n_head * head_dim]`, positions `start..`)
/// against the layer's KV cache (which already holds these positions). Output like `q`.
///
/// One task per (head, tile of up to 6 queries): scores `S = Q Kᵀ` and `O = P V` both run on the
/// GEMM micro-kernel (keys transposed in the cache, 16 keys per tile).
#[allow(clippy::too_many_arguments)]
fn attention(pool: &Pool, c: &Config, l: &LayerKv, q: &[f32], t_n: usize, start: usize, out: &mut [f32], simd: bool) {
    let hd = c.head_dim;
    let qd = c.n_head * hd;
    let kv_dim = c.n_kv_head * hd;
    let group = c.n_head / c.n_kv_head;
    let scale = 1.0 / (hd as f32).sqrt();
    let n_tiles = t_n.div_ceil(6);
    assert!(out.len() >= t_n * qd && q.len() >= t_n * qd);
    assert!(l.kt.len() >= (start + t_n).div_ceil(16) * kv_dim * 16);
    assert!(l.v.len() >= (start + t_n) * kv_dim && hd % 16 == 0);
    let op = SyncPtr::new(out);
    let (kt, v) = (&l.kt, &l.v);
    pool.run(n_tiles * c.n_head, &|task| {
        let h = task % c.n_head;
        let t0 = task / c.n_head * 6;
        let mr = (t_n - t0).min(6);
        let g = h / group;
        let n_keys = start + t0 + mr; // keys seen by the last query of the tile
        let ldc = n_keys.div_ceil(16) * 16;
        SCORES.with(|s| {
            let mut sc = s.borrow_mut();
            sc.resize(mr * ldc, 0.0);
            let qrows = &q[t0 * qd + h * hd..];
            scores(qrows, qd, mr, hd, kt, kv_dim, g, n_keys, &mut sc, ldc, simd);
            for i in 0..mr {
                softmax_row(&mut sc[i * ldc..(i + 1) * ldc], start + t0 + i + 1, scale, simd);
            }
            weighted_values(&sc, ldc, mr, n_keys, hd, v, kv_dim, g, simd, &mut |i, d0, row| {
                // SAFETY: this task alone owns head `h` of token t0+i in `out` (`row.len()` floats
                // at column h*hd+d0, within the head, in bounds as asserted); `out` outlives the run.
                let o = unsafe { op.slice((t0 + i) * qd + h * hd + d0, row.len()) };
                o.copy_from_slice(row);
            });
        });
    });
}

/// Decode-time attention: one task per (token, KV head) handling all query heads that share the
/// KV head (grouped-query attention), so each key/value tile is loaded once for the group. Token
/// `t` (queries `q[t]`, output `out[t]`) attends to its own sequence's cache `kv[t].0`, positions
/// `0..=kv[t].1` (its own position included).
fn attention_gqa(pool: &Pool, c: &Config, kv: &[(&LayerKv, usize)], q: &[f32], out: &mut [f32], simd: bool) {
    let hd = c.head_dim;
    let qd = c.n_head * hd;
    let kv_dim = c.n_kv_head * hd;
    let group = c.n_head / c.n_kv_head;
    assert!((1..=6).contains(&group));
    let scale = 1.0 / (hd as f32).sqrt();
    let t_n = kv.len();
    assert!(out.len() >= t_n * qd && q.len() >= t_n * qd && hd % 16 == 0);
    for (l, pos) in kv {
        assert!(l.kt.len() >= (pos + 1).div_ceil(16) * kv_dim * 16);
        assert!(l.v.len() >= (pos + 1) * kv_dim);
    }
    let op = SyncPtr::new(out);
    pool.run(t_n * c.n_kv_head, &|task| {
        let t = task / c.n_kv_head;
        let g = task % c.n_kv_head;
        let (l, pos) = kv[t];
        let (kt, v) = (&l.kt, &l.v);
        let n_keys = pos + 1;
        let ldc = n_keys.div_ceil(16) * 16;
        SCORES.with(|s| {
            let mut sc = s.borrow_mut();
            sc.resize(group * ldc, 0.0);
            let qrows = &q[t * qd + g * group * hd..];
            scores(qrows, hd, group, hd, kt, kv_dim, g, n_keys, &mut sc, ldc, simd);
            for i in 0..group {
                softmax_row(&mut sc[i * ldc..(i + 1) * ldc], n_keys, scale, simd);
            }
            // SAFETY: this task alone owns heads g*group..(g+1)*group of token t in `out`: one
            // contiguous range of group*hd floats, in bounds as asserted; `out` outlives the run.
            let o = unsafe { op.slice(t * qd + g * group * hd, group * hd) };
            weighted_values(&sc, ldc, group, n_keys, hd, v, kv_dim, g, simd, &mut |i, d0, row| {
                o[i * hd + d0..i * hd + d0 + row.len()].copy_from_slice(row);
            });
        });
    });
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
pub(crate) mod tests_qwen;
