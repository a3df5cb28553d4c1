"""The Python package against the command on the same fixtures (issue #22 item 3):
analyze's findings are `stallscope analyze --format json`'s, `table(..., "latency")` is
`stallscope latency --format json` row for row, `waits` holds the worst wait of every
runqueue-starvation finding, every table has its documented columns and the rows
`stallscope tables` reports, and errors are exceptions with the command's message."""

import json

import pytest

import stallscope
from helpers import ROOT, cli

SCHED = [ROOT / "fixtures/sched" / f for f in ("starve.perf.data", "equal.perf.data")]


@pytest.mark.parametrize("path", SCHED + [ROOT / "fixtures/chain/chain.perf.data.xz"])
def test_analyze_is_the_command(path):
    r = stallscope.analyze(str(path))
    want = cli("analyze", "--format", "json", path)
    assert len(r.findings) == len(want["findings"])
    assert [f.title for f in r.findings] == [f["title"] for f in want["findings"]]
    assert json.loads(r.to_json()) == want
    for f in r.findings:
        assert f.severity in ("high", "medium", "low")
        assert f.end_ns >= f.start_ns


def test_paths_may_be_pathlike():
    # a pathlib.Path, alone or in a list, is a path like a str (issue #28)
    path = SCHED[0]
    want = stallscope.analyze(str(path)).to_json()
    assert stallscope.analyze(path).to_json() == want
    assert stallscope.analyze([path]).to_json() == want
    assert stallscope.table(path, "waits").num_rows == stallscope.table(str(path), "waits").num_rows


@pytest.mark.parametrize("path", SCHED)
def test_latency_table_is_the_latency_command(path):
    t = stallscope.table(str(path), "latency").to_pylist()
    want = cli("latency", "--format", "json", path)["tasks"]
    assert len(t) == len(want)
    for got, w in zip(t, want):
        for k in ("comm", "pid", "pids", "runtime_ns", "switches", "avg_delay_ns",
                  "max_delay_ns", "max_delay_start_ns", "max_delay_end_ns"):
            assert got[k] == w[k], k


@pytest.mark.parametrize("path", SCHED)
def test_waits_hold_every_starvation_findings_worst_wait(path):
    waits = stallscope.table(str(path), "waits")
    rows = set(zip(waits.column("tid").to_pylist(), waits.column("start_ns").to_pylist(),
                   waits.column("end_ns").to_pylist()))
    r = stallscope.analyze(str(path), select="runqueue-starvation")
    for f in r.findings:
        if f.measures.get("worst_wait_censored"):
            continue
        victim = next(t["pid"] for t in f.tasks if t["role"] == "victim")
        assert (victim, f.measures["worst_wait_start_ns"], f.measures["worst_wait_end_ns"]) in rows


def test_every_table_has_its_columns_and_the_commands_rows(tmp_path):
    path = ROOT / "fixtures/chain/chain.perf.data.xz"
    summary = cli("tables", "--format", "json", "--tables", ",".join(stallscope.TABLES),
                  "--to", tmp_path, path)
    rows = {t["table"]: t["rows"] for t in summary["tables"]}
    import pyarrow.parquet as pq
    for name in stallscope.TABLES:
        t = stallscope.table(str(path), name)
        assert t.num_rows == rows[name], name
        assert t.schema.equals(pq.read_schema(tmp_path / f"{name}.parquet")), name
    waits = stallscope.table(str(path), "waits")
    assert set(waits.column_names) >= {"tid", "comm", "cpu", "start_ns", "end_ns", "wait_ns",
                                       "started_by", "ended_by"}


def test_errors_raise_with_the_commands_message(tmp_path):
    bad = tmp_path / "broken.perf.data"
    bad.write_bytes(b"PERFILE2" + b"\0" * 40)
    with pytest.raises(stallscope.StallscopeError) as e:
        stallscope.analyze(str(bad))
    assert str(bad) in str(e.value)
    with pytest.raises(stallscope.StallscopeError, match="unknown table"):
        stallscope.table(str(SCHED[0]), "nope")
    with pytest.raises(stallscope.StallscopeError, match="unknown detector"):
        stallscope.analyze(str(SCHED[0]), select="nope")


def test_report_types_are_the_derived_schema():
    """Report and Finding are made from the schema the command prints (``stallscope schema
    report``, derived from the Rust types): one field per schema property, required ones
    without a default; a finding read back has every key the command writes."""
    from dataclasses import MISSING, fields

    schema = cli("schema", "report")
    assert stallscope.REPORT_SCHEMA == schema
    for cls, definition in ((stallscope.Report, schema), (stallscope.Finding, schema["$defs"]["Finding"])):
        got = {f.name: f.default is MISSING for f in fields(cls)}
        want = {p: p in definition["required"] for p in definition["properties"]}
        assert got == want, cls.__name__
        assert cls.__doc__.startswith(definition["description"])
    want = cli("analyze", "--format", "json", SCHED[0])
    r = stallscope.analyze(str(SCHED[0]))
    assert r.findings, "the starve fixture has findings"
    for f, w in zip(r.findings, want["findings"]):
        for key, value in w.items():
            assert getattr(f, key) == value, key
        assert (f.start_ns, f.end_ns) == (w["window"]["start_ns"], w["window"]["end_ns"])
    assert r.capabilities == want["capabilities"] and r.schema == "stallscope.report/1"
