//! In-process LLM engine: model loading (GGUF / safetensors), tokenizer, chat template,
//! generation with a KV cache, and JSON-schema-constrained decoding.

pub mod model;
