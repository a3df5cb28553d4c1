//! Every product reads its input's data once: the bytes each command takes from the input
//! file, counted by `strace` (the results of `read` / `pread64` on the file, plus the length
//! of every `mmap` of it, over all threads), are those of one reading — `analyze`'s, the
//! baseline: the format sniffing, the headers and the data once. A second reading of the data
//! (a product reading the input apart, as `tables` did for `samples` and compare for its
//! summary) adds at least the data size again.
//! `analyze --html` too: the windows around the findings (known only after the analysis)
//! come from the events the analysis kept as they streamed by.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::root;

/// What sniffing formats may read of an input besides the data: the heads of a few
/// attempts, or a decompressor's first input buffer.
const SNIFF: u64 = 256 * 1024;

/// Bytes the command `args` (stallscope's) read from `file`, by strace.
fn bytes_read(file: &Path, args: &[&str]) -> u64 {
    let dir = tempdir();
    let prefix = dir.join("trace");
    let out = Command::new("strace")
        .args(["-f", "-ff", "-y", "-e", "trace=read,pread64,mmap", "-o"])
        .arg(&prefix)
        .arg(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .output()
        .expect("run strace");
    assert!(
        out.status.success(),
        "stallscope {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = std::fs::canonicalize(file).expect("the input's path");
    let tag = format!("<{}>", path.display());
    let mut total = 0;
    for entry in std::fs::read_dir(&dir).expect("strace output") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("trace file");
        for line in text.lines().filter(|l| l.contains(&tag)) {
            total += syscall_bytes(line);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    total
}

/// The bytes one strace line of a call on the input took: a read's result, an mmap's length.
fn syscall_bytes(line: &str) -> u64 {
    if line.starts_with("read(") || line.starts_with("pread64(") {
        return line
            .rsplit("= ")
            .next()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
    }
    if line.starts_with("mmap(") {
        // mmap(ADDR, LENGTH, PROT, FLAGS, FD<path>, OFFSET) = ADDR
        return line
            .split(", ")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
    }
    0
}

/// A fresh directory under the target directory.
fn tempdir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("stallscope-reads-once-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn every_product_reads_the_data_once() {
    if !stallscope_testkit::require(
        "strace",
        stallscope_testkit::starts("strace", &["-V"]),
        "apt-get install strace",
    ) {
        return;
    }
    // an uncompressed perf.data (mapped) and an xz trace.dat with
    // workqueue events (read and decompressed), each larger than the sniffing reads, so a
    // second reading of the data cannot hide in the slack
    for rel in [
        "fixtures/detectors/runqueue-starvation/cgroup.perf.data",
        "fixtures/detectors/worker-flood/prewritten.dat.xz",
    ] {
        let file = root().join(rel);
        let size = std::fs::metadata(&file).expect("fixture").len();
        let f = file.to_str().expect("utf-8 path");
        let out = tempdir();
        let o = |name: &str| out.join(name).to_string_lossy().into_owned();
        let once = bytes_read(&file, &["analyze", f]);
        assert!(
            size > 2 * SNIFF,
            "{rel}: too small to tell a second reading"
        );
        // the baseline itself reads the data once: the data, headers and sniffing
        assert!(
            once >= size && once <= size + SNIFF,
            "{rel}: analyze read {once} bytes of {size}"
        );
        let (tables, fleet, export) = (o("tables"), o("fleet"), o("export.json"));
        let html = o("report.html");
        let products: [(&str, Vec<&str>); 6] = [
            ("analyze --html", vec!["analyze", f, "--html", &html]),
            (
                "tables (all but events)",
                vec!["tables", f, "--to", &tables],
            ),
            ("fleet", vec!["fleet", f, "--out", &fleet]),
            (
                "export --findings",
                vec![
                    "export",
                    f,
                    "--to",
                    "chrome-json",
                    "-o",
                    &export,
                    "--findings",
                ],
            ),
            ("latency", vec!["latency", f]),
            ("sleeps", vec!["sleeps", f]),
        ];
        for (name, args) in products {
            let n = bytes_read(&file, &args);
            println!("{rel}: {name}: {n} bytes (analyze {once}, file {size})");
            // one reading: analyze's bytes, give or take one more sniff of the head
            assert!(
                n <= once + SNIFF,
                "{rel}: {name} read {n} bytes, analyze {once} (file {size}): the data twice"
            );
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}
