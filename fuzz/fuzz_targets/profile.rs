//! Fuzz target: arbitrary bytes through every text profile parser (folded stacks, `perf
//! script` text, `perf report --stdio` text, kallsyms) and the profile sniffer, plus the
//! self/total computations on whatever profile comes out. Any panic, hang or huge allocation
//! is a bug; errors are fine.
//!
//! `cargo +nightly fuzz run profile` (seed corpus: `fixtures/profile/`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::profile::{
    folded, perf_report, perf_script, sniff_profile, Kallsyms, KernelSymbolSource, ProfileOptions,
    ProfileRead,
};

fn exercise(r: Result<ProfileRead, stallscope_read::ReadError>) {
    if let Ok(r) = r {
        let _ = r.profile.self_weights();
        let _ = r.profile.total_weights();
        let _ = r.profile.total_weight();
    }
}

fn run(data: &[u8]) {
    let _ = sniff_profile(data);
    let text = String::from_utf8_lossy(data);
    let opts = ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: None,
        no_user_symbols: true,
    };
    exercise(folded::parse("fuzz", &text));
    exercise(perf_script::parse("fuzz", &text, &opts));
    exercise(perf_report::parse("fuzz", &text));
    if let Ok(k) = Kallsyms::parse("fuzz", &text) {
        for s in k.symbols().iter().take(8) {
            let _ = k.lookup(s.addr.wrapping_add(1));
        }
        let _ = k.lookup(u64::MAX);
    }
}

fuzz_target!(|data: &[u8]| run(data));
