"""Window table functions in the plan: their parameters and bound expressions."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from planner.expressions import quote
from sql.intervals import interval_micros
from sql.statements import WindowTVF

WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
#: window_time is window_end minus one millisecond, as in Flink.
WINDOW_TIME_OFFSET_US = 1000


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # 'tumble'
    time_column: str
    size: int  # µs
    offset: int = 0  # µs

    def config(self) -> dict:
        return {"kind": self.kind, "time_column": self.time_column, "size": self.size, "offset": self.offset}

    def describe(self) -> str:
        text = f"{self.kind.upper()}({self.time_column}, {format_duration(self.size)}"
        if self.offset:
            text += f", offset {format_duration(self.offset)}"
        return text + ")"

    def start_us_sql(self) -> str:
        ts = f"epoch_us({quote(self.time_column)})"
        return f"({ts} - ((({ts} - {self.offset}) % {self.size}) + {self.size}) % {self.size})"

    def assign_sql(self) -> list[tuple[str, str]]:
        """(name, SQL) for window_start, window_end and window_time over the input."""
        start = self.start_us_sql()
        return [
            ("window_start", f"make_timestamp({start})"),
            ("window_end", f"make_timestamp({start} + {self.size})"),
            ("window_time", f"make_timestamp({start} + {self.size - WINDOW_TIME_OFFSET_US})"),
        ]


def window_spec(tvf: WindowTVF, time_column: str) -> WindowSpec:
    offset = tvf.args.get("offset")
    return WindowSpec(
        kind=tvf.kind.lower(),
        time_column=time_column,
        size=interval_micros(tvf.args["size"]),
        offset=interval_micros(offset) if offset is not None else 0,
    )


def window_fields() -> list[pa.Field]:
    return [pa.field(name, pa.timestamp("us")) for name in WINDOW_COLUMNS]


def format_duration(us: int) -> str:
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000), ("ms", 1000)):
        if us % size == 0:
            return f"{us // size} {unit}"
    return f"{us} µs"
