"""Feature and score drift profiles (dmocli/prep/feature_drift.py), on small data drawn with numpy."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from dmocli.errors import DmoError
from dmocli.prep.feature_drift import Profile, ProfileBuilder, chi_square_p, compare, drift_gate, psi, psi_severity
from dmocli.prep.features import Preprocessor

NUMERIC = [f"x{i}" for i in range(5)]
DRAWS = 100


def _numeric(rng: np.random.Generator, n: int, shifted: str | None = None) -> pa.Table:
    """Five independent standard normal columns; `shifted` moved up by one standard deviation."""
    return pa.table({name: rng.normal(size=n) + (1.0 if name == shifted else 0.0) for name in NUMERIC})


def _profile(table: pa.Table, **settings) -> Profile:
    builder = ProfileBuilder(NUMERIC, **settings)
    builder.add(table)
    return builder.finish()


def _levels(rng: np.random.Generator, n: int, shares: dict[str, float]) -> pa.Array:
    return pa.array(rng.choice(list(shares), size=n, p=list(shares.values())).tolist())


def _draw(seed: int, shifted: str | None) -> tuple[list, list[str]]:
    """One reference of 3000 training rows and one new sample of 1000, compared and gated."""
    rng = np.random.default_rng(seed)
    drifts = compare(_profile(_numeric(rng, 3000)), [_numeric(rng, 1000, shifted)])
    return drifts, drift_gate(drifts)


def test_no_drift_keeps_psi_low_and_the_gate_closed():
    quiet = 0
    for seed in range(DRAWS):
        drifts, reasons = _draw(seed, None)
        quiet += max(d.psi for d in drifts) < 0.1 and not reasons
    assert quiet >= 0.95 * DRAWS, f"only {quiet} of {DRAWS} draws without drift had every PSI < 0.1 and no reason"


def test_a_one_sd_mean_shift_is_ranked_first_and_gated():
    caught = 0
    for seed in range(DRAWS):
        drifts, reasons = _draw(1000 + seed, "x3")
        caught += drifts[0].name == "x3" and len(reasons) == 1 and "'x3'" in reasons[0]
    assert caught >= 0.95 * DRAWS, f"a 1 SD shift of x3 was ranked first and alone gated in {caught} of {DRAWS}"


def test_a_negligible_shift_on_a_big_sample_is_significant_but_not_gated():
    rng = np.random.default_rng(2)
    builder = ProfileBuilder(["x0"])
    builder.add({"x0": rng.normal(size=200_000)})
    (drift,) = compare(builder.finish(), {"x0": rng.normal(0.05, 1.0, size=200_000)})
    assert drift.p_value < 1e-6 and drift.psi < 0.01 and drift_gate([drift]) == []


def test_a_change_of_level_mix_is_detected():
    rng = np.random.default_rng(3)
    builder = ProfileBuilder(["x0"], ["city"])
    builder.add({"x0": rng.normal(size=5000), "city": _levels(rng, 5000, {"a": 0.5, "b": 0.3, "c": 0.2})})
    new = {"x0": rng.normal(size=2000), "city": _levels(rng, 2000, {"a": 0.2, "b": 0.3, "c": 0.5})}
    drifts = compare(builder.finish(), [new])
    assert [d.name for d in drifts] == ["city", "x0"]
    assert drifts[0].kind == "categorical" and drifts[0].severity == "major" and drifts[0].p_value < 1e-10
    assert len(drift_gate(drifts)) == 1 and drift_gate(drifts)[0].startswith("categorical 'city' drifted: PSI")


def test_unseen_levels_are_counted_apart_from_the_models_other_levels():
    rng = np.random.default_rng(4)
    known = {"city": ["a", "b", "c", "d"]}
    builder = ProfileBuilder([], known, max_levels=2)
    builder.add({"city": _levels(rng, 3000, {"a": 0.6, "b": 0.3, "c": 0.1})})
    reference = builder.finish()
    assert reference.categorical["city"].levels == ["a", "b"] and reference.categorical["city"].unseen == 0
    new = {"city": pa.array(["a"] * 50 + ["c"] * 10 + ["d"] * 5 + ["z"] * 30 + [" ", None, " b "])}
    matching = ProfileBuilder.matching(reference, known)
    matching.add(new)
    counted = matching.finish().categorical["city"]
    assert (counted.counts, counted.other, counted.unseen, counted.missing) == ([50, 1], 15, 30, 2)
    (drift,) = compare(reference, matching.finish())
    assert drift.unseen_after == 30 and "30 rows at unseen levels" in drift_gate([drift])[0]
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
    (drift,) = compare(builder.finish(), [{"city": ["a", "b", "q", "q"]}])
    assert drift.unseen_after == 2


def test_a_change_in_missing_share_is_reported():
    rng = np.random.default_rng(5)
    reference = _profile(_numeric(rng, 3000))
    values = rng.normal(size=1000)
    values[:150] = np.nan
    values[150:200] = np.inf  # what training refuses or imputes counts as missing
    new = _numeric(rng, 1000).set_column(0, "x0", pa.array(values))
    drifts = compare(reference, [new])
    assert drifts[0].name == "x0" and drifts[0].missing_before == 0.0 and drifts[0].missing_after == 0.2
    assert "missing 0.0% -> 20.0%" in drift_gate(drifts)[0]


def test_the_score_profile_is_compared_and_batches_alone_leave_it_out():
    rng = np.random.default_rng(6)
    builder = ProfileBuilder(NUMERIC)
    builder.add(_numeric(rng, 3000))
    builder.add_scores(rng.normal(-2.0, 1.0, size=800))  # the held-out rows' logits
    reference = builder.finish()
    new = ProfileBuilder.matching(reference)
    batch = _numeric(rng, 1000)
    new.add(batch)
    new.add_scores(rng.normal(-1.0, 1.0, size=1000))
    drifts = compare(reference, new.finish())
    assert (drifts[0].kind, drifts[0].name) == ("score", "score") and drifts[0].severity == "major"
    assert [d.kind for d in compare(reference, [batch])] == ["numeric"] * 5


def test_profile_round_trips_through_json():
    rng = np.random.default_rng(7)
    builder = ProfileBuilder(NUMERIC, {"city": ["a", "b", "c"]})
    table = _numeric(rng, 2000).append_column("city", _levels(rng, 2000, {"a": 0.7, "b": 0.2, "c": 0.1}))
    builder.add(table)
    builder.add_scores(rng.normal(size=500))
    profile = builder.finish()
    again = Profile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again == profile
    new = _numeric(rng, 500, "x1").append_column("city", _levels(rng, 500, {"a": 0.5, "b": 0.5}))
    assert compare(again, [new]) == compare(profile, [new])


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(format=99),
        lambda d: d["numeric"]["x0"]["counts"].pop(),
        lambda d: d["numeric"]["x0"]["edges"].reverse(),
        lambda d: d["numeric"]["x0"].update(missing=-1),
        lambda d: d["categorical"]["city"].update(levels=["a", "a"]),
    ],
)
def test_a_damaged_profile_is_refused(damage):
    builder = ProfileBuilder(["x0"], ["city"])
    builder.add({"x0": np.arange(100.0), "city": ["a", "b"] * 50})
    data = builder.finish().to_dict()
    damage(data)
    with pytest.raises(ValueError):
        Profile.from_dict(data)


def test_streaming_gives_the_same_profile_as_one_batch():
    rng = np.random.default_rng(8)
    table = _numeric(rng, 7000).append_column("city", _levels(rng, 7000, {"a": 0.5, "b": 0.4, " c ": 0.1}))
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
    binned = _profile(_numeric(rng, 40_000), sample_rows=5000).numeric["x0"]
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


def test_no_rows_a_missing_column_and_other_cells_are_refused():
    reference = _profile(_numeric(np.random.default_rng(10), 500))
    with pytest.raises(DmoError, match="no rows in the new data"):
        compare(reference, [])
    with pytest.raises(DmoError, match="missing column 'x4'"):
        compare(reference, [{name: [1.0] for name in NUMERIC[:4]}])
    with pytest.raises(ValueError, match="other cells"):
        compare(reference, _profile(_numeric(np.random.default_rng(11), 500)))


def test_psi_and_test_on_counts():
    same = np.array([100.0, 200.0, 300.0])
    assert psi(same, same * 2) == 0.0 and chi_square_p(same, same * 2) == pytest.approx(1.0)
    assert psi(np.array([50.0, 50.0, 0.0]), np.array([50.0, 50.0, 0.0])) == 0.0  # cells empty on both sides
    assert chi_square_p(np.array([5.0, 0.0]), np.array([5.0, 0.0])) == 1.0  # one cell: nothing to tell apart
    assert [psi_severity(v) for v in (0.05, 0.1, 0.24, 0.25)] == ["none", "moderate", "moderate", "major"]


def test_matching_builders_of_parts_merge_into_the_profile_of_all_the_rows():
    """Dask's monitor merges one builder per partition: counts into the reference's fixed bins and levels add up to
    one pass over all the rows, missing values and unseen levels included; a free builder (edges from its own
    first values) cannot be merged, as its parts' bins differ."""
    rng = np.random.default_rng(3)
    colours = {"red": 0.5, "blue": 0.3, "green": 0.2}
    reference = ProfileBuilder(NUMERIC, {"colour": ["red", "blue", "green"]})
    reference.add(_numeric(rng, 2000).append_column("colour", _levels(rng, 2000, colours)))
    stored = reference.finish()
    new = _numeric(rng, 900, shifted="x1").append_column("colour", _levels(rng, 900, {**colours, "violet": 0.0}))
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
