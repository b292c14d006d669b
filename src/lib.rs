//! keet: the Kernel Execution Explanation Toolkit.
//!
//! Data flows one way: [`profile`] (ingest) → [`facts`] → [`rules`] → prompt ([`explain`]) →
//! findings ([`llm`]) → [`validate`] and the [`prose`] gate → report ([`render`]), with [`cache`] keeping analyses.

pub mod analysis;
pub mod batch;
pub mod cache;
pub mod cli;
pub mod collect;
pub mod compare;
pub mod eval;
pub mod explain;
pub mod facts;
pub mod llm;
pub mod merge;
pub mod profile;
pub mod prose;
pub mod render;
pub mod rules;
pub mod validate;
