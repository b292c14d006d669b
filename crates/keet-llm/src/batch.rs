//! Batched generation: several requests decoded together on one model, each in its own KV-cache
//! slot ([`Sequences`](crate::model::Sequences)), so that one decode step runs a token (or a few) of every active request
//! and the weights' products are shared across them (on the fast CPU engine a step of 8 tokens
//! costs about 2.5 single steps).
//!
//! * [`BatchDecoder`] holds the requests waiting and the ones being decoded (at most its slot
//!   count). [`BatchDecoder::step`] first admits waiting requests into free slots (continuous
//!   batching: a finished request's slot goes to the next one at once), each prompt prefilled on
//!   its own on the prompt path, reusing the longest prefix its slot already holds; then it runs
//!   one decode step of every active request together and returns the requests that finished.
//! * Each request keeps its own grammar matcher, repeat-penalty window and random generator,
//!   seeded as [`Engine::generate`] seeds it, and goes through the same choices in the same order
//!   (sample, end tokens, forced tokens, budget, context): with the model's per-token values equal
//!   bit for bit whatever else runs in the step, the tokens and text are exactly those of the
//!   request generated alone, greedy or sampled. Prompt-lookup drafts
//!   ([`GenerateOptions::lookahead`]) are not used here (they change the cost, never the tokens).
//!   A run of generated tokens longer than [`Sequences::max_step_tokens`](crate::model::Sequences::max_step_tokens) (many forced tokens) goes
//!   through the model alone, as a single request's would.
//! * Models without [`Sequences`](crate::model::Sequences) (candle models, CUDA) are served one request per step, whole.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use llguidance::Matcher;
use serde_json::Value;

use super::engine::{mask_logits, sample, Engine, GenerateOptions, Generation, SplitMix64, StopReason, Timings};
use super::model::{LlmError, SlotRun};
use super::template::ChatMessage;

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// What a request generates from.
#[derive(Debug, Clone)]
pub enum Prompt {
    /// A conversation, rendered with the model's chat template (as [`Engine::generate`]).
    Messages(Vec<ChatMessage>),
    /// A full prompt text (as [`Engine::generate_text`]).
    Text(String),
}

/// One generation request: the prompt, its options and an optional JSON Schema for the answer.
#[derive(Debug, Clone)]
pub struct Request {
    pub prompt: Prompt,
    pub options: GenerateOptions,
    pub schema: Option<Value>,
}

impl Request {
    /// A request for the reply to `messages`.
    pub fn messages(messages: Vec<ChatMessage>, options: GenerateOptions, schema: Option<Value>) -> Request {
        Request { prompt: Prompt::Messages(messages), options, schema }
    }
}

/// Names a submitted request among the results of [`BatchDecoder::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// A finished request: its ticket and its generation (or why it failed).
pub type Finished = (Ticket, Result<Generation, LlmError>);

/// Requests waiting and being decoded together; see the module documentation.
pub struct BatchDecoder {
    slots: usize,
    next_ticket: u64,
    waiting: VecDeque<(Ticket, Request)>,
    active: Vec<Sequence>,
}

/// A request being decoded in batch slot `slot` (the model's KV slot `slot + 1`).
struct Sequence {
    ticket: Ticket,
    slot: usize,
    prompt_len: usize,
    options: GenerateOptions,
    matcher: Option<Matcher>,
    rng: SplitMix64,
    end_ids: Vec<u32>,
    out: Vec<u32>,
    /// The logits after the last token run (current when `pending` is empty).
    logits: Vec<f32>,
    /// Generated tokens (sampled and forced) still to run through the model.
    pending: Vec<u32>,
    timings: Timings,
    decode_start: Instant,
}

impl BatchDecoder {
    /// A decoder running at most `slots` requests at once (at least 1).
    pub fn new(slots: usize) -> BatchDecoder {
        BatchDecoder { slots: slots.max(1), next_ticket: 0, waiting: VecDeque::new(), active: Vec::new() }
    }

    /// Queues `request`; it starts when a slot is free.
    pub fn submit(&mut self, request: Request) -> Ticket {
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.waiting.push_back((ticket, request));
        ticket
    }

