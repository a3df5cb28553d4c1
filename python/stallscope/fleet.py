"""Many traces into one Parquet dataset, on this machine or on a Dask cluster.

    >>> from stallscope.fleet import analyze_many
    >>> fleet = analyze_many(["hosts/*/perf.data"], "fleet/")               # all local cores
    >>> fleet.summary["recurring_culprits"][:3]
    >>> fleet.dataset("waits").to_table().to_pandas()                      # pyarrow.dataset

    >>> from dask.distributed import Client
    >>> fleet = analyze_many(paths, "/shared/fleet", client=Client("scheduler:8786"))

The dataset is the one ``stallscope fleet`` writes: ``OUT/<table>/part-NNNNN.parquet``
(one file per trace; ``trace_id``, ``host``, ``kernel``, ``file`` columns first),
``OUT/traces.parquet``, ``OUT/errors.parquet`` (traces that could not be read, with the
reason) and ``OUT/summary.json``. With a Dask client each trace is analyzed by a worker
(which calls the Rust core, so every worker needs this package and ``OUT`` must be a
directory all workers and the client see); the client numbers the traces, gathers the
outcomes and writes the ``traces``, ``errors`` and summary files. Both ways give the same
files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from . import Paths, _files, _native

__all__ = ["Fleet", "analyze_many"]


@dataclass
class Fleet:
    """A fleet dataset: its directory and summary."""

    out: str
    summary: Dict[str, Any]

    def dataset(self, name: str) -> Any:
        """Table ``name`` of every trace as a ``pyarrow.dataset.Dataset``."""
        import pyarrow.dataset as ds

        return ds.dataset(os.path.join(self.out, name), format="parquet")

    def traces(self) -> Any:
        """The ``traces`` table (one row per trace) as a ``pyarrow.Table``."""
        import pyarrow.parquet as pq

        return pq.read_table(os.path.join(self.out, "traces.parquet"))

    def errors(self) -> Any:
        """The ``errors`` table (traces that could not be read) as a ``pyarrow.Table``."""
        import pyarrow.parquet as pq

        return pq.read_table(os.path.join(self.out, "errors.parquet"))


def _analyze_one(
    trace_id: int, file: str, out: str, tables: Optional[List[str]]
) -> str:
    # runs on a Dask worker: one trace into its part files, the outcome as JSON
    return _native.fleet_trace(trace_id, file, out, tables)


def analyze_many(
    paths: Paths,
    out: Union[str, "os.PathLike[str]"],
    *,
    client: Any = None,
    tables: Optional[Sequence[str]] = None,
    jobs: Optional[int] = None,
) -> Fleet:
    """Analyzes every trace of ``paths`` (files, blktrace directories, glob patterns) into
    the dataset at ``out``.

    Without ``client``: this process, ``jobs`` traces at once (default: all CPUs). With a
    ``dask.distributed.Client``: one task per trace on its workers. ``tables``: which
    tables to write per trace (default: all but ``events``). A trace that cannot be read
    is a row of ``errors.parquet``; the others go on.
    """
    inputs = _files(paths)
    out = os.fspath(out)
    names = None if tables is None else list(tables)
    if client is None:
        return Fleet(out, json.loads(_native.fleet_run(inputs, out, names, jobs)))
    plan = _native.fleet_plan(inputs)
    _native.fleet_prepare(out, names)
    futures = client.map(
        _analyze_one,
        [t for t, _ in plan],
        [f for _, f in plan],
        out=out,
        tables=names,
        pure=False,
    )
    outcomes = client.gather(futures)
    return Fleet(out, json.loads(_native.fleet_finish(out, outcomes, names)))
