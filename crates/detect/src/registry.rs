//! The list of detectors. Adding one is one line here (see DESIGN.md "Adding a detector").

use crate::detectors::{idle_while_runnable, runqueue_starvation, wakeup_ping_pong};
use crate::{Detector, DetectorInfo, Params};

/// One registered detector: its description and its constructor.
pub struct Entry {
    /// Static description.
    pub info: &'static DetectorInfo,
    /// Builds it with resolved parameters.
    pub make: fn(&Params) -> Box<dyn Detector>,
}

/// Every detector, in listing order.
pub static DETECTORS: &[Entry] = &[
    Entry {
        info: &runqueue_starvation::INFO,
        make: runqueue_starvation::make,
    },
    Entry {
        info: &wakeup_ping_pong::INFO,
        make: wakeup_ping_pong::make,
    },
    Entry {
        info: &crate::detectors::cpu_saturation::INFO,
        make: crate::detectors::cpu_saturation::make,
    },
    Entry {
        info: &idle_while_runnable::INFO,
        make: idle_while_runnable::make,
    },
    Entry {
        info: &crate::detectors::worker_flood::INFO,
        make: crate::detectors::worker_flood::make,
    },
    Entry {
        info: &crate::detectors::lock_spinning::INFO,
        make: crate::detectors::lock_spinning::make,
    },
    Entry {
        info: &crate::detectors::dispatch_starvation::INFO,
        make: crate::detectors::dispatch_starvation::make,
    },
    Entry {
        info: &crate::detectors::blocked_chain::INFO,
        make: crate::detectors::blocked_chain::make,
    },
];

/// The entry with id `id`.
pub fn find(id: &str) -> Option<&'static Entry> {
    DETECTORS.iter().find(|e| e.info.id == id)
}

/// Every id, comma-separated (for error messages).
pub fn ids() -> String {
    DETECTORS
        .iter()
        .map(|e| e.info.id)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_documented() {
        let mut seen = std::collections::BTreeSet::new();
        for e in DETECTORS {
            let i = e.info;
            assert!(seen.insert(i.id), "duplicate id {}", i.id);
            assert!(
                i.id.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{}",
                i.id
            );
            for section in [
                "## What it finds",
                "## Why it matters",
                "## How to confirm",
                "## Limits",
                "## Severity",
            ] {
                assert!(i.explanation.contains(section), "{} lacks {section}", i.id);
            }
            for p in i.params {
                assert!(
                    i.explanation.contains(p.name),
                    "{}: {} undocumented",
                    i.id,
                    p.name
                );
            }
            let d = (e.make)(&Params::defaults(i.params));
            assert_eq!(d.info().id, i.id);
        }
    }
}
