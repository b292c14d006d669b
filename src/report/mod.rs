//! Report types that sit below the stages which fill them: plain data, imported by the stages and
//! the renderers, importing no stage.

pub mod batch;
pub mod code;
pub mod explain;
pub mod writer;
