//! Maps details-page display labels ("Duration" in "GPU Speed Of Light Throughput") to raw metric names.
