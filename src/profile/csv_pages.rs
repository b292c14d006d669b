//! Readers for ncu's CSV pages: details, raw, metrics, source, and GUI exports.
use super::{Profile, ProfileError, Result};
use std::path::Path;

pub fn read(path: &Path, _bytes: &[u8]) -> Result<Profile> {
    Err(ProfileError::Format { path: path.to_owned(), message: "CSV reader not written yet".into() })
}
