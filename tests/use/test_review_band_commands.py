"""The review band through the commands (issue 48): train --review-budget stores both cuts in the model file (an
older file, without them, loads as before), predict writes decision positive/review/negative (names by
--decision-names), info shows the band, threshold keeps or re-targets it, --adapt drops it, evaluate and monitor
report its volume; and every refusal, in one line with its exit code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import save_file

from dmocli.models import modelfile
from dmocli.models.modelfile import load_model
from dmocli.operating_point.review_band import decisions


@pytest.fixture(scope="module")
def banded(tmp_path_factory) -> dict[str, Path]:
    """A model trained with a review band (fpor 0.6, 15 % to review), its report, fresh rows of the same kind, and
    the same model trained without a band."""
    root = tmp_path_factory.mktemp("band")
    train, fresh = root / "train.parquet", root / "fresh.parquet"
    make_binary_frame(n=2000, pos_frac=0.3, seed=1, sep=1.0).to_parquet(train)
    make_binary_frame(n=1500, pos_frac=0.3, seed=2, sep=1.0).to_parquet(fresh)
    paths = {"train": train, "fresh": fresh, "model": root / "band.dmo.safetensors", "report": root / "band.json"}
    run_dmo(
        "train", train, "--problem", "fpor", "--target", "0.6", "--review-budget", "0.15", "--confidence", "0.9",
        "-o", paths["model"], "--report", paths["report"], check=True,
    )  # fmt: skip
    paths["plain"] = root / "plain.dmo.safetensors"
    run_dmo("train", train, "--problem", "fpor", "--target", "0.6", "-o", paths["plain"], check=True)
    return paths


def test_train_reports_the_band_and_the_file_keeps_both_cuts(banded):
    band = json.loads(banded["report"].read_text())["review_band"]
    model = load_model(banded["model"])
    assert model.review_threshold == band["review_threshold"] < model.threshold == band["threshold"]
    assert band["volume_bound"] <= 0.15 and band["certified"] and band["review_rows"] > 0
    stored = model.info["review_band"]
    assert (stored["budget"], stored["confidence"], stored["volume"]) == (0.15, 0.9, band["volume"])
    classes = band["classes"]
    assert sum(classes[name]["rows"] for name in classes) == band["rows"]
    assert sum(classes[name]["recall"] for name in classes) == pytest.approx(1.0)
    assert classes["positive"]["precision"] >= 0.6  # the automatic decisions meet the target on the held-out rows
    assert modelfile.read_metadata(banded["model"])["review_threshold"] == model.review_threshold


def test_a_model_without_a_band_has_none_in_its_file(banded):
    meta = modelfile.read_metadata(banded["plain"])
    assert "review_threshold" not in meta and "review_band" not in meta["info"]
    assert load_model(banded["plain"]).review_threshold is None


def _rewritten(source: Path, target: Path, edit) -> Path:
    stored = modelfile.read_model_file(source)
    meta = dict(stored.metadata)
    edit(meta)
    save_file(dict(stored.tensors), str(target), metadata={modelfile.METADATA_KEY: json.dumps(meta)})
    return target


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda meta: meta.__setitem__("review_threshold", meta["threshold"] + 1.0), "above the threshold"),
        (lambda meta: meta.pop("review_threshold"), "come together"),
        (lambda meta: meta["info"]["review_band"].__setitem__("budget", 1.5), "info.review_band.budget"),
    ],
)
def test_a_file_whose_band_lies_is_refused(banded, tmp_path, dmo, edit, words):
    bad = _rewritten(banded["model"], tmp_path / "bad.dmo.safetensors", edit)
    code, _, err = dmo("info", bad)
    assert code == 2 and words in err


def test_predict_writes_the_class_of_decision_by_name(banded, tmp_path, dmo):
    out = tmp_path / "pred.parquet"
    assert dmo("predict", banded["model"], banded["fresh"], "-o", out)[0] == 0
    frame = pd.read_parquet(out)
    model = load_model(banded["model"])
    expected = np.array(["positive", "review", "negative"])[
        decisions(frame["logit"].to_numpy(), model.threshold, model.review_threshold)
    ]
    assert (frame["decision"].to_numpy() == expected).all() and set(expected) == {"positive", "review", "negative"}
    assert ((frame["decision"] == "positive") == (frame["predicted"] == 1)).all()  # predicted: the automatic cut
    named = tmp_path / "named.csv"
    assert dmo("predict", banded["model"], banded["fresh"], "-o", named, "--decision-names", "block,look,pass")[0] == 0
    renamed = pd.read_csv(named)["decision"].map({"block": "positive", "look": "review", "pass": "negative"})
    assert (renamed.to_numpy() == expected).all()


@pytest.mark.parametrize(
    "model, names, words",
    [
        ("plain", "a,b,c", "this model has no band"),
        ("model", "a,b", "three distinct names"),
        ("model", "a,a,b", "three distinct names"),
    ],
)
def test_decision_names_are_refused_where_they_cannot_apply(banded, tmp_path, dmo, model, names, words):
    code, _, err = dmo("predict", banded[model], banded["fresh"], "-o", tmp_path / "p.csv", "--decision-names", names)
    assert code == 2 and words in err and not (tmp_path / "p.csv").exists()


def test_info_shows_the_band(banded, dmo):
    code, out, _ = dmo("info", banded["model"])
    assert code == 0 and "review band: logit" in out and "within 0.15 of the rows" in out
    code, out, _ = dmo("info", banded["model"], "--json")
    assert json.loads(out)["review_band"]["budget"] == 0.15
    assert "review_band" not in json.loads(dmo("info", banded["plain"], "--json")[1])


def test_threshold_keeps_the_band_and_re_targets_it(banded, tmp_path, dmo):
    kept = tmp_path / "kept.dmo.safetensors"
    assert dmo("threshold", banded["model"], "--problem", "fpor", "--target", "0.7", "-o", kept)[0] == 0
    moved, before = load_model(kept), load_model(banded["model"])
    assert moved.threshold > before.threshold and moved.review_threshold < moved.threshold
    assert moved.info["review_band"]["budget"] == 0.15
    wider = tmp_path / "wider.dmo.safetensors"
    report = tmp_path / "wider.json"
    assert dmo("threshold", banded["model"], "--review-budget", "0.3", "-o", wider, "--report", report)[0] == 0
    assert load_model(wider).review_threshold < before.review_threshold
    assert json.loads(report.read_text())["review_band"]["budget"] == 0.3
    code, out, _ = dmo("threshold", banded["model"], "--review-budget", "0.3", "-o", wider, "--json")
    assert code == 0 and json.loads(out)["review_band"] == json.loads(report.read_text())["review_band"]
    assert "review band: logit" in dmo("threshold", banded["model"], "-o", wider)[1]
    added = tmp_path / "added.dmo.safetensors"
    assert dmo("threshold", banded["plain"], "--review-budget", "0.1", "-o", added)[0] == 0
    assert load_model(added).review_threshold is not None


def test_a_problem_without_a_target_drops_or_refuses_the_band(banded, tmp_path, dmo):
    out = tmp_path / "ofbs.dmo.safetensors"
    code, _, err = dmo("threshold", banded["model"], "--problem", "ofbs", "-o", out)
    assert code == 0 and "review band is dropped" in err and load_model(out).review_threshold is None
    code, _, err = dmo("threshold", banded["model"], "--problem", "ofbs", "--review-budget", "0.1", "-o", out)
    assert code == 2 and "--problem fpor --target A" in err


def test_adapt_drops_the_band_with_a_warning(banded, tmp_path, dmo):
    out = tmp_path / "adapted.dmo.safetensors"
    code, _, err = dmo("threshold", banded["model"], "--prior", "0.4", "-o", out)
    assert code == 0 and "review band is dropped" in err
    assert load_model(out).review_threshold is None and "review_band" not in load_model(out).info
    code, _, err = dmo("threshold", banded["model"], "--prior", "0.4", "--review-budget", "0.1", "-o", out)
    assert code == 2 and "--adapt and --prior move the automatic cut alone" in err


def test_evaluate_and_monitor_report_the_realized_band(banded, dmo):
    code, out, _ = dmo("evaluate", banded["model"], banded["fresh"], "--json")
    band = json.loads(out)["review_band"]
    assert code == 0 and band["budget"] == 0.15 and band["rows"] == 1500
    assert band["review_volume"] == pytest.approx(band["classes"]["review"]["volume"])
    code, out, _ = dmo("monitor", banded["model"], banded["fresh"], "--chunk-size", "500", "--json")
    report = json.loads(out)
    volume = report["overall"]["review_volume"] if "overall" in report else report["review_volume"]
    assert code == 0 and volume["rows"] == 1500 and volume["review_rows"] == band["classes"]["review"]["rows"]
    assert "review_band" not in json.loads(dmo("evaluate", banded["plain"], banded["fresh"], "--json")[1])


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["--review-budget", "0.1"], 2, "--review-budget sets a review band"),
        (["--problem", "ofbs", "--review-budget", "0.1"], 2, "--review-budget sets a review band"),
        (["--problem", "fpor", "--target", "0.6", "--review-budget", "1.5"], 2, "strictly between 0 and 1"),
        (["--problem", "fpor", "--target", "0.6", "--review-budget", "0.001", "--confidence", "0.9"], 3, "what"),
    ],
)
def test_train_refuses_a_band_it_cannot_make(banded, tmp_path, dmo, args, code, words):
    out = tmp_path / "m.dmo.safetensors"
    status, _, err = dmo("train", banded["train"], *args, "-o", out)
    assert status == code and not out.exists()
    if code == 3:
        assert "no review band fits --review-budget 0.001" in err and "or more" in err
    else:
        assert words in err


def test_a_multiclass_model_has_no_band(tmp_path, dmo):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=300), "label": rng.choice(["a", "b", "c"], 300)})
    frame.to_parquet(tmp_path / "three.parquet")
    args = ("--problem", "fpor", "--target", "0.5", "--review-budget", "0.1", "--solver", "wce")
    code, _, err = dmo("train", tmp_path / "three.parquet", *args, "-o", tmp_path / "m.dmo.safetensors")
    assert code == 2 and ("multi-class" in err or "binary" in err)