    /// No request waiting or being decoded.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.active.is_empty()
    }

    /// Requests being decoded now.
    pub fn active(&self) -> usize {
        self.active.len()
    }

    /// Admits waiting requests into free slots, runs one decode step of every active request, and
    /// returns the requests that finished. A model without [`Sequences`](crate::model::Sequences) runs one whole request.
    pub fn step(&mut self, engine: &mut Engine) -> Vec<Finished> {
        if engine.model.sequences().is_none() {
            return self.waiting.pop_front().map(|(ticket, request)| vec![(ticket, engine.generate_request(&request))]).unwrap_or_default();
        }
        let mut done = Vec::new();
        self.admit(engine, &mut done);
        self.choose(engine, &mut done);
        self.run_pending(engine, &mut done);
        done
    }

    /// Starts waiting requests while slots are free (a request that fails to start finishes).
    fn admit(&mut self, engine: &mut Engine, done: &mut Vec<Finished>) {
        if engine.slot_cached.len() < self.slots {
            engine.slot_cached.resize(self.slots, Vec::new());
        }
        if let Some(seqs) = engine.model.sequences() {
            seqs.ensure_slots(self.slots + 1);
        }
        while self.active.len() < self.slots {
            let Some((ticket, request)) = self.waiting.pop_front() else { break };
            let free: Vec<usize> = (0..self.slots).filter(|s| self.active.iter().all(|a| a.slot != *s)).collect();
            match Sequence::start(engine, ticket, &free, &request) {
                Ok(seq) => self.active.push(seq),
                Err(e) => done.push((ticket, Err(e))),
            }
        }
    }

    /// Chooses the next tokens of every request whose logits are current; finished requests leave.
    fn choose(&mut self, engine: &mut Engine, done: &mut Vec<Finished>) {
        let mut i = 0;
        while i < self.active.len() {
            let seq = &mut self.active[i];
            let outcome = if seq.pending.is_empty() { seq.advance(engine) } else { Ok(None) };
            match outcome {
                Ok(None) => i += 1,
                Ok(Some(stop)) => {
                    let seq = self.active.remove(i);
                    done.push((seq.ticket, Ok(seq.finish(engine, stop))));
                }
                Err(e) => {
                    let seq = self.active.remove(i);
                    done.push((seq.ticket, Err(e)));
                }
            }
        }
    }

    /// Runs every request's pending tokens: the short runs in one step of all of them, a longer
    /// run alone. On a failure the requests involved finish with the error and their slots are
    /// cleared (their cache state is unknown).
    fn run_pending(&mut self, engine: &mut Engine, done: &mut Vec<Finished>) {
        let Some(seqs) = engine.model.sequences() else { return };
        let max = seqs.max_step_tokens();
        let (short, long): (Vec<usize>, Vec<usize>) = (0..self.active.len()).partition(|&i| self.active[i].pending.len() <= max);
        let mut results: HashMap<usize, Result<Vec<f32>, String>> = HashMap::new();
        for &i in &long {
            let seq = &self.active[i];
            let start = engine.slot_cached[seq.slot].len();
            results.insert(i, seqs.forward_slot(seq.slot + 1, &seq.pending, start).map_err(|e| e.to_string()));
        }
        let runs: Vec<SlotRun<'_>> = short
            .iter()
            .map(|&i| &self.active[i])
            .map(|seq| SlotRun { slot: seq.slot + 1, tokens: &seq.pending, start: engine.slot_cached[seq.slot].len() })
            .collect();
        if !runs.is_empty() {
            match seqs.forward_step(&runs) {
                Ok(logits) => results.extend(short.iter().copied().zip(logits.into_iter().map(Ok))),
                Err(e) => results.extend(short.iter().map(|&i| (i, Err(e.to_string())))),
            }
        }
        let mut failed = Vec::new();
        for (i, seq) in self.active.iter_mut().enumerate() {
            match results.remove(&i) {
                Some(Ok(logits)) => {
                    engine.slot_cached[seq.slot].extend_from_slice(&seq.pending);
                    seq.pending.clear();
                    seq.logits = logits;
                }
                Some(Err(e)) => failed.push((i, e)),
                None => {}
            }
        }
        for (i, e) in failed.into_iter().rev() {
            let seq = self.active.remove(i);
            seqs.truncate_slot(seq.slot + 1, 0);
            engine.slot_cached[seq.slot].clear();
            done.push((seq.ticket, Err(err(e))));
        }
    }
}

