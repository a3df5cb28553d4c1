from typing import List, Optional

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
