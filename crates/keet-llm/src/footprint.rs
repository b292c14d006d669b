//! How many bytes of weights a loaded model holds and reads per decoded token
//! ([`WeightBytes`]), for the candle-transformers implementations: from the GGUF tensor table
//! with the conversions candle makes at load, or from the tensors a safetensors `VarBuilder` handed
//! out (recorded by [`RecordingBackend`] as they load). keet's fast CPU Llama counts its own
//! buffers (`FastLlama::weight_bytes`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;

use super::model::WeightBytes;

/// Bytes of `elems` elements stored as `dtype` (whole GGUF blocks, scales included).
pub fn ggml_bytes(dtype: GgmlDType, elems: usize) -> u64 {
    (elems / dtype.block_size() * dtype.type_size()) as u64
}

/// The weights of a GGUF model as candle-transformers' quantized Llama / Qwen2 / Qwen3 load them:
/// matrices stay in their GGUF block format, except F32/F16/BF16 matrices and every vector
/// (norms, biases), which become f32; the input embedding gets an f32 copy for the row lookup, and
/// when there is no `output.weight` the GGUF embedding also serves as the output layer. Tensors
/// the models do not read (e.g. `rope_freqs.weight`) are left out.
pub fn gguf_candle(ct: &gguf_file::Content) -> WeightBytes {
    let mut w = WeightBytes::default();
    let tied = !ct.tensor_infos.contains_key("output.weight");
    for (name, ti) in &ct.tensor_infos {
        let used = name == "token_embd.weight" || name == "output.weight" || name == "output_norm.weight" || name.starts_with("blk.");
        if !used {
            continue;
        }
        let elems = ti.shape.elem_count();
        let dims = ti.shape.dims();
        w.params += elems as u64;
        let as_matmul = match ti.ggml_dtype {
            GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16 => elems as u64 * 4,
            d => ggml_bytes(d, elems),
        };
        if name == "token_embd.weight" {
            let row_f32 = dims.last().copied().unwrap_or(0) as u64 * 4;
            w.resident_bytes += elems as u64 * 4;
            w.per_token_bytes += row_f32;
            if tied {
                w.resident_bytes += as_matmul;
                w.per_token_bytes += as_matmul;
            }
        } else if dims.len() < 2 {
            w.resident_bytes += elems as u64 * 4;
            w.per_token_bytes += elems as u64 * 4;
        } else {
            w.resident_bytes += as_matmul;
            w.per_token_bytes += as_matmul;
        }
    }
    w
}

/// One tensor a [`RecordingBackend`] handed out.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub dims: Vec<usize>,
    pub dtype: DType,
}

/// The tensors handed out so far, by name.
pub type Records = Arc<Mutex<BTreeMap<String, Recorded>>>;

/// A `VarBuilder` backend that passes every request to `inner` and records the name, shape and
/// dtype of the tensor it returns: the model's tensors exactly as loaded.
pub struct RecordingBackend {
    pub inner: Box<dyn SimpleBackend>,
    pub records: Records,
}

impl RecordingBackend {
    pub fn new(inner: Box<dyn SimpleBackend>) -> Self {
        RecordingBackend { inner, records: Arc::default() }
    }

    fn record(&self, name: &str, t: &Tensor) {
        if let Ok(mut r) = self.records.lock() {
            r.insert(name.to_string(), Recorded { dims: t.dims().to_vec(), dtype: t.dtype() });
        }
    }
}

impl SimpleBackend for RecordingBackend {
    fn get(&self, s: Shape, name: &str, h: candle_nn::Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let t = self.inner.get(s, name, h, dtype, dev)?;
        self.record(name, &t);
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let t = self.inner.get_unchecked(name, dtype, dev)?;
        self.record(name, &t);
        Ok(t)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.inner.contains_tensor(name)
    }
}

