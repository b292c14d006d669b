//! The model of one explain run: which one it is before any kernel needs it ([`ModelSource`]),
//! loaded on first use ([`ModelSlot`]), and how the report records it.

use super::report::ModelInfo;
use super::{ExplainError, RunOptions, RunStats};
use crate::llm::engine::Engine;
use std::time::Instant;

/// A loaded model and what identifies it in cache keys.
pub struct Model {
    pub engine: Engine,
    pub info: ModelInfo,
}

/// Which model the explain stage uses, known before any kernel needs it.
// One per run: the size of the resolved variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// `--no-llm`: the rule layer alone.
    None,
    /// Resolved (not loaded) and its file's SHA-256.
    Resolved(crate::llm::resolve::ResolvedModel, String),
    /// As a report recorded it (`keet merge`): resolved (`--model`, else the recorded path) and
    /// checked against the recorded hash only if a kernel still needs it.
    Recorded(ModelInfo),
}

/// The run's model: where it comes from, and the engine once a kernel needed it.
pub struct ModelSlot {
    pub source: ModelSource,
    /// The model file's SHA-256 (`None` without a model).
    pub sha: Option<String>,
    /// The engine, once loaded.
    pub loaded: Option<Model>,
}

impl ModelSlot {
    pub fn new(source: ModelSource) -> ModelSlot {
        let sha = match &source {
            ModelSource::None => None,
            ModelSource::Resolved(_, sha) => Some(sha.clone()),
            ModelSource::Recorded(info) => Some(info.sha256.clone()),
        };
        ModelSlot { source, sha, loaded: None }
    }

    /// Loads the model on first use.
    pub fn load(&mut self, run: &RunOptions, stats: &mut RunStats) -> Result<&mut Model, ExplainError> {
        if self.loaded.is_none() {
            let resolved = match &self.source {
                ModelSource::Resolved(r, _) => r.clone(),
                ModelSource::Recorded(info) => resolve_recorded(info, run)?,
                ModelSource::None => unreachable!("a model hash without a model"),
            };
            let tl = Instant::now();
            if run.progress {
                eprintln!("keet: loading {} ...", resolved.location.path().display());
            }
            let engine = Engine::load_resolved(
                &resolved,
                run.engine.device.as_deref().unwrap_or("cpu"),
                crate::llm::threads::configure(run.engine.threads),
            )?;
            stats.model_load_s = tl.elapsed().as_secs_f64();
            let info = ModelInfo {
                name: engine.info.name.clone(),
                path: engine.info.path.display().to_string(),
                sha256: self.sha.clone().expect("a model source has a hash"),
                device: engine.info.device.clone(),
            };
            self.loaded = Some(Model { engine, info });
        }
        Ok(self.loaded.as_mut().expect("model loaded above"))
    }

    /// The model as the report records it: the loaded one, else as resolved or recorded (a warm
    /// run names the model its cached answers came from without loading it).
    pub fn info(&self, run: &RunOptions) -> Option<ModelInfo> {
        match (&self.loaded, &self.source) {
            (Some(m), _) => Some(m.info.clone()),
            (None, ModelSource::Resolved(r, sha)) => Some(ModelInfo {
                name: r
                    .manifest
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_else(|| r.location.path().file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()),
                path: r.location.path().display().to_string(),
                sha256: sha.clone(),
                device: run.engine.device.clone().unwrap_or_else(|| "cpu".into()),
            }),
            (None, ModelSource::Recorded(info)) => Some(info.clone()),
            (None, ModelSource::None) => None,
        }
    }
}

/// Resolves the model a report recorded (`--model` first, else its recorded path) and checks it
/// is the same file (SHA-256).
fn resolve_recorded(info: &ModelInfo, run: &RunOptions) -> Result<crate::llm::resolve::ResolvedModel, ExplainError> {
    let given = run.engine.model.clone().unwrap_or_else(|| info.path.clone());
    let r = crate::llm::resolve::resolve_model(Some(&given))?;
    let sha = crate::llm::resolve::sha256_file(r.location.path())?;
    if sha != info.sha256 {
        return Err(ExplainError::Io(format!(
            "model {}: SHA-256 {sha}, but the reports were made with {} ({}, SHA-256 {}); pass that model with --model",
            r.location.path().display(),
            info.name,
            info.path,
            info.sha256
        )));
    }
    Ok(r)
}
