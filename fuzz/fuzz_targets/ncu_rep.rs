//! Fuzz target: the `.ncu-rep` reader and its salvage path on arbitrary bytes behind the `NVR\0`
//! magic. It must return `Ok` or a `ProfileError`, never panic, hang or allocate without bound
//! (see `salvage.rs` for the checks on every read).
//!
//! When the whole input reads as a report, prefixes of it (10%, 50%, 90% of its bytes, all but
//! the last byte) are read too, as a report cut off mid-write: each must give exactly a prefix of
//! the full report's launches (same IDs and kernel names, in order), never a launch the full
//! report does not have.
#![no_main]

mod salvage;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Inputs that already start with the magic (e.g. the seed reports) are used as they are.
    let owned;
    let bytes = if data.starts_with(b"NVR\0") {
        data
    } else {
        owned = [b"NVR\0".as_slice(), data].concat();
        &owned
    };
    let (full, cut) = salvage::read_checked("fuzz.ncu-rep", bytes);
    if cut || full.is_empty() {
        return;
    }
    let n = bytes.len();
    for k in [n / 10, n / 2, n * 9 / 10, n - 1] {
        if k < 4 {
            continue;
        }
        let (part, _) = salvage::read_checked("fuzz.ncu-rep", &bytes[..k]);
        assert!(part.len() <= full.len(), "{k} of {n} bytes: {} launches, the full report has {}", part.len(), full.len());
        for (p, f) in part.iter().zip(&full) {
            assert_eq!((p.id, &p.name), (f.id, &f.name), "{k} of {n} bytes: not a prefix of the full report's launches");
        }
    }
});
