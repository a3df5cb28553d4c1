//! What a reader learns about an input before (and while) reading its events.

use serde::Serialize;

/// Which of several kernel symbols at one address names it, as the peer that reads the
/// input names it. `perf` extends every symbol to the next one's start, which leaves the
/// **last** listed of equal-address symbols the only one with a size, and keeps it
/// (`memcpy`, `__memcpy`, `__pi_memcpy` → `__pi_memcpy`). `trace-cmd` (libtraceevent) lists
/// the functions newest first, sorts them by address and takes the last of equal ones in
/// that order: the **first** listed (`_raw_spin_unlock_irqrestore`, not the
/// `__lock_text_start` marker at its address after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SymbolAliases {
    /// The last listed names the address (perf).
    #[default]
    LastListed,
    /// The first listed names the address (trace-cmd).
    FirstListed,
}

/// Input formats stallscope knows. [`InputFormat::name`] is the `--input-format` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// perf.data, file mode (`PERFILE2`, seekable header + feature sections).
    PerfData,
    /// perf.data, pipe mode (`perf record -o -`).
    PerfPipe,
    /// Kernel ftrace `trace` / `trace_pipe` text.
    FtraceText,
    /// `trace-cmd report` text.
    TraceCmdText,
    /// `perf script` text.
    PerfScriptText,
    /// trace-cmd `trace.dat` (versions 6 and 7).
    TraceDat,
    /// blktrace binary per-CPU files (`DEV.blktrace.N`, `struct blk_io_trace`).
    Blktrace,
    /// `blkparse` default text.
    BlkparseText,
}

impl InputFormat {
    /// Whose rule names an address several kernel symbols share in this format's own
    /// symbol table ([`SymbolAliases`]): trace-cmd's for trace.dat and its text, perf's for
    /// the rest.
    pub fn symbol_aliases(self) -> SymbolAliases {
        match self {
            InputFormat::TraceDat | InputFormat::TraceCmdText => SymbolAliases::FirstListed,
            _ => SymbolAliases::LastListed,
        }
    }

    /// Every format, in the order sniffing tries them.
    pub const ALL: [InputFormat; 8] = [
        InputFormat::PerfData,
        InputFormat::PerfPipe,
        InputFormat::TraceDat,
        InputFormat::TraceCmdText,
        InputFormat::FtraceText,
        InputFormat::PerfScriptText,
        InputFormat::Blktrace,
        InputFormat::BlkparseText,
    ];

    /// Stable name (`perf-data`, `perf-pipe`, `ftrace-text`, `trace-cmd-text`, `perf-script-text`).
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::PerfData => "perf-data",
            InputFormat::PerfPipe => "perf-pipe",
            InputFormat::FtraceText => "ftrace-text",
            InputFormat::TraceCmdText => "trace-cmd-text",
            InputFormat::PerfScriptText => "perf-script-text",
            InputFormat::TraceDat => "trace-dat",
            InputFormat::Blktrace => "blktrace",
            InputFormat::BlkparseText => "blkparse-text",
        }
    }

    /// Inverse of [`InputFormat::name`].
    pub fn from_name(s: &str) -> Option<InputFormat> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// True for formats whose timestamps are only µs-precise text.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            InputFormat::FtraceText | InputFormat::TraceCmdText | InputFormat::PerfScriptText
        )
    }
}

/// Facts about one input known from its header (binary) or learned while reading (text).
/// Readers fill what they can; `None` means the input does not say.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TraceMeta {
    /// Path as given (`-` for stdin).
    pub path: String,
    /// Detected or forced format.
    pub format: Option<InputFormat>,
    /// Compression wrapper removed on open (`gzip`, `zstd`, `xz`).
    pub compression: Option<String>,
    /// Kernel release (`6.18.44-…`), from perf OSRELEASE, trace.dat UNAME or a text header.
    pub kernel_release: Option<String>,
    /// Host name when recorded.
    pub hostname: Option<String>,
    /// Version of the recording tool (`perf version`), when recorded.
    pub tool_version: Option<String>,
    /// Command line of the recording, when recorded.
    pub cmdline: Option<String>,
    /// Number of CPUs (online at record time) when the input says.
    pub nr_cpus: Option<u32>,
    /// Which CPUs the input holds events of (perf's `-C`, `stallscope record --cpus`, a
    /// trace.dat whose buffer of a CPU is empty); every CPU when nothing says otherwise.
    pub cpus_recorded: crate::CpuCoverage,
    /// Which tasks the input holds events of: every task, or a per-task recording's targets
    /// (`perf record -- COMMAND` without `-a`; [`crate::TaskCoverage`]).
    pub tasks_recorded: crate::TaskCoverage,
    /// Trace clock name (`local`, `mono`, `counter`, `x86-tsc`, `perf`, …) when known.
    pub clock: Option<String>,
    /// False when timestamps are raw counts (counter / x86-tsc clocks), not nanoseconds.
    pub clock_is_ns: bool,
    /// Event names the input declares (header attrs / format files), `system:name` when the
    /// system is known. Text inputs fill this with the names seen while reading.
    pub declared_events: Vec<String>,
    /// Host facts recorded with the trace (`stallscope record`), when present.
    pub system_context: Option<crate::SystemContext>,
    /// Events lost per CPU as recorded in the file's own statistics (e.g. trace.dat CPU
    /// stats), `(cpu, count)`; lost events seen inline are reported as `lost_events` events.
    pub lost_per_cpu: Vec<(u32, u64)>,
    /// The input's own `/proc/kallsyms` text when it carries one (trace.dat KALLSYMS section,
    /// `stallscope record --kallsyms`): names kernel addresses such as workqueue functions.
    #[serde(skip)]
    pub kallsyms: Option<std::sync::Arc<str>>,
    /// `(tid, tgid)` of the tasks whose process the text said (ftrace's `record-tgid`
    /// column, perf script's `PID/TID`), first occurrence each: exports group threads into
    /// processes with them. Filled while reading.
    #[serde(skip)]
    pub task_tgids: Vec<(crate::Tid, crate::Tid)>,
    /// `(file, build id as lowercase hex)` of the binaries the recording touched, as perf
    /// wrote them at its end (perf.data HEADER_BUILD_ID): which file a user frame's name
    /// may be read from.
    #[serde(skip)]
    pub build_ids: Vec<(String, String)>,
}

impl TraceMeta {
    /// The input's own kallsyms text with its path and how its peer names aliased
    /// addresses, for a symbol table (`None` when the input carries none).
    pub fn embedded_kallsyms(&self) -> Option<(&str, &str, SymbolAliases)> {
        let aliases = self
            .format
            .map(InputFormat::symbol_aliases)
            .unwrap_or_default();
        self.kallsyms
            .as_deref()
            .map(|k| (self.path.as_str(), k, aliases))
    }

    /// Sets the perf command line that made the recording, the CPUs it covers when it
    /// names them (`perf record -C 1 …`) and whether it recorded some tasks only (`perf
    /// record -- COMMAND` without `-a`).
    pub fn set_perf_cmdline(&mut self, cmdline: String) {
        if let Some(cpus) = crate::cpus::perf_cmdline_cpus(&cmdline) {
            self.cpus_recorded = crate::CpuCoverage::Only(cpus);
        }
        self.tasks_recorded = crate::cpus::perf_cmdline_task_coverage(&cmdline);
        self.cmdline = Some(cmdline);
    }
}
