"""Multi-class operating points through `dmo train`, `predict`, `evaluate` and `threshold`: per-class recall floors
and precision, --focus, macro F-beta, --confidence, the offsets in the model file (checked on load), and the
refusals; on generated long-tailed 3- and 4-class data, with real training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_gaussian_classes, run_dmo
from jsonschema import Draft202012Validator
from safetensors.numpy import load_file, save_file

import dmocli
from dmocli.models.modelfile import load_model
from dmocli.operating_point.class_offsets import decide

VALIDATOR = Draft202012Validator(dmocli.report_schema())
PRIORS = (0.1, 0.8, 0.1)


def valid(report: dict) -> dict:
    assert [e.message[:200] for e in VALIDATOR.iter_errors(report)] == []
    return report


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mcop")
    paths = {"train": root / "train.parquet", "test": root / "test.parquet", "root": root}
    make_gaussian_classes(1500, seed=1, d=5, priors=PRIORS, sep=1.0).to_parquet(paths["train"])
    make_gaussian_classes(1500, seed=2, d=5, priors=PRIORS, sep=1.0).to_parquet(paths["test"])
    return paths


@pytest.fixture(scope="module")
def frop(data: dict[str, Path]) -> dict:
    """wce, frop with a recall floor of 0.8 for every class, cross-fitted (the default --cv 5)."""
    model = data["root"] / "frop.st"
    proc = run_dmo("train", data["train"], "--problem", "frop", "--target", "0.8", "-o", model, "--json")
    assert proc.returncode == 0, proc.stderr
    return {"model": model, "report": valid(json.loads(proc.stdout))}


def test_frop_meets_every_floor_on_out_of_fold_logits_where_argmax_does_not(data: dict[str, Path], frop: dict):
    report = frop["report"]
    point = report["class_operating_point"]
    assert point["split"] == "cv" and report["cv"]["folds"] == 5
    assert point["feasible"] is True and point["below_floor"] == []
    assert (report["problem"], report["target"]) == ("frop", 0.8)
    assert all(row["recall"] >= 0.8 for row in point["per_class"])
    guard = point["guard"]  # the do-no-harm rule: the arg-max misses a floor, so the baseline moved
    assert guard["chosen"] in ("offsets", "minimal") and guard["folds"] == 5 and guard["gain_se"] >= 0
    assert min(report["splits"]["cv"]["per_class"]["recall"]) >= 0.8  # the split report at the same offsets
    plain = data["root"] / "argmax.st"
    argmax = json.loads(run_dmo("train", data["train"], "-o", plain, "--json", check=True).stdout)
    assert min(argmax["splits"]["cv"]["per_class"]["recall"]) < 0.8  # what the offsets are for
    for row in point["per_class"]:
        low, high = row["recall_interval"]
        assert low <= row["recall"] <= high


def test_model_file_keeps_offsets_and_predict_follows_them(data: dict[str, Path], frop: dict):
    model = load_model(frop["model"])
    assert model.class_offsets is not None and model.class_offsets.shape == (3,)
    assert model.class_problem.kind == "frop" and model.class_problem.floors == (0.8, 0.8, 0.8)
    out = data["root"] / "p.csv"
    run_dmo("predict", frop["model"], data["test"], "-o", out, check=True)
    predicted = pd.read_csv(out)
    logits, _ = model.logits(pd.read_parquet(data["test"]).drop(columns="label").pipe(_table))
    assert (predicted["predicted"].to_numpy() == decide(logits, model.class_offsets)).all()
    assert (decide(logits, model.class_offsets) != logits.argmax(axis=1)).any()
    proba = predicted[[f"probability_{k}" for k in range(3)]].to_numpy()
    assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    evaluate = valid(json.loads(run_dmo("evaluate", frop["model"], data["test"], "--json", check=True).stdout))
    split = evaluate["splits"]["data"]
    assert split["per_class"]["predicted"] == np.bincount(decide(logits, model.class_offsets), minlength=3).tolist()
    assert len(split["per_class"]["recall_interval"]) == 3 and split["macro_precision"] > 0


def _table(frame: pd.DataFrame):
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)


def test_threshold_moves_the_offsets_on_data(data: dict[str, Path], frop: dict):
    moved = data["root"] / "moved.st"
    proc = run_dmo("threshold", frop["model"], data["test"], "--problem", "frop", "--target", "0.7", "-o", moved)
    assert proc.returncode == 0, proc.stderr
    assert "class offsets:" in proc.stdout
    report = valid(json.loads(run_dmo("threshold", frop["model"], data["test"], "-o", moved, "--json").stdout or "{}"))
    assert report["problem_source"] == "model" and report["class_operating_point"]["split"] == "data"
    without = run_dmo("threshold", frop["model"], "-o", moved)
    assert without.returncode == 2 and "DATA" in without.stderr


@pytest.mark.parametrize("solver, extra", [("lus", ("--gamma", "2")), ("wce", ("--model", "gbdt"))])
def test_other_solvers_cross_fit_and_search_offsets(data: dict[str, Path], solver: str, extra: tuple[str, ...]):
    if "gbdt" in extra:
        pytest.importorskip("xgboost")
    model = data["root"] / f"{solver}.st"
    args = ("train", data["train"], "--solver", solver, *extra, "--problem", "ofbs", "-o", model, "--json")
    proc = run_dmo(*args)
    assert proc.returncode == 0, proc.stderr
    report = valid(json.loads(proc.stdout))
    point = report["class_operating_point"]
    assert point["split"] == "cv" and point["feasible"] is None
    assert point["macro_f_beta"] >= report["splits"]["cv"]["macro_f1"] - 1e-9
    assert load_model(model).class_offsets is not None


def test_unreachable_floor_exits_3_with_the_best_per_class(data: dict[str, Path]):
    out = data["root"] / "never.st"
    proc = run_dmo("train", data["train"], "--problem", "frop", "--target", "0.97", "-o", out, "--json")
    assert proc.returncode == 3 and not out.exists()
    report = json.loads(proc.stdout)
    point = report["class_operating_point"]
    assert point["feasible"] is False and point["below_floor"]
    assert "not reachable" in report["message"] and str(point["below_floor"][0]) in report["message"]
    kept = run_dmo("train", data["train"], "--problem", "frop", "--target", "0.97", "--allow-infeasible", "-o", out)
    assert kept.returncode == 0 and out.exists()


def test_focus_and_confidence(data: dict[str, Path]):
    """--focus 2 with a certified precision floor: one class's bound reported at the --confidence level, the
    others' offsets equal (arg-max among themselves)."""
    out = data["root"] / "focus.st"
    args = ("--problem", "fpor", "--target", "0.6", "--focus", "2", "--confidence", "0.9")
    report = valid(json.loads(run_dmo("train", data["train"], *args, "-o", out, "--json", check=True).stdout))
    point = report["class_operating_point"]
    assert point["focus"] == 2 and point["floors"] == {"2": 0.6}
    rows = point["per_class"]
    assert rows[2]["bound"] >= 0.6 and rows[2]["precision"] >= rows[2]["bound"]
    assert rows[0]["offset"] == pytest.approx(rows[1]["offset"])


