//! One model shared by several threads whose requests are decoded together.
//!
//! Design: a coordinator thread owns the [`Engine`] and a [`BatchDecoder`]; clients hold
//! [`EngineHandle`]s (cheap to clone, one per thread) that send a [`Request`] over a channel and
//! wait for its [`Generation`]. Between decode steps the coordinator takes every request that
//! arrived, so requests from N threads share each step (continuous batching: a new request joins
//! at the next step, a finished one frees its slot at once); when nothing is outstanding it sleeps
//! on the channel. Each answer is exactly what the request gets from [`Engine::generate`] alone.
//!
//! [`Generate`] is the one call the ask loop ([`crate::ask::ask`]) and other callers need; both
//! [`Engine`] (one request at a time, `&mut`) and [`EngineHandle`] implement it, so a stage runs
//! one flow on an engine or several flows on threads, each with a handle:
//!
//! ```ignore
//! let shared = SharedEngine::start(engine, 4)?; // up to 4 requests per decode step
//! std::thread::scope(|s| {
//!     for kernel in kernels {
//!         let mut handle = shared.handle();
//!         s.spawn(move || explain_one(&mut handle, kernel)); // ask(&mut handle, ...)
//!     }
//! });
//! let engine = shared.stop()?; // the engine back, for what follows
//! ```
//!
//! Slots: more client threads than slots is fine (requests wait for a free slot); each slot keeps
//! its own KV cache, with the prompt of its last request for prefix reuse (memory: slots x the
//! longest conversation). Models without several-sequence support (candle models, CUDA) are
//! served through the same handle one request at a time, in arrival order.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;

use serde_json::Value;

use super::batch::{BatchDecoder, Request, Ticket};
use super::engine::{Engine, GenerateOptions, Generation, ModelInfo};
use super::model::LlmError;
use super::template::ChatMessage;

/// Generation under the engine's rules (see [`Engine::generate`]), by an engine or a handle.
pub trait Generate {
    /// The assistant's reply to `messages`; with `schema`, JSON valid against it.
    fn generate(&mut self, messages: &[ChatMessage], opts: &GenerateOptions, schema: Option<&Value>) -> Result<Generation, LlmError>;
}

impl Generate for Engine {
    fn generate(&mut self, messages: &[ChatMessage], opts: &GenerateOptions, schema: Option<&Value>) -> Result<Generation, LlmError> {
        Engine::generate(self, messages, opts, schema)
    }
}

type Reply = mpsc::Sender<Result<Generation, LlmError>>;

/// What a handle asks of the coordinator.
enum Message {
    Generate(Box<Request>, Reply),
    /// Finish the outstanding requests and hand the engine back.
    Stop,
}

/// The coordinator thread and its engine; see the module documentation.
pub struct SharedEngine {
    requests: mpsc::Sender<Message>,
    worker: Option<JoinHandle<Engine>>,
    info: ModelInfo,
}

impl SharedEngine {
    /// Moves `engine` to a coordinator thread that decodes up to `slots` requests at once.
    pub fn start(engine: Engine, slots: usize) -> Result<SharedEngine, LlmError> {
        let info = engine.info.clone();
        let (requests, inbox) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("keet-llm-batch".into())
            .spawn(move || serve(engine, slots, inbox))
            .map_err(|e| LlmError::Msg(format!("starting the engine thread: {e}")))?;
        Ok(SharedEngine { requests, worker: Some(worker), info })
    }

    /// A handle for one client thread.
    pub fn handle(&self) -> EngineHandle {
        EngineHandle { requests: self.requests.clone() }
    }

    /// What was loaded.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Waits for the outstanding requests, stops the coordinator and returns the engine (handles
    /// still held answer errors from then on).
    pub fn stop(mut self) -> Result<Engine, LlmError> {
        let worker = self.worker.take().ok_or_else(|| LlmError::Msg("the engine thread is gone".into()))?;
        let _ = self.requests.send(Message::Stop);
        worker.join().map_err(|_| LlmError::Msg("the engine thread panicked".into()))
    }
}

impl Drop for SharedEngine {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            let _ = self.requests.send(Message::Stop);
            let _ = worker.join();
        }
    }
}

/// A client's way to the shared engine: [`Generate`] from any thread (clone one per thread).
#[derive(Clone)]
pub struct EngineHandle {
    requests: mpsc::Sender<Message>,
}

impl EngineHandle {
    /// Sends `request` and waits for its generation.
    pub fn submit(&self, request: Request) -> Result<Generation, LlmError> {
        let gone = || LlmError::Msg("the shared engine has stopped".into());
        let (reply, answer) = mpsc::channel();
        self.requests.send(Message::Generate(Box::new(request), reply)).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

impl Generate for EngineHandle {
    fn generate(&mut self, messages: &[ChatMessage], opts: &GenerateOptions, schema: Option<&Value>) -> Result<Generation, LlmError> {
        self.submit(Request::messages(messages.to_vec(), opts.clone(), schema.cloned()))
    }
}

/// The coordinator: takes requests between steps, steps while any is outstanding, answers each
/// when it finishes; returns the engine after a stop once nothing is outstanding.
fn serve(mut engine: Engine, slots: usize, inbox: mpsc::Receiver<Message>) -> Engine {
    let mut decoder = BatchDecoder::new(slots);
    let mut replies: HashMap<Ticket, Reply> = HashMap::new();
    let mut stopping = false;
    loop {
        if decoder.is_idle() {
            if stopping {
                break;
            }
            match inbox.recv() {
                Ok(message) => stopping |= take(message, &mut decoder, &mut replies),
                Err(_) => break,
            }
        }
        while let Ok(message) = inbox.try_recv() {
            stopping |= take(message, &mut decoder, &mut replies);
        }
        for (ticket, result) in decoder.step(&mut engine) {
            if let Some(reply) = replies.remove(&ticket) {
                let _ = reply.send(result);
            }
        }
    }
    engine
}

/// Queues a request (its reply kept by ticket); `true` for a stop.
fn take(message: Message, decoder: &mut BatchDecoder, replies: &mut HashMap<Ticket, Reply>) -> bool {
    match message {
        Message::Generate(request, reply) => {
            replies.insert(decoder.submit(*request), reply);
            false
        }
        Message::Stop => true,
    }
}
