//! perf.data samples with callchains → [`Profile`].
//!
//! The perf.data reader ([`crate::perf_data`]) emits every non-tracepoint sample as a
//! generic event named after its attribute (`cpu-clock:pppH`, `cycles`) with fields `ip`
//! and `period`, and every sample recorded with `-g` carries [`Event::callchain`]: raw
//! addresses, leaf first, with perf's context markers in place:
//!
//! ```text
//! callchain := { MARKER | ADDR }*
//! MARKER    := PERF_CONTEXT_KERNEL (-128) | PERF_CONTEXT_USER (-512) | PERF_CONTEXT_HV (-32)
//!            | PERF_CONTEXT_GUEST (-2048) | _GUEST_KERNEL (-2176) | _GUEST_USER (-2560)   (as u64)
//! e.g.  [KERNEL, ffffffff821f39e5, ffffffff81000e06, USER, 5630b1a8b1fa, 5630b1a8b264, 7f…1f5]
//! ```
//!
//! One sample → one [`WeightedStack`] (markers dropped, frames leaf first) with the sample's
//! time, CPU, TID and the comm last set for that TID by a COMM record (else the
//! `swapper` for TID 0, as perf names idle, else the switched-out task's name of a
//! sched_switch sample). Weight = the sample's
//! `period` (perf report's "Overhead" is period-based; for `cpu-clock` that is nanoseconds),
//! or 1 when the sample has no period; [`Profile::unit`] says which.
//!
//! Only one event is profiled: the first event name that has a callchain (or, without `-g`,
//! an `ip`); samples of other events are counted (`profile_other_event`). A sched_switch
//! recorded with `-g` is such an event too: its stacks are off-CPU stacks.
//!
//! Kernel frames (after a kernel marker, or at/above [`super::KERNEL_ADDR_MIN`] before any
//! marker) are named from the input's own kallsyms text when it carries one, else the table
//! chosen by [`super::kernel_symbols_for`] (see [`super::kernel_symbols_with_embedded`]);
//! unresolved kernel and all user frames are named `0x<hex>` (raw virtual addresses: user
//! symbolization needs MMAP records and the ELF files, which this reader does not have).

use std::collections::HashMap;

use stallscope_model::{
    Comm, DataQuality, Event, EventKind, FieldValue, Problem, Profile, Tid, WeightUnit,
    WeightedStack,
};

use super::{
    frame_name, kernel_symbols_with_embedded, Kallsyms, ProfileFormat, ProfileOptions, ProfileRead,
};
use crate::{EventReader, ReadError};

/// Smallest perf context marker (`PERF_CONTEXT_MAX` = -4095 as u64): callchain values at or
/// above it are markers, not addresses.
pub const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// Kernel frames follow.
pub const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// User frames follow.
pub const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// Hypervisor frames follow.
pub const PERF_CONTEXT_HV: u64 = -32i64 as u64;
/// Guest kernel frames follow.
pub const PERF_CONTEXT_GUEST_KERNEL: u64 = -2176i64 as u64;

/// Builds a profile from a stream of events (see the module doc).
pub struct SampleProfiler<'k> {
    profile: Profile,
    quality: DataQuality,
    kallsyms: Option<&'k Kallsyms>,
    event: Option<String>,
    comms: HashMap<Tid, Comm>,
    any_period: bool,
    /// Frame ids by (address space, address): 0 for kernel addresses, else the tgid.
    names: HashMap<(Tid, u64), u32>,
    /// Executable mappings per process (MMAP / MMAP2 records).
    maps: super::address_space::AddressSpaces,
    /// Process of each task, from COMM records and sample tgids.
    tgid_of: HashMap<Tid, Tid>,
    /// User frames named by file and offset, for [`super::user_symbols`].
    user_frames: HashMap<u32, super::user_symbols::UserFrame>,
}

/// Where a sample's ip was, from the record header's cpumode (`PERF_RECORD_MISC_*`).
fn cpumode_is_kernel(cpumode: u64) -> Option<bool> {
    match cpumode {
        1 | 3 | 4 => Some(true), // kernel, hypervisor, guest kernel
        2 | 5 => Some(false),    // user, guest user
        _ => None,
    }
}

fn field_u64(fields: &[(String, FieldValue)], name: &str) -> Option<u64> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| match v {
            FieldValue::UInt(u) => Some(*u),
            FieldValue::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        })
}

