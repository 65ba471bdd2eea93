"""Table functions for the tests, in a module of their own so that worker processes import them by name."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import weir


@weir.udtf(result_types=["STRING", "BIGINT"])
def split_words(s):
    """A row at a time: each space-separated word of s and its length; nothing for NULL or ''."""
    for word in (s or "").split(" "):
        if word:
            yield word, len(word)


@weir.udtf(result_types=["STRING", "BIGINT"], func_type="arrow")
def split_words_arrow(s: pa.Array) -> pa.Table:
    """split_words over arrays: the input row index of each word, the word, its length."""
    words = pc.split_pattern(pc.fill_null(s, ""), " ")
    row, word = pc.list_parent_indices(words), pc.list_flatten(words)
    keep = pc.not_equal(pc.utf8_length(word), 0)
    word, row = pc.filter(word, keep), pc.filter(row, keep)
    return pa.table({"row": row, "word": word, "len": pc.cast(pc.utf8_length(word), pa.int64())})


@weir.udtf(result_types="BIGINT")
def count_to(n):
    """1, 2, ..., n: bare values for one result type."""
    for i in range(1, (n or 0) + 1):
        yield i


@weir.udtf(result_types=["BIGINT"])
def inverse(v):
    """100 // v: fails on 0, to test the error naming the row."""
    yield 100 // v


@weir.udtf(result_types=["STRING", "BIGINT"])
def too_narrow(s):
    """Yields one value where two are declared."""
    yield (s,)
