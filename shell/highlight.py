"""Syntax highlighting at the prompt: keywords, functions, strings, numbers, comments.

A small tokenizer over the whole buffer (a `/* ... */` comment or a string
may span lines), cut into lines for prompt-toolkit.
"""
from __future__ import annotations

import re
from typing import Callable

from prompt_toolkit.document import Document
from prompt_toolkit.lexers import Lexer

from weir.shell.vocabulary import FUNCTIONS, KEYWORDS

STYLES = {
    "keyword": "class:keyword",
    "function": "class:function",
    "string": "class:string",
    "number": "class:number",
    "comment": "class:comment",
    "name": "class:name",
    "text": "",
}

_TOKEN = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<string>'(?:[^']|'')*(?:'|\Z))"
    r"|(?P<name>\"(?:[^\"]|\"\")*(?:\"|\Z)|`[^`]*(?:`|\Z))"
    r"|(?P<number>\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<text>\s+|.)",
    re.S,
)
_KEYWORDS = frozenset(KEYWORDS)
_FUNCTIONS = frozenset(FUNCTIONS)


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) for the whole text; kinds are the keys of STYLES."""
    out: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(text):
        kind, value = match.lastgroup, match.group()
        if kind == "word":
            upper = value.upper()
            kind = "keyword" if upper in _KEYWORDS else "function" if upper in _FUNCTIONS else "text"
        if out and out[-1][0] == kind == "text":
            out[-1] = ("text", out[-1][1] + value)
        else:
            out.append((kind, value))
    return out


def styled_lines(text: str) -> list[list[tuple[str, str]]]:
    """The text as prompt-toolkit fragments, one list per line."""
    lines: list[list[tuple[str, str]]] = [[]]
    for kind, value in tokens(text):
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if part:
                lines[-1].append((STYLES[kind], part))
    return lines


class SqlLexer(Lexer):
    def lex_document(self, document: Document) -> Callable[[int], list[tuple[str, str]]]:
        lines = styled_lines(document.text)
        return lambda number: lines[number] if number < len(lines) else []
