//! Facts an expert reads, derived from a launch's metrics.
