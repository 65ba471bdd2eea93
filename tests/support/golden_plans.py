"""Planning a golden query (``tests/queries/<name>/query.sql``) outside its job's run."""
from __future__ import annotations

import sys
from pathlib import Path

from weir.engine.graph import JobGraph
from weir.planner.planner import default_job_name, plan_script
from weir.sql import parse


def plan_golden(path: Path) -> JobGraph:
    """The JobGraph of ``path``, planned as its job plans it: the Python functions of a module
    beside it (CREATE FUNCTION f AS 'module.f') importable, as from its job's working directory."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)
    return plan_script(parse(path.read_text(), str(path)), job_name=default_job_name(path)).graph