impl<'k> SampleProfiler<'k> {
    /// A profiler naming kernel frames with `kallsyms` (when given), profiling `event` (by
    /// default the first event with a callchain or an ip).
    pub fn new(kallsyms: Option<&'k Kallsyms>, event: Option<String>) -> Self {
        SampleProfiler {
            profile: Profile::new(WeightUnit::Samples),
            quality: DataQuality::default(),
            kallsyms,
            event,
            comms: HashMap::new(),
            any_period: false,
            names: HashMap::new(),
            maps: Default::default(),
            tgid_of: HashMap::new(),
            user_frames: HashMap::new(),
        }
    }

    /// Interned id of the frame at `addr` (in process `tgid`'s address space when not
    /// `kernel`). Kernel frames are named from kallsyms, else `0x<addr>`; user frames by the
    /// file mapped there and the offset into it, `[libc.so.6+0x2a1c9]` (perf report keys
    /// unresolved user addresses the same way: DSO and `addr - start + pgoff`), else
    /// `0x<addr>` when no mapping covers them.
    fn frame(&mut self, addr: u64, kernel: bool, tgid: Tid) -> u32 {
        let key = (if kernel { 0 } else { tgid }, addr);
        if let Some(&id) = self.names.get(&key) {
            return id;
        }
        let name = if kernel {
            frame_name(
                self.kallsyms.and_then(|k| k.lookup(addr)).map(|s| s.name),
                addr,
            )
        } else {
            let mapped = self.maps.find(tgid, addr);
            match mapped {
                Some(m) => {
                    let (frame, name) = super::user_symbols::UserFrame::in_mapping(m, addr);
                    let id = self.profile.intern(&name, Some(false));
                    self.user_frames.insert(id, frame);
                    self.names.insert(key, id);
                    return id;
                }
                None => frame_name(None, addr),
            }
        };
        let id = self.profile.intern(&name, Some(kernel));
        self.names.insert(key, id);
        id
    }

    /// The sample's task name: the last COMM record of its TID, else `swapper` for TID 0
    /// (perf's name for every idle task, which has no COMM record; the kernel says
    /// `swapper/N`), else the switched-out task of a sched_switch sample (the sampled task).
    fn comm_of(&self, ev: &Event) -> Option<Comm> {
        if let Some(c) = self.comms.get(&ev.pid) {
            return Some(*c);
        }
        match &ev.kind {
            _ if ev.pid == 0 => Some(Comm::new("swapper")),
            EventKind::Switch(sw) if sw.prev.pid == ev.pid => Some(sw.prev.comm),
            _ => None,
        }
    }

