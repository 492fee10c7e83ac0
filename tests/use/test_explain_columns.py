"""The `--explain K` columns of `dmo predict` (issue 45, trial 5 and hostile review 10): named for what they hold
(`explain_<i>_contribution`, a contribution to the logit, not the feature's value), K capped at the model's
column count (no rank padded with NaN, no memory for ranks no model has), and the feature names
formula-escaped in CSV like every text cell. And integer options past int64 refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame, run_dmo

import dmocli


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("explain_columns")
    frame = make_binary_frame(n=300, seed=8).rename(columns={"f1": "=HYPERLINK(1)", "f2": "-amount"})
    frame.to_parquet(root / "t.parquet")
    model = root / "m.safetensors"
    run_dmo("train", root / "t.parquet", "-o", model, "--seed", "0", "--cv-transfer", "apply", check=True)
    return model, root / "t.parquet"


@pytest.mark.parametrize("k", [4, 5, 1000, 10_000_000])
def test_k_past_the_column_count_writes_every_column_once(tmp_path: Path, trained: tuple[Path, Path], k: int) -> None:
    model, data = trained
    out = tmp_path / "p.parquet"
    run_dmo("predict", model, data, "-o", out, "--explain", k, check=True)
    written = pd.read_parquet(out)
    ranks = [c for c in written.columns if c.startswith("explain_")]
    assert ranks == [name for i in (1, 2, 3, 4) for name in (f"explain_{i}_feature", f"explain_{i}_contribution")]
    assert written[ranks].notna().all().all()  # no padded rank
    for row in written[[f"explain_{i}_feature" for i in (1, 2, 3, 4)]].itertuples(index=False):
        assert sorted(row) == sorted(dmocli.load_model(model).preprocessor.input_columns)
    # the contributions of a row add up to its logit, less the intercept
    bias = float(dmocli.load_model(model).module()[0].bias.detach()[0])
    total = written[[f"explain_{i}_contribution" for i in (1, 2, 3, 4)]].to_numpy(np.float64).sum(axis=1)
    np.testing.assert_allclose(total + bias, written["logit"], rtol=1e-4, atol=1e-4)


def test_feature_names_are_formula_escaped_in_csv(tmp_path: Path, trained: tuple[Path, Path]) -> None:
    model, data = trained
    run_dmo("predict", model, data, "-o", tmp_path / "p.csv", "--explain", "4", check=True)
    names = set(pd.read_csv(tmp_path / "p.csv")[[f"explain_{i}_feature" for i in (1, 2, 3, 4)]].stack())
    assert names == {"f0", "f3", "'=HYPERLINK(1)", "'-amount"}
    run_dmo("predict", model, data, "-o", tmp_path / "raw.csv", "--explain", "4", "--no-csv-escape", check=True)
    names = set(pd.read_csv(tmp_path / "raw.csv")[[f"explain_{i}_feature" for i in (1, 2, 3, 4)]].stack())
    assert names == {"f0", "f3", "=HYPERLINK(1)", "-amount"}


def test_the_python_api_caps_k_the_same_way(trained: tuple[Path, Path]) -> None:
    model, data = trained
    frame = pd.read_parquet(data).drop(columns="label")
    api = dmocli.predict(model, frame, explain=99)
    assert [c for c in api.columns if c.startswith("explain_")][-2:] == ["explain_4_feature", "explain_4_contribution"]
    clf = dmocli.DmoClassifier.load(model).explain(frame, 99)
    assert list(clf.columns) == [c for c in api.columns if c.startswith("explain_")]


@pytest.mark.parametrize(
    ("command", "flag"),
    [("predict", "--explain"), ("monitor", "--chunk-size"), ("predict", "--workers"), ("train", "--width")],
)
def test_a_count_past_int64_is_one_line_and_exit_2(tmp_path: Path, trained: tuple[Path, Path], command, flag) -> None:
    model, data = trained
    leading = {
        "predict": [model, data, "-o", tmp_path / "p.csv"],
        "monitor": [model, data],
        "train": [data, "-o", tmp_path / "m.safetensors"],
    }[command]
    done = run_dmo(command, *leading, flag, str(2**63))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and flag in lines[0] and "at most 9223372036854775807" in lines[0]
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "m.safetensors").exists()


def test_the_largest_chunk_size_admitted_works(trained: tuple[Path, Path]) -> None:
    """The bound is one the pipelines can use: --chunk-size 2**63 - 1 is one chunk, not an overflow."""
    model, data = trained
    done = run_dmo("monitor", model, data, "--chunk-size", str(2**63 - 1), "--json")
    assert done.returncode in (0, 3), done.stderr
