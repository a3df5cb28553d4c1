"""Shared by the package's tests: the repository root and the command built beside it."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli(*args):
    exe = os.environ.get("STALLSCOPE_BIN") or str(ROOT / "target/debug/stallscope")
    if not os.path.exists(exe):
        pytest.fail(f"no stallscope binary at {exe}: run `cargo build -p stallscope-cli` or set STALLSCOPE_BIN")
    out = subprocess.run([exe, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)
