from typing import List, Optional, Tuple

import pyarrow

class StallscopeError(Exception): ...

def analyze_json(
    files: List[str],
    select: Optional[str] = None,
    ignore: Optional[str] = None,
    sets: List[str] = ...,
    time: Optional[str] = None,
    kallsyms: Optional[str] = None,
) -> str: ...
def table(files: List[str], name: str, time: Optional[str] = None) -> pyarrow.Table: ...
def table_names() -> List[str]: ...
def fleet_plan(inputs: List[str]) -> List[Tuple[int, str]]: ...
def fleet_prepare(out: str, tables: Optional[List[str]] = None) -> None: ...
def fleet_trace(
    trace_id: int, file: str, out: str, tables: Optional[List[str]] = None
) -> str: ...
def fleet_finish(
    out: str, outcomes: List[str], tables: Optional[List[str]] = None
) -> str: ...
def fleet_run(
    inputs: List[str],
    out: str,
    tables: Optional[List[str]] = None,
    jobs: Optional[int] = None,
) -> str: ...
