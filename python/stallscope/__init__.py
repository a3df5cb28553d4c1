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
import os
from dataclasses import field, fields, make_dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from ._native import StallscopeError, analyze_json, report_schema, table_names
from ._native import table as _table

__all__ = [
    "StallscopeError",
    "Finding",
    "Report",
    "REPORT_SCHEMA",
    "analyze",
    "table",
    "TABLES",
]

#: The table names, in documentation order.
TABLES: List[str] = list(table_names())

#: The JSON Schema of the report (``stallscope schema report``), derived from the Rust report
#: types: :class:`Report` and :class:`Finding` are made from it, so their fields and docs are
#: the command's.
REPORT_SCHEMA: Dict[str, Any] = json.loads(report_schema())

#: One trace path or several: ``str`` or any ``os.PathLike`` (``pathlib.Path``).
Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

_JSON_TYPES = {"string": str, "integer": int, "boolean": bool, "number": float}
# the schema definitions that are classes of this package (the others stay dicts)
_CLASSES = ("Finding",)


def _files(paths: Paths) -> List[str]:
    """The paths as strings: one path (``str`` or ``os.PathLike``) or a sequence of them."""
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _annotation(prop: Dict[str, Any]) -> Any:
    """The Python type of a schema property (classes for the report's own definitions)."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        if name in _CLASSES:
            return name
        return _annotation(REPORT_SCHEMA["$defs"][name])
    if "enum" in prop or "oneOf" in prop:
        return str
    if "anyOf" in prop:
        kinds = [_annotation(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return Optional[kinds[0]] if len(kinds) == 1 else Any
    kind = prop.get("type", "object")
    nullable = isinstance(kind, list) and "null" in kind
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "object")
    if kind == "array":
        t: Any = List[_annotation(prop.get("items", {}))]
    elif kind == "object":
        t = Dict[str, Any]
    else:
        t = _JSON_TYPES.get(kind, Any)
    return Optional[t] if nullable else t


def _report_type(name: str, definition: Dict[str, Any], namespace: Dict[str, Any]) -> type:
    """A dataclass with one field per property of the schema definition ``definition``
    (required ones first; the others default to ``None``), documented by its descriptions."""
    props = definition["properties"]
    required = [p for p in props if p in definition.get("required", [])]
    optional = [p for p in props if p not in required]
    spec = [(p, _annotation(props[p])) for p in required]
    spec += [(p, _annotation(props[p]), field(default=None)) for p in optional]
    doc = definition.get("description", "")
    lines = [f"    {p}: {props[p].get('description', '')}".replace("\n", " ") for p in props]
    namespace = dict(namespace, __doc__=doc + "\n\nFields:\n" + "\n".join(lines))
    return make_dataclass(name, spec, namespace=namespace)


def _finding_window(self: Any, end: str) -> int:
    return self.window[end]


Finding = _report_type(
    "Finding",
    REPORT_SCHEMA["$defs"]["Finding"],
    {
        "__module__": __name__,
        "start_ns": property(lambda self: _finding_window(self, "start_ns"), doc="window start"),
        "end_ns": property(lambda self: _finding_window(self, "end_ns"), doc="window end"),
        "_from": classmethod(lambda cls, d: cls(**{f.name: d.get(f.name) for f in fields(cls)})),
    },
)


def _report_from_json(cls: type, text: str) -> Any:
    d = json.loads(text)
    values = {f.name: d.get(f.name) for f in fields(cls) if f.name != "_json"}
    values["findings"] = [Finding._from(f) for f in d.get("findings", [])]
    r = cls(**values)
    r._json = text
    return r


Report = _report_type(
    "Report",
    REPORT_SCHEMA,
    {
        "__module__": __name__,
        "to_json": lambda self: self._json,
        "from_json": classmethod(_report_from_json),
        "_json": "",
    },
)
Report.to_json.__doc__ = "The report as ``stallscope analyze --format json`` prints it."


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
