//! Decode-speed measurement (not a timed test: it asserts nothing about speed). Drains a big
//! perf.data through `PerfDataReader::next_event()` and prints the time next to
//! `perf script > /dev/null` on the same file:
//!
//! ```text
//! perf sched record -o /tmp/big.data -- perf bench sched pipe -l 200000
//! STALLSCOPE_PERF_BENCH=/tmp/big.data cargo test --release -p stallscope-read \
//!     --test perf_drain -- --ignored --nocapture
//! ```

use std::process::{Command, Stdio};
use std::time::Instant;

use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::{EventReader, Input};

#[test]
#[ignore = "needs a big perf.data in STALLSCOPE_PERF_BENCH; run with --release --ignored"]
fn drain_speed_versus_perf_script() {
    let Ok(path) = std::env::var("STALLSCOPE_PERF_BENCH") else {
        panic!("set STALLSCOPE_PERF_BENCH to a perf.data file");
    };
    for worker in [true, false] {
        let t = Instant::now();
        let mut r =
            PerfDataReader::open_with_worker(Input::open(&path).unwrap(), 0, worker).unwrap();
        let mut n = 0u64;
        while r.next_event().unwrap().is_some() {
            n += 1;
        }
        let dt = t.elapsed();
        println!(
            "stallscope ({}): {n} events in {:.3} s ({:.0} ns/event)",
            if worker {
                "reader thread"
            } else {
                "one thread"
            },
            dt.as_secs_f64(),
            dt.as_nanos() as f64 / n.max(1) as f64
        );
    }
    let t = Instant::now();
    let status = Command::new("perf")
        .args(["script", "-i", &path])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => println!("perf script: {:.3} s", t.elapsed().as_secs_f64()),
        other => println!("perf script did not run: {other:?}"),
    }
}
