//! The explain report's data model, re-exported from [`crate::report::explain`], where it sits
//! below the stages that fill it.

pub use crate::report::explain::*;