def test_per_class_floors_with_confidence_are_bonferroni(data: dict[str, Path]):
    out = data["root"] / "conf.st"
    args = ("--problem", "frop", "--target", "0.75", "--class-target", "1=0.5", "--confidence", "0.95")
    report = valid(json.loads(run_dmo("train", data["train"], *args, "-o", out, "--json", check=True).stdout))
    point = report["class_operating_point"]
    assert point["bound_level"] == pytest.approx(1 - 0.05 / 3)
    assert [row["floor"] for row in point["per_class"]] == [0.75, 0.5, 0.75]
    assert all(row["bound"] >= row["floor"] for row in point["per_class"])
    assert report["target"] is None  # the floors differ: they are in class_operating_point


def test_bad_options_are_named_in_one_message(data: dict[str, Path], tmp_path: Path):
    args = ("--problem", "frop", "--target", "0.8", "--class-target", "x=0.5", "--focus", "7", "--new-rows", "9")
    proc = run_dmo("train", data["train"], *args, "--confidence", "0.9", "-o", tmp_path / "m.st")
    assert proc.returncode == 2
    assert "'x' is not a class" in proc.stderr and "--focus '7'" in proc.stderr and "--new-rows" in proc.stderr
    plain = run_dmo("train", data["train"], "--problem", "multiclass", "--focus", "1", "-o", tmp_path / "m.st")
    assert plain.returncode == 2 and "--focus" in plain.stderr
    none = run_dmo("train", data["train"], "--problem", "fpor", "-o", tmp_path / "m.st")
    assert none.returncode == 2 and "--target" in none.stderr


@pytest.mark.parametrize(
    "bad, says",
    [
        (np.array([0.0, np.nan, 0.0]), "not finite"),
        (np.zeros(2), "not 3 float64"),
        (np.zeros(3, dtype=np.float32), "not 3 float64"),
    ],
)
def test_tampered_offsets_are_refused_on_load(frop: dict, tmp_path: Path, bad: np.ndarray, says: str):
    from safetensors import safe_open

    with safe_open(str(frop["model"]), "np") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(frop["model"]))
    tensors["class_offsets"] = bad
    path = tmp_path / "bad.st"
    save_file(tensors, str(path), metadata=metadata)
    proc = run_dmo("predict", path, frop["model"].parent / "test.parquet", "-o", tmp_path / "p.parquet")
    assert proc.returncode == 2 and says in proc.stderr and "class_offsets" in proc.stderr
