//! The one interface every model implementation offers to the generation loop.

/// Errors of the LLM engine.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{0}")]
    Candle(#[from] candle_core::Error),
    #[error("{0}")]
    Msg(String),
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
}
