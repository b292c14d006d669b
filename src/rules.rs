//! Deterministic rule layer.