impl Sequence {
    /// Tokenizes `request`, compiles its schema, prefills its prompt in the free slot whose cache
    /// shares the longest prefix with it, and takes the tokens the grammar forces at the start.
    fn start(engine: &mut Engine, ticket: Ticket, free: &[usize], request: &Request) -> Result<Sequence, LlmError> {
        let ids = match &request.prompt {
            Prompt::Messages(messages) => engine.message_tokens(messages)?.0,
            Prompt::Text(text) => engine.text_tokens(text)?,
        };
        if ids.is_empty() {
            return Err(err("empty prompt"));
        }
        let ctx = engine.info.context_length;
        if ids.len() >= ctx {
            return Err(LlmError::PromptTooLong { prompt_tokens: ids.len(), context_tokens: ctx });
        }
        let options = request.options.clone();
        let mut timings = Timings { prompt_tokens: ids.len(), ..Default::default() };
        let mut matcher = match &request.schema {
            Some(schema) => {
                let started = Instant::now();
                engine.prepare_constraints()?;
                let m = engine.constrainer.as_ref().ok_or_else(|| err("no constraint engine"))?.matcher(schema)?;
                timings.schema_s = started.elapsed().as_secs_f64();
                Some(m)
            }
            None => None,
        };
        let common = |slot: &usize| engine.slot_cached[*slot].iter().zip(&ids).take_while(|(a, b)| a == b).count();
        let slot = free.iter().copied().max_by_key(|s| (common(s), std::cmp::Reverse(*s))).ok_or_else(|| err("no free slot"))?;
        let started = Instant::now();
        let (logits, reused) = prefill_slot(engine, slot, &ids)?;
        timings.reused_tokens = reused;
        timings.prompt_s = started.elapsed().as_secs_f64();
        let end_ids = engine.tokenizer.end_ids.iter().chain(options.extra_stop_ids.iter()).copied().collect();
        let mut out = Vec::new();
        let mut pending = Vec::new();
        if let Some(m) = matcher.as_mut() {
            let forced = m.consume_ff_tokens();
            let forced = &forced[..forced.len().min(options.max_tokens).min(ctx.saturating_sub(engine.slot_cached[slot].len() + 1))];
            out.extend_from_slice(forced);
            timings.forced_tokens += forced.len();
            if !forced.is_empty() && !m.is_stopped() {
                pending = forced.to_vec();
            }
        }
        let rng = SplitMix64::for_seed(options.seed);
        let decode_start = Instant::now();
        Ok(Sequence { ticket, slot, prompt_len: ids.len(), options, matcher, rng, end_ids, out, logits, pending, timings, decode_start })
    }

