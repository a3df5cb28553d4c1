"""stallscope: find and explain kernel-level performance pathologies in Linux traces.

    >>> import stallscope
    >>> r = stallscope.analyze("perf.data")
    >>> for f in r.findings:
    ...     print(f.severity, f.detector, f.title)
    >>> waits = stallscope.table("perf.data", "waits")      # a pyarrow.Table
    >>> waits.to_pandas().nlargest(5, "wait_ns")

The analysis is the Rust core the ``stallscope`` command runs (``stallscope analyze``);
tables arrive through the Arrow C data interface (no JSON round trip). Errors raise
:class:`StallscopeError` with the same message as the command (file, offset or line,
expected vs found).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._native import StallscopeError, analyze_json, table_names
from ._native import table as _table

__all__ = [
    "StallscopeError",
    "Finding",
    "Report",
    "analyze",
    "table",
    "TABLES",
]

#: The table names, in documentation order.
TABLES: List[str] = list(table_names())

Paths = Union[str, Sequence[str]]


def _files(paths: Paths) -> List[str]:
    return [paths] if isinstance(paths, str) else [str(p) for p in paths]


@dataclass
class Finding:
    """One finding: what a detector concluded, with the numbers and events behind it."""

    detector: str
    severity: str
    title: str
    start_ns: int
    end_ns: int
    cpus: List[int]
    tasks: List[Dict[str, Any]]
    measures: Dict[str, int]
    evidence: List[Dict[str, Any]]
    hint: str
    cause: Optional[Dict[str, str]] = None

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Finding":
        return cls(
            detector=d["detector"],
            severity=d["severity"],
            title=d["title"],
            start_ns=d["window"]["start_ns"],
            end_ns=d["window"]["end_ns"],
            cpus=list(d.get("cpus", [])),
            tasks=list(d.get("tasks", [])),
            measures=dict(d.get("measures", {})),
            evidence=list(d.get("evidence", [])),
            hint=d.get("hint", ""),
            cause=d.get("cause"),
        )


@dataclass
class Report:
    """The report of one analysis (the ``stallscope.report/1`` document)."""

    findings: List[Finding]
    inputs: List[Dict[str, Any]]
    detectors_run: List[str]
    skipped: List[Dict[str, str]]
    data_quality: Dict[str, Any]
    capabilities: Dict[str, Any]
    nothing_analyzed: Optional[str] = None
    _json: str = field(default="", repr=False)

    def to_json(self) -> str:
        """The report as ``stallscope analyze --format json`` prints it."""
        return self._json

    @classmethod
    def from_json(cls, text: str) -> "Report":
        d = json.loads(text)
        return cls(
            findings=[Finding._from(f) for f in d.get("findings", [])],
            inputs=d.get("inputs", []),
            detectors_run=d.get("detectors_run", []),
            skipped=d.get("skipped", []),
            data_quality=d.get("data_quality", {}),
            capabilities=d.get("capabilities", {}),
            nothing_analyzed=d.get("nothing_analyzed"),
            _json=text,
        )


def analyze(
    paths: Paths,
    *,
    select: Optional[str] = None,
    ignore: Optional[str] = None,
    set: Sequence[str] = (),
    time: Optional[str] = None,
    kallsyms: Optional[str] = None,
) -> Report:
    """Runs the detectors over one trace (or several merged in time order).

    ``select`` / ``ignore``: comma-separated detector ids; ``set``: thresholds as
    ``"ID.PARAM=VALUE"``; ``time``: ``"A..B"`` in seconds of the trace clock;
    ``kallsyms``: the recording host's ``/proc/kallsyms``.
    """
    text = analyze_json(_files(paths), select, ignore, list(set), time, kallsyms)
    return Report.from_json(text)


def table(paths: Paths, name: str, *, time: Optional[str] = None) -> "Any":
    """Table ``name`` (one of :data:`TABLES`) of the trace as a ``pyarrow.Table``."""
    return _table(_files(paths), name, time)
