//! Data-quality counters: every recoverable problem a reader or the timeline meets is
//! counted here, with its first few examples, and shown to the user before any result.
//! Never an uncounted `continue`.

use std::collections::BTreeMap;

use serde::Serialize;

/// How much a data-quality problem can distort results.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational (e.g. µs-resolution text input).
    Info,
    /// Some numbers may be off (e.g. unparsed lines, out-of-order events).
    Warning,
    /// Results are incomplete (e.g. lost events).
    Error,
}

/// One counter.
#[derive(Clone, Debug, Serialize)]
pub struct StatEntry {
    /// Severity.
    pub severity: Severity,
    /// Occurrences (or, for `lost_events`, events lost where known).
    pub count: u64,
    /// What it means, one sentence.
    pub description: String,
    /// The first few occurrences (`file:line: text`).
    pub examples: Vec<String>,
}

/// The data-quality registry of one run (merge the registries of several readers with
/// [`DataQuality::merge`]).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct DataQuality {
    entries: BTreeMap<String, StatEntry>,
}

impl DataQuality {
    /// Examples kept per counter.
    pub const MAX_EXAMPLES: usize = 5;

    /// Adds `n` to counter `key`, keeping `example` if fewer than [`Self::MAX_EXAMPLES`] are kept.
    /// `description` is used when the counter is created.
    pub fn add(
        &mut self,
        key: &str,
        severity: Severity,
        description: &str,
        n: u64,
        example: impl FnOnce() -> String,
    ) {
        // Fast path without allocating the key: floods of one problem are common.
        if let Some(e) = self.entries.get_mut(key) {
            // counts can come from the file (lost-event totals): they saturate
            e.count = e.count.saturating_add(n);
            if e.examples.len() < Self::MAX_EXAMPLES {
                e.examples.push(example());
            }
            return;
        }
        self.entries.insert(
            key.to_string(),
            StatEntry {
                severity,
                count: n,
                description: description.to_string(),
                examples: vec![example()],
            },
        );
    }

    /// Counter value (0 when absent).
    pub fn count(&self, key: &str) -> u64 {
        self.entries.get(key).map_or(0, |e| e.count)
    }

    /// All counters, by key.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &StatEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds every counter of `other` into `self`.
    pub fn merge(&mut self, other: &DataQuality) {
        for (k, v) in &other.entries {
            let e = self.entries.entry(k.clone()).or_insert_with(|| StatEntry {
                severity: v.severity,
                count: 0,
                description: v.description.clone(),
                examples: Vec::new(),
            });
            e.count = e.count.saturating_add(v.count);
            for ex in &v.examples {
                if e.examples.len() < Self::MAX_EXAMPLES {
                    e.examples.push(ex.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_keeps_first_examples() {
        let mut dq = DataQuality::default();
        for i in 0..10 {
            dq.add("bad_line", Severity::Warning, "unparsed line", 1, || {
                format!("line {i}")
            });
        }
        assert_eq!(dq.count("bad_line"), 10);
        assert_eq!(dq.count("other"), 0);
        let (_, e) = dq.entries().next().unwrap();
        assert_eq!(
            e.examples,
            vec!["line 0", "line 1", "line 2", "line 3", "line 4"]
        );
        let mut dq2 = DataQuality::default();
        dq2.merge(&dq);
        dq2.merge(&dq);
        assert_eq!(dq2.count("bad_line"), 20);
    }
}
