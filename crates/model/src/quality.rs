//! Data-quality counters: every recoverable problem a reader or the timeline meets is
//! counted here, with its first few examples, and shown to the user before any result.
//! Never an uncounted `continue`.
//!
//! The problems form one registry, [`Problem`] (as Perfetto's stats table): each has a
//! stable snake_case key, a severity and a help sentence, stated once here; call sites name
//! the problem and give the count and an example. `stallscope explain data-quality` lists
//! the registry.

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

impl Severity {
    /// `info`, `warning`, `error` (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

macro_rules! problems {
    ($($variant:ident = ($key:literal, $severity:ident, $help:literal),)*) => {
        /// A recoverable input problem stallscope counts (the data-quality registry).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Problem {
            $(#[doc = $help] $variant,)*
        }

        impl Problem {
            /// Every problem, sorted by key.
            pub const ALL: &'static [Problem] = &[$(Problem::$variant,)*];

            /// Stable snake_case key (the report's `data_quality` key).
            pub fn key(self) -> &'static str {
                match self {
                    $(Problem::$variant => $key,)*
                }
            }

            /// How much it can distort results.
            pub fn severity(self) -> Severity {
                match self {
                    $(Problem::$variant => Severity::$severity,)*
                }
            }

            /// What it means, one sentence.
            pub fn help(self) -> &'static str {
                match self {
                    $(Problem::$variant => $help,)*
                }
            }
        }
    };
}

