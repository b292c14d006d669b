//! Fuzz target: the `.ncu-rep` reader on arbitrary bytes behind the `NVR\0` magic.
//! It must return `Ok` or a `ProfileError`, never panic, hang or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    // Inputs that already start with the magic (e.g. the seed reports) are used as they are.
    let owned;
    let bytes = if data.starts_with(b"NVR\0") {
        data
    } else {
        owned = [b"NVR\0".as_slice(), data].concat();
        &owned
    };
    let _ = keet::profile::read_bytes(Path::new("fuzz.ncu-rep"), bytes);
});
