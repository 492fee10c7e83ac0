"""The training rows' fingerprint of `dmo train --model gbdt --engine dask` (pipelines/dask_fingerprint.py): merged
from per-partition sketches on a real 2-worker cluster, it equals the sketch of the same rows hashed in this
process, and `dmo threshold MODEL DATA` then refuses those rows as it does for an in-memory model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dmocli import load_model
from dmocli.pipelines.dask_trees import PartitionRows
from dmocli.prep.dataset import prepare
from dmocli.prep.row_fingerprint import SKETCH_SIZE, row_hashes, sketch
from dmocli.solvers.boosting import TreeParams

pytest.importorskip("xgboost")
pytest.importorskip("distributed")


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(4)])
    frame.loc[rng.random(n) < 0.05, "x3"] = np.nan
    label = (X[:, 0] + X[:, 1] ** 2 > 1.2) ^ (rng.random(n) < 0.05)
    return frame.assign(kind=rng.choice(["a", "b", "c"], n), label=label.astype(np.int64))


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask_fingerprint")
    folder = root / "parts"
    folder.mkdir()
    for i, n in enumerate((1_500, 700, 1_100)):  # unequal partitions: more rows than the sketch keeps
        _frame(n, seed=i).to_parquet(folder / f"part-{i}.parquet")
    _frame(500, seed=50).to_parquet(root / "val.parquet")
    _frame(1_200, seed=60).to_parquet(root / "other.parquet")
    return root


def _in_memory_sketch(model_path, files, *, held_out: bool) -> np.ndarray:
    """The sketch of the rows the trees were fitted on, encoded and hashed here, one table at a time: without
    --val, the workers' seeded stop-frac draw (PartitionRows, per file) is left out, as the trees left it out."""
    model = load_model(model_path)
    X, y = [], []
    for part, path in enumerate(files):
        table = pq.read_table(path)
        if held_out:
            draw = PartitionRows(model.preprocessor, model.labels, [1.0, 1.0], TreeParams().stop_frac, 0)
            rows = draw(table, part)
            kept = rows[~rows["held"]]
            X.append(kept[draw.columns].to_numpy(np.float32)), y.append(kept["label"].to_numpy(np.int64))
        else:
            prepared = prepare(table, model.preprocessor, model.labels).labeled()
            X.append(prepared.X), y.append(prepared.y)
    return sketch(row_hashes(np.concatenate(X), np.concatenate(y)))


@pytest.mark.parametrize("with_val", [pytest.param(True, marks=pytest.mark.slow), False], ids=["val", "stop-frac"])
def test_the_dask_models_fingerprint_is_the_in_memory_sketch_of_its_rows(
    dmo, dask_processes, parts, tmp_path, with_val
):
    model = tmp_path / "m.safetensors"
    val = ["--val", parts / "val.parquet"] if with_val else []
    code, _, err = dmo("train", parts / "parts", "--model", "gbdt", "--engine", "dask", "--scheduler", dask_processes,
                       "--problem", "fpor", "--target", "0.8", *val, "--seed", "0", "-o", model)  # fmt: skip
    assert code == 0, err
    stored = load_model(model).training_rows
    files = sorted((parts / "parts").glob("*.parquet"))
    assert stored is not None and stored.size == SKETCH_SIZE
    assert np.array_equal(stored, _in_memory_sketch(model, files, held_out=not with_val))
    if with_val:
        return
    assert not np.array_equal(stored, _in_memory_sketch(model, files, held_out=False))  # the held rows: not in it
    out = tmp_path / "t.safetensors"
    code, _, err = dmo("threshold", model, parts / "parts", "--problem", "fpor", "--target", "0.7", "-o", out)
    assert code == 2 and "holds the rows the model was trained on" in err and "--allow-train-rows" in err, err
    assert not out.exists()
    code, _, err = dmo("threshold", model, parts / "other.parquet", "--problem", "fpor", "--target", "0.7", "-o", out)
    assert code == 0, err  # rows it has not seen
