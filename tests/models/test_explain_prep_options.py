"""Explanations and importance for every preparation option and every model family (issue 45, trial 0 and
hostile review 8; issue 46): a model trained with `--dates parts`, `--dates parts,trend`, `--dates parts` on rows of
one month (its month part dropped as constant), `--parse-numbers`, `--fold-case`, `--impute median`, text levels,
or all of them at once, as linear, mlp, gbdt or multi-class, explains its rows through
`dmo predict --explain`, `dmocli.predict(..., explain=K)` and `dmo info --features`, and the contributions add
up to the logit of the class the model decides on (class offsets applied).

Before the fix a derived column (a date's parts) broke all three: an IndexError in predict, a KeyError
`created_at.year` in info, and a multi-class model explained the arg-max class where its offsets decided another.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import run_dmo
from test_report_schema import problems

import dmocli
from dmocli.models.explain import contributions

ROWS = 240

# Each preparation option: the train flags and the raw columns it needs (a text date column without
# --dates parts, or amounts written `$1,234.50` without --parse-numbers, are refused by train).
OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dates parts": (("--dates", "parts"), ("created_at",)),
    "dates parts,trend": (("--dates", "parts,trend"), ("created_at",)),  # the year, 2024 in every row, dropped
    "dates parts, one month": (("--dates", "parts"), ("march_at",)),  # the month, 3 in every row, dropped
    "parse numbers": (("--parse-numbers",), ("amount",)),
    "fold case": (("--fold-case",), ("shop",)),
    "impute median": (("--impute", "median"), ("gappy",)),
    "text levels": ((), ("shop",)),
    "all together": (
        ("--dates", "parts", "--parse-numbers", "--fold-case", "--impute", "median"),
        ("created_at", "amount", "shop", "gappy"),
    ),
}
# Each family: the train flags, and whether the label has three classes.
FAMILIES: dict[str, tuple[tuple[str, ...], bool]] = {
    "linear": (("--model", "linear"), False),
    "mlp": (("--model", "mlp", "--param", "max-epochs=40"), False),
    "gbdt": (("--model", "gbdt", "--param", "fixed-rounds=60"), False),
    "multi-class linear": (("--model", "linear"), True),
    "multi-class gbdt": (("--model", "gbdt", "--param", "fixed-rounds=60"), True),
    "multi-class mlp": (("--model", "mlp", "--param", "max-epochs=40"), True),
}


def raw_frame(columns: tuple[str, ...], *, classes: int, seed: int = 0) -> pd.DataFrame:
    """A small table as a user exports it: a timestamp written as text (over 90 days, or within March), amounts
    written for people, a shop written in case variants, a numeric column with gaps; two plain numeric columns and
    the label."""
    rng = np.random.default_rng(seed)
    label = rng.choice(classes, size=ROWS, p=[0.6, 0.25, 0.15] if classes == 3 else [0.7, 0.3])
    frame = pd.DataFrame({"x0": rng.normal(size=ROWS) + label, "x1": rng.normal(size=ROWS) - 0.5 * label})
    if "created_at" in columns:
        stamps = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 90 * 86400, ROWS) + label * 3600, "s")
        frame["created_at"] = stamps.strftime("%Y-%m-%d %H:%M:%S")
    if "march_at" in columns:
        stamps = pd.Timestamp("2024-03-01") + pd.to_timedelta(rng.integers(0, 30 * 86400, ROWS) + label * 3600, "s")
        frame["march_at"] = stamps.strftime("%Y-%m-%d %H:%M:%S")
    if "amount" in columns:
        frame["amount"] = [f"${value:,.2f}" for value in rng.gamma(2.0, 400.0, ROWS) + 300.0 * label]
    if "shop" in columns:
        shops = np.asarray(["grocery", "Grocery", "GROCERY", "web", "Web", "store"])
        frame["shop"] = shops[(rng.integers(0, 3, ROWS) + 2 * label) % len(shops)]
    if "gappy" in columns:
        gappy = rng.normal(size=ROWS) + 0.8 * label
        gappy[rng.random(ROWS) < 0.2] = np.nan
        frame["gappy"] = gappy
    frame["label"] = np.asarray(["ok", "fraud", "review"])[label] if classes == 3 else label
    return frame


def train(tmp_path: Path, frame: pd.DataFrame, *flags: str, transfer: str = "apply") -> Path:
    data, model = tmp_path / "train.csv", tmp_path / "m.safetensors"
    frame.to_csv(data, index=False)
    run_dmo("train", data, "-o", model, "--seed", "0", "--cv", "3", "--cv-transfer", transfer, *flags, check=True)
    return model


def assert_add_up_to_the_decided_logit(model: dmocli.DmoModel, frame: pd.DataFrame, kind: str) -> None:
    """Contributions plus bias are the logit of the class the model decides on, row by row."""
    features, _ = model.preprocessor.transform(pa.Table.from_pandas(frame, preserve_index=False))
    logits = model.logits_of_features(features)
    found = contributions(model, features)
    decided = np.zeros(len(frame), dtype=np.int64) if model.binary else model.decide(logits)
    np.testing.assert_array_equal(found.target, decided)
    explained = logits if model.binary else logits[np.arange(len(frame)), decided]
    total = found.values.sum(axis=1) + found.bias
    if kind == "mlp":  # integrated gradients: to the accuracy of the 64-step integral
        gap = np.abs(total - explained)
        assert np.median(gap) < 0.05 * max(np.median(np.abs(explained)), 0.1), gap
    else:
        np.testing.assert_allclose(total, explained, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("option", list(OPTIONS))
def test_every_preparation_option_explains_through_every_surface(tmp_path: Path, option: str, family: str) -> None:
    flags, columns = OPTIONS[option]
    family_flags, multiclass = FAMILIES[family]
    frame = raw_frame(columns, classes=3 if multiclass else 2)
    path = train(tmp_path, frame, *flags, *family_flags)
    model = dmocli.load_model(path)
    names = set(model.preprocessor.numeric) | set(model.preprocessor.categorical)
    trends = ["created_at.days_since"] if "parts,trend" in flags else []  # the trend only when asked for
    assert model.preprocessor.trend_features() == trends and not names & {"created_at.year", "march_at.month"}

    # dmo predict --explain 3: exit 0, three ranks, each naming a feature column of the model
    written = tmp_path / "p.csv"
    run_dmo("predict", path, tmp_path / "train.csv", "-o", written, "--explain", "3", check=True)
    shown = pd.read_csv(written)
    for rank in (1, 2, 3):
        assert set(shown[f"explain_{rank}_feature"]) <= names
        assert np.isfinite(shown[f"explain_{rank}_contribution"]).all()
    assert (shown["explain_1_contribution"].abs() >= shown["explain_3_contribution"].abs() - 1e-6).all()

    # the Python API: the same columns from a DataFrame, no file in between
    unlabeled = frame.drop(columns="label")
    api = dmocli.predict(path, unlabeled, explain=3)
    np.testing.assert_array_equal(api["explain_1_feature"], shown["explain_1_feature"])
    np.testing.assert_allclose(api["explain_1_contribution"], shown["explain_1_contribution"], rtol=1e-5, atol=1e-6)

    # dmo info --features: every feature column ranked, with an importance (the training profile has them)
    report = json.loads(run_dmo("info", path, "--features", "--json", check=True).stdout)
    assert problems(report) == []
    ranked = report["importance"]["columns"]
    assert {column["name"] for column in ranked} == names
    assert all(column["importance"] is not None and np.isfinite(column["importance"]) for column in ranked)
    text = run_dmo("info", path, "--features", check=True).stdout
    assert all(name in text for name in names)

    assert_add_up_to_the_decided_logit(model, unlabeled, model.architecture.kind)


def test_a_date_columns_parts_are_explained_each_by_name(tmp_path: Path) -> None:
    """A date column stands for its parts: the explanation and the linear coefficients name each part (the
    recurring ones: plain --dates parts makes no trend)."""
    frame = raw_frame(("created_at",), classes=2)
    path = train(tmp_path, frame, "--dates", "parts")
    explained = dmocli.DmoClassifier.load(path).explain(frame.drop(columns="label"))
    parts = [c for c in explained.columns if c.startswith("created_at.")]
    assert set(parts) == {f"created_at.{part}" for part in ("month", "day", "weekday", "hour", "minute")}
    report = json.loads(run_dmo("info", path, "--features", "--json", check=True).stdout)
    by_name = {column["name"]: column for column in report["importance"]["columns"]}
    weight = dmocli.load_model(path).module()[0].weight.detach().double().numpy()[0]
    numeric = dmocli.load_model(path).preprocessor.numeric
    for j, name in enumerate(numeric):
        assert by_name[name]["coefficient"] == pytest.approx(weight[j], rel=1e-6)


@pytest.mark.parametrize("kind", ["gbdt", "linear"])
def test_multiclass_explanations_follow_the_class_offsets(tmp_path: Path, kind: str) -> None:
    """Offsets that move the decision away from the arg-max: every row's contributions add up to the logit of
    the class it is predicted as, through dmocli.predict and DmoClassifier.explain alike."""
    frame = raw_frame(("shop",), classes=3, seed=1)
    model = dmocli.load_model(train(tmp_path, frame, "--model", kind))
    unlabeled = frame.drop(columns="label")
    features, _ = model.preprocessor.transform(pa.Table.from_pandas(unlabeled, preserve_index=False))
    logits = model.logits_of_features(features)
    # an offset that lifts the class the arg-max picks least, past the arg-max for half the rows
    rare = int(np.argmin(np.bincount(logits.argmax(axis=1), minlength=3)))
    gap = np.sort(logits.max(axis=1) - logits[:, rare])
    offsets = np.zeros(3)
    offsets[rare] = gap[len(gap) // 2] + 1e-3
    model = model.with_decision(dataclasses.replace(model.decision, class_offsets=offsets))
    decided = model.decide(logits)
    moved = decided != logits.argmax(axis=1)
    assert moved.sum() >= len(frame) // 4  # the offsets change decisions: the case under test

    predicted = dmocli.predict(model, unlabeled, explain=len(model.preprocessor.input_columns) + 5)
    classes = np.asarray(model.labels.classes, dtype=object)
    np.testing.assert_array_equal(predicted["predicted"].to_numpy(dtype=object), classes[decided])
    ranks = [c for c in predicted.columns if c.endswith("_contribution")]
    found = contributions(model, features)
    total = np.nansum(predicted[ranks].to_numpy(np.float64), axis=1) + found.bias
    np.testing.assert_allclose(total, logits[np.arange(len(frame)), decided], rtol=1e-4, atol=1e-4)
    assert not np.allclose(total[moved], logits[moved].max(axis=1), atol=1e-3)  # not the arg-max's logit
    assert len(ranks) == len(found.columns)  # K past the column count: every column once, no padded rank


@pytest.mark.parametrize("family", ["linear", "gbdt", "multi-class gbdt"])
def test_a_fold_ensemble_with_every_option_adds_up_to_its_logit(tmp_path: Path, family: str) -> None:
    """--cv-transfer ensemble (the members' contributions combined along the path) on derived columns too."""
    flags, columns = OPTIONS["all together"]
    family_flags, multiclass = FAMILIES[family]
    frame = raw_frame(columns, classes=3 if multiclass else 2, seed=2)
    path = train(tmp_path, frame, *flags, *family_flags, transfer="ensemble")
    unlabeled = frame.drop(columns="label")
    assert_add_up_to_the_decided_logit(dmocli.load_model(path), unlabeled, "ensemble")
    api = dmocli.predict(path, unlabeled, explain=2)
    assert set(api["explain_1_feature"]) <= set(dmocli.load_model(path).preprocessor.numeric) | {"shop"}