problems! {
    BadCallchainLines = ("bad_callchain_lines", Warning, "indented lines in a callchain block that are not `ADDRESS SYMBOL (DSO)` frames (skipped)"),
    BlkparseInputFileNotes = ("blkparse_input_file_notes", Info, "blkparse `Input file … added` notes (its stderr) in the text, skipped"),
    BlkparseLinesOutOfOrder = ("blkparse_lines_out_of_order", Info, "lines earlier than a line before them (an excerpt put together by grep?): the events are read in time order"),
    BlkparseSummaryLines = ("blkparse_summary_lines", Info, "blkparse summary lines after the events (per-CPU and total statistics), not read"),
    BlkparseUnmodeledAction = ("blkparse_unmodeled_action", Info, "blkparse actions not modeled as events (S: sleep waiting for a request)"),
    BlktraceGarbage = ("blktrace_garbage", Warning, "bytes between blktrace records without a valid magic were skipped"),
    BlktraceShortPayload = ("blktrace_short_payload", Warning, "blktrace records whose payload is too short for their action"),
    BlktraceUnknownAction = ("blktrace_unknown_action", Warning, "blktrace records with an unknown action code"),
    BlktraceUnknownNotify = ("blktrace_unknown_notify", Warning, "blktrace notify records with an unknown code"),
    BlktraceUnmodeledAction = ("blktrace_unmodeled_action", Info, "blktrace records not modeled as events (SLEEPRQ, ABORT, DRV_DATA)"),
    BlockBioSectorInFlight = ("block_bio_sector_in_flight", Info, "a bio queued at the start sector of another bio still in flight (e.g. a write after a read of the same block); as in btt, the newer bio replaces the older in the per-bio phases"),
    BlockCompleteUnknownRequest = ("block_complete_unknown_request", Info, "a completion of a request never seen before (dispatched before the trace began); not in any request statistic"),
    BlockCompleteWithoutDispatch = ("block_complete_without_dispatch", Warning, "a request completed that was queued or inserted but never dispatched (lost events?)"),
    BlockDuplicateSector = ("block_duplicate_sector", Warning, "a bio or request at a sector where another one was still in flight (its completion was missed); the older one is dropped"),
    BlockEventWithoutDevice = ("block_event_without_device", Warning, "a request event that names no device; ignored"),
    BlockFlushUnmatched = ("block_flush_unmatched", Warning, "a zero-length flush step with no open flush sequence to belong to (or too many open ones)"),
    BlockIssueWithoutRequest = ("block_issue_without_request", Info, "a request dispatched that was never seen queued, allocated or inserted (allocated before the trace began)"),
    BlockMergeWithoutRequest = ("block_merge_without_request", Info, "a bio merged into a request that was allocated before the trace began (or whose neighbouring bio was not traced)"),
    BlockRequestsInFlightAtEnd = ("block_requests_in_flight_at_end", Info, "requests (or flush sequences) not completed when the trace ended; not in any statistic"),
    BlockRequeueUnknownRequest = ("block_requeue_unknown_request", Info, "a request requeued that was never seen dispatched (dispatched before the trace began)"),
    CpuBufferStartedLate = ("cpu_buffer_started_late", Info, "CPUs whose buffer starts later than the others (`annotate` marker): earlier events of that CPU are not in the trace"),
    CpuNotRecorded = ("cpu_not_recorded", Warning, "events printed without a CPU column (record with -a or perf sched record to get it): they are put on CPU 0"),
    CpuOutOfRange = ("cpu_out_of_range", Warning, "an event names a CPU number above 65535; its CPU is not tracked"),
    CpusPartlyRecorded = ("cpus_partly_recorded", Info, "the recording holds the events of only some CPUs (perf -C, stallscope record --cpus, per-CPU buffers left empty, the blktrace files of some CPUs): tasks sent to the others are in no known state there, and no wait, run or idle time is taken on them"),
    DuplicateEvents = ("duplicate_events", Warning, "events identical in time, CPU, task and kind to one another input gave (overlapping inputs merged with --merge-overlapping): counted once"),
    EventCpuOutOfRange = ("event_cpu_out_of_range", Error, "an event names a CPU number the trace does not have (corrupt input); the event is skipped"),
    FioMissingField = ("fio_missing_field", Warning, "a field expected in fio JSON was missing"),
    FoldedBadLine = ("folded_bad_line", Warning, "lines that are not `frame;frame;… COUNT` (ignored)"),
    FoldedDifferential = ("folded_differential", Info, "differential lines (two counts): the second count is the new profile's weight"),
    FoldedFractionalCount = ("folded_fractional_count", Info, "fractional counts, rounded to integers"),
    FtraceRawOrHexLines = ("ftrace_raw_or_hex_lines", Error, "lines printed with the tracefs `raw` or `hex` option carry event type numbers instead of names and cannot be decoded from text; re-read the trace with those options off"),
    ImpossibleTransition = ("impossible_transition", Warning, "an event contradicts the task's known state (the task's state was reset)"),
    InputNamedTwice = ("input_named_twice", Info, "a file named more than once (the same path, or another path to the same file) is read once: merged twice, every event would be doubled"),
    KallsymsBadLine = ("kallsyms_bad_line", Warning, "kallsyms lines that are not `ADDR TYPE NAME [MODULE]` (ignored)"),
    KernelSymbols = ("kernel_symbols", Warning, "kernel frames are shown as addresses (no usable kernel symbol table)"),
    KernelSymbolsEmbedded = ("kernel_symbols_embedded", Info, "the input's own kallsyms text cannot name anything"),
    KernelSymbolsReleaseUnknown = ("kernel_symbols_release_unknown", Info, "kernel frames are shown as addresses: the input does not name its kernel release, so this host's table is not used"),
    LatencyFormat = ("latency_format", Warning, "latency-format lines: times are µs relative to the start of the buffer (not the trace clock) and task names are cut to 8 bytes"),
    LkpUnparsedLines = ("lkp_unparsed_lines", Info, "lines after the table title that are not `BASE [± SD%] CHANGE NEW [± SD%] METRIC` rows (skipped)"),
    LostChunks = ("lost_chunks", Error, "events were lost (ring buffer overrun); task states around the gap are uncertain"),
    LostEvents = ("lost_events", Error, "events lost (ring-buffer overrun or dropped; perf LOST records, as `perf sched latency` and `perf report` count them): results near them are incomplete"),
    LostEventsUnknownCount = ("lost_events_unknown_count", Error, "lost-events markers that do not say how many events were lost"),
    LostSamples = ("lost_samples", Warning, "samples perf reports lost per event (LOST_SAMPLES records, as `perf report --stats` lists them): the same drops the LOST records count, split by event"),
    MetricMissingInSomeRuns = ("metric_missing_in_some_runs", Warning, "a metric is missing from some of a side's files: its runs are fewer"),
    NoFinalNewline = ("no_final_newline", Info, "the last line has no final newline; it parses as a complete line and is used"),
    NonUtf8Lines = ("non_utf8_lines", Warning, "lines that were not valid UTF-8; invalid bytes were replaced by U+FFFD"),
    OffCpuUnpaired = ("off_cpu_unpaired", Info, "blocked switch-outs followed by another switch-out of the same task before its switch-in (lost events, or CPU clocks out of step): not counted as sleeps"),
    OutOfOrderEvents = ("out_of_order_events", Warning, "an event's timestamp is earlier than the previous event of the same input"),
    OverlappingInputs = ("overlapping_inputs", Warning, "inputs that hold the same events (one recording twice, or two recordings of the same CPUs made together), merged as asked (--merge-overlapping): identical events are counted once, the others are all kept"),
    PerfAmbiguousSampleId = ("perf_ambiguous_sample_id", Warning, "event attributes disagree on where the sample id is; records were matched with the first attribute's layout"),
    PerfAuxtraceSkipped = ("perf_auxtrace_skipped", Info, "AUXTRACE records (hardware trace: Intel PT, CoreSight, ARM SPE) whose data was skipped: this reader does not decode it; `perf script --itrace` does"),
    PerfBadFeature = ("perf_bad_feature", Warning, "header feature sections that could not be parsed (their information is missing)"),
    PerfBadSample = ("perf_bad_sample", Warning, "SAMPLE records too short for their sample_type, skipped"),
    PerfBadTracepointRecord = ("perf_bad_tracepoint_record", Warning, "tracepoint payloads missing or too short for their format (or with a __data_loc outside the record), skipped"),
    PerfDataCutRecord = ("perf_data_cut_record", Error, "the last record is cut off by the end of the file (incomplete perf.data): the data ends before it"),
    PerfDataIncomplete = ("perf_data_incomplete", Error, "the perf.data file is incomplete (unfinished recording or cut copy): read up to its last complete record"),
    PerfForcedFlush = ("perf_forced_flush", Info, "records released before their round ended because too many were queued (no FINISHED_ROUND records); order may differ from perf"),
    PerfFormatsFromHost = ("perf_formats_from_host", Warning, "the perf.data lacks its tracepoint formats (a perf record killed before it wrote its header features; perf itself refuses such a file): they were read from this host's tracefs, the file having been recorded on this host's running kernel (its kernel map is at this kernel's address and every tracepoint id is one of its events)"),
    PerfFormatsMissing = ("perf_formats_missing", Error, "the perf.data lacks its tracepoint formats (a perf record killed before it wrote its header features) and this host cannot stand in for them: its tracepoint records are not decoded"),
    PerfOutOfOrderEvents = ("perf_out_of_order_events", Warning, "records older than one already emitted (outside perf's round ordering)"),
    PerfPipeTrailingGarbage = ("perf_pipe_trailing_garbage", Warning, "bytes after the last record that are not perf records (often perf's own messages appended by `2>&1`): the stream ends before them, as in perf"),
    PerfReportApproximate = ("perf_report_approximate", Warning, "entries without folded lines: weight estimated from the percentage"),
    PerfReportBadLine = ("perf_report_bad_line", Warning, "lines before the column ruler or not fitting the report grammar (ignored)"),
    PerfReportLossy = ("perf_report_lossy", Info, "perf report text is lossy: percentages rounded to 0.01%, entries below --percent-limit and branches below the call-graph threshold dropped; weights are basis points"),
    PerfReportOneEntry = ("perf_report_one_entry", Info, "one `perf report --children` entry (an excerpt): the samples through it are the profile, as its call graph prints them (each path weighs its last line's percentage; lines without one carry their parent's); shares stay percentages of perf's whole profile"),
    PerfReportOtherEvent = ("perf_report_other_event", Info, "sections of other events than the first one (ignored)"),
    PerfReportPruned = ("perf_report_pruned", Info, "call-graph branches perf pruned below its threshold: their weight stays on the path above them"),
    PerfSideBandLinesSkipped = ("perf_side_band_lines_skipped", Info, "perf side-band records printed by --show-*-events (PERF_RECORD_COMM, _FORK, …), skipped"),
    PerfStatBadLine = ("perf_stat_bad_line", Warning, "a line of perf stat output was not understood and was skipped"),
    PerfStatCsvRepeat = ("perf_stat_csv_repeat", Info, "perf stat -r CSV output does not record the number of runs: the file counts as one run and its ± column is not used"),
    PerfStatNotCounted = ("perf_stat_not_counted", Info, "a counter was <not counted> or <not supported> (no value for it)"),
    PerfTracepointWithoutFormat = ("perf_tracepoint_without_format", Warning, "tracepoint events whose format is not in the file's tracing data; kept as events without fields"),
    PerfUnknownRecordTypes = ("perf_unknown_record_types", Warning, "records of types this reader does not know, skipped by their size"),
    PerfUnknownSampleId = ("perf_unknown_sample_id", Warning, "records whose sample id matches no event attribute, skipped"),
    PrevStatePreemptionUnavailable = ("prev_state_preemption_unavailable", Info, "trace-cmd's sched_switch plugin form drops the preemption mark: a preempted task (R+) shows as R, so preemption cannot be told from other runnable switch-outs (state letters were mapped back through the 4.14+ table); use `trace-cmd report -N` or `-R` to keep it"),
    PrevStateTableAssumed = ("prev_state_table_assumed", Info, "numeric prev_state values decoded with a table chosen without the kernel release (the text does not name it; `trace-cmd report --uname` or `perf script --header` would)"),
    PrevStateTableFallback = ("prev_state_table_fallback", Info, "sched_switch print fmt without a usable prev_state table; states decoded with a built-in table"),
    ProfileBadFrame = ("profile_bad_frame", Warning, "indented lines that are not a frame of a sample (`ADDR SYMBOL (DSO)`), ignored"),
    ProfileBadLine = ("profile_bad_line", Warning, "lines that are neither a sample header nor a frame (ignored)"),
    ProfileEmptyCallchain = ("profile_empty_callchain", Warning, "samples whose callchain holds no address (counted in the total, no frame)"),
    ProfileEventFirstSeen = ("profile_event_first_seen", Warning, "a perf script text without its `--header` block samples several events: the profile is of the first one in the text, which need not be the one perf report shows first (the first given to perf record)"),
    ProfileNoCallchain = ("profile_no_callchain", Info, "samples printed without frames (recorded without -g, or perf script -F without ip): they weigh in the total but have no function"),
    ProfileNotASample = ("profile_not_a_sample", Info, "events without a callchain or ip (not samples; ignored by the profile)"),
    ProfileNotCpuTime = ("profile_not_cpu_time", Info, "samples of events that do not measure CPU time (not in the CPU profile)"),
    ProfileOtherEvent = ("profile_other_event", Info, "samples of other events than the profiled one (ignored)"),
    ProfileOutsideTime = ("profile_outside_time", Info, "profile samples outside --time (not analyzed)"),
    ProfileSideBand = ("profile_side_band", Info, "perf side-band records (PERF_RECORD_*), skipped"),
    ProfileUserLeafOnly = ("profile_user_leaf_only", Info, "user-space samples whose callchain has no user part (`--call-graph dwarf`: perf unwinds the copied user stack with the recording host's binaries; `lbr`: from the branch stack): only the sampled function is known, so self shares are exact and callers' totals are not"),
    RecorderFindingsLeftOut = ("recorder_findings_left_out", Info, "findings about the recorder's own threads (stallscope record's, perf's) — the recording's cost, not the machine's — left out (--include-recorder keeps them)"),
    RecordingCut = ("recording_cut", Error, "the recording ended early (its recorder was killed): the file holds what was recorded up to shortly before; the end of each CPU's data, lost-event counts and task context may be missing"),
    RepeatFileAsOneRun = ("repeat_file_as_one_run", Info, "a perf stat -r N file among several on one side counts as one run (its mean)"),
    StackFramesUnnamed = ("stack_frames_unnamed", Info, "kernel frames of the stacks recorded with events are shown as addresses (no kernel symbol table)"),
    StackTraceLinesSkipped = ("stack_trace_lines_skipped", Info, "kernel/user stack trace lines (`<stack trace>` and ` => symbol`), not used by stallscope yet"),
    SwitchInMissing = ("switch_in_missing", Info, "a task ran on a CPU with no switch-in recorded there (dropped switch records): a woken task's run is taken to start at the CPU's previous switch or its wakeup, whichever is later; another's at the record that shows it running"),
    SwitchInWithoutWakeup = ("switch_in_without_wakeup", Info, "a sleeping task was switched in with no wakeup recorded"),
    SwitchPrevMismatch = ("switch_prev_mismatch", Warning, "a switch's previous task is not the task the CPU was running (perf: context switch bug)"),
    SwitchRecordsInconsistent = ("switch_records_inconsistent", Error, "so many context switches contradict the task the CPU was running that the switch records are incomplete or mixed up: scheduler results (waits, run times, findings) are not trustworthy"),
    TaskNotRecorded = ("task_not_recorded", Info, "in a per-task recording a task outside its targets was woken: nothing it does is recorded (not its switch in or out), so it is in no known state — no wait, run or sleep is taken for it"),
    TaskOnUnrecordedCpu = ("task_on_unrecorded_cpu", Info, "a task was woken onto or moved to a CPU the recording does not cover: its state is unknown until it comes back (no wait is taken there)"),
    TasksPartlyRecorded = ("tasks_partly_recorded", Warning, "a per-task recording (`perf record -- COMMAND` or `-p PID` without `-a`): events are recorded only while the recorded command's tasks run, so other tasks' runs, waits and idle time are not in the trace and no finding is made about them; a CPU looks idle while another task runs on it. Record with `-a` (every CPU) for the whole picture"),
    TimestampOutlier = ("timestamp_outlier", Warning, "events whose time is more than an hour from the events before and after them in their input (a corrupted timestamp): left out, so that the trace's span and per-time measures are what was recorded"),
    TimestampsNotNs = ("timestamps_not_ns", Warning, "timestamps are raw clock counts (trace_clock counter, x86-tsc, …), not nanoseconds: durations are in counts"),
    TracedatBadOption = ("tracedat_bad_option", Warning, "trace.dat options whose data could not be read; ignored"),
    TracedatBadRecord = ("tracedat_bad_record", Warning, "records too short for their event format (or with a __data_loc outside the record); skipped"),
    TracedatBadSubbuffer = ("tracedat_bad_subbuffer", Warning, "ring-buffer sub-buffers (pages) whose header or events could not be decoded; their remaining events are skipped"),
    TracedatBadSystemContext = ("tracedat_bad_system_context", Warning, "a stallscope system-context option that is not valid JSON; ignored"),
    TracedatDiscardedRecords = ("tracedat_discarded_records", Info, "ring-buffer items the kernel discarded after writing them (event filters); not events"),
    TracedatInstanceRead = ("tracedat_instance_read", Info, "the top buffer holds no data; the events come from this buffer instance"),
    TracedatInstancesSkipped = ("tracedat_instances_skipped", Info, "buffer instances other than the top one; their events are not read"),
    TracedatUnknownEventId = ("tracedat_unknown_event_id", Warning, "records whose event id has no format file in the trace.dat; skipped"),
    TracefsBadFormat = ("tracefs_bad_format", Warning, "event format files in the trace.dat that could not be parsed (their records are skipped)"),
    TracefsFormatFallback = ("tracefs_format_fallback", Info, "scheduler events whose format lacks an expected field; decoded as generic events"),
    TruncatedLastLine = ("truncated_last_line", Warning, "the input ends in the middle of a line (no final newline, and the line does not parse): that line was cut off and is not used"),
    UnorderedWakeupTimestamps = ("unordered_wakeup_timestamps", Warning, "a wakeup is time-stamped before the task's last switch-out; perf ignores it"),
    UnparsedLines = ("unparsed_lines", Warning, "lines that are neither comments nor parsable events (skipped)"),
    UnrecognizedSchedPayload = ("unrecognized_sched_payload", Warning, "scheduler events whose payload matched no known layout (kept as generic events)"),
    UntimedSampleLines = ("untimed_sample_lines", Warning, "sample lines without a time column, not events of the trace (skipped; `stallscope profile` reads them)"),
    UserFramesUnnamed = ("user_frames_unnamed", Info, "user-space frames of the stacks recorded with events are shown as addresses: the trace does not say which files the processes had mapped (perf record -g records them: its user frames are named)"),
    UserSymbols = ("user_symbols", Info, "user frames named from the recording's binaries found on this host (build ids checked where the recording gave them)"),
    UserSymbolsMissing = ("user_symbols_missing", Info, "user frames stay file+offset: their binaries are not on this host (run stallscope on the recording host, or copy its binaries or ~/.debug build-id cache here)"),
    UserSymbolsNone = ("user_symbols_none", Info, "user frames stay file+offset: the binary has no symbols for them (stripped; install its debug symbols)"),
    UserSymbolsOtherVersion = ("user_symbols_other_version", Info, "user frames stay file+offset: the file on this host is another build than the recorded one (build ids differ)"),
    UserSymbolsUnreadable = ("user_symbols_unreadable", Info, "user frames stay addresses or file+offset: the input could not be read again for its mappings, or a binary for its symbols"),
    WorkqueueEndWithoutStart = ("workqueue_end_without_start", Info, "workqueue_execute_end without its execute_start (started before the trace, or lost)"),
    WorkqueueExecuteWithoutEnd = ("workqueue_execute_without_end", Warning, "a worker started an item before its previous one ended (lost events?): the previous one was closed at the new start"),
    WorkqueueFunctionsUnnamed = ("workqueue_functions_unnamed", Info, "workqueue work functions are shown as kernel addresses (no kernel symbol table)"),
    WorkqueueOpenAtEnd = ("workqueue_open_at_end", Info, "work items still executing when the trace ended (counted up to the last event)"),
    WorkqueueUnparsed = ("workqueue_unparsed", Warning, "workqueue events without a usable work pointer were ignored"),
    WrappedLinesJoined = ("wrapped_lines_joined", Info, "event and frame lines broken over several lines (mail-wrapped), read joined"),
}

