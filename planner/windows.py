"""Window table functions in the plan: their parameters and bound expressions."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa

from weir.planner.expressions import position, quote
from weir.sql.errors import Problem
from weir.sql.intervals import interval_micros
from weir.sql.statements import WindowTVF

WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
#: window_time is window_end minus one millisecond, as in Flink.
WINDOW_TIME_OFFSET_US = 1000
#: The parameter that cuts a window into slices, per sliced kind.
SLICE_PARAMETER = {"hop": "slide", "cumulate": "step"}


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # 'tumble' | 'hop' | 'cumulate' | 'session'
    time_column: str
    size: int | None = None  # µs; None for SESSION
    offset: int = 0  # µs
    slide: int | None = None  # µs, HOP
    step: int | None = None  # µs, CUMULATE
    gap: int | None = None  # µs, SESSION
    partition_by: tuple[str, ...] = ()  # SESSION's PARTITION BY columns

    def config(self) -> dict:
        config = {"kind": self.kind, "time_column": self.time_column}
        if self.kind == "session":
            return {**config, "gap": self.gap}
        config.update(size=self.size, offset=self.offset)
        for name in ("slide", "step"):
            if getattr(self, name) is not None:
                config[name] = getattr(self, name)
        return config

    def describe(self) -> str:
        if self.kind == "session":
            partition = f", partitionBy=[{', '.join(self.partition_by)}]" if self.partition_by else ""
            return f"SESSION({self.time_column}, gap {format_duration(self.gap)}{partition})"
        text = f"{self.kind.upper()}({self.time_column}, {format_duration(self.size)}"
        for name in ("slide", "step"):
            if getattr(self, name) is not None:
                text += f", {name} {format_duration(getattr(self, name))}"
        if self.offset:
            text += f", offset {format_duration(self.offset)}"
        return text + ")"

    def _floor(self, ts: str, width: int) -> str:
        return f"({ts} - ((({ts} - {self.offset}) % {width}) + {width}) % {width})"

    def assign_sql(self) -> list[tuple[str, str]]:
        """(name, SQL) for window_start, window_end and window_time over the input. HOP and
        CUMULATE give a row once per window it belongs to (``unnest`` of the window bounds)."""
        ts = f"epoch_us({quote(self.time_column)})"
        lag = WINDOW_TIME_OFFSET_US
        if self.kind == "hop":
            # the starts floor(ts, slide) - (n - 1) * slide, ..., floor(ts, slide)
            last = self._floor(ts, self.slide)
            first = f"{last} - {self.size - self.slide}"
            return [
                ("window_start", f"make_timestamp(unnest(range({first}, {last} + 1, {self.slide})))"),
                ("window_end", f"make_timestamp(unnest(range({first} + {self.size}, {last} + {self.size} + 1, {self.slide})))"),
                ("window_time", f"make_timestamp(unnest(range({first} + {self.size - lag}, {last} + {self.size - lag} + 1, {self.slide})))"),
            ]
        if self.kind == "cumulate":
            # [floor(ts, size), end) for end = floor(ts, step) + step, ... up to floor(ts, size) + size
            start, first_end = self._floor(ts, self.size), f"{self._floor(ts, self.step)} + {self.step}"
            return [
                ("window_start", f"make_timestamp({start})"),
                ("window_end", f"make_timestamp(unnest(range({first_end}, {start} + {self.size} + 1, {self.step})))"),
                ("window_time", f"make_timestamp(unnest(range({first_end} - {lag}, {start} + {self.size - lag} + 1, {self.step})))"),
            ]
        start = self._floor(ts, self.size)
        return [
            ("window_start", f"make_timestamp({start})"),
            ("window_end", f"make_timestamp({start} + {self.size})"),
            ("window_time", f"make_timestamp({start} + {self.size - lag})"),
        ]


def window_spec(tvf: WindowTVF, time_column: str) -> WindowSpec:
    def micros(name: str) -> int | None:
        value = tvf.args.get(name)
        return interval_micros(value) if value is not None else None

    partition_by = tuple(c.name for c in tvf.args.get("partition_by") or ())
    return WindowSpec(
        kind=tvf.kind.lower(),
        time_column=time_column,
        size=micros("size"),
        offset=micros("offset") or 0,
        slide=micros("slide"),
        step=micros("step"),
        gap=micros("gap"),
        partition_by=partition_by,
    )


def window_problems(spec: WindowSpec, tvf: WindowTVF, fallback: tuple[int, int]) -> list[Problem]:
    """What is wrong with a window's parameters: sizes must be positive, and a HOP or
    CUMULATE size an integral multiple of its slide or step (as Flink requires)."""
    problems = []
    for name in ("size", "slide", "step", "gap"):
        value = getattr(spec, name)
        if value is not None and value <= 0:
            problems.append(Problem(f"{spec.kind.upper()} {name} must be positive, got {format_duration(value)}",
                                    *position(tvf.args.get(name), fallback),
                                    "give a positive interval, e.g. INTERVAL '1' MINUTE"))
    name = SLICE_PARAMETER.get(spec.kind)
    part = getattr(spec, name) if name else None
    if not problems and part and spec.size % part:
        fits = max(1, spec.size // part) * part
        problems.append(Problem(
            f"{spec.kind.upper()} size {format_duration(spec.size)} is not an integral multiple of its "
            f"{name} {format_duration(part)}",
            *position(tvf.args.get("size"), fallback),
            f"make the size a multiple of the {name}, e.g. {format_duration(fits)}, or the {name} a divisor "
            f"of the size",
        ))
    return problems


def window_fields() -> list[pa.Field]:
    return [pa.field(name, pa.timestamp("us")) for name in WINDOW_COLUMNS]


def format_duration(us: int) -> str:
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000), ("ms", 1000)):
        if us % size == 0:
            return f"{us // size} {unit}"
    return f"{us} µs"


# -- window lineage ---------------------------------------------------------------------


def register_window_columns(builder, node_id: str, projection: list[list[str]], window: WindowSpec) -> None:
    """Record which output columns of ``node_id`` (a window aggregate: its projection) are the
    bounds of ``window``, so that ``window_bound`` finds them under any later name."""
    found = {name: (bound, window) for name, sql in projection for bound in WINDOW_COLUMNS if sql == quote(bound)}
    if found:
        builder.window_columns[node_id] = found


def window_bound(builder, node_id: str, column: str) -> tuple[str, WindowSpec] | None:
    """('window_start' | 'window_end' | 'window_time', the window) when ``column`` of ``node_id``'s
    output is a bound of a window, followed through renames (``window_start AS starttime``)
    and operators that pass their input's columns through (filters, window joins, Top-N).
    A window aggregate's keys and aggregates are new columns; a source's are no bounds."""
    graph = builder.graph
    while True:
        made = builder.window_columns.get(node_id, {})
        if column in made:
            return made[column]
        node = graph.node(node_id)
        if node.kind in ("source", "window_aggregate") or not node.inputs:
            return None
        projection = getattr(node.config, "projection", None)  # a Calc's, an aggregate's ...
        if projection is not None:
            sql = dict(projection).get(column)
            upstream = graph.node(node.inputs[0].source)
            column = next((name for name in upstream.output_schema.names if sql == quote(name)), None)
            if column is None:
                return None
        node_id = node.inputs[0].source
        if column not in graph.node(node_id).output_schema.names:
            return None


def same_window(one: WindowSpec, other: WindowSpec) -> bool:
    """The same windows, whatever time column each was computed from."""
    return dataclasses.replace(one, time_column="") == dataclasses.replace(other, time_column="")
