"""`dmo evaluate` and `dmo monitor` on rows the model was trained on (issue 45, trial item 2).

`dmo evaluate fraud.safetensors jan.csv --gate` on the training file reported precision 1.0000 and passed. The
model file's fingerprint of its training rows (prep/row_fingerprint.py, as `dmo threshold` uses it) now tells both
commands: a warning naming the share, `training_rows` in the report, and under `--gate` a refusal (exit 2, one
line naming --allow-train-rows) unless --allow-train-rows. monitor's NEW has no labels: each row is hashed under
every class, and the Dask engine gives the local engine's share.
"""

from __future__ import annotations

import json

import jsonschema
import pandas as pd
import pytest
from conftest import make_binary_frame

from dmocli import report_schema


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("train_rows")
    training = make_binary_frame(n=2500, d=4, pos_frac=0.2, seed=1)
    holdout = make_binary_frame(n=1500, d=4, pos_frac=0.2, seed=2)
    training.to_parquet(root / "train.parquet")
    training.to_csv(root / "train.csv", index=False)  # another format, same rows
    holdout.to_parquet(root / "holdout.parquet")
    pd.concat([training.head(750), holdout.head(750)]).to_parquet(root / "half.parquet")
    pd.concat([training.head(75), holdout.head(1425)]).to_parquet(root / "few.parquet")  # 5 %: a few repeated rows
    training.drop(columns="label").to_parquet(root / "train_unlabeled.parquet")
    (root / "parts").mkdir()
    for i, part in enumerate((training.iloc[:1000], training.iloc[1000:])):
        part.drop(columns="label").to_parquet(root / "parts" / f"part{i}.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.8, cv=3, seed=0), output=root / "m.st")
    return root


def _json(dmo, *args):
    code, out, err = dmo(*args, "--json")
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    return code, report, err


@pytest.mark.parametrize(
    ("command", "data"),
    [(command, data) for command in ("evaluate", "monitor") for data in ("train.parquet", "train.csv")]
    + [("monitor", "train_unlabeled.parquet")],
)
def test_training_rows_are_warned_about_with_their_share(dmo, files, command, data):
    code, report, err = _json(dmo, command, files / "m.st", files / data)
    assert code == 0, err
    assert report["training_rows"]["share"] >= 0.95 and report["training_rows"]["rows_checked"] >= 1000
    assert "holds rows the model was trained on (about 100% of the" in err, err
    assert any("trained on" in warning for warning in report["warnings"])


@pytest.mark.parametrize("command", ["evaluate", "monitor"])
def test_a_gate_on_training_rows_is_refused_unless_allowed(dmo, files, command):
    code, out, err = dmo(command, files / "m.st", files / "train.parquet", "--gate")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--allow-train-rows" in lines[0] and "Traceback" not in err, err
    assert "about 100% of the" in lines[0]
    code, out, err = dmo(command, files / "m.st", files / "train.parquet", "--gate", "--allow-train-rows")
    assert code in (0, 3) and "holds rows the model was trained on" in err, err


def test_evaluate_gate_confidence_is_a_gate_too(dmo, files):
    code, _, err = dmo("evaluate", files / "m.st", files / "train.parquet", "--gate-confidence", "0.95")
    assert code == 2 and "--allow-train-rows" in err, err


@pytest.mark.parametrize("command", ["evaluate", "monitor"])
def test_the_share_is_measured_not_guessed(dmo, files, command):
    """Unseen rows: share 0 and no warning; half and half: about half (the sketch is a sample of ~1000 rows)."""
    code, report, err = _json(dmo, command, files / "m.st", files / "holdout.parquet", "--gate")
    assert code in (0, 3) and report["training_rows"]["share"] == 0.0 and "trained on" not in err, err
    code, report, err = _json(dmo, command, files / "m.st", files / "half.parquet")
    assert code == 0 and abs(report["training_rows"]["share"] - 0.5) < 0.1, report["training_rows"]
    assert "about 5" in err or "about 4" in err, err


def test_the_python_api_names_the_keyword(files):
    from dmocli import evaluate
    from dmocli.errors import DmoError, UnreachableTarget

    with pytest.raises(DmoError, match="allow_train_rows=True"):
        evaluate(files / "m.st", files / "train.parquet", gate=True)
    try:  # allowed: gated, passed or failed, with the share in the report
        report = evaluate(files / "m.st", files / "train.parquet", gate=True, allow_train_rows=True)
    except UnreachableTarget as failed:
        report = failed.report
    assert report["training_rows"]["share"] >= 0.95 and report["gate"]["passed"] is not None


def test_monitor_on_dask_workers_finds_the_same_share(files, dask_threads):
    from dmocli.engines.choice import EngineChoice
    from dmocli.use.monitor import monitor

    local = monitor(files / "m.st", files / "parts").to_dict()
    dask = monitor(files / "m.st", files / "parts", engine=EngineChoice("dask", scheduler=dask_threads)).to_dict()
    assert local["training_rows"] == dask["training_rows"] and local["training_rows"]["share"] >= 0.95
    assert local["warnings"] == dask["warnings"]


def test_a_row_without_its_label_matches_under_it_and_no_rows_share_nothing():
    import numpy as np

    from dmocli.prep.row_fingerprint import candidate_hashes, row_hashes, share_of_sketched_rows, sketch

    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(3000, 3)).astype(np.float32), rng.integers(0, 2, 3000)
    hashes = row_hashes(features, labels)
    candidates = candidate_hashes(features, 2)
    assert (candidates[np.arange(3000), labels] == hashes).all()
    stored = sketch(hashes)
    assert share_of_sketched_rows(stored, hashes)[0] == 1.0
    assert share_of_sketched_rows(stored, candidates)[0] > 0.9  # the rows in range estimated from both columns
    assert share_of_sketched_rows(stored, hashes[:0]) == (0.0, 0) == share_of_sketched_rows(stored, candidates[:0])


@pytest.mark.parametrize("command", ["evaluate", "monitor"])
def test_a_few_repeated_training_rows_are_named_but_do_not_stop_a_gate(dmo, files, command):
    """A holdout may repeat a few training rows exactly (sample_data's test split: 1.9 %): warned about with the
    share, gated all the same; from a tenth on the gate is refused."""
    code, report, err = _json(dmo, command, files / "m.st", files / "few.parquet", "--gate")
    assert code in (0, 3) and 0.02 <= report["training_rows"]["share"] < 0.1, report["training_rows"]
    assert "holds rows the model was trained on (about" in err and "--allow-train-rows" not in err, err
