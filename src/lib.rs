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
pub mod direction;
pub mod eval;
pub mod explain;
pub mod facts;
pub mod files;
pub mod format;
pub mod grounding;
/// The model engine, a crate of its own (`crates/keet-llm`); `crate::llm::...` paths keep working.
pub use keet_llm as llm;
pub mod mechanism;
pub mod merge;
/// Ingest, a crate of its own (`crates/keet-profile`); `crate::profile::...` paths keep working.
pub use keet_profile as profile;
pub mod prose;
pub mod render;
pub mod report;
pub mod rules;
pub mod sense;
pub mod sets;
pub mod templating;
pub mod validate;
