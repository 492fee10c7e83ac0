"""`--cv auto` (dmocli/pipelines/cv_auto.py): K folds when a held-out fifth would hold too few positives for the
Clopper-Pearson margin, one held-out split when it holds enough; reported as `cv_rule` and in the summary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import make_binary_frame, make_gaussian_classes, run_dmo
from jsonschema import Draft202012Validator
from scipy.stats import beta

import dmocli
from dmocli.operating_point.problems import Problem
from dmocli.pipelines.cv_auto import SPLIT_FRAC, TOLERANCE, decide, held_out_positives_needed

VALIDATOR = Draft202012Validator(dmocli.report_schema())
FROP_09 = ("--problem", "frop", "--target", "0.9")  # 742 held-out positives at 0.95: one split from ~3,700


def margin(rate: float, trials: int, confidence: float) -> float:
    """rate minus its one-sided Clopper-Pearson lower bound at rate x trials successes, by scipy's Beta quantile
    (not the module's code)."""
    successes = rate * trials
    return rate - beta.ppf(1 - confidence, successes, trials - successes + 1)


@pytest.mark.parametrize(("rate", "confidence"), [(0.8, 0.95), (0.9, 0.95), (0.5, 0.95), (0.8, 0.99)])
def test_the_needed_count_is_the_first_that_keeps_the_margin_within_the_tolerance(rate, confidence) -> None:
    needed = held_out_positives_needed(rate, confidence)
    scan = next(n for n in range(1, 10 * needed) if margin(rate, n, confidence) <= TOLERANCE)  # brute force
    assert needed == scan
    z = {0.95: 1.645, 0.99: 2.326}[confidence]  # and of the size Wilson's score bound, an approximation, gives

    def wilson_margin(n: int) -> float:
        spread = z * math.sqrt(rate * (1 - rate) / n + z**2 / (4 * n**2))
        return rate - (rate + z**2 / (2 * n) - spread) / (1 + z**2 / n)

    wilson = next(n for n in range(1, 10 * needed) if wilson_margin(n) <= TOLERANCE)
    assert needed == pytest.approx(wilson, rel=0.05)


def test_the_rule_crosses_at_the_documented_count() -> None:
    frop = Problem("frop", 0.8)
    needed = held_out_positives_needed(0.8, 0.95)
    assert needed == 1194  # docs/training.md#cv-auto quotes it
    at = decide(positives=round(needed / SPLIT_FRAC), problem=frop, confidence=None)
    below = decide(positives=round(needed / SPLIT_FRAC) - 3, problem=frop, confidence=None)
    assert (at.decision, at.held_out_positives) == ("split", needed)
    assert (below.decision, below.held_out_positives) == ("folds", needed - 1)
    ofbs = decide(positives=6200, problem=Problem("ofbs"), confidence=None)
    assert (ofbs.rate, ofbs.decision) == (0.5, "folds")  # the widest bound: ofbs needs more positives
    stricter = decide(positives=6200, problem=frop, confidence=0.99)
    assert stricter.needed > needed and stricter.decision == "folds"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cv_auto")
    frames = {
        "few": make_binary_frame(n=1500, pos_frac=0.15, seed=1),  # ~225 positives: a fifth holds ~45
        "many": make_binary_frame(n=8000, pos_frac=0.5, seed=2),  # ~4,000 positives: a fifth holds ~800
        "val_many": make_binary_frame(n=4000, pos_frac=0.5, seed=3),
        "val_few": make_binary_frame(n=600, pos_frac=0.15, seed=4),
    }
    paths = {}
    for name, frame in frames.items():
        paths[name] = root / f"{name}.parquet"
        frame.to_parquet(paths[name])
    paths["root"] = root
    return paths


def train_report(*args: str | Path) -> dict:
    proc = run_dmo("train", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [error.message for error in VALIDATOR.iter_errors(report)] == []
    return report


def test_few_positives_cross_fit_five_folds(files: dict[str, Path]) -> None:
    report = train_report(files["few"], *FROP_09, "--cv", "auto", "-o", files["root"] / "few.dmo.safetensors")
    rule = report["cv_rule"]
    assert rule["decision"] == "folds" and rule["held_out"] == "split" and rule["folds"] == 5
    assert rule["positives"] == report["splits"]["train"]["n_pos"]
    assert rule["held_out_positives"] == round(0.2 * rule["positives"]) < rule["needed"] == 742
    assert report["cv"]["folds"] == 5 and report["operating_point"]["split"] == "cv"


def test_many_positives_hold_out_one_split_as_val_frac_would(files: dict[str, Path]) -> None:
    root = files["root"]
    auto = train_report(files["many"], *FROP_09, "--cv", "auto", "-o", root / "auto.dmo.safetensors")
    rule = auto["cv_rule"]
    assert (rule["decision"], rule["folds"], rule["split_frac"]) == ("split", 0, 0.2)
    assert rule["held_out_positives"] == auto["splits"]["val"]["n_pos"] >= rule["needed"]
    assert "cv" not in auto and auto["operating_point"]["split"] == "val"
    assert auto["architecture"].get("members") is None  # one model, not an ensemble of folds
    by_hand = train_report(files["many"], *FROP_09, "--val-frac", "0.2", "-o", root / "hand.dmo.safetensors")
    assert "cv_rule" not in by_hand
    assert auto["threshold"] == by_hand["threshold"]  # the same split, the same fit
    assert auto["splits"]["val"] == by_hand["splits"]["val"]


def test_the_summary_says_what_auto_decided_and_on_which_counts(files: dict[str, Path]) -> None:
    out = run_dmo("train", files["many"], *FROP_09, "--cv", "auto", "-o", files["root"] / "s.dmo.safetensors").stdout
    (line,) = [line for line in out.splitlines() if line.startswith("cv auto:")]
    assert "one held-out split (0.2 of DATA), no folds" in line and "at least the 742" in line


def test_with_val_the_rule_counts_val_positives(files: dict[str, Path]) -> None:
    root = files["root"]
    enough = train_report(files["few"], *FROP_09, "--cv", "auto", "--val", files["val_many"], "-o", root / "a.dmo")
    assert enough["cv_rule"]["decision"] == "val" and enough["cv_rule"]["held_out"] == "val"
    assert enough["cv_rule"]["positives"] == enough["splits"]["val"]["n_pos"] >= 742
    assert "cv" not in enough and enough["operating_point"]["split"] == "val"
    few = train_report(files["few"], *FROP_09, "--cv", "auto", "--val", files["val_few"], "-o", root / "b.dmo")
    assert few["cv_rule"]["decision"] == "folds" and few["cv_rule"]["positives"] < 742
    assert few["cv"]["pooled_val"] is True and few["cv"]["folds"] == 5
    pooled = few["splits"]["cv"]["n"]
    assert pooled == 1500 + 600  # DATA's and --val's labeled rows, every one held out once


def test_multiclass_keeps_the_default_folds(files: dict[str, Path]) -> None:
    path = files["root"] / "three.parquet"
    make_gaussian_classes(900, d=4).to_parquet(path)
    report = train_report(path, "--problem", "multiclass", "--cv", "auto", "-o", files["root"] / "m.dmo")
    assert "cv_rule" not in report and report["cv"]["folds"] == 5


def test_the_estimator_takes_cv_auto() -> None:
    from dmocli.estimator import DmoClassifier

    frame = make_binary_frame(n=1500, pos_frac=0.15, seed=5)
    fitted = DmoClassifier(problem="frop", target=0.9, cv="auto").fit(frame.drop(columns="label"), frame["label"])
    assert fitted.report_["cv_rule"]["decision"] == "folds"
    assert np.isfinite(fitted.threshold_)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (("--cv", "many"), "--cv 'many' must be a number of folds K >= 2, 0 for none, or auto"),
        (("--cv", "auto", "--val-frac", "0.2"), "give either --cv K or --val-frac, not both"),
        (("--cv", "auto", "--solver", "fofo"), "--cv refits the model per fold"),
    ],
)
def test_bad_values_are_refused_in_one_line(files: dict[str, Path], given, expected) -> None:
    proc = run_dmo("train", files["few"], *given, "-o", files["root"] / "bad.dmo.safetensors")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("dmo: error: ") and expected in line
