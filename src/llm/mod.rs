//! In-process LLM engine: model loading (GGUF / safetensors), tokenizer, chat template,
//! generation with a KV cache, and JSON-schema-constrained decoding.

pub mod constraint;
pub mod engine;
pub mod fast;
pub mod loader;
pub mod model;
pub mod resolve;
pub mod template;
pub mod threads;
pub mod tokenizer;

pub use engine::{Engine, EngineOptions, GenerateOptions, Generation, ModelInfo, StopReason, Timings};
pub use model::{CausalLm, LlmError};
pub use template::ChatMessage;
