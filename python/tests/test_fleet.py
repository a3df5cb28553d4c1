"""Fleet analysis (issue #22 items 4-5): ``stallscope.fleet.analyze_many`` gives the dataset
``stallscope fleet`` writes, byte for byte, both in this process and on a Dask
``LocalCluster`` with two worker processes; a bad file is a row of ``errors`` and the run
goes on; the DuckDB queries of docs/fleet.md run on the dataset and agree with the
summary."""

import os
import pathlib
import re

import pytest

import stallscope
from helpers import ROOT, cli
from stallscope.fleet import analyze_many

INPUTS = [
    str(ROOT / "fixtures/sched/*.perf.data"),
    str(ROOT / "fixtures/detectors/cpu-saturation/*.dat.zst"),
    str(ROOT / "fixtures/detectors/dispatch-starvation/deadline"),  # blktrace: requests
    str(ROOT / "fixtures/sched/README.md"),  # no trace: a row of errors.parquet
]


def need(module, install):
    """The module, or a failure naming its install command (a printed skip with
    STALLSCOPE_SKIP_MISSING=1, as the Rust tests do)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        msg = f"{module} is missing: {install} (scripts/setup.sh and scripts/test.sh install it)"
        if os.environ.get("STALLSCOPE_SKIP_MISSING") == "1":
            print(f"SKIPPED: {msg}")
            pytest.skip(msg)
        pytest.fail(msg)


def files_of(out):
    out = pathlib.Path(out)
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def cli_fleet(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    summary = cli("fleet", "--format", "json", *INPUTS, "-o", out)
    return out, summary


def test_local_run_is_the_command(cli_fleet, tmp_path):
    out, summary = cli_fleet
    fleet = analyze_many(INPUTS, tmp_path / "local", jobs=2)
    assert fleet.summary == summary
    assert files_of(fleet.out) == files_of(out)
    assert summary["failed"] == 1 and summary["analyzed"] == summary["traces"] - 1
    errors = fleet.errors().to_pylist()
    assert [e["file"].endswith("README.md") for e in errors] == [True]
    with pytest.raises(stallscope.StallscopeError) as e:
        stallscope.analyze(str(ROOT / "fixtures/sched/README.md"))
    assert errors[0]["error"] in str(e.value)


def test_one_row_per_finding_per_trace(cli_fleet):
    out, summary = cli_fleet
    fleet = stallscope.fleet.Fleet(str(out), summary)
    findings = fleet.dataset("findings").to_table()
    traces = fleet.traces().to_pylist()
    by_trace = {}
    for t in findings.column("trace_id").to_pylist():
        by_trace[t] = by_trace.get(t, 0) + 1
    for t in traces:
        if t["status"] != "ok":
            continue
        want = len(stallscope.analyze(t["file"]).findings)
        assert by_trace.get(t["trace_id"], 0) == want == t["findings"], t["file"]


def test_dask_local_cluster_gives_the_same_dataset(cli_fleet, tmp_path):
    distributed = need("dask.distributed", "pip install 'dask[distributed]'")
    out, summary = cli_fleet
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        fleet = analyze_many(INPUTS, tmp_path / "dask", client=client)
        # each trace ran on a worker process, not here
        assert len(client.scheduler_info()["workers"]) == 2
    assert fleet.summary == summary
    assert files_of(fleet.out) == files_of(out)


def sql_blocks():
    text = (ROOT / "docs/fleet.md").read_text()
    return re.findall(r"```sql\n(.*?)```", text, re.S)


def test_docs_queries_run_on_the_dataset(cli_fleet):
    duckdb = need("duckdb", "pip install duckdb")
    out, summary = cli_fleet
    blocks = sql_blocks()
    assert len(blocks) >= 4
    con = duckdb.connect()
    results = []
    for q in blocks:
        q = q.replace("'fleet/", f"'{out}/")
        rows = con.sql(q).fetchall()
        assert rows, q
        results.append(rows)
    # the first query is the summary's recurring culprits (commands without kernel
    # threads' renumbering: these fixtures' culprits are user tasks)
    top = results[0][0]
    want = summary["recurring_culprits"][0]
    assert (top[0], top[1], top[2], top[3]) == (
        want["comm"], want["hosts"], want["traces"], want["findings"])
