//! The one interface every model implementation offers to the generation loop.

/// Errors of the LLM engine.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{}", candle_message(.0))]
    Candle(#[from] candle_core::Error),
    #[error("{0}")]
    Msg(String),
    /// The conversation does not fit the model's context window (the answer needs room too).
    #[error("prompt has {prompt_tokens} tokens, the model's context is {context_tokens}")]
    PromptTooLong { prompt_tokens: usize, context_tokens: usize },
}

/// A candle error's message without the backtrace candle puts into it when library backtraces are
/// on (`RUST_BACKTRACE=1`): keet's errors carry the message and the fix, never a dependency's frames.
pub fn candle_message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => candle_message(inner),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        e => e.to_string(),
    }
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
    /// and returns the logits of the last token (length = vocabulary size). The engine runs
    /// generated tokens (decode steps, forced runs, drafts) through it and prompts through
    /// [`CausalLm::forward_prompt`]; an implementation whose values could depend on how generated
    /// tokens are grouped into calls must not let them (the fast engine runs them all on its
    /// token-major path), or drafts and batching would change the text.
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
    /// Like [`CausalLm::forward`], for prompt tokens: an implementation may take a path whose
    /// values do not depend on how a prompt was split across calls (see
    /// [`CausalLm::reusable_prefix`]).
    fn forward_prompt(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError> {
        self.forward(tokens, start_pos)
    }
    /// How many leading positions of the KV cache a prompt whose first `common` tokens equal the
    /// cached ones may keep: positions whose KV values are, bit for bit, what a cold run of that
    /// prompt computes, so that reuse never changes an answer. Default: `common` rounded down to
    /// [`CausalLm::reuse_granularity`] (prompts run in chunks aligned to it).
    fn reusable_prefix(&self, common: usize) -> usize {
        let granularity = self.reuse_granularity().max(1);
        common / granularity * granularity
    }
    /// Reuse points fall on multiples of this many tokens (1: any position). Default: [`chunk_size`].
    fn reuse_granularity(&self) -> usize {
        chunk_size()
    }
    /// How many tokens [`CausalLm::forward_each`] takes in one call with, for each, the very logits
    /// one-token-at-a-time decoding gives (so that checking drafted tokens never changes what greedy
    /// decoding writes). 0: no drafts.
    fn max_lookahead(&self) -> usize {
        0
    }
    /// The logits after each of `tokens` (at most [`CausalLm::max_lookahead`]), appended to the KV
    /// cache as decode steps would append them. Default: one token at a time.
    fn forward_each(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>, LlmError> {
        tokens.iter().enumerate().map(|(i, &t)| self.forward(&[t], start_pos + i)).collect()
    }
    /// The model's several-sequences interface, when it keeps one KV cache per sequence and
    /// decodes them together ([`Sequences`]); `None`: one sequence at a time.
    fn sequences(&mut self) -> Option<&mut dyn Sequences> {
        None
    }
}

/// A few tokens of one sequence for a batched decode step: `tokens` at positions `start..` of slot
/// `slot`'s KV cache.
#[derive(Debug, Clone, Copy)]
pub struct SlotRun<'a> {
    pub slot: usize,
    pub tokens: &'a [u32],
    pub start: usize,
}

/// Several sequences in one model, each with its own KV cache (a numbered slot; slot 0 is the
/// cache [`CausalLm`]'s own methods use), decoded together: one step runs a few new tokens of
/// each, sharing the weights' products across them, while each token's RoPE position, KV store and
/// attention are its own sequence's. Every token's values are bit for bit what its sequence gets
/// alone through [`CausalLm::forward`], so batching never changes an answer.
pub trait Sequences {
    /// Makes slots `0..n` usable.
    fn ensure_slots(&mut self, n: usize);
    /// Positions held in slot `slot`'s cache.
    fn slot_len(&self, slot: usize) -> usize;
    /// Keeps the first `len` positions of slot `slot`'s cache.
    fn truncate_slot(&mut self, slot: usize, len: usize);
    /// [`CausalLm::reusable_prefix`] for slot `slot`.
    fn reusable_prefix_slot(&self, slot: usize, common: usize) -> usize;
    /// [`CausalLm::forward`] on slot `slot`'s cache.
    fn forward_slot(&mut self, slot: usize, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError>;
    /// [`CausalLm::forward_prompt`] on slot `slot`'s cache.
    fn forward_prompt_slot(&mut self, slot: usize, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, LlmError>;
    /// The most tokens of one sequence a [`Sequences::forward_step`] run may hold and still get
    /// the values [`CausalLm::forward`] gives that run alone (longer runs of generated tokens go
    /// through [`Sequences::forward_slot`]).
    fn max_step_tokens(&self) -> usize;
    /// One decode step of the sequences in `runs` (distinct slots): the logits after each run's
    /// last token, in order.
    fn forward_step(&mut self, runs: &[SlotRun<'_>]) -> Result<Vec<Vec<f32>>, LlmError>;
}

/// Tokens handed to a candle model per call. Its prompts run in chunks at multiples of this size from
/// position 0, so a KV prefix restored from a snapshot equals the one a cold run computes, bit for bit
/// (prefix reuse never changes the output), and the engine aligns its reuse points to it (the default
/// [`CausalLm::reuse_granularity`]). The fast engine reuses any prefix of its prompt path.
pub const CHUNK: usize = 32;

/// The prompt chunk size in force: [`CHUNK`], or `KEET_PREFILL_CHUNK` (for experiments).
pub fn chunk_size() -> usize {
    static C: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *C.get_or_init(|| std::env::var("KEET_PREFILL_CHUNK").ok().and_then(|v| v.parse().ok()).filter(|&n: &usize| n > 0).unwrap_or(CHUNK))
}
