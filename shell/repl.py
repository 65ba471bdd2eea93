"""The interactive prompt: multi-line statements ended by `;`, highlighting,
completion, persistent history; Ctrl-C cancels, Ctrl-D exits.

Background jobs report when they end: at the prompt the line appears above
it, otherwise it waits for the next prompt.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style

from weir.shell.completion import SqlCompleter
from weir.shell.highlight import SqlLexer
from weir.shell.jobs import FAILED, Job
from weir.shell.runner import Runner, job_done_line, job_failure
from weir.shell.session import Session
from weir.shell.splitter import is_complete

HISTORY_ENV = "WEIR_HISTORY"
PROMPT = "weir> "
CONTINUATION = "   -> "

STYLE = Style.from_dict({
    "keyword": "bold ansiblue",
    "function": "ansicyan",
    "string": "ansigreen",
    "number": "ansimagenta",
    "comment": "italic ansibrightblack",
    "name": "ansiyellow",
})


def history_path() -> Path:
    return Path(os.environ.get(HISTORY_ENV) or Path.home() / ".weir_history")


def _key_bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    def _enter(event) -> None:
        """Run what was typed once its statement ends with `;`; else start a new line."""
        buffer = event.current_buffer
        if buffer.complete_state is not None and buffer.complete_state.current_completion is not None:
            buffer.apply_completion(buffer.complete_state.current_completion)
        elif is_complete(buffer.text) and buffer.document.is_cursor_at_the_end:
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @keys.add("escape", "enter")
    def _run_now(event) -> None:
        event.current_buffer.validate_and_handle()

    return keys


class Repl:
    def __init__(self, session: Session, runner: Runner):
        self.session = session
        self.runner = runner
        self.pending: deque[str] = deque()
        self.at_prompt = threading.Event()
        self._reporting = threading.Lock()
        session.jobs.on_done = self._job_done
        history = history_path()
        history.parent.mkdir(parents=True, exist_ok=True)
        self.prompt = PromptSession(
            PROMPT,
            multiline=True,
            prompt_continuation=lambda width, line, soft: CONTINUATION.rjust(width),
            lexer=SqlLexer(),
            completer=SqlCompleter(session.columns_by_table, session.function_names),
            complete_while_typing=False,
            history=FileHistory(str(history)),
            key_bindings=_key_bindings(),
            style=STYLE,
            enable_history_search=False,
        )

    def _job_done(self, job: Job) -> None:
        if job.kind == "select" or job.stopping:
            return  # the live view or STOP JOB has said how it ended
        self.pending.append(job_failure(job, self.runner.colour) if job.status == FAILED else job_done_line(job))
        if self.at_prompt.is_set():
            self._report()  # patch_stdout puts it above the prompt

    def _report(self) -> None:
        with self._reporting:
            while self.pending:
                print(self.pending.popleft(), flush=True)

    def run(self) -> int:
        print("weir shell: statements end with ';'. HELP for help, Ctrl-D to exit.", flush=True)
        while not self.runner.quit:
            try:
                with patch_stdout(raw=True):
                    self.at_prompt.set()
                    self._report()
                    try:
                        text = self.prompt.prompt()
                    finally:
                        self.at_prompt.clear()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt drops what was typed
            except EOFError:
                break
            try:
                self.runner.run_text(text)
            except KeyboardInterrupt:
                print("canceled", flush=True)
            self.session.refresh()
        self._leave()
        return 0

    def _leave(self) -> None:
        running = [job for job in self.session.jobs.running() if job.kind != "select"]
        if running:
            print(f"stopping {len(running)} running job{'s' if len(running) != 1 else ''}: "
                  f"{', '.join(j.id for j in running)}", flush=True)
            self.session.jobs.cancel_all()
        print("bye", flush=True)
