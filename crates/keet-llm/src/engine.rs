//! The engine: a loaded model with its tokenizer and chat template, generating with a KV cache,
//! greedy (default) or seeded temperature/top-p sampling, a repeat penalty, the model's end tokens,
//! a token budget, optional JSON-Schema constraints, and prompt-prefix reuse across requests.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::constraint::Constrainer;
use super::loader::{self, GgufFile, LoadOptions};
use super::model::{CausalLm, LlmError};
use super::resolve::{self, ModelLocation, ResolvedModel};
use super::template::{ChatMessage, ChatTemplate, CHATML_TEMPLATE};
use super::threads;
use super::tokenizer::Tokenizer;

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// How to load a model.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// `--model`: a `.gguf` file, a model folder or a manifest name; `None` resolves (KEET_MODEL, manifests, HF cache).
    pub model: Option<String>,
    /// `cpu`, `cuda` or `cuda:N` (default cpu).
    pub device: Option<String>,
    /// CPU threads (default: see [`threads`]).
    pub threads: Option<usize>,
}

/// Generation settings. The default is deterministic: greedy, repeat penalty 1.1 over the last 64
/// tokens (word tokens only, so JSON punctuation is never penalised), 256 new tokens at most.
#[derive(Debug, Clone, Serialize)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    /// 0 = greedy.
    pub temperature: f32,
    pub top_p: f32,
    pub seed: u64,
    /// 1.0 = off.
    pub repeat_penalty: f32,
    pub repeat_last_n: usize,
    /// Also end generation on these token ids (the model's end tokens always end it).
    pub extra_stop_ids: Vec<u32>,
    /// Decoding drafts up to this many tokens by copying what followed the last tokens where they
    /// occur earlier in the prompt or output (prompt lookup), and runs them in one forward pass on a
    /// model whose per-token logits are exact ([`CausalLm::max_lookahead`]). Each position's token
    /// is then chosen from the same logits, with the same random draws, as without drafts, and a
    /// draft counts only where it equals that choice: the text is the same, and copied spans cost
    /// a fraction of a decode step per token. 0 = off.
    pub lookahead: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
            repeat_penalty: 1.1,
            repeat_last_n: 64,
            extra_stop_ids: Vec::new(),
            lookahead: default_lookahead(),
        }
    }
}

/// Drafted tokens per check: 8 (a decode step of up to 8 tokens costs about 2.3 single steps on
/// the default model, its K-quant blocks unpacked once for all), or `KEET_LOOKAHEAD` (0 turns
/// prompt lookup off, for comparisons).
fn default_lookahead() -> usize {
    static L: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *L.get_or_init(|| std::env::var("KEET_LOOKAHEAD").ok().and_then(|v| v.parse().ok()).unwrap_or(8))
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model emitted one of its end tokens.
    EndToken,
    /// The schema's grammar is complete (constrained generation).
    ConstraintComplete,
    /// The token budget ran out (constrained output may then be cut short).
    MaxTokens,
    /// The model's context is full.
    ContextFull,
}

/// Time spent, per request.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Prompt tokens in total.
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV cache was reused from an earlier request.
    pub reused_tokens: usize,
    /// Seconds spent running the prompt tokens that were not reused.
    pub prompt_s: f64,
    /// Tokens generated (decode steps and forced tokens).
    pub generated_tokens: usize,
    /// Of those, tokens the grammar forced (its only choice), appended without sampling and run
    /// through the model as one batch with the sampled token before them.
    pub forced_tokens: usize,
    /// Tokens drafted by prompt lookup ([`GenerateOptions::lookahead`]), and of those, the ones
    /// decoding then chose (whose forward pass was already done).
    pub drafted_tokens: usize,
    pub draft_hits: usize,
    /// Seconds spent in decode steps (model + mask + sampling).
    pub decode_s: f64,
    /// Constraint-mask computation time per generated token, microseconds (empty when unconstrained).
    pub mask_us: Vec<f64>,
    /// Schema compile time, seconds.
    pub schema_s: f64,
}

impl Timings {
    pub fn prompt_tok_s(&self) -> f64 {
        let n = self.prompt_tokens - self.reused_tokens;
        if self.prompt_s > 0.0 {
            n as f64 / self.prompt_s
        } else {
            0.0
        }
    }
    pub fn decode_tok_s(&self) -> f64 {
        if self.decode_s > 0.0 {
            self.generated_tokens as f64 / self.decode_s
        } else {
            0.0
        }
    }
}

/// The result of one request.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    pub text: String,
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    pub timings: Timings,
}

