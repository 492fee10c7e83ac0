"""`--history H.parquet` (issue 46): monitor's estimates and, once labels arrive, the realized metrics of the same
period in the same row; appending twice changes nothing; another model's history, or a broken file, is refused."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame

from dmocli.models.modelfile import file_sha256


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two models (another target: another file), and 1,800 labeled new rows over three months."""
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("history")
    make_binary_frame(n=2000, d=3, pos_frac=0.3, seed=1).to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.8, cv=3, seed=0), output=root / "m.st")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.7, cv=3, seed=0), output=root / "other.st")
    new = make_binary_frame(n=1800, d=3, pos_frac=0.2, seed=2)
    new["created_at"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.arange(1800) * 72, "min")
    new.to_parquet(root / "labeled.parquet")
    new.drop(columns="label").to_parquet(root / "new.parquet")
    return root


PERIODS = ("--time-col", "created_at", "--every", "month")


def rows_of(path) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.endswith("_at")} for row in pq.read_table(path).to_pylist()]


def test_monitor_appends_one_row_a_period_and_again_the_same_rows(dmo, made, tmp_path):
    h = tmp_path / "h.parquet"
    code, out, err = dmo("monitor", made / "m.st", made / "new.parquet", *PERIODS, "--history", h, "--json")
    assert code == 0, err
    report = json.loads(out)
    first = rows_of(h)
    assert [row["period"] for row in first] == ["2026-01-01", "2026-02-01", "2026-03-01"]
    for row, chunk in zip(first, report["chunks"]):
        assert row["rows"] == chunk["rows"] and row["rate"] == chunk["positive_rate"]["estimate"]
        assert [row["precision_low"], row["precision_high"]] == chunk["label_shift"]["precision_interval"]
        assert row["top_drift_feature"] == chunk["drift"][0]["name"] and row["realized_rows"] is None
        assert row["model_sha256"] == file_sha256(made / "m.st") and row["every"] == "month"
    code, _, err = dmo("monitor", made / "m.st", made / "new.parquet", *PERIODS, "--history", h)
    assert code == 0, err
    assert rows_of(h) == first  # the same periods replaced, never doubled


def test_evaluate_fills_the_realized_metrics_beside_the_estimates(dmo, made, tmp_path):
    h = tmp_path / "h.parquet"
    assert dmo("monitor", made / "m.st", made / "new.parquet", *PERIODS, "--history", h)[0] == 0
    estimated = rows_of(h)
    code, _, err = dmo("evaluate", made / "m.st", made / "labeled.parquet", *PERIODS, "--history", h)
    assert code == 0, err
    both = rows_of(h)
    assert len(both) == 3
    labeled = pd.read_parquet(made / "labeled.parquet")
    months = labeled.created_at.dt.to_period("M").dt.start_time.dt.strftime("%Y-%m-%d")
    for before, row in zip(estimated, both):
        assert {k: row[k] for k in ("rate", "precision", "gate_passed")} == {
            k: before[k] for k in ("rate", "precision", "gate_passed")
        }
        assert row["realized_source"] == "evaluate"
        assert row["realized_rate"] == pytest.approx(labeled.label[months == row["period"]].mean())
    code, out, _ = dmo("monitor", made / "m.st", "--history", h, "--json")
    assert code == 0 and [p["realized_rows"] for p in json.loads(out)["periods"]] == [r["realized_rows"] for r in both]
    code, out, _ = dmo("monitor", made / "m.st", "--history", h)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4 and lines[1].startswith("2026-01-01") and "passed" in lines[1]


def test_monitor_on_labeled_rows_writes_its_realized_figures(dmo, made, tmp_path):
    h = tmp_path / "h.parquet"
    code, out, err = dmo("monitor", made / "m.st", made / "labeled.parquet", "--history", h, "--json")
    assert code == 0, err
    (row,) = rows_of(h)
    realized = json.loads(out)["realized"]
    assert row["period"] == "all" and row["realized_source"] == "monitor"
    assert row["realized_precision"] == realized["precision"] and row["realized_rows"] == realized["rows"]


def test_another_models_history_is_refused(dmo, made, tmp_path):
    h = tmp_path / "h.parquet"
    assert dmo("monitor", made / "m.st", made / "new.parquet", "--history", h)[0] == 0
    before = h.read_bytes()
    code, _, err = dmo("monitor", made / "other.st", made / "new.parquet", "--history", h)
    assert code == 2 and "history of another model file" in err and "new history file" in err
    assert len(err.strip().splitlines()) == 1 and h.read_bytes() == before


@pytest.mark.parametrize("broken", ["truncated", "foreign"])
def test_a_broken_history_is_refused_in_one_line(dmo, made, tmp_path, broken):
    h = tmp_path / "h.parquet"
    assert dmo("monitor", made / "m.st", made / "new.parquet", "--history", h)[0] == 0
    if broken == "truncated":
        h.write_bytes(h.read_bytes()[:200])
    else:
        pd.DataFrame({"a": [1]}).to_parquet(h)
    before = h.read_bytes()
    code, _, err = dmo("monitor", made / "m.st", made / "new.parquet", "--history", h)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert ("not a readable parquet file" if broken == "truncated" else "not a dmo monitoring history") in err
    assert h.read_bytes() == before


def test_a_failing_write_leaves_the_old_history(made, tmp_path, monkeypatch):
    h = tmp_path / "h.parquet"
    from dmocli.use.monitor import monitor

    monitor(made / "m.st", made / "new.parquet", history=h)
    before, listed = h.read_bytes(), sorted(os.listdir(tmp_path))

    def fails(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", fails)
    with pytest.raises(OSError):
        monitor(made / "m.st", made / "new.parquet", time_col="created_at", every="month", history=h)
    assert h.read_bytes() == before and sorted(os.listdir(tmp_path)) == listed  # no temporary file left


def test_printing_a_history_that_is_not_there_says_how_to_start_one(dmo, made, tmp_path):
    code, _, err = dmo("monitor", made / "m.st", "--history", tmp_path / "none.parquet")
    assert code == 2 and "starts one" in err
    code, _, err = dmo("monitor", made / "m.st")
    assert code == 2 and "needs NEW" in err
