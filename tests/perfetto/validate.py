#!/usr/bin/env python3
"""Decodes a stallscope Perfetto export with Perfetto's own trace protos (the `perfetto`
Python package ships perfetto_trace_pb2, compiled from Perfetto's .proto files) and prints
a JSON summary: packet kinds, ftrace event kinds, track-event slices per track name,
processes and threads of the ProcessTree, the texts of typed `print` (trace_marker) events,
and every field the official schema does not
know (a wrong field number or wire type shows up there or fails the parse).

Usage: validate.py TRACE.pftrace  (exit 2 when the file does not parse)
"""
import json
import sys
from collections import Counter

from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

try:
    from google.protobuf.unknown_fields import UnknownFieldSet
except ImportError:  # older protobuf: no public API for unknown fields
    UnknownFieldSet = None


def unknown_fields(msg, path, out):
    """Appends `path.field_number` of every unknown field under msg (recursively)."""
    if UnknownFieldSet is not None:
        for f in UnknownFieldSet(msg):
            out.append(f"{path}#{f.field_number}")
    for desc, value in msg.ListFields():
        if desc.type != desc.TYPE_MESSAGE:
            continue
        repeated = getattr(desc, "is_repeated", None)
        if repeated is None:
            repeated = desc.label == desc.LABEL_REPEATED
        if repeated:
            for i, v in enumerate(value):
                unknown_fields(v, f"{path}.{desc.name}[{i}]", out)
        else:
            unknown_fields(value, f"{path}.{desc.name}", out)


def main():
    data = open(sys.argv[1], "rb").read()
    trace = pb.Trace()
    try:
        trace.ParseFromString(data)
    except DecodeError as e:
        print(f"does not parse as a perfetto Trace: {e}", file=sys.stderr)
        sys.exit(2)
    packets, ftrace, unknown = Counter(), Counter(), []
    tracks, slices = {}, Counter()
    processes, threads, prints = {}, {}, []
    for i, p in enumerate(trace.packet):
        kind = p.WhichOneof("data") or "none"
        packets[kind] += 1
        if len(unknown) < 50:
            unknown_fields(p, f"packet[{i}]", unknown)
        if kind == "ftrace_events":
            for ev in p.ftrace_events.event:
                ftrace[ev.WhichOneof("event") or "none"] += 1
                if ev.WhichOneof("event") == "print":
                    prints.append(ev.print.buf)
        elif kind == "track_descriptor":
            tracks[p.track_descriptor.uuid] = p.track_descriptor.name
        elif kind == "track_event":
            if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                slices[tracks.get(p.track_event.track_uuid, str(p.track_event.track_uuid))] += 1
        elif kind == "process_tree":
            for pr in p.process_tree.processes:
                processes[pr.pid] = list(pr.cmdline)
            for th in p.process_tree.threads:
                threads[th.tid] = th.tgid
    print(json.dumps({
        "packets": packets,
        "ftrace_events": ftrace,
        "slices_by_track": slices,
        "processes": len(processes),
        "threads": len(threads),
        "threads_in_processes": sum(1 for t, g in threads.items() if g in processes),
        "unknown_fields": unknown,
        "print_bufs": prints,
    }))


main()