    /// One choice of [`Engine::generate_tokens`]'s loop from the current logits: the next token
    /// and the tokens the grammar forces after it become `pending`, or the request stops.
    fn advance(&mut self, engine: &Engine) -> Result<Option<StopReason>, LlmError> {
        let ctx = engine.info.context_length;
        let cached = engine.slot_cached[self.slot].len();
        let opts = &self.options;
        if self.out.len() >= opts.max_tokens {
            return Ok(Some(StopReason::MaxTokens));
        }
        if cached + 1 >= ctx {
            return Ok(Some(StopReason::ContextFull));
        }
        engine.apply_repeat_penalty(&mut self.logits, &self.out, opts);
        if let Some(m) = self.matcher.as_mut() {
            if m.is_stopped() {
                return Ok(Some(StopReason::ConstraintComplete));
            }
            mask_logits(m, &mut self.logits, &mut self.timings)?;
        }
        let tok = sample(&self.logits, opts, &mut self.rng);
        if self.end_ids.contains(&tok) {
            return Ok(Some(StopReason::EndToken));
        }
        self.out.push(tok);
        let mut step = vec![tok];
        if let Some(m) = self.matcher.as_mut() {
            m.consume_token(tok).map_err(|e| err(format!("constraint: {e}")))?;
            if m.is_stopped() {
                return Ok(Some(StopReason::ConstraintComplete));
            }
            let forced = m.consume_ff_tokens();
            let room = opts.max_tokens.saturating_sub(self.out.len()).min(ctx.saturating_sub(cached + 2));
            let forced = &forced[..forced.len().min(room)];
            self.out.extend_from_slice(forced);
            step.extend_from_slice(forced);
            self.timings.forced_tokens += forced.len();
            if m.is_stopped() {
                return Ok(Some(StopReason::ConstraintComplete));
            }
        }
        if self.out.len() >= opts.max_tokens {
            return Ok(Some(StopReason::MaxTokens));
        }
        self.pending = step;
        Ok(None)
    }

    /// The generation, its slot's prompt kept for reuse (as [`Engine::generate_tokens`] keeps it).
    fn finish(mut self, engine: &mut Engine, stop: StopReason) -> Generation {
        self.timings.generated_tokens = self.out.len();
        self.timings.decode_s = self.decode_start.elapsed().as_secs_f64();
        let cached = &mut engine.slot_cached[self.slot];
        cached.truncate(self.prompt_len.min(cached.len()));
        let text = engine.tokenizer.decode(&self.out);
        Generation { text, tokens: self.out, stop_reason: stop, timings: self.timings }
    }
}

/// Runs prompt `ids` in batch slot `slot`, reusing the longest prefix its cache holds exactly
/// ([`crate::model::Sequences::reusable_prefix_slot`]); returns the logits of the last prompt
/// token and how many tokens were reused. On a failure the slot is cleared.
fn prefill_slot(engine: &mut Engine, slot: usize, ids: &[u32]) -> Result<(Vec<f32>, usize), LlmError> {
    let seqs = engine.model.sequences().ok_or_else(|| err("the model decodes one sequence at a time"))?;
    let cached = &mut engine.slot_cached[slot];
    let common = cached.iter().zip(ids).take_while(|(a, b)| a == b).count();
    let reuse = seqs.reusable_prefix_slot(slot + 1, common.min(ids.len() - 1));
    seqs.truncate_slot(slot + 1, reuse);
    cached.truncate(reuse);
    match seqs.forward_prompt_slot(slot + 1, &ids[reuse..], reuse) {
        Ok(logits) => {
            cached.extend_from_slice(&ids[reuse..]);
            Ok((logits, reuse))
        }
        Err(e) => {
            seqs.truncate_slot(slot + 1, 0);
            cached.clear();
            Err(e)
        }
    }
}

impl Engine {
    /// Generates for `requests` together, at most `slots` at once (continuous batching: see the
    /// module documentation); the results in the order of `requests`, each exactly what the
    /// request gets alone.
    pub fn generate_batch(&mut self, requests: Vec<Request>, slots: usize) -> Vec<Result<Generation, LlmError>> {
        let mut decoder = BatchDecoder::new(slots);
        let tickets: Vec<Ticket> = requests.into_iter().map(|r| decoder.submit(r)).collect();
        let mut results: HashMap<Ticket, Result<Generation, LlmError>> = HashMap::new();
        while !decoder.is_idle() {
            results.extend(decoder.step(self));
        }
        tickets.iter().map(|t| results.remove(t).unwrap_or_else(|| Err(err("request lost by the batch decoder")))).collect()
    }

    /// [`Engine::generate`] or [`Engine::generate_text`] for `request`.
    pub fn generate_request(&mut self, request: &Request) -> Result<Generation, LlmError> {
        match &request.prompt {
            Prompt::Messages(messages) => self.generate(messages, &request.options, request.schema.as_ref()),
            Prompt::Text(text) => self.generate_text(text, &request.options, request.schema.as_ref()),
        }
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
