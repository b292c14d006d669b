//! In-process LLM engine: model loading (GGUF / safetensors), tokenizer, chat template,
//! generation with a KV cache, JSON-schema-constrained decoding, the device (CUDA selection, memory,
//! copy bandwidth) and synthetic random-weight models for benchmarks.

pub mod ask;
pub mod batch;
pub mod concurrency;
pub mod constraint;
pub mod device;
pub mod engine;
pub mod fast;
pub mod footprint;
pub mod gguf;
pub mod loader;
pub mod model;
pub mod resolve;
pub mod shared;
pub mod synthetic;
pub mod template;
pub mod threads;
pub mod tokenizer;

pub use batch::{BatchDecoder, Prompt, Request, Ticket};
pub use engine::{Engine, EngineOptions, GenerateOptions, Generation, ModelInfo, OptionLogProb, StopReason, Timings};
pub use model::{CausalLm, LlmError, Sequences, SlotRun, WeightBytes};
pub use shared::{EngineHandle, Generate, SharedEngine};
pub use template::ChatMessage;
