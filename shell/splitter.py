"""Where statements end: text split at `;` outside quotes and comments.

The shell runs a script one statement at a time (so statement 3 runs before
an error in statement 5 is found), and submits what is typed at the prompt
once the last statement is ended by `;`. Positions stay positions in the
whole text: ``Chunk.padded()`` puts a chunk back where it was, so a parse
error of the chunk reports the line and column of the whole file.
"""
from __future__ import annotations

from dataclasses import dataclass

from weir.shell.vocabulary import SHELL_COMMANDS as _COMMANDS

#: Words that the shell itself understands, with or without a `;`.
SHELL_COMMANDS = tuple(c.lower() for c in _COMMANDS)


@dataclass(frozen=True)
class Chunk:
    text: str  # the statement as written, without its `;`
    start: int  # offset of its first character in the whole text
    line: int  # 1-based line of ``start``
    col: int  # 1-based column of ``start``

    def padded(self) -> str:
        """The chunk preceded by blank lines and spaces up to where it stood."""
        return "\n" * (self.line - 1) + " " * (self.col - 1) + self.text

    @property
    def shell_command(self) -> str | None:
        if self.text.startswith("\\"):  # a psql meta-command (\x, \pset format csv, \d t): as written
            return self.text.rstrip(";").strip()
        word = _strip_comments(self.text).strip().rstrip(";").strip().lower()
        return word if word in SHELL_COMMANDS else None


def _scan(text: str):
    """Yield (offset, kind) for every character: 'code', 'quote', 'comment', or 'end' at a `;` in code."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if text[j] == c:
                    if j + 1 < n and text[j + 1] == c:  # '' inside a string
                        j += 2
                        continue
                    break
                j += 1
            for k in range(i, min(j + 1, n)):
                yield k, "quote"
            i = j + 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                yield k, "comment"
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                yield k, "comment"
            i = j
        else:
            yield i, "end" if c == ";" else "code"
            i += 1


def _strip_comments(text: str) -> str:
    return "".join(text[i] for i, kind in _scan(text) if kind != "comment")


def split(text: str) -> list[Chunk]:
    """The statements of ``text``; empty ones (only blanks and comments) left out."""
    chunks, start = [], 0
    for offset, kind in list(_scan(text)) + [(len(text), "end")]:
        if kind != "end":
            continue
        body = text[start:offset]
        while _strip_comments(body).strip():
            lead = len(body) - len(body.lstrip())
            if body[lead] == "\\":  # a meta-command ends at its line's end, as in psql
                end = body.find("\n", lead)
                end = len(body) if end < 0 else end
                chunks.append(_chunk(text, start + lead, body[lead:end].rstrip()))
                start, body = start + end, body[end:]
                continue
            chunks.append(_chunk(text, start + lead, body[lead:].rstrip()))
            break
        start = offset + 1
    return chunks


def _chunk(text: str, start: int, body: str) -> Chunk:
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return Chunk(body, start, line, col)


def is_complete(text: str) -> bool:
    """True when what was typed can be run: it ends with `;` (comments and
    blanks after it aside) outside quotes and comments, or is a shell command."""
    if not _strip_comments(text).strip():
        return False
    if text.strip().startswith("\\") and "\n" not in text.strip():
        return True  # a meta-command: its line is all of it
    meaningful = [kind for i, kind in _scan(text) if kind != "comment" and not (kind == "code" and text[i].isspace())]
    if meaningful and meaningful[-1] == "end":
        return True
    return _strip_comments(text).strip().lower() in SHELL_COMMANDS

