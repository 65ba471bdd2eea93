"""The `weir` shell in a real pseudo-terminal, driven with pexpect.

``ShellProcess`` sends keys and waits for output: ``expect`` for lines the
shell prints, ``wait_screen`` for what prompt-toolkit draws (the prompt, the
completion, the full-screen live views), read from ``screen.Screen``. No
sleeps: every wait is for something to appear, with a generous timeout.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pexpect

from screen import Screen

WEIR = shutil.which("weir")
ROWS, COLS = 40, 160
TIMEOUT = 30


class _Tee:
    def __init__(self, *files):
        self.files = files

    def write(self, data: str) -> None:
        for f in self.files:
            f.write(data)

    def flush(self) -> None:
        for f in self.files:
            f.flush()


class ShellProcess:
    def __init__(self, cwd: Path, home: Path, *args: str):
        env = dict(os.environ, HOME=str(home), WEIR_HISTORY=str(home / "history"), TERM="xterm",
                   PROMPT_TOOLKIT_NO_CPR="1", COLUMNS=str(COLS), LINES=str(ROWS))
        self.screen = Screen(ROWS, COLS)
        self.log = open(cwd / "terminal.log", "w")
        self.child = pexpect.spawn(WEIR, list(args), cwd=str(cwd), env=env, encoding="utf-8",
                                   timeout=TIMEOUT, dimensions=(ROWS, COLS))
        self.child.logfile_read = _Tee(self.screen, self.log)

    def expect(self, pattern: str, timeout: float = TIMEOUT) -> re.Match:
        self.child.expect(pattern, timeout=timeout)
        return self.child.match

    def prompt(self) -> None:
        """Wait for a fresh prompt."""
        self.expect(r"weir>")

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def line(self, text: str) -> None:
        """Type a line and press Enter."""
        self.child.send(text + "\r")

    def run(self, statement: str) -> None:
        """Wait for the prompt, then type a statement and Enter."""
        self.prompt()
        self.line(statement)

    def wait_screen(self, pattern: str, timeout: float = TIMEOUT) -> re.Match:
        """Read output until the screen shows ``pattern`` (a regular expression)."""
        deadline = time.monotonic() + timeout
        compiled = re.compile(pattern, re.M)
        while True:
            found = compiled.search(self.screen.text())
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the screen never showed {pattern!r}; it shows:\n{self.screen.text()}")
            try:
                self.child.read_nonblocking(100_000, timeout=min(left, 1.0))
            except pexpect.TIMEOUT:
                pass

    def exit(self) -> int:
        """Wait for the prompt, press Ctrl-D, and return the exit status."""
        self.prompt()
        self.child.sendcontrol("d")
        self.child.expect(pexpect.EOF, timeout=TIMEOUT)
        self.child.close()
        self.log.close()
        return self.child.exitstatus
