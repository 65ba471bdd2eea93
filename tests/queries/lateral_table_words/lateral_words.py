"""The table functions of query.sql, imported by name from the job's folder (its working directory)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import weir


@weir.udtf(result_types=["STRING", "INT"])
def split_words(line):
    """Each space-separated word of a line and its length, a row at a time."""
    for word in (line or "").split(" "):
        if word:
            yield word, len(word)


@weir.udtf(result_types=["STRING"], func_type="arrow")
def words_of(lines: pa.Array) -> pa.Table:
    """The words of each line, over arrays: the input row index of each word, then the word."""
    words = pc.split_pattern(pc.fill_null(lines, ""), " ")
    row, word = pc.list_parent_indices(words), pc.list_flatten(words)
    keep = pc.not_equal(word, "")
    return pa.table({"row": pc.filter(row, keep), "word": pc.filter(word, keep)})


@weir.udtf(result_types="BIGINT")
def count_to(n):
    """1, 2, ..., n."""
    yield from range(1, n + 1)
