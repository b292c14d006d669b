//! Report types that sit below the stages which fill them: plain data, imported by the stages and
//! the renderers, importing no stage. (The explain report's other types still live in
//! `explain::report`; they move here as they leave the explain stage's import circle.)

pub mod code;
