"""What a ``calc`` (a projection and filter) does to the plan around it: its EXPLAIN
description and the upsert key that survives it."""
from __future__ import annotations

from weir.planner.expressions import quote


def projected_key(key: tuple[str, ...] | None, projection: list[list[str]]) -> tuple[str, ...] | None:
    """An upsert key through a projection: the output names of its columns, or None
    when the projection drops one of them (the rows are then no longer unique by a key)."""
    if key is None:
        return None
    out = []
    for column in key:
        name = next((n for n, sql in projection if sql == quote(column)), None)
        if name is None:
            return None
        out.append(name)
    return tuple(out)


def calc_description(projection: list[list[str]], filter_sql: str | None, input_names: list[str]) -> str:
    """``Calc(select=[...], where=[...])``; a column passed through is shown by its name alone,
    and a projection passing every input column through is left out."""
    identity = [[name, quote(name)] for name in input_names]
    parts = []
    if projection != identity or not filter_sql:
        items = [name if sql == quote(name) else f"{name}={sql}" for name, sql in projection]
        parts.append(f"select=[{', '.join(items)}]")
    if filter_sql:
        parts.append(f"where=[{filter_sql}]")
    return f"Calc({', '.join(parts)})"
