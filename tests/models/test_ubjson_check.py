"""The booster bytes' bounds check (models/ubjson_check.py): a booster XGBoost wrote passes, and no prefix of it,
no count larger than what is left, nothing after its end, and no runaway nesting reaches XGBoost's reader."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from dmocli.models.ubjson_check import check_ubjson

xgb = pytest.importorskip("xgboost")


@pytest.fixture(scope="module")
def booster_bytes() -> bytes:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + rng.normal(size=300) > 0.5).astype(int)
    booster = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X, label=y), num_boost_round=3)
    return bytes(booster.save_raw(raw_format="ubj"))


def test_a_booster_xgboost_wrote_passes_and_loads(booster_bytes):
    check_ubjson(booster_bytes)
    assert xgb.Booster(model_file=bytearray(booster_bytes)).num_boosted_rounds() == 3


def test_every_prefix_of_a_booster_is_refused(booster_bytes):
    accepted = []
    for size in range(len(booster_bytes)):
        try:
            check_ubjson(booster_bytes[:size])
            accepted.append(size)
        except ValueError:
            pass
    assert not accepted and len(booster_bytes) > 1000


def test_bytes_after_the_end_are_refused(booster_bytes):
    with pytest.raises(ValueError, match="after the booster's end"):
        check_ubjson(booster_bytes + b"Z")


@pytest.mark.parametrize(
    "data, message",
    [
        (b"[$d#L" + struct.pack(">q", 10**12) + b"\x00" * 8, "end early"),  # a packed array longer than the rest
        (b"{L" + struct.pack(">q", 2**40) + b"ab}", "end early"),  # a key longer than the rest
        (b"[#i" + struct.pack(">b", -1), "negative count"),
        (b"[" * 100 + b"]" * 100, "deeper"),
        (b"{i\x01aS" + b"\x00", "length or count"),  # a string length without an integer marker
        (b"[x]", "unknown marker"),
    ],
)
def test_lengths_counts_and_nesting_that_do_not_fit_are_refused(data, message):
    with pytest.raises(ValueError, match=message):
        check_ubjson(data)


def test_well_formed_values_of_every_kind_pass():
    check_ubjson(b"{i\x01a[$i#i\x03\x01\x02\x03i\x01bSi\x02hii\x01c[TFZd\x00\x00\x00\x00]i\x01d{}}")