/// The weights of a model built from a `VarBuilder` (candle-transformers' Llama / Qwen2 / Qwen3):
/// each recorded tensor once; of `*embed_tokens.weight` one row per token, unless no
/// `lm_head.weight` was loaded (tied embeddings: the table is also the output layer).
pub fn recorded(records: &Records) -> WeightBytes {
    let r = match records.lock() {
        Ok(r) => r,
        Err(p) => p.into_inner(),
    };
    let tied = !r.keys().any(|k| k.ends_with("lm_head.weight"));
    let mut w = WeightBytes::default();
    for (name, t) in r.iter() {
        let elems: usize = t.dims.iter().product();
        let bytes = (elems * t.dtype.size_in_bytes()) as u64;
        w.params += elems as u64;
        w.resident_bytes += bytes;
        w.per_token_bytes += if name.ends_with("embed_tokens.weight") && !tied {
            (t.dims.last().copied().unwrap_or(0) * t.dtype.size_in_bytes()) as u64
        } else {
            bytes
        };
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use gguf_file::{Content, TensorInfo, VersionedMagic};
    use std::collections::HashMap;

    fn info(dtype: GgmlDType, dims: &[usize]) -> TensorInfo {
        TensorInfo { ggml_dtype: dtype, shape: Shape::from(dims), offset: 0 }
    }

    #[test]
    fn gguf_bytes_follow_candles_conversions() {
        let mut t = HashMap::new();
        t.insert("token_embd.weight".to_string(), info(GgmlDType::Q4_0, &[1000, 64]));
        t.insert("output_norm.weight".to_string(), info(GgmlDType::F32, &[64]));
        t.insert("blk.0.attn_q.weight".to_string(), info(GgmlDType::Q8_0, &[64, 64]));
        t.insert("blk.0.attn_norm.weight".to_string(), info(GgmlDType::F16, &[64]));
        t.insert("rope_freqs.weight".to_string(), info(GgmlDType::F32, &[32]));
        let ct = Content { magic: VersionedMagic::GgufV3, metadata: HashMap::new(), tensor_infos: t, tensor_data_offset: 0 };
        let w = gguf_candle(&ct);
        let q4_embd = 1000 * 64 / 32 * 18;
        let q8 = 64 * 64 / 32 * 34;
        assert_eq!(w.params, 1000 * 64 + 64 + 64 * 64 + 64);
        // Tied: the f32 lookup copy plus the Q4_0 table as the output layer.
        assert_eq!(w.resident_bytes, (1000 * 64 * 4 + q4_embd + 64 * 4 + q8 + 64 * 4) as u64);
        assert_eq!(w.per_token_bytes, (64 * 4 + q4_embd + 64 * 4 + q8 + 64 * 4) as u64);

        let mut ct = ct;
        ct.tensor_infos.insert("output.weight".to_string(), info(GgmlDType::F16, &[1000, 64]));
        let w = gguf_candle(&ct);
        // An F16 output matrix is dequantized to f32 by QMatMul.
        assert_eq!(w.per_token_bytes, (64 * 4 + 1000 * 64 * 4 + 64 * 4 + q8 + 64 * 4) as u64);
    }

    #[test]
    fn recorded_bytes_count_one_embedding_row_unless_tied() {
        let mut ts = HashMap::new();
        let z = |d: &[usize]| Tensor::zeros(d, DType::BF16, &Device::Cpu).unwrap();
        ts.insert("model.embed_tokens.weight".to_string(), z(&[100, 8]));
        ts.insert("model.norm.weight".to_string(), z(&[8]));
        let rec = RecordingBackend::new(Box::new(ts));
        let records = rec.records.clone();
        let vb = candle_nn::VarBuilder::from_backend(Box::new(rec), DType::BF16, Device::Cpu);
        vb.get((100, 8), "model.embed_tokens.weight").unwrap();
        vb.get(8, "model.norm.weight").unwrap();
        let w = recorded(&records);
        assert_eq!(w, WeightBytes { params: 808, resident_bytes: 1616, per_token_bytes: 1616 });
        records.lock().unwrap().insert("lm_head.weight".into(), Recorded { dims: vec![100, 8], dtype: DType::BF16 });
        let w = recorded(&records);
        assert_eq!(w, WeightBytes { params: 1608, resident_bytes: 3216, per_token_bytes: 16 + 16 + 1600 });
    }
}
