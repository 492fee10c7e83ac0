"""A boosted-tree `--cv` model never reports feasible a cut its own scores cannot reach (issue 45, hostile review 3).

The threshold is searched on the out-of-fold scores of the fold models; the saved fold ensemble averages its
members' probabilities, a scale compressed at the top, where a cut from the top of the out-of-fold curve can lie
above every score it gives: it then flagged nothing while the report said feasible. Now such a cut is refused as
flagging nothing (or kept infeasible under --allow-infeasible), naming `--cv-transfer rank`, which carries the
out-of-fold scores to the saved model's own scores by rank: its search, certificate and stored held-out curve
are on the model's scale, so a re-target and the monitor read it at the cut the model applies. Carrying every
gbdt ensemble's cut that way measured worse on test (docs/gbdt.md), so the default keeps the out-of-fold scale
and a re-target on it says what the cut may do.

The data reproduce the class: at 2,000 rows the fold fits stop early on their held-out positives, and the
members disagree most at the top, so before the fix the ensemble's highest score on DATA was below the cut at
FPOR 0.95 in 3 of 4 seeds (the cut flagged nothing) and the re-targeted FROP 0.2 cut flagged nothing on new rows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dmocli import Problem, TrainOptions, UnreachableTarget, refit_threshold, train
from dmocli.models.modelfile import load_model
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.pipelines.thresholding import Asked, FitDetails, settle_threshold
from dmocli.shift.carry import carried_by_rank
from dmocli.use.monitor import monitor


def _frame(n: int, seed: int, terms: tuple[float, float, float] = (-3.0, 2.0, 1.5)) -> pd.DataFrame:
    """A rare class whose log-odds are `terms`: an intercept, a linear term and an interaction (the trees' kind of
    problem)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    intercept, linear, interaction = terms
    logit = intercept + linear * X[:, 0] + interaction * (X[:, 1] * X[:, 2] > 0.5)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(5)])
    frame["label"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return frame


def _table(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


def _flagged(model, table: pa.Table) -> tuple[np.ndarray, int]:
    """The model's own logits of `table` and how many of them its threshold flags."""
    logits = model.logits(table)[0]
    return logits, int(np.count_nonzero(logits >= np.float32(model.threshold)))


@pytest.mark.parametrize("seed", [1, 3])
@pytest.mark.parametrize("model_kind", ["gbdt", "auto"])
def test_an_ensemble_never_reports_feasible_a_cut_that_flags_nothing(seed, model_kind):
    """The default ensemble: where the out-of-fold cut lies above every score the model gives its training rows,
    the operating point is infeasible and says so with the way out; refused without --allow-infeasible."""
    frame = _frame(2000, seed, terms=(-3.5, 1.0, 3.0) if model_kind == "auto" else (-3.0, 2.0, 1.5))
    table = _table(frame)
    opts = TrainOptions(problem="fpor", target=0.95, model=model_kind, seed=seed, device="cpu", allow_infeasible=True)
    model, report = train(table, opts)
    logits, flagged = _flagged(model, table)
    if flagged == 0:
        assert report["operating_point"]["feasible"] is False and report["splits"]["cv"]["feasible"] is False
        assert any("flags none of them" in w and "cv_transfer='rank'" in w for w in report["warnings"]), report
        with pytest.raises(UnreachableTarget, match="flags none of them"):
            train(table, dataclasses.replace(opts, allow_infeasible=False))
    else:
        assert model.threshold <= logits.max()
    assert not (report["operating_point"]["feasible"] and flagged == 0)


@pytest.mark.parametrize("seed", [1, 3])
def test_a_high_precision_cut_is_carried_to_the_models_own_scores_by_rank(seed):
    frame = _frame(2000, seed)
    table = _table(frame)
    opts = TrainOptions(problem="fpor", target=0.95, model="gbdt", cv_transfer="rank", seed=seed, device="cpu")
    model, report = train(table, dataclasses.replace(opts, allow_infeasible=True))
    cv = report["splits"]["cv"]
    logits, flagged = _flagged(model, table)
    assert model.threshold <= logits.max(), (model.threshold, float(logits.max()))
    # the share of DATA the saved model flags is the share the out-of-fold cut flagged (ties of its own scores
    # may take in a row or two more)
    assert cv["tp"] + cv["fp"] <= flagged <= cv["tp"] + cv["fp"] + 2, (flagged, cv)
    # the stored curve is on the model's scale: read at the model's threshold it gives the out-of-fold counts
    assert model.heldout.counts_at(model.threshold) == (cv["tp"], cv["fp"])
    assert report["splits"]["train"]["tp"] + report["splits"]["train"]["fp"] == flagged
    assert report["operating_point"]["feasible"] == cv["feasible"]
    # the cut on the out-of-fold scale flags the same rows: before, it was the threshold, above every score
    assert report["cv"]["oof_threshold"] >= model.threshold


def test_a_retargeted_cut_is_on_the_models_scale_and_the_monitor_reads_it_there(tmp_path):
    """`dmo threshold MODEL --problem frop --target 0.2` from the stored curve of a `--cv-transfer rank` model,
    then `dmo monitor` on labeled new rows: the recall the monitor estimates from the curve is the one realized on
    them (within their noise)."""
    seed, terms = 0, (-5.0, 4.0, 2.0)  # a sharp top: before, the cut lay above every score on new rows (recall 0)
    path, retargeted = tmp_path / "gb.safetensors", tmp_path / "gf.safetensors"
    frame = _frame(2000, seed, terms)
    opts = TrainOptions(
        problem="fpor", target=0.8, model="gbdt", cv_transfer="rank", seed=seed, device="cpu", allow_infeasible=True
    )
    train(_table(frame), opts, path)
    refit_threshold(path, None, Problem("frop", 0.2), retargeted)
    model = load_model(retargeted)
    logits, flagged = _flagged(model, _table(frame))
    assert model.threshold <= logits.max() and flagged > 0
    new = _frame(4000, 100 + seed, terms)
    new_path = tmp_path / "new.parquet"
    new.to_parquet(new_path)
    report = monitor(retargeted, new_path).to_dict()
    estimated, realized = report["label_shift"]["recall"], report["realized"]["recall"]
    # three standard errors of a recall near 0.2 measured on the new positives and estimated on the curve's
    noise = 3 * np.sqrt(0.2 * 0.8 * (1 / int(new.label.sum()) + 1 / model.heldout.n_pos))
    assert abs(estimated - realized) <= noise, (estimated, realized, noise)


def test_carried_by_rank_keeps_the_share_each_cut_flags():
    """Brute force over every cut: a cut on the carried scores flags, on the model's own scores, the share it
    flags of the held-out rows (the carried scores are the model's own, so ties there take in their rows)."""
    rng = np.random.default_rng(0)
    for n_held, n_own in ((200, 200), (150, 400)):
        held = np.round(rng.normal(size=n_held), 1).astype(np.float32)  # ties among the held-out scores
        own = np.round(rng.normal(size=n_own) * 0.3, 2).astype(np.float32)  # and among the model's
        carried = carried_by_rank(held, own)
        assert carried.dtype == np.float32 and set(carried.tolist()) <= set(own.tolist())
        order = np.argsort(held)
        assert (np.diff(carried[order]) >= 0).all()  # the ranking is kept, ties stay tied
        assert all(np.ptp(carried[held == v]) == 0 for v in np.unique(held))
        for value in np.unique(held):
            share = np.count_nonzero(held >= value) / n_held
            cut = carried[held == value][0]
            wanted = int(round(share * n_own))
            assert np.count_nonzero(own >= cut) >= wanted
            assert np.count_nonzero(own > cut) < wanted


def test_a_cut_that_flags_none_of_the_models_rows_is_not_feasible():
    """Where a cut is kept on the out-of-fold scale (`--cv-transfer apply`) and the saved model's scores of DATA
    all lie below it, the target is not reached: refused, or with --allow-infeasible kept with a line saying so."""
    rng = np.random.default_rng(1)
    y = (rng.random(400) < 0.2).astype(np.int64)
    oof = (rng.normal(size=400) + 3.0 * y).astype(np.float32)
    own = (0.1 * oof - 2.0).astype(np.float32)  # the same ranking, on a scale far below the out-of-fold one
    logits, truth = {"train": own, "cv": oof}, {"train": y, "cv": y}
    asked = Asked(problem=Problem("fpor", 0.9))
    refused = settle_threshold(logits, truth, asked)
    assert refused.operating_point.point.feasible is False and refused.refusal is not None
    assert "flags none of them" in str(refused.refusal) and "cv_transfer='rank'" in str(refused.refusal)
    kept = settle_threshold(logits, truth, dataclasses.replace(asked, allow_infeasible=True))
    assert kept.refusal is None and any("flags none of them" in w for w in kept.warnings)
    assert kept.splits.splits["cv"]["feasible"] is False
    carried = settle_threshold(logits, truth, asked, FitDetails(carry_to=own))
    assert carried.refusal is None and carried.operating_point.point.feasible is True
    assert np.count_nonzero(own >= np.float32(carried.threshold)) > 0


def test_a_retarget_on_a_curve_written_off_the_models_scale_says_so(tmp_path):
    """A gbdt ensemble keeps its members' out-of-fold curve: re-targeting on it cannot carry the cut (the model's
    own scores are not in the file), so it says what the cut may do; a carried curve (`rank`) says nothing."""
    old, out = tmp_path / "old.safetensors", tmp_path / "out.safetensors"
    frame = _frame(600, 0, (-2.0, 2.0, 1.5))
    model, _ = train(_table(frame), TrainOptions(problem="fpor", target=0.7, model="gbdt", cv=3, seed=0, device="cpu"))
    assert not model.heldout.carried
    model.save(old)
    report = refit_threshold(old, None, Problem("frop", 0.2), out)
    assert any("not this boosted-tree ensemble's own" in w for w in report["warnings"]), report["warnings"]
    report = refit_threshold(out, None, Problem("frop", 0.3), out)  # the re-target keeps the curve as it was
    assert any("give labeled DATA" in w for w in report["warnings"])
    carried = dataclasses.replace(model.heldout, carried=True)
    model.with_decision(dataclasses.replace(model.decision, heldout=carried)).save(old)
    assert not any("boosted-tree" in w for w in refit_threshold(old, None, Problem("frop", 0.2), out)["warnings"])


def test_a_retarget_above_every_score_of_the_model_is_refused_and_the_monitor_gate_fails(tmp_path):
    """Issue 45, hostile 3's second repro: a gbdt ensemble re-targeted from its stored out-of-fold curve to FROP 0.2
    got a cut above every score it gives, and `monitor --gate` passed estimating recall 0.2 where 0.0 was
    realized. The curve keeps the highest score the model gives its training rows (`highest_own`): a cut above it
    is refused like train's, and where it is kept (--allow-infeasible) the monitor's gate fails on it."""
    seed, terms = 0, (-5.0, 4.0, 2.0)  # a sharp top: the cut for a low recall lies above the ensemble's scores
    path, retargeted = tmp_path / "gb.safetensors", tmp_path / "gf.safetensors"
    frame = _frame(2000, seed, terms)
    opts = TrainOptions(problem="fpor", target=0.8, model="gbdt", seed=seed, device="cpu", allow_infeasible=True)
    train(_table(frame), opts, path)
    model = load_model(path)
    own = model.logits(_table(frame))[0]
    assert model.heldout.highest_own == pytest.approx(float(own.max()))
    low = Problem("frop", 0.2)
    with pytest.raises(UnreachableTarget, match="above every score the saved model gives its training rows"):
        refit_threshold(path, None, low, retargeted)
    report = refit_threshold(path, None, low, retargeted, allow_infeasible=True)
    kept = load_model(retargeted)
    assert kept.threshold > own.max() and report["operating_point"]["feasible"] is False
    assert kept.heldout.highest_own == model.heldout.highest_own  # the re-target keeps what the curve knew
    new_path = tmp_path / "new.parquet"
    _frame(2000, 100 + seed, terms).to_parquet(new_path)
    verdict = monitor(retargeted, new_path).to_dict()["gate"]
    assert not verdict["passed"] and "flags none of them" in verdict["reasons"][0], verdict
    # a cut the model's scores reach is re-targeted as before
    reachable = refit_threshold(path, None, Problem("frop", 0.6), retargeted)
    assert reachable["operating_point"]["feasible"] and load_model(retargeted).threshold <= own.max()


def test_the_curves_highest_own_is_checked_on_load():
    curve = HeldOutCurve.from_scores(np.array([0.1, 0.5, 0.9]), np.array([0, 1, 1]), split="cv", highest_own=0.7)
    tensors, info = curve.tensors(), curve.info()
    assert HeldOutCurve.from_file(tensors, info).highest_own == 0.7
    for bad in ("0.7", True, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="highest_own"):
            HeldOutCurve.from_file(tensors, {**info, "highest_own": bad})
    assert HeldOutCurve.from_file(tensors, {k: v for k, v in info.items() if k != "highest_own"}).highest_own is None