impl Problem {
    /// The problem whose [`Problem::key`] is `key`.
    pub fn from_key(key: &str) -> Option<Problem> {
        Problem::ALL.iter().copied().find(|p| p.key() == key)
    }
}

/// One counter.
#[derive(Clone, Debug, Serialize)]
pub struct StatEntry {
    /// Severity (the problem's).
    pub severity: Severity,
    /// Occurrences (or, for `lost_events`, events lost where known).
    pub count: u64,
    /// What it means, one sentence (the problem's help).
    pub description: String,
    /// The first few occurrences (`file:line: text`).
    pub examples: Vec<String>,
}

/// The data-quality counters of one run (merge those of several readers with
/// [`DataQuality::merge`]), by key.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct DataQuality {
    entries: BTreeMap<&'static str, StatEntry>,
}

impl DataQuality {
    /// Examples kept per counter.
    pub const MAX_EXAMPLES: usize = 5;

    /// Adds `n` occurrences of `problem`, keeping `example` if fewer than
    /// [`Self::MAX_EXAMPLES`] are kept.
    pub fn add(&mut self, problem: Problem, n: u64, example: impl FnOnce() -> String) {
        let e = self
            .entries
            .entry(problem.key())
            .or_insert_with(|| StatEntry {
                severity: problem.severity(),
                count: 0,
                description: problem.help().to_string(),
                examples: Vec::new(),
            });
        // counts can come from the file (lost-event totals): they saturate
        e.count = e.count.saturating_add(n);
        if e.examples.len() < Self::MAX_EXAMPLES {
            e.examples.push(example());
        }
    }

