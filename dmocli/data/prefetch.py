"""Run a producer (reading and decoding record batches) one step ahead of its consumer, in a thread.

Parquet and CSV decoding release the GIL, so on a machine with two or more
cores the next batch is read while the consumer (the feature transform and
the model: the online learner, the pilot, the predictor) works on the
current one: a pass costs about max(read, work) instead of their sum.
At most `depth` items wait in the queue, so memory stays O(batch).
"""

from __future__ import annotations

import queue
import threading
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")
_DONE = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def prefetched(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """The items of `items` in order, produced in a background thread; its exceptions re-raised here.

    If the consumer stops early (break, exception, garbage collection), the
    producer is told to stop and is not left blocked on a full queue.
    """
    buffer: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                buffer.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as error:  # handed to the consumer, which raises it
            put(_Failure(error))

    worker = threading.Thread(target=produce, name="dmocli-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item = buffer.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join()