/// What was loaded, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub name: String,
    pub architecture: String,
    /// `candle` or `fast` (keet's own CPU Llama, `KEET_LLM_IMPL=fast`).
    pub implementation: String,
    pub via: String,
    pub device: String,
    pub threads: usize,
    pub context_length: usize,
    pub load_s: f64,
}

/// A loaded model ready to generate.
pub struct Engine {
    pub(crate) model: Box<dyn CausalLm>,
    pub(crate) tokenizer: Arc<Tokenizer>,
    template: ChatTemplate,
    pub(crate) constrainer: Option<Constrainer>,
    /// Tokens whose KV entries the model holds (prompt + fed generated tokens).
    cached: Vec<u32>,
    /// The same for each batch slot of a model that decodes several sequences at once (batch slot
    /// `i` is the model's KV slot `i + 1`; see [`crate::batch`]).
    pub(crate) slot_cached: Vec<Vec<u32>>,
    pub info: ModelInfo,
}

fn read_json(path: &std::path::Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn template_from_config(cfg: Option<&Value>) -> Option<String> {
    let t = cfg?.get("chat_template")?;
    if let Some(s) = t.as_str() {
        return Some(s.to_string());
    }
    // A list of named templates: take "default".
    t.as_array()?
        .iter()
        .find(|x| x.get("name").and_then(|n| n.as_str()) == Some("default"))
        .and_then(|x| x.get("template"))
        .and_then(|s| s.as_str())
        .map(|s| s.to_string())
}

impl Engine {
    /// Resolves and loads a model (offline).
    pub fn load(opts: &EngineOptions) -> Result<Engine, LlmError> {
        let n_threads = threads::configure(opts.threads);
        let resolved = resolve::resolve_model(opts.model.as_deref())?;
        Self::load_resolved(&resolved, opts.device.as_deref().unwrap_or("cpu"), n_threads)
    }

    pub fn load_resolved(resolved: &ResolvedModel, device: &str, n_threads: usize) -> Result<Engine, LlmError> {
        let t0 = Instant::now();
        let dev = loader::parse_device(device)?;
        let mut implementation = "candle";
        let (model, tokenizer, template_src, arch, ctx, path) = match &resolved.location {
            ModelLocation::Gguf(p) => {
                let gguf = GgufFile::open(p)?;
                let dir = p.parent().map(|d| d.to_path_buf()).unwrap_or_default();
                let tok_json = dir.join("tokenizer.json");
                let cfg = read_json(&dir.join("tokenizer_config.json"));
                let opts = LoadOptions::from_env(n_threads);
                // The tokenizer (vocabulary and merges) is built on a second thread while the
                // weights load: the two take about as long as each other.
                let (tokenizer, fast) = std::thread::scope(|s| {
                    let tok = s.spawn(|| {
                        if tok_json.is_file() {
                            Tokenizer::from_file(&tok_json, cfg.as_ref())
                        } else {
                            Tokenizer::from_gguf(gguf.metadata())
                        }
                    });
                    let fast = loader::load_gguf_fast(&gguf, &dev, &opts);
                    let tokenizer = tok.join().unwrap_or_else(|_| Err(err("building the tokenizer failed (thread panicked)")));
                    (tokenizer, fast)
                });
                let tokenizer = tokenizer?;
                let template = gguf.md_str("tokenizer.chat_template").or_else(|| template_from_config(cfg.as_ref()));
                let arch = gguf.architecture();
                let ctx = gguf.context_length().unwrap_or(4096);
                let model = match fast? {
                    Some(m) => {
                        implementation = "fast";
                        m
                    }
                    None => loader::load_gguf_candle(gguf, &dev)?,
                };
                (model, tokenizer, template, arch, ctx, p.clone())
            }
            ModelLocation::Safetensors(dir) => {
                let cfg = read_json(&dir.join("tokenizer_config.json"));
                let tok_json = dir.join("tokenizer.json");
                if !tok_json.is_file() {
                    return Err(err(format!("{} has no tokenizer.json", dir.display())));
                }
                let tokenizer = Tokenizer::from_file(&tok_json, cfg.as_ref())?;
                let template = template_from_config(cfg.as_ref());
                let mcfg = read_json(&dir.join("config.json")).unwrap_or(Value::Null);
                let arch = format!("{:?}", loader::Arch::from_config(&mcfg)?).to_lowercase();
                let ctx = mcfg.get("max_position_embeddings").and_then(|v| v.as_u64()).unwrap_or(4096) as usize;
                let model = loader::load_safetensors_model(dir, &dev)?;
                (model, tokenizer, template, arch, ctx, dir.clone())
            }
        };
        let ctx = resolved.manifest.as_ref().map(|m| m.context_length.min(ctx)).unwrap_or(ctx);
        let bos = tokenizer.bos_id.map(|i| tokenizer.token_text(i)).unwrap_or_default();
        let eos = tokenizer.eos_id.map(|i| tokenizer.token_text(i)).unwrap_or_default();
        let template = ChatTemplate::new(template_src.as_deref().unwrap_or(CHATML_TEMPLATE), &bos, &eos)?;
        let name = resolved
            .manifest
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_else(|| path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
        let info = ModelInfo {
            path,
            name,
            architecture: arch,
            implementation: implementation.to_string(),
            via: resolved.via.clone(),
            device: device.to_string(),
            threads: n_threads,
            context_length: ctx,
            load_s: t0.elapsed().as_secs_f64(),
        };
        Ok(Engine { model, tokenizer: Arc::new(tokenizer), template, constrainer: None, cached: Vec::new(), slot_cached: Vec::new(), info })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The prompt text for `messages` (the model's chat template, ending with the assistant turn).
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, LlmError> {
        self.template.render(messages, true)
    }

    /// Prompt token ids for `messages` (BOS prepended when the model asks for it and the template did not).
    pub fn prompt_tokens(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, LlmError> {
        self.text_tokens(&self.render(messages)?)
    }

    pub(crate) fn text_tokens(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        let mut ids = self.tokenizer.encode(text)?;
        if self.tokenizer.add_bos {
            if let Some(b) = self.tokenizer.bos_id {
                if ids.first() != Some(&b) {
                    ids.insert(0, b);
                }
            }
        }
        Ok(ids)
    }

    /// Prepares the constraint engine now (otherwise it is built on the first schema), returning seconds.
    pub fn prepare_constraints(&mut self) -> Result<f64, LlmError> {
        let t = Instant::now();
        if self.constrainer.is_none() {
            self.constrainer = Some(Constrainer::new(self.tokenizer.clone(), self.model.vocab_size())?);
        }
        Ok(t.elapsed().as_secs_f64())
    }

    /// Generates the assistant's reply to `messages`; with `schema`, the reply is JSON valid against it
    /// (provided the token budget covers the largest output the schema allows).
    pub fn generate(&mut self, messages: &[ChatMessage], opts: &GenerateOptions, schema: Option<&Value>) -> Result<Generation, LlmError> {
        let (ids, boundary) = self.message_tokens(messages)?;
        self.generate_tokens(&ids, boundary, opts, schema)
    }

    /// Prompt token ids for `messages`, and where the last message starts (the tokens up to it: a
    /// natural place to keep a KV snapshot for reuse), when the template renders it as a prefix.
    pub(crate) fn message_tokens(&self, messages: &[ChatMessage]) -> Result<(Vec<u32>, Option<usize>), LlmError> {
        let ids = self.prompt_tokens(messages)?;
        let boundary = if messages.len() > 1 {
            let head = self.template.render(&messages[..messages.len() - 1], false).ok();
            head.and_then(|h| self.text_tokens(&h).ok())
                .filter(|h| !h.is_empty() && h.len() < ids.len() && ids.starts_with(h))
                .map(|h| h.len())
        } else {
            None
        };
        Ok((ids, boundary))
    }

    /// Like [`Engine::generate`] for a prompt that is already a full text (chat template applied or not).
    pub fn generate_text(&mut self, prompt: &str, opts: &GenerateOptions, schema: Option<&Value>) -> Result<Generation, LlmError> {
        let ids = self.text_tokens(prompt)?;
        self.generate_tokens(&ids, None, opts, schema)
    }

    /// Reuse points of the model's KV cache fall on multiples of this many tokens (1: anywhere).
    pub fn reuse_granularity(&self) -> usize {
        self.model.reuse_granularity().max(1)
    }

    /// Runs the prompt, reusing the longest prefix already in the KV cache; returns the logits of the
    /// last prompt token and how many tokens were reused. The model says how much of the common
    /// prefix holds exactly the KV values a cold run computes ([`CausalLm::reusable_prefix`]: chunk
    /// multiples for candle, any position the fast engine computed on its prompt path), so the
    /// output never depends on earlier requests.
    fn prefill(&mut self, ids: &[u32], boundary: Option<usize>) -> Result<(Vec<f32>, usize), LlmError> {
        let g = self.reuse_granularity();
        let common = self.cached.iter().zip(ids.iter()).take_while(|(a, b)| a == b).count();
        // At least one token must run to get logits.
        let reuse = self.model.reusable_prefix(common.min(ids.len() - 1));
        self.model.truncate_cache(reuse);
        self.cached.truncate(reuse);
        let mut pos = reuse;
        // Keep a snapshot where the last message starts (system prompt and earlier turns), for a
        // model whose cache returns to a snapshot (one that truncates in place needs none).
        if let Some(b) = boundary.map(|b| b / g * g).filter(|&b| g > 1 && b > pos && b < ids.len()) {
            self.model.forward_prompt(&ids[pos..b], pos)?;
            self.cached.extend_from_slice(&ids[pos..b]);
            self.model.checkpoint();
            pos = b;
        }
        let logits = self.model.forward_prompt(&ids[pos..], pos)?;
        self.cached.extend_from_slice(&ids[pos..]);
        Ok((logits, reuse))
    }

    /// Generation from prompt token ids.
    pub fn generate_tokens(
        &mut self,
        ids: &[u32],
        boundary: Option<usize>,
        opts: &GenerateOptions,
        schema: Option<&Value>,
    ) -> Result<Generation, LlmError> {
        if ids.is_empty() {
            return Err(err("empty prompt"));
        }
        let ctx = self.info.context_length;
        if ids.len() >= ctx {
            return Err(LlmError::PromptTooLong { prompt_tokens: ids.len(), context_tokens: ctx });
        }
        let mut timings = Timings { prompt_tokens: ids.len(), ..Default::default() };
        let mut matcher = match schema {
            Some(s) => {
                let t = Instant::now();
                self.prepare_constraints()?;
                let m = self.constrainer.as_ref().unwrap().matcher(s)?;
                timings.schema_s = t.elapsed().as_secs_f64();
                Some(m)
            }
            None => None,
        };
        let t = Instant::now();
        let (mut logits, reused) = match self.prefill(ids, boundary) {
            Ok(x) => x,
            Err(e) => {
                // The cache state is unknown after a failure: start clean next time.
                self.model.truncate_cache(0);
                self.cached.clear();
                return Err(e);
            }
        };
        timings.reused_tokens = reused;
        timings.prompt_s = t.elapsed().as_secs_f64();

        let mut rng = SplitMix64::for_seed(opts.seed);
        let end_ids: Vec<u32> = self.tokenizer.end_ids.iter().chain(opts.extra_stop_ids.iter()).copied().collect();
        let mut out: Vec<u32> = Vec::new();
        let stop;
        let t_dec = Instant::now();
        let lookahead = opts.lookahead.min(self.model.max_lookahead());
        // How many tokens the next draft may have: halved (to 1 at least) by a draft whose first
        // token decoding did not take, doubled (to `lookahead` at most) by one taken whole, so
        // free prose, where drafts mostly miss, pays little for them and copies pay in full.
        let mut draft_budget = lookahead;
        let mut draft_taken = 0usize;
        // Drafted tokens already run through the model, each with the logits after it.
        let mut ahead: std::collections::VecDeque<(u32, Vec<f32>)> = std::collections::VecDeque::new();
        // Tokens the grammar forces at the start run as one batch before the first sampled token.
        if let Some(m) = matcher.as_mut() {
            let forced = m.consume_ff_tokens();
            let forced = &forced[..forced.len().min(opts.max_tokens).min(ctx.saturating_sub(self.cached.len() + 1))];
            out.extend_from_slice(forced);
            timings.forced_tokens += forced.len();
            if !forced.is_empty() && !m.is_stopped() {
                logits = self.step(forced)?;
            }
        }
        loop {
            if out.len() >= opts.max_tokens {
                stop = StopReason::MaxTokens;
                break;
            }
            if self.cached.len() + 1 >= ctx {
                stop = StopReason::ContextFull;
                break;
            }
            self.apply_repeat_penalty(&mut logits, &out, opts);
            if let Some(m) = matcher.as_mut() {
                if m.is_stopped() {
                    stop = StopReason::ConstraintComplete;
                    break;
                }
                mask_logits(m, &mut logits, &mut timings)?;
            }
            let tok = sample(&logits, opts, &mut rng);
            if end_ids.contains(&tok) {
                stop = StopReason::EndToken;
                break;
            }
            out.push(tok);
            // A drafted token that decoding chose is already in the KV cache, with its logits; a
            // draft that went another way is dropped from the cache with everything after it.
            let drafted = match ahead.pop_front() {
                Some((d, l)) if d == tok => {
                    draft_taken += 1;
                    if ahead.is_empty() {
                        draft_budget = (draft_budget * 2).min(lookahead);
                    }
                    Some(l)
                }
                Some(_) => {
                    draft_budget = if draft_taken == 0 { (draft_budget / 2).max(1) } else { draft_taken.max(draft_budget / 2).max(1) };
                    let keep = self.cached.len() - ahead.len() - 1;
                    ahead.clear();
                    self.model.truncate_cache(keep);
                    self.cached.truncate(keep);
                    None
                }
                None => None,
            };
            timings.draft_hits += drafted.is_some() as usize;
            // The sampled token, then whatever the grammar forces after it (a key, the rest of an
            // enum value, a closing quote): all of them run through the model as one batch.
            let mut step = if drafted.is_some() { Vec::new() } else { vec![tok] };
            if let Some(m) = matcher.as_mut() {
                m.consume_token(tok).map_err(|e| err(format!("constraint: {e}")))?;
                if m.is_stopped() {
                    stop = StopReason::ConstraintComplete;
                    break;
                }
                let forced = m.consume_ff_tokens();
                let room = opts.max_tokens.saturating_sub(out.len()).min(ctx.saturating_sub(self.cached.len() + 2));
                let forced = &forced[..forced.len().min(room)];
                out.extend_from_slice(forced);
                step.extend_from_slice(forced);
                timings.forced_tokens += forced.len();
                if m.is_stopped() {
                    stop = StopReason::ConstraintComplete;
                    break;
                }
            }
            if out.len() >= opts.max_tokens {
                stop = StopReason::MaxTokens;
                break;
            }
            if !step.is_empty() && !ahead.is_empty() {
                // forced tokens follow a drafted one: the rest of the draft is stale
                let keep = self.cached.len() - ahead.len();
                ahead.clear();
                self.model.truncate_cache(keep);
                self.cached.truncate(keep);
            }
            if step.is_empty() {
                if let Some(l) = drafted {
                    logits = l;
                }
                if !ahead.is_empty() {
                    continue;
                }
                // the whole draft was taken: draft again from here (the logits are current)
            }
            let room = opts.max_tokens.saturating_sub(out.len()).min(ctx.saturating_sub(self.cached.len() + step.len() + 2));
            let draft = if lookahead > 0 && step.len() < lookahead {
                let mut history = Vec::with_capacity(ids.len() + out.len());
                history.extend_from_slice(ids);
                history.extend_from_slice(&out);
                prompt_lookup(&history, (lookahead - step.len()).min(draft_budget).min(room))
            } else {
                Vec::new()
            };
            if draft.is_empty() {
                if !step.is_empty() {
                    logits = self.step(&step)?;
                }
                continue;
            }
            let mut run = step.clone();
            run.extend_from_slice(&draft);
            let mut each = self.step_each(&run)?;
            timings.drafted_tokens += draft.len();
            let after_draft = each.split_off(step.len());
            if let Some(l) = each.pop() {
                logits = l;
            }
            ahead = draft.into_iter().zip(after_draft).collect();
            draft_taken = 0;
        }
        timings.generated_tokens = out.len();
        timings.decode_s = t_dec.elapsed().as_secs_f64();
        let text = self.tokenizer.decode(&out);
        // Only the prompt is offered for reuse: generated tokens' KV entries were computed one at a
        // time, which a cold run of a prompt holding the same text would not do.
        self.cached.truncate(ids.len().min(self.cached.len()));
        Ok(Generation { text, tokens: out, stop_reason: stop, timings })
    }

    /// Like [`Engine::step`], with the logits after each token ([`CausalLm::forward_each`]).
    fn step_each(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.run_generated(tokens, |model, pos| model.forward_each(tokens, pos))
    }

    /// Runs generated tokens after the cache and returns the logits after the last; on failure the
    /// cache is cleared (its state is unknown).
    fn step(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LlmError> {
        self.run_generated(tokens, |model, pos| model.forward(tokens, pos))
    }

    /// `forward(model, position)` for generated `tokens` appended to the cache: on success they join
    /// the cached tokens, on failure the cache is cleared (its state is unknown).
    fn run_generated<T>(
        &mut self,
        tokens: &[u32],
        forward: impl FnOnce(&mut dyn CausalLm, usize) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        let pos = self.cached.len();
        match forward(self.model.as_mut(), pos) {
            Ok(out) => {
                self.cached.extend_from_slice(tokens);
                Ok(out)
            }
            Err(e) => {
                self.model.truncate_cache(0);
                self.cached.clear();
                Err(e)
            }
        }
    }

    pub(crate) fn apply_repeat_penalty(&self, logits: &mut [f32], out: &[u32], opts: &GenerateOptions) {
        if opts.repeat_penalty == 1.0 || out.is_empty() {
            return;
        }
        let start = out.len().saturating_sub(opts.repeat_last_n);
        let mut seen: Vec<u32> = out[start..].to_vec();
        seen.sort_unstable();
        seen.dedup();
        let bytes = self.tokenizer.token_bytes();
        for t in seen {
            // Only word-like tokens: punctuation and JSON structure are never penalised.
            let wordy = bytes.get(t as usize).map(|b| b.iter().any(|c| c.is_ascii_alphanumeric() || *c >= 0x80)).unwrap_or(false);
            if !wordy {
                continue;
            }
            if let Some(l) = logits.get_mut(t as usize) {
                *l = if *l >= 0.0 { *l / opts.repeat_penalty } else { *l * opts.repeat_penalty };
            }
        }
    }

    /// Picks one of `choices` (each a single token, such as the letters of a multiple-choice
    /// question) as the assistant's first token: the prompt is run (reusing the longest cached
    /// prefix, as in [`Engine::generate`]) and the choice with the highest logit wins. This is
    /// greedy decoding under a grammar that admits exactly these tokens, at the cost of the prompt
    /// alone (no decode step). Returns the index of the choice, the logits of all choices and the
    /// timings.
    pub fn choose(&mut self, messages: &[ChatMessage], choices: &[&str]) -> Result<(usize, Vec<f32>, Timings), LlmError> {
        let mut choice_ids = Vec::with_capacity(choices.len());
        for c in choices {
            match self.tokenizer.encode(c)?.as_slice() {
                [id] => choice_ids.push(*id),
                other => {
                    return Err(err(format!("choice {c:?} is {} tokens for this tokenizer; choices must be one token each", other.len())))
                }
            }
        }
        if choice_ids.is_empty() {
            return Err(err("no choices"));
        }
        let (logits, timings) = self.run_prompt(messages)?;
        let scores: Vec<f32> = choice_ids.iter().map(|&i| logits.get(i as usize).copied().unwrap_or(f32::NEG_INFINITY)).collect();
        let mut best = 0;
        for (i, s) in scores.iter().enumerate() {
            if *s > scores[best] {
                best = i;
            }
        }
        Ok((best, scores, timings))
    }

    /// Picks one of `options` (texts of any length, such as the options of a multiple-choice
    /// question) by letting the model write it: greedy decoding under a grammar that admits exactly
    /// these texts, each in the tokenizer's own tokens. The prompt is run as in [`Engine::choose`];
    /// then, while more than one option is still possible, the next token of each is scored (an
    /// option that has ended by its end-of-turn tokens), the highest wins, and only when the
    /// options left still differ is that token run (a decode step). Options that start
    /// differently cost the prompt alone. Returns the index of the option and the timings
    /// (`generated_tokens` counts the decode steps run).
    pub fn choose_text(&mut self, messages: &[ChatMessage], options: &[&str]) -> Result<(usize, Timings), LlmError> {
        let mut tokens = Vec::with_capacity(options.len());
        for o in options {
            tokens.push(self.tokenizer.encode(o)?);
        }
        if tokens.is_empty() {
            return Err(err("no options"));
        }
        if let Some(i) = (1..tokens.len()).find(|&i| tokens[..i].contains(&tokens[i])) {
            return Err(err(format!("option {:?} is given twice", options[i])));
        }
        let (mut logits, mut timings) = self.run_prompt(messages)?;
        let mut alive: Vec<usize> = (0..tokens.len()).collect();
        let t = Instant::now();
        for depth in 0.. {
            // (next token, its score) per option still possible; None = the option has ended
            let next = |i: usize| tokens[i].get(depth).copied();
            let score = |tok: Option<u32>| match tok {
                Some(id) => logits.get(id as usize).copied().unwrap_or(f32::NEG_INFINITY),
                None => self.tokenizer.end_ids.iter().filter_map(|&id| logits.get(id as usize).copied()).fold(f32::NEG_INFINITY, f32::max),
            };
            let Some(&best) = alive.iter().max_by(|&&a, &&b| score(next(a)).total_cmp(&score(next(b))).then(b.cmp(&a))) else {
                return Err(err("no options"));
            };
            let chosen = next(best);
            alive.retain(|&i| next(i) == chosen);
            match chosen {
                Some(id) if alive.len() > 1 => {
                    logits = self.step(&[id])?;
                    timings.generated_tokens += 1;
                }
                _ => break,
            }
        }
        timings.decode_s = t.elapsed().as_secs_f64();
        Ok((alive[0], timings))
    }

    /// Scores each of `options` as the assistant's answer: the mean log-probability per token of
    /// the option's text (in the tokenizer's own tokens) after the prompt, as likelihood-scored
    /// multiple choice does (lm-eval-harness). Returns the index of the most likely option, the
    /// scores, and the timings of [`Engine::option_log_probs`].
    pub fn choose_likeliest(&mut self, messages: &[ChatMessage], options: &[&str]) -> Result<(usize, Vec<f32>, Timings), LlmError> {
        let (scored, timings) = self.option_log_probs(messages, options)?;
        let scores: Vec<f32> = scored.iter().map(|o| o.mean() as f32).collect();
        let best = (0..scores.len()).fold(0, |best, i| if scores[i] > scores[best] { i } else { best });
        Ok((best, scores, timings))
    }

    /// The log-probability of each of `options` as the assistant's whole reply after the prompt of
    /// `messages` (in the tokenizer's own tokens). The prompt runs once (reusing the longest cached
    /// prefix); each option then runs its tokens on top of it (the logits after each,
    /// [`CausalLm::forward_each`]), and the next option goes back to the prompt's KV state (cut
    /// back to it where the model holds it exactly, as a cold run computes it; else the prompt
    /// runs again from its reused prefix). Timings: the prompt's, with `generated_tokens` the
    /// option tokens run and `decode_s` their time.
    pub fn option_log_probs(&mut self, messages: &[ChatMessage], options: &[&str]) -> Result<(Vec<OptionLogProb>, Timings), LlmError> {
        if options.is_empty() {
            return Err(err("no options"));
        }
        let (first, mut timings) = self.run_prompt(messages)?;
        let prompt_len = self.cached.len();
        let started = Instant::now();
        let mut scored = Vec::with_capacity(options.len());
        for (i, option) in options.iter().enumerate() {
            let tokens = self.tokenizer.encode(option)?;
            let Some((last, _)) = tokens.split_last() else {
                return Err(err(format!("option {i} is empty")));
            };
            let mut logits = if i == 0 || self.cut_back_to(prompt_len) { first.clone() } else { self.run_prompt(messages)?.0 };
            let mut total = 0.0f64;
            let chunk = self.model.max_lookahead().max(1);
            for run in tokens[..tokens.len() - 1].chunks(chunk) {
                let each = self.run_generated(run, |model, pos| model.forward_each(run, pos))?;
                for (&token, after) in run.iter().zip(each) {
                    total += log_prob(&logits, token);
                    logits = after;
                }
                timings.generated_tokens += run.len();
            }
            total += log_prob(&logits, *last);
            scored.push(OptionLogProb { log_prob: total, tokens: tokens.len() });
        }
        timings.decode_s = started.elapsed().as_secs_f64();
        Ok((scored, timings))
    }

    /// Cuts the KV cache back to its first `len` positions when the model holds them exactly as a
    /// cold run computes them ([`CausalLm::reusable_prefix`]); false (nothing cut) otherwise.
    fn cut_back_to(&mut self, len: usize) -> bool {
        if len == 0 || self.cached.len() < len || self.model.reusable_prefix(len) != len {
            return false;
        }
        self.model.truncate_cache(len);
        self.cached.truncate(len);
        true
    }

    /// Runs the chat prompt of `messages` (reusing the longest cached prefix) and returns the
    /// logits of the assistant's first token with the prompt's timings.
    fn run_prompt(&mut self, messages: &[ChatMessage]) -> Result<(Vec<f32>, Timings), LlmError> {
        let ids = self.prompt_tokens(messages)?;
        if ids.len() >= self.info.context_length {
            return Err(LlmError::PromptTooLong { prompt_tokens: ids.len(), context_tokens: self.info.context_length });
        }
        let boundary = if messages.len() > 1 {
            let head = self.template.render(&messages[..messages.len() - 1], false).ok();
            head.and_then(|h| self.text_tokens(&h).ok())
                .filter(|h| !h.is_empty() && h.len() < ids.len() && ids.starts_with(h))
                .map(|h| h.len())
        } else {
            None
        };
        let t = Instant::now();
        let (logits, reused) = match self.prefill(&ids, boundary) {
            Ok(x) => x,
            Err(e) => {
                self.model.truncate_cache(0);
                self.cached.clear();
                return Err(e);
            }
        };
        let timings =
            Timings { prompt_tokens: ids.len(), reused_tokens: reused, prompt_s: t.elapsed().as_secs_f64(), ..Default::default() };
        Ok((logits, timings))
    }

    /// Forgets the KV caches (the next request runs its whole prompt).
    pub fn reset(&mut self) {
        self.model.truncate_cache(0);
        self.cached.clear();
        self.forget_slots();
    }

    /// Direct access to the model (benchmarks).
    pub fn model_mut(&mut self) -> &mut dyn CausalLm {
        self.reset();
        &mut *self.model
    }

    /// Forgets the batch slots' KV caches.
    fn forget_slots(&mut self) {
        if let Some(seqs) = self.model.sequences() {
            for slot in 0..self.slot_cached.len() {
                seqs.truncate_slot(slot + 1, 0);
            }
        }
        self.slot_cached.clear();
    }
}

/// Sets the logits of the tokens the grammar does not allow now to -inf (the mask's time joins
/// `timings`).
pub(crate) fn mask_logits(matcher: &mut llguidance::Matcher, logits: &mut [f32], timings: &mut Timings) -> Result<(), LlmError> {
    let started = Instant::now();
    let mask = matcher.compute_mask().map_err(|e| err(format!("constraint: {e}")))?;
    timings.mask_us.push(started.elapsed().as_secs_f64() * 1e6);
    for (i, l) in logits.iter_mut().enumerate() {
        if !mask.is_allowed(i as u32) {
            *l = f32::NEG_INFINITY;
        }
    }
    Ok(())
}

/// Small deterministic RNG for seeded sampling.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    /// The generator a request with `seed` samples with.
    pub(crate) fn for_seed(seed: u64) -> SplitMix64 {
        SplitMix64(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// `ln p(token)` under the softmax of `logits`.
/// An option's log-probability as a reply ([`Engine::option_log_probs`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionLogProb {
    /// The natural log of the probability of the option's whole text.
    pub log_prob: f64,
    /// Its length in the tokenizer's tokens.
    pub tokens: usize,
}

impl OptionLogProb {
    /// The mean log-probability per token (lm-eval-harness's length normalisation).
    pub fn mean(&self) -> f64 {
        self.log_prob / self.tokens.max(1) as f64
    }
}

fn log_prob(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| ((l as f64) - max).exp()).sum();
    logits.get(token as usize).map_or(f64::NEG_INFINITY, |&l| l as f64 - max - sum.ln())
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut bv = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > bv {
            bv = v;
            best = i;
        }
    }
    best as u32
}

pub(crate) fn sample(logits: &[f32], opts: &GenerateOptions, rng: &mut SplitMix64) -> u32 {
    if opts.temperature <= 0.0 {
        return argmax(logits);
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut probs: Vec<(u32, f32)> =
        logits.iter().enumerate().filter(|(_, &l)| l.is_finite()).map(|(i, &l)| (i as u32, ((l - max) / opts.temperature).exp())).collect();
    probs.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f32 = probs.iter().map(|p| p.1).sum();
    let mut keep = probs.len();
    if opts.top_p < 1.0 {
        let mut acc = 0.0;
        for (i, p) in probs.iter().enumerate() {
            acc += p.1 / total;
            if acc >= opts.top_p {
                keep = i + 1;
                break;
            }
        }
    }
    probs.truncate(keep.max(1));
    let total: f32 = probs.iter().map(|p| p.1).sum();
    let mut r = rng.next_f32() * total;
    for (i, p) in &probs {
        r -= p;
        if r <= 0.0 {
            return *i;
        }
    }
    probs.last().map(|p| p.0).unwrap_or_else(|| argmax(logits))
}

/// Prompt lookup: the tokens that followed the latest earlier occurrence of the last three tokens of
/// `history`, at most `max` of them. Empty when the tail occurs nowhere before. Only 3-grams: a
/// 2-gram match in prose is mostly coincidence, and a missed draft costs more than the single step
/// it replaces.
fn prompt_lookup(history: &[u32], max: usize) -> Vec<u32> {
    const N: usize = 3;
    if max == 0 || history.len() <= N {
        return Vec::new();
    }
    let tail = &history[history.len() - N..];
    // latest occurrence that ends before the tail itself and has a token after it
    let found = (0..history.len() - N).rev().find(|&i| &history[i..i + N] == tail);
    match found {
        Some(i) => history[i + N..(i + N + max).min(history.len())].to_vec(),
        None => Vec::new(),
    }
}
