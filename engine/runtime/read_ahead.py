"""An iterator run a few items ahead of its consumer, in a thread of its own.

A bounded file source decodes its next batches (Parquet pages, CSV text: pyarrow's C++ code,
which lets go of the GIL) while the job's thread aggregates the ones before them in DuckDB
(which lets go of it too), so a job at parallelism 1 keeps both cores busy. The items, and
any exception the iterator raises, reach the consumer in the order the iterator produced
them, so nothing the job computes depends on the thread: only when the reading is done.
"""
from __future__ import annotations

import queue
import threading
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")

#: Items produced and not yet consumed, at most (each a source batch: a few MB).
DEPTH = 2
_END = object()


class ReadAhead(Generic[T]):
    """Iterate ``items`` in a daemon thread, at most ``depth`` items ahead; ``close`` stops it."""

    def __init__(self, items: Iterator[T], depth: int = DEPTH, name: str = "weir-read-ahead"):
        self._items = items
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._produce, name=name, daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        """Hand ``item`` on, waiting for room; False once the consumer has closed."""
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._put((item, None)):
                    return
            self._put((_END, None))
        except BaseException as error:  # raised where the consumer reaches it
            self._put((_END, error))
        finally:
            close = getattr(self._items, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        item, error = self._queue.get()
        if item is _END:
            self._stopped.set()
            if error is not None:
                raise error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop reading ahead (the thread ends within its wait's tick) and drop what was read."""
        self._stopped.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5.0)
