"""A drift profile counted from columns in one pass (dmocli/prep/drift_counting.py): the same profile whatever the
batching, bins of about a tenth of the rows, levels matched as the model matches them, unseen levels apart from the
model's other ones, and per-partition builders that merge into one pass's counts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from test_drift_stats import NUMERIC, level_array, matched, numeric_table, profile_of

from dmocli.errors import DmoError
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.prep.features import Preprocessor
from dmocli.shift.drift_stats import compare
from dmocli.use.verdicts import drift_reasons


def test_unseen_levels_are_counted_apart_from_the_models_otherlevel_array():
    rng = np.random.default_rng(4)
    known = {"city": ["a", "b", "c", "d"]}
    builder = ProfileBuilder([], known, max_levels=2)
    builder.add({"city": level_array(rng, 3000, {"a": 0.6, "b": 0.3, "c": 0.1})})
    reference = builder.finish()
    assert reference.categorical["city"].levels == ["a", "b"] and reference.categorical["city"].unseen == 0
    new = {"city": pa.array(["a"] * 50 + ["c"] * 10 + ["d"] * 5 + ["z"] * 30 + [" ", None, " b "])}
    matching = ProfileBuilder.matching(reference, known)
    matching.add(new)
    counted = matching.finish().categorical["city"]
    assert (counted.counts, counted.other, counted.unseen, counted.missing) == ([50, 1], 15, 30, 2)
    (drift,) = compare(reference, matching.finish())
    assert drift.unseen_after == 30 and "30 rows at unseen levels" in drift_reasons([drift])[0]
    without_known = ProfileBuilder.matching(reference)  # the reference had other levels: z cannot be told apart
    without_known.add(new)
    assert without_known.finish().categorical["city"].unseen == 0


def test_a_matching_profile_keeps_every_reference_level_whatever_its_own_cap():
    builder = ProfileBuilder([], ["city"], max_levels=60)
    builder.add({"city": [f"level_{i}" for i in range(60)]})
    reference = builder.finish()
    matching = ProfileBuilder.matching(reference)  # its own cap (50) is not the reference's
    matching.add({"city": [f"level_{i}" for i in range(60)]})
    counted = matching.finish().categorical["city"]
    assert counted == reference.categorical["city"] and counted.rows == 60


def test_a_level_outside_a_complete_reference_is_unseen():
    builder = ProfileBuilder([], ["city"])
    builder.add({"city": ["a", "b", "a"]})
    reference = builder.finish()
    (drift,) = compare(reference, matched(reference, [{"city": ["a", "b", "q", "q"]}]))
    assert drift.unseen_after == 2


def test_streaming_gives_the_same_profile_as_one_batch():
    rng = np.random.default_rng(8)
    table = numeric_table(rng, 7000).append_column("city", level_array(rng, 7000, {"a": 0.5, "b": 0.4, " c ": 0.1}))
    x0 = table.column("x0").to_numpy().copy()
    x0[::13] = np.nan
    table = table.set_column(0, "x0", pa.array(x0))
    scores = rng.normal(size=7000)
    whole = ProfileBuilder(NUMERIC, ["city"], sample_rows=2000)  # the edges' sample spans several batches
    whole.add(table)
    whole.add_scores(scores)
    streamed = ProfileBuilder(NUMERIC, ["city"], sample_rows=2000)
    for batch in table.to_batches(max_chunksize=333):
        streamed.add(batch)
    for part in np.array_split(scores, 9):
        streamed.add_scores(part)
    profile = streamed.finish()
    assert profile == whole.finish()  # exactly: edges come from the first values in stream order
    assert profile.categorical["city"].levels == ["a", "b", "c"]  # trimmed, as the model matches levels


def test_bins_hold_about_a_tenth_of_the_rows_and_the_tails_apart():
    rng = np.random.default_rng(9)
    binned = profile_of(numeric_table(rng, 40_000), sample_rows=5000).numeric["x0"]
    shares = np.asarray(binned.counts) / 40_000
    assert len(shares) == 12 and np.all(np.abs(shares[[0, -1]] - 0.01) < 0.005)
    assert np.all(np.abs(shares[1:-1] - 0.098) < 0.02), shares


def test_profile_follows_the_preprocessors_columns_and_level_matching():
    pre = Preprocessor(numeric=["amount"], categorical={"region": ["north", "south"]}, fold_case=True)
    builder = ProfileBuilder.for_preprocessor(pre)
    builder.add(pa.table({"amount": pa.array([1, None, 3]), "region": [" North ", "SOUTH", "west"]}))
    profile = builder.finish()
    assert profile.numeric["amount"].missing == 1 and profile.fold_case
    assert profile.categorical["region"].to_dict() == {
        "levels": ["north", "south"],
        "counts": [1, 1],
        "other": 0,
        "unseen": 1,
        "missing": 0,
    }


def test_matching_builders_of_parts_merge_into_the_profile_of_all_the_rows():
    """Dask's monitor merges one builder per partition: counts into the reference's fixed bins and levels add up to
    one pass over all the rows, missing values and unseen levels included; a free builder (edges from its own
    first values) cannot be merged, as its parts' bins differ."""
    rng = np.random.default_rng(3)
    colours = {"red": 0.5, "blue": 0.3, "green": 0.2}
    reference = ProfileBuilder(NUMERIC, {"colour": ["red", "blue", "green"]})
    reference.add(numeric_table(rng, 2000).append_column("colour", level_array(rng, 2000, colours)))
    stored = reference.finish()
    new = numeric_table(rng, 900, shifted="x1").append_column(
        "colour", level_array(rng, 900, {**colours, "violet": 0.0})
    )
    new = new.set_column(0, "x0", pa.array(np.where(np.arange(900) % 7 == 0, np.nan, new.column("x0").to_numpy())))
    new = new.set_column(
        5,
        "colour",
        pa.array([("violet" if i % 11 == 0 else c) for i, c in enumerate(new.column("colour").to_pylist())]),
    )
    whole = ProfileBuilder.matching(stored)
    whole.add(new)
    merged = ProfileBuilder.matching(stored)
    for start, stop in ((0, 250), (250, 251), (251, 900)):
        part = ProfileBuilder.matching(stored)
        part.add(new.slice(start, stop - start))
        merged.merge(part)
    assert merged.finish() == whole.finish()
    assert merged.finish().categorical["colour"].unseen == len(range(0, 900, 11))
    free = ProfileBuilder(NUMERIC)
    with pytest.raises(ValueError, match="fixed bins"):
        free.merge(ProfileBuilder(NUMERIC))


def test_new_data_missing_a_profiled_column_is_refused():
    reference = profile_of(numeric_table(np.random.default_rng(10), 500))
    with pytest.raises(DmoError, match="missing column 'x4'"):
        matched(reference, [{name: [1.0] for name in NUMERIC[:4]}])
