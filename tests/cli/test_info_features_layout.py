"""`dmo info MODEL --features` where stdout is no terminal (a pipe, a file, a CI log): one line per column, whole,
whatever its width (issue 45, trial 5). A table laid out for 80 columns split each long row over several lines,
so `grep COLUMN` found half a row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from conftest import make_binary_frame, run_dmo

import dmocli

LONG = "average_transaction_amount_over_the_previous_thirty_days_in_euros"


def test_piped_importance_rows_are_one_line_each(tmp_path: Path) -> None:
    frame = make_binary_frame(n=300, seed=3).rename(columns={"f0": LONG})
    rng = np.random.default_rng(3)
    frame["merchant_category_description"] = rng.choice(["groceries and household", "travel and lodging"], len(frame))
    frame.to_parquet(tmp_path / "t.parquet")
    model = tmp_path / "m.safetensors"
    run_dmo("train", tmp_path / "t.parquet", "-o", model, "--seed", "0", "--cv-transfer", "apply", check=True)
    shown = run_dmo("info", model, "--features", check=True).stdout.splitlines()
    rows = shown[shown.index(next(line for line in shown if line.startswith("importance:"))) + 1 :]
    header, body = rows[0].split(), rows[1:]
    assert header == ["column", "kind", "importance", "coefficient"]
    columns = dmocli.load_model(model).preprocessor.input_columns
    assert len(body) == len(columns)  # one line per column, nothing wrapped onto a next line
    for name in columns:
        (line,) = [line for line in body if line.split()[0] == name]
        assert " per std (" in line or " +" in line or " -" in line  # its coefficient on the same line
    (long_line,) = [line for line in body if line.startswith(LONG)]
    assert len(long_line) > 80 and long_line.endswith("per unit)")
    # the cells line up: each heading starts where its column's cells start
    starts = [rows[0].index(heading) for heading in header]
    for line in body:
        assert all(line[start - 2 : start] == "  " for start in starts[1:])
    assert pd.Series(body).str.contains("│").sum() == 0  # plain text, no box drawing