    /// Takes one event: COMM records update names, samples become stacks, the rest is
    /// counted.
    pub fn push(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::TaskComm { tgid, tid, comm } => {
                self.comms.insert(*tid, *comm);
                if *tgid > 0 {
                    self.tgid_of.insert(*tid, *tgid);
                }
                return;
            }
            EventKind::Mapping(m) => {
                self.maps.add(m);
                self.names.retain(|&(space, _), _| space != m.tgid);
                // a forked process starts with its parent's name, as perf names it
                if let Some(parent) = m.forked_from {
                    if let Some(&c) = self.comms.get(&parent) {
                        self.comms.entry(m.tgid).or_insert(c);
                    }
                }
                return;
            }
            _ => {}
        }
        let (name, ip, period, cpumode, tgid) = match &ev.kind {
            EventKind::Generic(g) => (
                g.name.as_str(),
                field_u64(&g.fields, "ip"),
                field_u64(&g.fields, "period"),
                field_u64(&g.fields, "cpumode").and_then(cpumode_is_kernel),
                g.fields.iter().find_map(|(n, v)| match (n.as_str(), v) {
                    ("tgid", FieldValue::Int(t)) => Tid::try_from(*t).ok(),
                    _ => None,
                }),
            ),
            k => (k.name(), None, None, None, None),
        };
        let tgid = match tgid {
            Some(t) if t > 0 => {
                self.tgid_of.insert(ev.pid, t);
                t
            }
            _ => self.tgid_of.get(&ev.pid).copied().unwrap_or(ev.pid),
        };
        if ev.callchain.is_none() && ip.is_none() {
            self.quality.add(Problem::ProfileNotASample, 1, || {
                format!("{} at {}", name, ev.ts)
            });
            return;
        }
        match &self.event {
            None => self.event = Some(name.to_string()),
            Some(e) if !super::event_matches(e, name) => {
                self.quality
                    .add(Problem::ProfileOtherEvent, 1, || name.to_string());
                return;
            }
            Some(_) => {}
        }
        // Kernel or user: by the context markers in the chain; before any marker and for
        // the ip, by the sample's cpumode (the address range only when there is none: on
        // 32-bit kernels kernel addresses are below any 64-bit kernel range).
        let by_address = |a: u64| cpumode.unwrap_or(a >= super::KERNEL_ADDR_MIN);
        let mut chain_frames: Vec<(u64, bool)> = Vec::new();
        if let Some(chain) = &ev.callchain {
            let mut kernel: Option<bool> = None;
            for &v in chain.iter() {
                if v >= PERF_CONTEXT_MAX {
                    kernel = Some(matches!(
                        v,
                        PERF_CONTEXT_KERNEL | PERF_CONTEXT_GUEST_KERNEL | PERF_CONTEXT_HV
                    ));
                    continue; // a marker, not a frame
                }
                chain_frames.push((v, kernel.unwrap_or_else(|| by_address(v))));
            }
        }
        // The leaf is the sampled ip, as perf attributes self time (`al` of the sample),
        // not callchain[0]: dwarf call graphs carry only the kernel part of the chain (a
        // user sample's chain is empty), and LBR / interrupted chains may start elsewhere.
        let mut frames = Vec::with_capacity(chain_frames.len() + 1);
        if let Some(ip) = ip {
            if chain_frames.first().map(|&(a, _)| a) != Some(ip) {
                let k = by_address(ip);
                frames.push(self.frame(ip, k, tgid));
                if !k && !chain_frames.iter().any(|&(_, fk)| !fk) && ev.callchain.is_some() {
                    self.quality.add(Problem::ProfileUserLeafOnly, 1, || {
                        format!("{} at {}", name, ev.ts)
                    });
                }
            }
        }
        for (a, k) in chain_frames {
            frames.push(self.frame(a, k, tgid));
        }
        if frames.is_empty() {
            self.quality.add(Problem::ProfileEmptyCallchain, 1, || {
                format!("{} at {}", name, ev.ts)
            });
        }
        let weight = match period {
            Some(p) if p > 0 => {
                self.any_period = true;
                p
            }
            _ => 1,
        };
        self.profile.stacks.push(WeightedStack {
            frames,
            weight,
            weight_new: None,
            comm: self.comm_of(ev),
            pid: Some(ev.pid),
            cpu: Some(ev.cpu),
            ts: Some(ev.ts),
            span: ev.span,
        });
    }

    /// The user frames named by file and offset (for [`super::user_symbols`]).
    pub fn user_frames(&self) -> &HashMap<u32, super::user_symbols::UserFrame> {
        &self.user_frames
    }

    /// The profile, its notes and the profiled event name.
    pub fn finish(mut self) -> (Profile, DataQuality, Option<String>) {
        if self.any_period {
            self.profile.unit = WeightUnit::Period(self.event.clone().unwrap_or_default());
        }
        (self.profile, self.quality, self.event)
    }
}

/// The event name of `ev` when it is a sample a profile is made of (it carries a callchain
/// or an `ip`), else `None`.
pub fn sample_event_name(ev: &Event) -> Option<&str> {
    match &ev.kind {
        EventKind::Generic(g) if field_u64(&g.fields, "ip").is_some() || ev.callchain.is_some() => {
            Some(g.name.as_str())
        }
        k if ev.callchain.is_some() => Some(k.name()),
        _ => None,
    }
}

/// The event a profile of a file with `declared` events (its attrs, in order) is made of,
/// given whether each declared event has samples: the first one that has (perf report's
/// first section).
pub fn first_declared_sampled(
    declared: &[String],
    has_samples: impl Fn(&str) -> bool,
) -> Option<String> {
    declared.iter().find(|d| has_samples(d)).cloned()
}

/// Of `declared` events (the file's attrs, in order), the first one with samples, reading
/// `reader` only until the first declared event's first sample (`None`: no samples).
pub fn first_sampled_event(
    reader: &mut dyn EventReader,
    declared: &[String],
) -> Result<Option<String>, ReadError> {
    let mut seen = vec![false; declared.len()];
    let mut batch = Vec::new();
    while reader.next_batch(&mut batch)? {
        for ev in &batch {
            let Some(name) = sample_event_name(ev) else {
                continue;
            };
            if let Some(i) = declared.iter().position(|d| super::event_matches(d, name)) {
                seen[i] = true;
                if i == 0 {
                    return Ok(Some(declared[0].clone()));
                }
            }
        }
    }
    Ok(first_declared_sampled(declared, |d| {
        declared.iter().zip(&seen).any(|(x, &s)| s && x == d)
    }))
}