    /// Adds `n` occurrences of `problem` whose examples were all given already (a flood's
    /// remainder, counted apart): no example.
    pub fn add_count(&mut self, problem: Problem, n: u64) {
        if let Some(e) = self.entries.get_mut(problem.key()) {
            e.count = e.count.saturating_add(n);
        } else {
            self.add(problem, n, String::new);
        }
    }

    /// Occurrences of `problem` (0 when absent).
    pub fn count(&self, problem: Problem) -> u64 {
        self.entries.get(problem.key()).map_or(0, |e| e.count)
    }

    /// All counters, by key.
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, &StatEntry)> {
        self.entries.iter().map(|(k, v)| (*k, v))
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds every counter of `other` into `self`.
    pub fn merge(&mut self, other: &DataQuality) {
        for (k, v) in &other.entries {
            let e = self.entries.entry(k).or_insert_with(|| StatEntry {
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
            dq.add(Problem::UnparsedLines, 1, || format!("line {i}"));
        }
        assert_eq!(dq.count(Problem::UnparsedLines), 10);
        assert_eq!(dq.count(Problem::LostEvents), 0);
        let (key, e) = dq.entries().next().unwrap();
        assert_eq!(key, "unparsed_lines");
        assert_eq!(e.severity, Problem::UnparsedLines.severity());
        assert_eq!(e.description, Problem::UnparsedLines.help());
        assert_eq!(
            e.examples,
            vec!["line 0", "line 1", "line 2", "line 3", "line 4"]
        );
        let mut dq2 = DataQuality::default();
        dq2.merge(&dq);
        dq2.merge(&dq);
        dq2.add_count(Problem::UnparsedLines, 5);
        assert_eq!(dq2.count(Problem::UnparsedLines), 25);
        assert_eq!(dq2.entries().next().unwrap().1.examples.len(), 5);
    }

    #[test]
    fn the_registry_has_one_snake_case_key_per_problem_with_help() {
        let mut keys: Vec<&str> = Problem::ALL.iter().map(|p| p.key()).collect();
        assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicate: {keys:?}"
        );
        keys.dedup();
        assert_eq!(keys.len(), Problem::ALL.len());
        for p in Problem::ALL {
            let k = p.key();
            assert!(
                k.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{k}: snake_case"
            );
            assert!(
                p.help().len() > 20 && !p.help().ends_with('.'),
                "{k}: one sentence"
            );
            assert_eq!(Problem::from_key(k), Some(*p));
        }
    }
}
