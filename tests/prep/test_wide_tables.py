"""Wide tables (thousands of columns) at predict time: work per column once per batch, and few batches (issue 45,
hostile 10: a 500 x 5,000 CSV took 109 s in predict, 145 of 155 profiled seconds a list of the schema's names
rebuilt for every column of every batch; bench/wide_table.py times it)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pyarrow as pa

from dmocli.data import reading
from dmocli.prep.columns import plan_columns
from dmocli.prep.features import Preprocessor


def _wide(rows: int, cols: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(rng.normal(size=(rows, cols)).round(6), columns=[f"x{i}" for i in range(cols)])


def test_the_training_columns_are_checked_in_linear_time():
    """10,000 columns: one membership test each (a quadratic check took about 20 s per batch here)."""
    table = pa.Table.from_pandas(_wide(3, 10_000).assign(label=[0, 1, 0]), preserve_index=False)
    pre = Preprocessor.fit(table.to_batches(), plan_columns(table.schema, label_col="label"))
    table = table.drop_columns(["label"])
    start = time.perf_counter()
    assert pre.column_problems(table.schema) == []
    assert pre.missing_columns(table.drop_columns(["x5", "x9999"]).schema) == ["x5", "x9999"]
    assert time.perf_counter() - start < 2.0


def test_a_wide_csv_is_read_in_batches_of_many_rows(tmp_path):
    """arrow's 1 MiB CSV blocks made a 2,000-column file a batch of about 40 rows: every per-column step of predict
    ran once per 40 rows. The block grows with the columns."""
    frame = _wide(400, 2_000)
    frame.to_csv(tmp_path / "wide.csv", index=False)
    batches = list(reading.iter_batches(tmp_path / "wide.csv"))
    assert sum(b.num_rows for b in batches) == 400 and len(batches) == 1
    read = pa.Table.from_batches(batches).to_pandas()
    assert np.allclose(read.to_numpy(), frame.to_numpy())
