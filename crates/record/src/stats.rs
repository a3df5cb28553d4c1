//! `per_cpu/cpuN/stats`: the ring buffer's per-CPU counters, and the CPUSTAT option text.
//!
//! ```text
//! entries: 0
//! overrun: 1523            events overwritten before the reader got them
//! commit overrun: 0
//! bytes: 0
//! oldest event ts:  2750.620596
//! now ts:  2750.620596
//! dropped events: 0        events refused (buffer full, overwrite off)
//! read events: 91234
//! ```
//! trace-cmd stores each CPU's file as option CPUSTAT = `"CPU: N\n" + file + "\0"`; we do the
//! same so `trace-cmd report --stat` and stallscope's reader see the counters.

/// The counters we use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// `overrun:`.
    pub overrun: u64,
    /// `commit overrun:`.
    pub commit_overrun: u64,
    /// `dropped events:`.
    pub dropped: u64,
    /// `read events:`.
    pub read_events: u64,
}

impl CpuStats {
    /// Parses the stats file; absent or malformed lines leave 0.
    pub fn parse(text: &str) -> CpuStats {
        let mut s = CpuStats::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue; // not a counter line (the file has none, but be tolerant)
            };
            let value = value.trim().parse::<u64>().unwrap_or(0);
            match key.trim() {
                "overrun" => s.overrun = value,
                "commit overrun" => s.commit_overrun = value,
                "dropped events" => s.dropped = value,
                "read events" => s.read_events = value,
                _ => {}
            }
        }
        s
    }

    /// Events the ring buffer lost on this CPU.
    pub fn lost(&self) -> u64 {
        self.overrun + self.commit_overrun + self.dropped
    }
}

/// The CPUSTAT option payload for one CPU (without the trailing NUL the writer adds).
pub fn cpustat_option_text(cpu: u32, stats_file: &str) -> String {
    let mut s = format!("CPU: {cpu}\n{stats_file}");
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_file() {
        // per_cpu/cpu1/stats of trace-cmd's recording in samples/tracecmd/trace_v6.dat, with
        // overrun and dropped counts edited in.
        let text = "entries: 0\noverrun: 17\ncommit overrun: 0\nbytes: 0\n\
                    oldest event ts:   392.424886\nnow ts:   392.468281\n\
                    dropped events: 3\nread events: 1930\n";
        let s = CpuStats::parse(text);
        assert_eq!(s.overrun, 17);
        assert_eq!(s.dropped, 3);
        assert_eq!(s.read_events, 1930);
        assert_eq!(s.lost(), 20);
        assert_eq!(
            cpustat_option_text(1, "entries: 0\n"),
            "CPU: 1\nentries: 0\n"
        );
    }
}
