"""The summary's outlook: the chance the target holds on the next sample (issue 35, item 3)."""

from __future__ import annotations

import numpy as np
from conftest import make_binary_frame

from dmocli.operating_point.outlook import probability_target_holds


def test_the_outlook_is_the_frequency_the_target_held_in_a_simulation():
    """Draw a true precision from the uniform prior, a held-out count and a next sample from it: among draws with
    the same held-out count, the share whose next sample met the target is the stated probability."""
    rng = np.random.default_rng(0)
    truth = rng.uniform(size=400_000)
    held = rng.binomial(200, truth)
    nxt = rng.binomial(150, truth)
    for successes in (150, 160, 170, 185):
        chosen = held == successes
        observed = float(np.mean(nxt[chosen] >= np.ceil(0.8 * 150)))
        stated = probability_target_holds(successes, 200, 0.8, 150)
        assert abs(observed - stated) < 0.03, (successes, observed, stated, int(chosen.sum()))


def test_a_threshold_at_the_target_holds_about_half_the_time_and_a_clear_one_nearly_always():
    assert 0.35 < probability_target_holds(800, 1000, 0.8, 1000) < 0.6
    assert probability_target_holds(950, 1000, 0.8, 1000) > 0.999
    assert probability_target_holds(0, 0, 0.8, 100) is None


def test_train_and_evaluate_print_the_outlook_and_name_confidence_when_it_is_low(dmo, tmp_path):
    make_binary_frame(n=1500, seed=4, sep=1.2).to_parquet(tmp_path / "d.parquet")
    code, out, err = dmo("train", tmp_path / "d.parquet", "--problem", "fpor", "--target", "0.6", "-o", tmp_path / "m")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("outlook:"))
    chance = float(line.split("probability about ")[1].split(";")[0])
    assert ("--confidence 0.95" in line) == (chance < 0.8)
    code, out, err = dmo("evaluate", tmp_path / "m", tmp_path / "d.parquet")
    assert code == 0 and "outlook: precision >= 0.6 on the next 1,500 rows" in out, out
    code, out, err = dmo("train", tmp_path / "d.parquet", "--problem", "fpor", "--target", "0.4", "--confidence",
                         "0.9", "--new-rows", "inf", "-o", tmp_path / "c")  # fmt: skip
    assert code == 0 and "outlook:" not in out and "certified:" in out, out + err  # the certificate says it
