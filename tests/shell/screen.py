"""A small terminal emulator for the shell tests: what a person would see.

prompt-toolkit redraws only what changed on the screen, so a word on the
screen is not always a word in the output stream. ``Screen`` is given
everything the shell writes (as pexpect's ``logfile_read``) and keeps the
grid of characters, for the escape sequences prompt-toolkit uses: cursor
movement, erase, the alternate screen; colours are ignored.
"""
from __future__ import annotations

import re

_SEQUENCE = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])|\x1b[()][A-Za-z0-9]|\x1b[=>78]|\x1b\][^\x07]*\x07|[\r\n\b\x07]|[^\x1b\r\n\b\x07]+")


class Screen:
    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        self.main = self._blank()
        self.grid = self.main
        self.row = self.col = 0
        self.saved = (0, 0)

    def _blank(self) -> list[list[str]]:
        return [[" "] * self.cols for _ in range(self.rows)]

    # pexpect's logfile protocol
    def write(self, data: str) -> None:
        for match in _SEQUENCE.finditer(data):
            text = match.group()
            if match.group(2) is not None:
                self._csi(match.group(1), match.group(2))
            elif text == "\r":
                self.col = 0
            elif text == "\n":
                self._line_feed()
            elif text == "\b":
                self.col = max(0, self.col - 1)
            elif not text.startswith("\x1b") and text != "\x07":
                for ch in text:
                    self._put(ch)

    def flush(self) -> None:
        pass

    def _put(self, ch: str) -> None:
        if self.col >= self.cols:
            self.col = 0
            self._line_feed()
        self.grid[self.row][self.col] = ch
        self.col += 1

    def _line_feed(self) -> None:
        if self.row == self.rows - 1:
            self.grid.pop(0)
            self.grid.append([" "] * self.cols)
        else:
            self.row += 1

    def _csi(self, params: str, final: str) -> None:
        if params.startswith("?"):
            if params == "?1049" and final in "hl":
                self.grid = self._blank() if final == "h" else self.main
                if final == "h":
                    self.saved = (self.row, self.col)
                else:
                    self.row, self.col = self.saved
            return
        numbers = [int(n) if n else 0 for n in params.split(";")] if params else []
        n = numbers[0] if numbers and numbers[0] else 1
        if final == "A":
            self.row = max(0, self.row - n)
        elif final == "B":
            self.row = min(self.rows - 1, self.row + n)
        elif final == "C":
            self.col = min(self.cols - 1, self.col + n)
        elif final == "D":
            self.col = max(0, self.col - n)
        elif final in "Hf":
            self.row = min(self.rows - 1, (numbers[0] if numbers and numbers[0] else 1) - 1)
            self.col = min(self.cols - 1, (numbers[1] if len(numbers) > 1 and numbers[1] else 1) - 1)
        elif final == "J":
            mode = numbers[0] if numbers else 0
            if mode == 0:
                self.grid[self.row][self.col:] = [" "] * (self.cols - self.col)
                for r in range(self.row + 1, self.rows):
                    self.grid[r] = [" "] * self.cols
            elif mode == 2:
                for r in range(self.rows):
                    self.grid[r] = [" "] * self.cols
        elif final == "K":
            mode = numbers[0] if numbers else 0
            if mode == 0:
                self.grid[self.row][self.col:] = [" "] * (self.cols - self.col)
            elif mode == 2:
                self.grid[self.row] = [" "] * self.cols

    def lines(self) -> list[str]:
        return ["".join(row).rstrip() for row in self.grid]

    def text(self) -> str:
        return "\n".join(self.lines())
