"""dmocli.data.prefetch: a background producer must not change what the consumer sees, nor hide errors, nor leak."""

from __future__ import annotations

import threading

import pytest

from dmocli.data.prefetch import prefetched
from dmocli.errors import DmoError


def test_items_arrive_in_order_and_complete():
    assert list(prefetched(iter(range(1000)), depth=3)) == list(range(1000))


def test_producer_error_is_raised_in_the_consumer_after_the_good_items():
    def items():
        yield 1
        yield 2
        raise DmoError("bad batch 3")

    seen = []
    with pytest.raises(DmoError, match="bad batch 3"):
        for item in prefetched(items()):
            seen.append(item)
    assert seen == [1, 2]


def test_stopping_early_stops_the_producer():
    produced = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    stream = prefetched(endless(), depth=2)
    assert [next(stream) for _ in range(5)] == [0, 1, 2, 3, 4]
    stream.close()
    assert not any(t.name == "dmocli-prefetch" and t.is_alive() for t in threading.enumerate())
    assert len(produced) <= 5 + 2 + 2  # at most a queue's worth ahead of the consumer
