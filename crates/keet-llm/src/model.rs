//! The one interface every model implementation offers to the generation loop.

/// Errors of the LLM engine.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{0}")]
    Candle(#[from] candle_core::Error),
    #[error("{0}")]
    Msg(String),
    /// The conversation does not fit the model's context window (the answer needs room too).
    #[error("prompt has {prompt_tokens} tokens, the model's context is {context_tokens}")]
    PromptTooLong { prompt_tokens: usize, context_tokens: usize },
}

/// The model's weights as loaded on its device (after any conversion the implementation makes:
/// quantized blocks with their scales, or dequantized copies), from the tensors themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WeightBytes {
    /// Weight elements (parameters), each tensor once (a tied embedding counts once).
    pub params: u64,
    /// Bytes the weights take on the device.
    pub resident_bytes: u64,
    /// Weight bytes one decode step reads: every matrix and vector once, but of the input
    /// embedding only the one row looked up (the whole table when it doubles as the output layer).
    /// The KV cache is not included (it grows with the position; weights dominate at short context).
    pub per_token_bytes: u64,
}

/// A causal language model with its own KV cache.
pub trait CausalLm: Send {
    /// Runs `tokens` at positions `start_pos..start_pos + tokens.len()`, appending to the KV cache,
    /// and returns the logits of the last token (length = vocabulary size).
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError>;
    /// Keeps only the first `len` positions of the KV cache (prefix reuse); `0` clears it.
    fn truncate_cache(&mut self, len: usize);
    /// Number of positions currently in the KV cache.
    fn cache_len(&self) -> usize;
    fn vocab_size(&self) -> usize;
    /// Hint: the current cache length is a prefix worth returning to (`truncate_cache` to it later
    /// should be cheap). Implementations whose cache truncates in place need not do anything.
    fn checkpoint(&mut self) {}
    /// The weights as loaded (see [`WeightBytes`]); `None` when the implementation cannot say.
    fn weight_bytes(&self) -> Option<WeightBytes> {
        None
    }
}

/// Tokens handed to the model per call. Prompts always run in chunks at multiples of this size from
/// position 0, so a KV prefix restored from a snapshot equals the one a cold run computes, bit for bit
/// (prefix reuse never changes the output). The engine aligns its reuse points to it.
pub const CHUNK: usize = 32;

/// The prompt chunk size in force: [`CHUNK`], or `KEET_PREFILL_CHUNK` (for experiments).
pub fn chunk_size() -> usize {
    static C: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *C.get_or_init(|| std::env::var("KEET_PREFILL_CHUNK").ok().and_then(|v| v.parse().ok()).filter(|&n: &usize| n > 0).unwrap_or(CHUNK))
}
