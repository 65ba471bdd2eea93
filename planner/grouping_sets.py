"""GROUPING SETS, ROLLUP and CUBE in a window aggregate, planned as Flink plans them: an Expand.

``GROUP BY window_start, window_end, GROUPING SETS ((a, b), (a), ())`` groups
each window's rows once per set; a key that is not in a set is NULL in that
set's rows. Before the exchange an ``expand`` calc reads every row once per
set, numbered by the BIGINT column ``_e`` (Flink's ``$e``), and computes every
key as ``_key<i>``: the key's value in the sets holding it, NULL in the others.
``_e`` is a key of the window aggregate like the others, so the exchange
hashes ``(_key0, ..., _e)``: each set's groups are whole in one subtask, and
the window state, snapshots and key groups need nothing new. ``GROUPING(k)``
and ``GROUPING_ID(k, ...)`` are a ``CASE`` over ``_e``.

Plain keys next to the constructs belong to every set, and several constructs
multiply (``GROUP BY a, ROLLUP (b), CUBE (c)`` has 4 sets), as in SQL.
"""
from __future__ import annotations

from itertools import combinations

from sqlglot import exp

#: The column numbering a row's copies, one per grouping set.
SET_ID = "_e"
CONSTRUCTS = (exp.GroupingSets, exp.Rollup, exp.Cube)
#: More sets than this multiply every row too often to be meant.
MAX_SETS = 4096


def grouping_construct(select: exp.Select) -> exp.Expression | None:
    """The first GROUPING SETS, ROLLUP or CUBE of ``select``'s GROUP BY, if any."""
    group = select.args.get("group")
    for item in group.expressions if group else []:
        if isinstance(item, CONSTRUCTS):
            return item
    return None


def _members(item: exp.Expression) -> list[exp.Expression]:
    """The expressions of one set element: ``(a, b)``, ``(a)``, ``a`` or ``()``."""
    if isinstance(item, exp.Tuple):
        return list(item.expressions)
    if isinstance(item, exp.Paren):
        return [item.this]
    return [item]


def construct_sets(construct: exp.Expression) -> list[list[exp.Expression]]:
    """The sets a construct stands for, each a list of (unbound) expressions."""
    elements = [_members(e) for e in construct.expressions]
    if isinstance(construct, exp.GroupingSets):
        return elements
    if isinstance(construct, exp.Rollup):
        return [sum(elements[:n], []) for n in range(len(elements), -1, -1)]
    chosen = [c for n in range(len(elements), -1, -1) for c in combinations(range(len(elements)), n)]
    return [sum((elements[i] for i in c), []) for c in chosen]  # CUBE: every subset


def multiply(sets: list[tuple[int, ...]], more: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Every set of ``sets`` joined with every set of ``more`` (key indices, in order, once)."""
    return [tuple(dict.fromkeys(a + b)) for a in sets for b in more]


def grouping_value(sets: list[tuple[int, ...]], keys: list[int | None]) -> exp.Expression:
    """GROUPING_ID over ``keys`` (key indices; None for a window column, always grouped) as SQL:
    bit ``n - 1 - j`` is 1 where key j is not in the row's set. GROUPING(k) is its one-key case."""
    values = []
    for members in sets:
        value = 0
        for key in keys:
            value = value * 2 + (0 if key is None or key in members else 1)
        values.append(value)
    if len(set(values)) == 1:
        return exp.cast(exp.Literal.number(values[0]), "BIGINT")
    case = exp.Case(this=exp.column(SET_ID, quoted=True))
    for index, value in enumerate(values):
        case = case.when(exp.Literal.number(index), exp.Literal.number(value))
    return exp.cast(case, "BIGINT")


def describe_sets(sets: list[tuple[int, ...]], names: list[str]) -> str:
    """``(a, b), (a), ()`` for EXPLAIN."""
    return ", ".join("(" + ", ".join(names[i] for i in members) + ")" for members in sets)
