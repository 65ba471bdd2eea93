"""Showing a live result in Flink's three result modes.

- ``tableau``: rows printed as lines of a boxed table as they arrive, with
  their row kind (`+I`, `-U`, `+U`, `-D`) in the first column.
- ``changelog``: a full-screen view of every change with its row kind,
  following the newest.
- ``table``: a full-screen view of the result table, updated in place.

In the full-screen views `q` leaves, the arrows and PgUp/PgDn scroll, and
Ctrl-C leaves too; in tableau mode Ctrl-C stops. Leaving stops the query's
job. A job that fails ends its view at once (as psql prints an ERROR when it
arrives), so that the shell shows the error without waiting for a key. Each
view returns one line that says how it ended.
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable, TextIO

import pyarrow as pa
from prompt_toolkit.application import Application, get_app
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl

from weir.shell.jobs import FAILED, Job
from weir.shell.live import LiveResult

REFRESH_SECONDS = 0.2


def show(result: LiveResult, job: Job, mode: str, out: TextIO, stop: Callable[[Job], None]) -> str:
    try:
        if mode == "tableau":
            total, left = _tableau(result, job, out)
        else:
            total, left = _full_screen(result, job, mode)
    except KeyboardInterrupt:
        total, left = result.received, True
    finally:
        result.close()
    if job.running:
        stop(job)
    if job.error is not None:
        return f"query {job.id} failed after {total:,} rows"
    if left:
        return f"query {job.id} stopped: received a total of {total:,} row{'s' if total != 1 else ''}"
    return f"query {job.id} finished: received a total of {total:,} row{'s' if total != 1 else ''}"


# -- tableau --------------------------------------------------------------------
def _tableau(result: LiveResult, job: Job, out: TextIO) -> tuple[int, bool]:
    names = ["op", *result.names]
    widths: list[int] | None = None
    printed = 0
    try:
        while True:
            rows, ended = result.wait_for_rows(REFRESH_SECONDS)
            if rows and widths is None:
                widths = [max(len(n), *(len(r[i]) for r in rows)) for i, n in enumerate(names)]
                border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
                out.write("\n".join([border, _line(names, widths), border]) + "\n")
            if rows:
                out.write("\n".join(_line(r, widths) for r in rows) + "\n")
                out.flush()
                printed += len(rows)
            if ended or (not job.running and result.read_to >= result.received):
                break
    except KeyboardInterrupt:
        _close_table(out, widths)
        return printed, True
    _close_table(out, widths)
    return printed, False


def _close_table(out: TextIO, widths: list[int] | None) -> None:
    if widths is not None:
        out.write("+" + "+".join("-" * (w + 2) for w in widths) + "+\n")
        out.flush()


def _line(cells: list[str], widths: list[int]) -> str:
    return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"


# -- table and changelog ----------------------------------------------------------
class _Screen:
    """What the full-screen view shows: a page of rows, a status line."""

    def __init__(self, result: LiveResult, job: Job, mode: str):
        self.result, self.job, self.mode = result, job, mode
        self.top: int | None = 0 if mode == "table" else None  # None: follow the newest rows
        self.left = False
        self.started = time.monotonic()

    def page_rows(self) -> int:
        return max(1, get_app().output.get_size().rows - 4)

    def span(self) -> tuple[int, int]:
        """The rows the view scrolls over, [first, last): in table mode of an updating result
        the current rows its changes leave; otherwise the rows (changes) kept."""
        if self.mode == "table" and self.result.updating:
            return 0, self.result.current_count()
        return self.result.first, self.result.received

    def _clamp(self, top: int, height: int) -> int:
        """``top`` kept where the page is full: from the first row to the last page."""
        first, last = self.span()
        return min(max(top, first), max(first, last - height))

    def current_top(self, height: int) -> int:
        first, last = self.span()
        return max(first, last - height) if self.top is None else self._clamp(self.top, height)

    def body(self) -> str:
        result, height = self.result, self.page_rows()
        names = (["op"] if self.mode == "changelog" else []) + result.names
        numeric = ([False] if self.mode == "changelog" else []) + [
            _numeric(result.schema.field(n).type) for n in result.names]
        top = self.current_top(height)
        if self.mode == "changelog":
            rows = result.changes(top, top + height)
        else:
            rows = result.current_rows(top, top + height)
        widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]

        def line(cells):
            return " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric))
        lines = [line(names), "-+-".join("-" * w for w in widths)]
        lines.extend(line(r) for r in rows)
        return "\n".join(lines)

    def status(self) -> str:
        job, result = self.job, self.result
        state = "running" if job.running else job.status.lower()
        if self.mode == "table" and result.updating:
            count = result.current_count()
            what = f"{count:,} row{'s' if count != 1 else ''} (from {result.received:,} changes)"
        else:
            what = f"{result.received:,} row{'s' if result.received != 1 else ''}"  # a changelog's rows
            if result.first:
                what += f" (the last {result.received - result.first:,} kept)"
        return (f" {self.mode} mode | query {job.id} {state} | {what} | "
                f"q: leave  arrows/PgUp/PgDn: scroll  Home/End")

    def scroll(self, by: int) -> None:
        height = self.page_rows()
        self.top = self._clamp(self.current_top(height) + by, height)

    def home(self) -> None:
        self.top = self.span()[0]


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _full_screen(result: LiveResult, job: Job, mode: str) -> tuple[int, bool]:
    screen = _Screen(result, job, mode)
    keys = KeyBindings()

    @keys.add("q")
    @keys.add("Q")
    @keys.add("c-c")
    def _leave(event) -> None:
        screen.left = job.running
        event.app.exit()

    @keys.add("up")
    def _up(event) -> None:
        screen.scroll(-1)

    @keys.add("down")
    def _down(event) -> None:
        screen.scroll(1)

    @keys.add("pageup")
    def _page_up(event) -> None:
        screen.scroll(-screen.page_rows())

    @keys.add("pagedown")
    def _page_down(event) -> None:
        screen.scroll(screen.page_rows())

    @keys.add("home")
    def _home(event) -> None:
        screen.home()

    @keys.add("end")
    def _end(event) -> None:
        screen.top = None

    layout = Layout(HSplit([
        Window(FormattedTextControl(lambda: screen.body()), wrap_lines=False),
        Window(FormattedTextControl(lambda: [("reverse", screen.status())]), height=1),
    ]))
    app = Application(layout=layout, key_bindings=keys, full_screen=True, refresh_interval=REFRESH_SECONDS)

    async def _leave_if_failed() -> None:
        """End the view as soon as the job fails: the shell then prints its error."""
        while not job.done.is_set():
            await asyncio.sleep(REFRESH_SECONDS)
        if job.status == FAILED:
            app.exit()

    app.run(pre_run=lambda: app.create_background_task(_leave_if_failed()))
    return result.received, screen.left
