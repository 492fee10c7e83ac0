"""`dmo threshold --adapt NEW` on a model whose scores are not on its stored curve's scale (issue 35, item 5).

A `--cv` ensemble of boosted trees averages its members' probabilities, while the curve keeps each member's
out-of-fold logit: the adapted cut is carried to the model by the share of NEW it is expected to flag
(r TPR + (1 - r) FPR, checked here from the stored curve's rows), so it never flags nothing where the curve's cut
flags rows. A linear model's cut is kept as the curve gives it.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame
from safetensors.numpy import save_file

from dmocli import TrainOptions, load_model, report_schema, train
from dmocli.models import modelfile
from dmocli.shift.adaptation import adapt_threshold
from dmocli.shift.carry import cut_flagging


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapt_share")
    make_binary_frame(n=2000, pos_frac=0.2, seed=0).to_parquet(root / "train.parquet")
    make_binary_frame(n=2000, pos_frac=0.05, seed=1).to_parquet(root / "new.parquet")  # a quarter of the rate
    for family in ("gbdt", "linear"):
        opts = TrainOptions(problem="fpor", target=0.8, seed=0, model=family)
        train(root / "train.parquet", opts, output=root / f"{family}.st")
    return root


def flagged(model_path, data_path, threshold: float) -> tuple[int, int, int]:
    """(rows of NEW at or above `threshold`, rows strictly above it, rows) on the model's own scores."""
    logits, _ = load_model(model_path).logits(pq.read_table(data_path))
    return int(np.sum(logits >= np.float32(threshold))), int(np.sum(logits > np.float32(threshold))), logits.size


def share_from_curve(model_path, cut: float, rate: float) -> float:
    """r TPR + (1 - r) FPR at `cut`, counted from the stored curve's rows (not its counts_at)."""
    scores, labels = load_model(model_path).heldout.rows()
    above = scores >= np.float32(cut)
    return rate * np.mean(above[labels == 1]) + (1 - rate) * np.mean(above[labels == 0])


@pytest.mark.parametrize("extra", [(), ("--confidence", "0.95", "--new-rows", "inf")])
def test_a_gbdt_ensemble_flags_the_share_of_new_the_curve_expects(dmo, models, tmp_path, extra):
    out = tmp_path / "adapted.st"
    args = ("threshold", models / "gbdt.st", "--adapt", models / "new.parquet", "-o", out, "--json")
    code, stdout, err = dmo(*args, *extra, "--allow-infeasible")
    assert code == 0, err
    report = json.loads(stdout)
    jsonschema.validate(report, report_schema())
    adapted = report["adapted"]
    assert adapted["carried"] == "share" and report["threshold"] == adapted["threshold"] == load_model(out).threshold
    expected = share_from_curve(models / "gbdt.st", adapted["curve_threshold"], adapted["new_rate"])
    assert adapted["expected_share"] == pytest.approx(expected, abs=1e-12) and expected > 0
    at_or_above, above, rows = flagged(out, models / "new.parquet", adapted["threshold"])
    wanted = int(round(expected * rows))
    assert wanted >= 1 and above < wanted <= at_or_above, (above, wanted, at_or_above)


def test_a_linear_models_adapted_cut_is_the_curves(dmo, models, tmp_path):
    out = tmp_path / "adapted.st"
    code, stdout, err = dmo("threshold", models / "linear.st", "--adapt", models / "new.parquet", "-o", out, "--json")
    assert code == 0, err
    adapted = json.loads(stdout)["adapted"]
    model = load_model(models / "linear.st")
    direct = adapt_threshold(model.heldout, model.problem, adapted["new_rate"], threshold=model.threshold)
    assert adapted["carried"] == "score" and direct.threshold != model.threshold
    assert load_model(out).threshold == adapted["threshold"] == adapted["curve_threshold"] == direct.threshold
    expected = share_from_curve(models / "linear.st", direct.threshold, adapted["new_rate"])
    assert adapted["expected_share"] == pytest.approx(expected, abs=1e-12)