/// Reads every event of `reader` into a profile, naming kernel frames per `symbols`.
/// Fails when the reader fails or when the input has no sample at all.
pub fn read(reader: &mut dyn EventReader, opts: &ProfileOptions) -> Result<ProfileRead, ReadError> {
    let meta = reader.meta();
    let release = meta.kernel_release.clone();
    let mut quality = DataQuality::default();
    let table = kernel_symbols_with_embedded(
        &opts.symbols,
        release.as_deref(),
        meta.embedded_kallsyms(),
        &mut quality,
    )?;
    let mut profiler = SampleProfiler::new(table.as_ref(), opts.event.clone());
    let mut batch = Vec::new();
    while reader.next_batch(&mut batch)? {
        for ev in &batch {
            profiler.push(ev);
        }
    }
    let user_frames = std::mem::take(&mut profiler.user_frames);
    let (mut profile, q, event) = profiler.finish();
    quality.merge(&q);
    quality.merge(reader.quality());
    if !opts.no_user_symbols {
        let recorded = reader.meta().build_ids.clone();
        super::user_symbols::name_user_frames(&mut profile, &user_frames, &recorded, &mut quality);
    }
    if profile.stacks.is_empty() {
        let path = reader.meta().path.clone();
        return Err(ReadError::new(
            &path,
            None,
            match &opts.event {
                Some(e) => format!("samples of event {e}"),
                None => "samples (perf record -g, or any sampling event with an ip)".to_string(),
            },
            match q.entries().find(|(k, _)| *k == "profile_other_event") {
                Some((_, e)) => format!(
                    "only samples of other events, e.g. {}",
                    e.examples.join(", ")
                ),
                None => crate::error::NO_SAMPLES.to_string(),
            },
        ));
    }
    Ok(ProfileRead {
        profile,
        quality,
        format: ProfileFormat::PerfData,
        event,
        kernel_release: release,
        reported_totals: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{GenericEvent, Mapping, Span};

    fn sample(chain: &[u64], period: u64) -> Event {
        Event {
            ts: 5,
            cpu: 1,
            pid: 42,
            span: Span::default(),
            kind: EventKind::Generic(Box::new(GenericEvent {
                system: None,
                name: "cycles".into(),
                fields: vec![
                    (
                        "ip".into(),
                        FieldValue::UInt(chain.get(1).copied().unwrap_or(0)),
                    ),
                    ("period".into(), FieldValue::UInt(period)),
                ],
            })),
            callchain: Some(chain.into()),
        }
    }

    /// A sample with an explicit ip, cpumode and tgid (as the perf.data decoder gives them).
    fn sample_at(ip: u64, cpumode: u64, chain: Option<&[u64]>) -> Event {
        Event {
            ts: 7,
            cpu: 0,
            pid: 43,
            span: Span::default(),
            kind: EventKind::Generic(Box::new(GenericEvent {
                system: None,
                name: "cycles".into(),
                fields: vec![
                    ("ip".into(), FieldValue::UInt(ip)),
                    ("cpumode".into(), FieldValue::UInt(cpumode)),
                    ("tgid".into(), FieldValue::Int(42)),
                    ("period".into(), FieldValue::UInt(10)),
                ],
            })),
            callchain: chain.map(Into::into),
        }
    }

    #[test]
    fn the_leaf_is_the_sample_ip_not_callchain_0() {
        let mut p = SampleProfiler::new(None, None);
        // LBR-style: a user-mode sample whose chain starts with a kernel frame (the
        // interrupt entry) — perf attributes the sample to its ip
        p.push(&sample_at(
            0x401d02,
            2,
            Some(&[
                PERF_CONTEXT_KERNEL,
                0xffffffff8e601250,
                PERF_CONTEXT_USER,
                0x431872,
            ]),
        ));
        // dwarf: a user sample with an empty chain
        p.push(&sample_at(0x401d05, 2, Some(&[])));
        // an ordinary frame-pointer chain whose first frame is the ip: not doubled
        p.push(&sample_at(
            0x401d02,
            2,
            Some(&[PERF_CONTEXT_USER, 0x401d02, 0x401000]),
        ));
        let (prof, q, _) = p.finish();
        let leaf = |i: usize| prof.symbol(prof.stacks[i].frames[0]).to_string();
        assert_eq!(leaf(0), "0x401d02");
        assert_eq!(prof.kernel[prof.stacks[0].frames[0] as usize], Some(false));
        assert_eq!(prof.stacks[0].frames.len(), 3);
        assert_eq!(leaf(1), "0x401d05");
        assert_eq!(prof.stacks[2].frames.len(), 2);
        assert_eq!(q.count(Problem::ProfileUserLeafOnly), 1);
        assert_eq!(q.count(Problem::ProfileEmptyCallchain), 0);
    }

    #[test]
    fn cpumode_decides_kernel_frames_on_32_bit_kernels() {
        // ARMv7: kernel at 0x8000_0000+, below any 64-bit kernel address
        let mut p = SampleProfiler::new(None, None);
        p.push(&sample_at(0x803a_0cbc, 1, None));
        p.push(&sample_at(0x769e_aa68, 2, None));
        let (prof, _, _) = p.finish();
        assert_eq!(prof.kernel[prof.stacks[0].frames[0] as usize], Some(true));
        assert_eq!(prof.kernel[prof.stacks[1].frames[0] as usize], Some(false));
    }

    #[test]
    fn user_frames_are_named_by_mapping_and_offset() {
        let mut p = SampleProfiler::new(None, None);
        p.push(&Event {
            kind: EventKind::Mapping(Box::new(Mapping {
                tgid: 42,
                start: 0x5555_0000_0000,
                len: 0x3000,
                pgoff: 0x1000,
                filename: "/usr/lib/libc.so.6".into(),
                build_id: None,
                forked_from: None,
            })),
            callchain: None,
            ..sample(&[], 0)
        });
        p.push(&sample_at(0x5555_0000_0e72, 2, None)); // tgid 42 (the sample says)
        p.push(&sample_at(0x7000_0000_0000, 2, None)); // no mapping covers it
                                                       // a later mapping inside the first one replaces only that part of it
        p.push(&Event {
            kind: EventKind::Mapping(Box::new(Mapping {
                tgid: 42,
                start: 0x5555_0000_1000,
                len: 0x1000,
                pgoff: 0,
                filename: "/usr/lib/libx.so".into(),
                build_id: None,
                forked_from: None,
            })),
            callchain: None,
            ..sample(&[], 0)
        });
        p.push(&sample_at(0x5555_0000_0e72, 2, None));
        p.push(&sample_at(0x5555_0000_1010, 2, None));
        p.push(&sample_at(0x5555_0000_2010, 2, None));
        let (prof, _, _) = p.finish();
        let leaf = |i: usize| prof.symbol(prof.stacks[i].frames[0]).to_string();
        assert_eq!(leaf(0), "[libc.so.6+0x1e72]");
        assert_eq!(leaf(1), "0x700000000000");
        assert_eq!(leaf(2), "[libc.so.6+0x1e72]");
        assert_eq!(leaf(3), "[libx.so+0x10]");
        assert_eq!(leaf(4), "[libc.so.6+0x3010]");
    }

    #[test]
    fn markers_split_kernel_and_user_and_kallsyms_names() {
        let k = Kallsyms::parse(
            "t",
            "ffffffff81000000 T do_idle\nffffffff81001000 T osq_lock\n",
        )
        .unwrap();
        let mut p = SampleProfiler::new(Some(&k), None);
        p.push(&Event {
            kind: EventKind::TaskComm {
                tgid: 42,
                tid: 42,
                comm: Comm::new("burn"),
            },
            callchain: None,
            ..sample(&[], 0)
        });
        p.push(&sample(
            &[
                PERF_CONTEXT_KERNEL,
                0xffffffff81001010,
                0xffffffff99000000,
                PERF_CONTEXT_USER,
                0x11e9,
            ],
            1000,
        ));
        let (prof, q, ev) = p.finish();
        assert_eq!(ev.as_deref(), Some("cycles"));
        assert_eq!(prof.unit, WeightUnit::Period("cycles".into()));
        let s = &prof.stacks[0];
        let names: Vec<&str> = s.frames.iter().map(|&f| prof.symbol(f)).collect();
        assert_eq!(names, ["osq_lock", "0xffffffff99000000", "0x11e9"]);
        assert_eq!(prof.kernel, [Some(true), Some(true), Some(false)]);
        assert_eq!(
            s.comm.map(|c| c.as_str().to_string()).as_deref(),
            Some("burn")
        );
        assert_eq!(s.weight, 1000);
        assert!(q.is_empty());
    }
}
