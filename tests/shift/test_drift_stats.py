"""The drift of each feature and of the score between two profiles (dmocli/shift/drift_stats.py), and the profile's
stored form (dmocli/shift/drift_profile.py), on small data drawn with numpy and counted by prep/drift_counting.py."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from dmocli.errors import DmoError
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.shift.drift_profile import Profile
from dmocli.shift.drift_stats import chi_square_p, compare, psi, psi_severity
from dmocli.use.verdicts import drift_reasons

NUMERIC = [f"x{i}" for i in range(5)]
DRAWS = 100


def numeric_table(rng: np.random.Generator, n: int, shifted: str | None = None) -> pa.Table:
    """Five independent standard normal columns; `shifted` moved up by one standard deviation."""
    return pa.table({name: rng.normal(size=n) + (1.0 if name == shifted else 0.0) for name in NUMERIC})


def profile_of(table: pa.Table, **settings) -> Profile:
    builder = ProfileBuilder(NUMERIC, **settings)
    builder.add(table)
    return builder.finish()


def level_array(rng: np.random.Generator, n: int, shares: dict[str, float]) -> pa.Array:
    return pa.array(rng.choice(list(shares), size=n, p=list(shares.values())).tolist())


def matched(reference: Profile, batches: list) -> Profile:
    """New data counted into the reference's cells, as `dmo monitor` counts it, for `compare`."""
    builder = ProfileBuilder.matching(reference)
    for batch in batches:
        builder.add(batch)
    return builder.finish()


def _draw(seed: int, shifted: str | None) -> tuple[list, list[str]]:
    """One reference of 3000 training rows and one new sample of 1000, compared and gated."""
    rng = np.random.default_rng(seed)
    reference = profile_of(numeric_table(rng, 3000))
    drifts = compare(reference, matched(reference, [numeric_table(rng, 1000, shifted)]))
    return drifts, drift_reasons(drifts)


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
    reference = builder.finish()
    (drift,) = compare(reference, matched(reference, [{"x0": rng.normal(0.05, 1.0, size=200_000)}]))
    assert drift.p_value < 1e-6 and drift.psi < 0.01 and drift_reasons([drift]) == []


def test_a_change_of_level_mix_is_detected():
    rng = np.random.default_rng(3)
    builder = ProfileBuilder(["x0"], ["city"])
    builder.add({"x0": rng.normal(size=5000), "city": level_array(rng, 5000, {"a": 0.5, "b": 0.3, "c": 0.2})})
    new = {"x0": rng.normal(size=2000), "city": level_array(rng, 2000, {"a": 0.2, "b": 0.3, "c": 0.5})}
    reference = builder.finish()
    drifts = compare(reference, matched(reference, [new]))
    assert [d.name for d in drifts] == ["city", "x0"]
    assert drifts[0].kind == "categorical" and drifts[0].severity == "major" and drifts[0].p_value < 1e-10
    assert len(drift_reasons(drifts)) == 1 and drift_reasons(drifts)[0].startswith("categorical 'city' drifted: PSI")


def test_a_change_in_missing_share_is_reported():
    rng = np.random.default_rng(5)
    reference = profile_of(numeric_table(rng, 3000))
    values = rng.normal(size=1000)
    values[:150] = np.nan
    values[150:200] = np.inf  # what training refuses or imputes counts as missing
    new = numeric_table(rng, 1000).set_column(0, "x0", pa.array(values))
    drifts = compare(reference, matched(reference, [new]))
    assert drifts[0].name == "x0" and drifts[0].missing_before == 0.0 and drifts[0].missing_after == 0.2
    assert "missing 0.0% -> 20.0%" in drift_reasons(drifts)[0]


def test_the_score_profile_is_compared_and_batches_alone_leave_it_out():
    rng = np.random.default_rng(6)
    builder = ProfileBuilder(NUMERIC)
    builder.add(numeric_table(rng, 3000))
    builder.add_scores(rng.normal(-2.0, 1.0, size=800))  # the held-out rows' logits
    reference = builder.finish()
    new = ProfileBuilder.matching(reference)
    batch = numeric_table(rng, 1000)
    new.add(batch)
    new.add_scores(rng.normal(-1.0, 1.0, size=1000))
    drifts = compare(reference, new.finish())
    assert (drifts[0].kind, drifts[0].name) == ("score", "score") and drifts[0].severity == "major"
    assert [d.kind for d in compare(reference, matched(reference, [batch]))] == ["numeric"] * 5


def test_profile_round_trips_through_json():
    rng = np.random.default_rng(7)
    builder = ProfileBuilder(NUMERIC, {"city": ["a", "b", "c"]})
    table = numeric_table(rng, 2000).append_column("city", level_array(rng, 2000, {"a": 0.7, "b": 0.2, "c": 0.1}))
    builder.add(table)
    builder.add_scores(rng.normal(size=500))
    profile = builder.finish()
    again = Profile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again == profile
    new = numeric_table(rng, 500, "x1").append_column("city", level_array(rng, 500, {"a": 0.5, "b": 0.5}))
    assert compare(again, matched(again, [new])) == compare(profile, matched(profile, [new]))


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


def test_no_rows_and_other_cells_are_refused():
    reference = profile_of(numeric_table(np.random.default_rng(10), 500))
    with pytest.raises(DmoError, match="no rows in the new data"):
        compare(reference, matched(reference, []))
    with pytest.raises(ValueError, match="other cells"):
        compare(reference, profile_of(numeric_table(np.random.default_rng(11), 500)))


def test_psi_and_test_on_counts():
    same = np.array([100.0, 200.0, 300.0])
    assert psi(same, same * 2) == 0.0 and chi_square_p(same, same * 2) == pytest.approx(1.0)
    assert psi(np.array([50.0, 50.0, 0.0]), np.array([50.0, 50.0, 0.0])) == 0.0  # cells empty on both sides
    assert chi_square_p(np.array([5.0, 0.0]), np.array([5.0, 0.0])) == 1.0  # one cell: nothing to tell apart
    assert [psi_severity(v) for v in (0.05, 0.1, 0.24, 0.25)] == ["none", "moderate", "moderate", "major"]