def test_prior_on_a_gbdt_ensemble_says_the_cut_is_on_the_held_out_scale(dmo, models, tmp_path):
    for family, warned in (("gbdt", True), ("linear", False)):
        code, stdout, err = dmo("threshold", models / f"{family}.st", "--prior", "0.05", "-o", tmp_path / "p.st")
        assert code == 0, err
        assert ("on the scale of the held-out scores" in err and "--adapt NEW" in err) is warned, (family, err)
    code, stdout, err = dmo("threshold", models / "gbdt.st", "--prior", "0.05", "-o", tmp_path / "p.st", "--json")
    report = json.loads(stdout)
    jsonschema.validate(report, report_schema())
    assert report["adapted"]["carried"] == "score" and report["adapted"]["expected_share"] is None


def test_prior_on_a_carried_curve_says_nothing_of_scales(dmo, models, tmp_path):
    """A curve carried to the model's own scale (`carried`, as `--cv-transfer rank` writes it): --prior's cut is on
    the model's scale, and the summary says nothing of the held-out scale."""
    stored = modelfile.read_model_file(models / "gbdt.st")
    meta = modelfile.read_metadata(models / "gbdt.st")
    meta["info"]["heldout"]["carried"] = True
    carried = tmp_path / "carried.st"
    save_file(dict(stored.tensors), str(carried), metadata={modelfile.METADATA_KEY: json.dumps(meta)})
    code, _, err = dmo("threshold", carried, "--prior", "0.05", "-o", tmp_path / "p.st")
    assert code == 0, err
    assert "on the scale of the held-out scores" not in err, err


def test_cut_flagging_against_brute_force():
    """The threshold that flags the `count` highest scores, ties at the last one flagged flagged with it."""
    rng = np.random.default_rng(0)
    for case in range(200):
        scores = rng.integers(0, 6, size=int(rng.integers(1, 12))).astype(np.float32)
        count = int(rng.integers(0, scores.size + 2))
        threshold = cut_flagging(scores, count)
        taken = int(np.sum(scores >= np.float32(threshold)))
        if count == 0:
            assert taken == 0, case
        else:  # the fewest rows at least `count` (or all of them) a threshold on these scores can flag
            possible = [int(np.sum(scores >= s)) for s in scores]
            assert taken == min(t for t in possible if t >= min(count, scores.size)), (case, scores, count)


def test_the_summary_says_when_the_cut_was_carried(dmo, models, tmp_path):
    code, gbdt, err = dmo("threshold", models / "gbdt.st", "--adapt", models / "new.parquet", "-o", tmp_path / "g.st")
    assert code == 0, err
    assert "carried to the model's scores by the share of NEW it should flag" in gbdt
    new = models / "new.parquet"
    code, linear, err = dmo("threshold", models / "linear.st", "--adapt", new, "-o", tmp_path / "l.st")
    assert code == 0, err
    assert "carried to" not in linear


def test_the_model_file_and_dmo_info_say_how_the_cut_was_carried(dmo, models, tmp_path):
    """info.adapted keeps `carried`, `expected_share` and `curve_threshold` as the threshold report gave them, and
    `dmo info` shows them; a model never adapted has `adapted: null`."""
    for family, carried in (("gbdt", "share"), ("linear", "score")):
        out = tmp_path / f"{family}.st"
        code, stdout, err = dmo("threshold", models / f"{family}.st", "--adapt", models / "new.parquet", "-o", out,
                                "--json")  # fmt: skip
        assert code == 0, err
        adapted = json.loads(stdout)["adapted"]
        kept = load_model(out).info["adapted"]
        keys = ("new_rate", "training_rate", "old_threshold", "carried", "expected_share", "curve_threshold")
        assert kept == {key: adapted[key] for key in keys} and kept["carried"] == carried
        code, stdout, err = dmo("info", out, "--json")
        assert code == 0, err
        info = json.loads(stdout)
        jsonschema.validate(info, report_schema())
        assert info["adapted"] == kept
        code, stdout, err = dmo("info", out)
        assert code == 0 and f"adapted: to the positive rate {adapted['new_rate']:.4f}" in stdout, err
        by_share = f"carried to the model's scores by the share of NEW it should flag ({adapted['expected_share']:.4f})"
        assert (by_share in stdout) is (carried == "share"), stdout
    code, stdout, err = dmo("info", models / "gbdt.st", "--json")
    assert code == 0 and json.loads(stdout)["adapted"] is None, err
    code, stdout, err = dmo("info", models / "gbdt.st")
    assert "adapted:" not in stdout
