"""Explanations (dmocli/models/explain.py, importance.py): contributions that add up to the logit, checked against
an independent computation for each model family, and the `dmo predict --explain K` and `dmo info --features`
commands that show them (issue 37)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLE, make_binary_frame, run_dmo
from test_report_schema import problems

import dmocli
from dmocli.models.explain import contributions


def _train(tmp_path: Path, frame: pd.DataFrame, *options: str) -> Path:
    frame.to_parquet(tmp_path / "train.parquet")
    model = tmp_path / "m.safetensors"
    run_dmo("train", tmp_path / "train.parquet", "-o", model, "--seed", "0", *options, check=True)
    return model


def _frame_with_text(n: int = 600, seed: int = 0) -> pd.DataFrame:
    frame = make_binary_frame(n=n, seed=seed)
    rng = np.random.default_rng(seed)
    frame["shop"] = np.where(frame["label"] == 1, rng.choice(["a", "b"], n), rng.choice(["a", "b", "c"], n))
    return frame


def _explained(model_path: Path, frame: pd.DataFrame) -> tuple[object, np.ndarray, np.ndarray, object]:
    model = dmocli.load_model(model_path)
    features, _ = model.preprocessor.transform(pa_table(frame))
    return model, features, model.logits_of_features(features), contributions(model, features)


def pa_table(frame: pd.DataFrame):
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)


def test_a_linear_models_contributions_are_its_weights_times_the_standardized_columns(tmp_path: Path) -> None:
    frame = _frame_with_text()
    model, _, logits, found = _explained(_train(tmp_path, frame, "--cv-transfer", "apply"), frame)
    pre = model.preprocessor
    layer = model.module()[0]
    weight, bias = layer.weight.detach().double().numpy()[0], float(layer.bias.detach()[0])
    # by hand from the raw columns: (x - mean) / scale per numeric column; the shop's level's own weight
    numeric = (frame[pre.numeric].to_numpy(np.float64) - pre.mean) / pre.scale * weight[: len(pre.numeric)]
    level_weight = dict(zip(pre.categorical["shop"], weight[len(pre.numeric) :]))
    expected = np.column_stack([numeric, frame["shop"].map(level_weight).to_numpy()])
    np.testing.assert_allclose(found.values, expected, rtol=1e-5, atol=1e-6)
    assert found.columns == [*pre.numeric, "shop"]
    np.testing.assert_allclose(found.bias, bias)
    np.testing.assert_allclose(found.values.sum(axis=1) + found.bias, logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [(), ("--cv", "3", "--cv-transfer", "ensemble")])
def test_linear_contributions_and_bias_add_up_to_the_logit(tmp_path: Path, options: tuple[str, ...]) -> None:
    """The default (a fold ensemble averaging calibrated probabilities, not logits) included."""
    frame = _frame_with_text(seed=1)
    _, _, logits, found = _explained(_train(tmp_path, frame, *options), frame)
    np.testing.assert_allclose(found.values.sum(axis=1) + found.bias, logits, rtol=1e-4, atol=1e-5)


def test_gbdt_contributions_are_xgboosts_own(tmp_path: Path) -> None:
    import xgboost

    frame = make_binary_frame(n=600, seed=2)
    model, features, logits, found = _explained(_train(tmp_path, frame, "-m", "gbdt", "--cv-transfer", "apply"), frame)
    own = model.module().xgb_booster().predict(xgboost.DMatrix(features), pred_contribs=True)
    np.testing.assert_allclose(found.values, own[:, :-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(found.bias, own[:, -1], rtol=1e-6)
    np.testing.assert_allclose(found.values.sum(axis=1) + found.bias, logits, rtol=1e-4, atol=1e-4)


def test_a_gbdt_ensembles_contributions_add_up_to_its_logit(tmp_path: Path) -> None:
    frame = make_binary_frame(n=600, seed=3)
    _, _, logits, found = _explained(_train(tmp_path, frame, "-m", "gbdt", "--cv", "3"), frame)
    np.testing.assert_allclose(found.values.sum(axis=1) + found.bias, logits, rtol=1e-4, atol=1e-4)


def test_mlp_integrated_gradients_come_close_to_the_logit(tmp_path: Path) -> None:
    frame = make_binary_frame(n=600, seed=4)
    _, _, logits, found = _explained(_train(tmp_path, frame, "-m", "mlp", "--cv-transfer", "apply"), frame)
    gap = np.abs(found.values.sum(axis=1) + found.bias - logits)
    assert np.median(gap) < 0.02 * np.median(np.abs(logits)) and gap.max() < 0.1 * np.abs(logits).max()


def test_predict_explain_writes_each_rows_largest_contributions(tmp_path: Path) -> None:
    frame = _frame_with_text(seed=5)
    model = _train(tmp_path, frame, "--cv-transfer", "apply")
    run_dmo("predict", model, tmp_path / "train.parquet", "-o", tmp_path / "p.csv", "--explain", "2", check=True)
    written = pd.read_csv(tmp_path / "p.csv")
    assert list(written.columns[-4:]) == [
        "explain_1_feature",
        "explain_1_contribution",
        "explain_2_feature",
        "explain_2_contribution",
    ]
    _, _, _, found = _explained(model, frame)
    by_name = pd.DataFrame(found.values, columns=found.columns)
    first = by_name.to_numpy()[np.arange(len(frame)), by_name.columns.get_indexer(written["explain_1_feature"])]
    np.testing.assert_allclose(written["explain_1_contribution"], first, rtol=1e-5, atol=1e-6)
    assert (np.abs(written["explain_1_contribution"]) >= np.abs(written["explain_2_contribution"])).all()
    # the same from Python
    explained = dmocli.DmoClassifier.load(model).explain(frame, 2)
    np.testing.assert_array_equal(explained["explain_1_feature"], written["explain_1_feature"])


@pytest.mark.parametrize("k", ["0", "-1"])
def test_a_bad_explain_count_is_one_line_and_exit_2(tmp_path: Path, k: str) -> None:
    model = _train(tmp_path, make_binary_frame(n=300), "--cv-transfer", "apply")
    done = run_dmo("predict", model, tmp_path / "train.parquet", "-o", tmp_path / "p.csv", "--explain", k)
    assert done.returncode == 2 and "--explain" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("family", ["linear", "gbdt"])
def test_info_features_on_the_sample_data(tmp_path: Path, family: str) -> None:
    model = tmp_path / "m.safetensors"
    run_dmo("train", SAMPLE / "train.parquet", "-m", family, "-o", model, check=True)
    shown = run_dmo("info", model, "--features", check=True).stdout
    assert "importance:" in shown and "x0" in shown
    report = json.loads(run_dmo("info", model, "--features", "--json", check=True).stdout)
    assert problems(report) == []
    importance = report["importance"]
    values = [column["importance"] for column in importance["columns"]]
    assert len(values) == 10 and values == sorted(values, reverse=True) and values[0] > 0
    if family == "gbdt":
        assert "total gain" in importance["method"]
    else:
        assert "mean absolute contribution" in importance["method"]
        assert all("coefficient" in column and "per_unit" in column for column in importance["columns"])
    assert "importance" not in json.loads(run_dmo("info", model, "--json", check=True).stdout)


def test_info_groups_a_linear_models_levels_under_their_column(tmp_path: Path) -> None:
    frame = _frame_with_text(seed=6)
    model = _train(tmp_path, frame, "--cv-transfer", "apply")
    report = json.loads(run_dmo("info", model, "--features", "--json", check=True).stdout)
    assert problems(report) == []
    shop = next(column for column in report["importance"]["columns"] if column["name"] == "shop")
    weight = dmocli.load_model(model).module()[0].weight.detach().numpy()[0]
    assert [level["level"] for level in shop["levels"]] == ["a", "b", "c"]
    np.testing.assert_allclose([level["coefficient"] for level in shop["levels"]], weight[4:], rtol=1e-6)
    # class c is only negative: its level weighs least
    assert shop["levels"][2]["coefficient"] < min(shop["levels"][0]["coefficient"], shop["levels"][1]["coefficient"])
