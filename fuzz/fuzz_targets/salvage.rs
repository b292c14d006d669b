//! Checks shared by the fuzz targets: a read either succeeds, or fails with an error that formats,
//! or is a [`ProfileError::Truncated`] whose recovered launches [`salvage`] hands back intact.
//! Every value of every launch is read (a raw page's values are parsed when read).
#![allow(dead_code)]

use keet::profile::{read_bytes, salvage, At, Launch, Profile, ProfileError};
use std::path::Path;

/// Reads `bytes` the way `keet inspect` does and checks the salvage invariants; returns the
/// launches that would be shown (complete read or recovered part) and whether the file was cut.
pub fn read_checked(path: &str, bytes: &[u8]) -> (Vec<Launch>, bool) {
    let r = read_bytes(Path::new(path), bytes);
    if let Err(e) = &r {
        assert!(!e.to_string().is_empty());
    }
    let (profile, err) = salvage(r);
    let cut = match (&profile, &err) {
        (Some(p), None) => {
            assert!(!p.launches.is_empty(), "Ok with no launch: {:?}", p.notes);
            false
        }
        (Some(p), Some(ProfileError::Truncated { at, launches, recovered, .. })) => {
            assert_eq!(*launches, p.launches.len(), "Truncated counts {launches} launches, recovered {}", p.launches.len());
            assert!(!p.launches.is_empty(), "a cut with no complete launch must be a plain error");
            assert!(recovered.launches.is_empty(), "salvage left the launches in the error too");
            match at {
                At::Byte(b) => assert_eq!(*b, bytes.len() as u64, "a report ends early at its length"),
                At::Line(l) => assert!(*l >= 1),
            }
            assert!(p.notes.iter().any(|n| n.contains("the file ends early")), "{:?}", p.notes);
            true
        }
        (Some(_), Some(e)) => panic!("salvage kept a profile beside a non-truncation error: {e}"),
        (None, Some(ProfileError::Truncated { .. })) => panic!("salvage dropped a Truncated profile"),
        (None, Some(_)) => false,
        (None, None) => unreachable!("salvage returns a profile or an error"),
    };
    let launches = profile.map(|p: Profile| p.launches).unwrap_or_default();
    for l in &launches {
        let n = l.metrics.iter().filter(|(_, m)| m.as_f64().is_some()).count();
        assert!(n <= l.metrics.len());
    }
    (launches, cut)
}
