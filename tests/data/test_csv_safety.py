"""CSV outputs a spreadsheet opens safely (issue 33): text cells that start like a formula get OWASP's leading
quote, numbers stay numbers, parquet stays as it is, and --no-csv-escape turns it off. And CSV inputs with a
cell over the 131,072 characters of Python's csv module read in check, train and predict."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import Result
from conftest import make_binary_frame
from typer.testing import CliRunner

from dmocli import predict, train
from dmocli.cli.app import app
from dmocli.options import TrainOptions

IDS = ['=HYPERLINK("x")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx", "plain"]
QUOTED = ["'" + value for value in IDS[:-1]] + ["plain"]
ROWS = 140  # every id 20 times


def invoke(*args: str | Path, stdin: bytes | None = None) -> Result:
    """`dmo ARGS` in this process; an exception (exit 1 from the console script) fails the test with it."""
    result = CliRunner().invoke(app, [str(arg) for arg in args], input=stdin)
    assert result.exit_code == 0 and result.exception is None, (result.output, repr(result.exception))
    return result


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> tuple[Path, Path]:
    """A model, and rows to score whose `id` column holds every formula start of OWASP's list (parquet: a CSV
    input could not hold the carriage return unquoted)."""
    root = tmp_path_factory.mktemp("csv_safety")
    make_binary_frame(n=300).to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(), output=root / "m.safetensors")
    rows = make_binary_frame(n=ROWS, seed=1).drop(columns="label")
    rows["id"] = [IDS[i % len(IDS)] for i in range(ROWS)]
    rows.to_parquet(root / "rows.parquet")
    return root / "m.safetensors", root / "rows.parquet"


def read_csv_text(text: str, delimiter: str = ",") -> dict[str, list[str]]:
    """The cells as written, per column (no type inference: a quote in front must show)."""
    header, *lines = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    return {name: [line[i] for line in lines] for i, name in enumerate(header)}


def read_csv_file(path: Path) -> dict[str, list[str]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        return read_csv_text(handle.read(), "\t" if path.name.endswith(".tsv") else ",")


def reference(model: Path, rows: Path, out: Path) -> pd.DataFrame:
    """The predictions as parquet, which keeps every value as it is."""
    predict(model, rows, out, id_col="id")
    return pq.read_table(out).to_pandas()


def assert_numbers_unchanged(cells: dict[str, list[str]], expected: pd.DataFrame) -> None:
    """The number columns parse back to the parquet output's values exactly (float32 written in full)."""
    logits = np.asarray([float(v) for v in cells["logit"]], dtype=np.float32)
    assert (expected["logit"] < 0).any() and np.array_equal(logits, expected["logit"].to_numpy())
    probabilities = np.asarray([float(v) for v in cells["probability"]], dtype=np.float32)
    assert np.array_equal(probabilities, expected["probability"].to_numpy())
    assert [int(v) for v in cells["decision"]] == expected["decision"].tolist()


@pytest.mark.parametrize("name", ["p.csv", "p.tsv", "p.csv.gz"])
def test_formula_like_ids_are_quoted_in_every_csv_file(scored, tmp_path, name):
    model, rows = scored
    expected = reference(model, rows, tmp_path / "p.parquet")
    predict(model, rows, tmp_path / name, id_col="id")
    cells = read_csv_file(tmp_path / name)
    assert cells["id"] == [QUOTED[i % len(IDS)] for i in range(ROWS)]
    assert_numbers_unchanged(cells, expected)


def test_formula_like_ids_are_quoted_on_standard_output(scored, tmp_path):
    model, rows = scored
    expected = reference(model, rows, tmp_path / "p.parquet")
    result = invoke("predict", model, rows, "--id-col", "id", "-o", "-")
    cells = read_csv_text(result.stdout_bytes.decode())
    assert cells["id"] == [QUOTED[i % len(IDS)] for i in range(ROWS)]
    assert_numbers_unchanged(cells, expected)


def test_the_off_switch_writes_ids_verbatim(scored, tmp_path):
    model, rows = scored
    predict(model, rows, tmp_path / "api.csv", id_col="id", csv_escape=False)
    invoke("predict", model, rows, "--id-col", "id", "-o", tmp_path / "cli.tsv", "--no-csv-escape")
    for name in ("api.csv", "cli.tsv"):
        assert read_csv_file(tmp_path / name)["id"] == [IDS[i % len(IDS)] for i in range(ROWS)]
    assert (tmp_path / "api.csv").read_bytes().split(b"\n")[1].startswith(b'"=HYPERLINK(""x"")",')


def test_parquet_predictions_keep_ids_as_they_are(scored, tmp_path):
    model, rows = scored
    assert reference(model, rows, tmp_path / "p.parquet")["id"].tolist() == [IDS[i % len(IDS)] for i in range(ROWS)]


def test_a_categorical_id_and_a_formula_like_header_are_quoted(scored, tmp_path):
    """A pandas categorical id (arrow dictionary: its levels are the text) and an id column named like a
    formula, which is a header cell."""
    model, _ = scored
    rows = make_binary_frame(n=20, seed=2).drop(columns="label")
    rows["@id"] = pd.Categorical(["=1+1", "ok"] * 10)
    rows.to_parquet(tmp_path / "rows.parquet")
    predict(model, tmp_path / "rows.parquet", tmp_path / "p.csv", id_col="@id")
    cells = read_csv_file(tmp_path / "p.csv")
    assert cells["'@id"] == ["'=1+1", "ok"] * 10


@pytest.fixture
def big_cell_csv(tmp_path) -> Path:
    """Training rows whose first data row has a 200,000-character `note` (a column to --drop)."""
    frame = make_binary_frame(n=300)
    frame["note"] = "short"
    frame.loc[0, "note"] = "y" * 200_000
    frame.to_csv(tmp_path / "big.csv", index=False)
    return tmp_path / "big.csv"


def test_a_cell_over_the_csv_module_limit_reads_in_check_train_and_predict(big_cell_csv, tmp_path, one_torch_thread):
    assert "ok, train would take it" in invoke("check", big_cell_csv, "--drop", "note").output
    invoke("train", big_cell_csv, "--drop", "note", "-o", tmp_path / "m.safetensors")
    invoke("predict", tmp_path / "m.safetensors", big_cell_csv, "--id-col", "note", "-o", tmp_path / "p.csv")
    notes = pacsv.read_csv(tmp_path / "p.csv").column("note").to_pylist()  # csv.reader would refuse it
    assert len(notes) == 300 and notes[0] == "y" * 200_000


def test_a_cell_over_the_csv_module_limit_reads_from_standard_input(big_cell_csv, tmp_path, one_torch_thread):
    train(big_cell_csv, TrainOptions(drop=("note",)), output=tmp_path / "m.safetensors")
    result = invoke("predict", tmp_path / "m.safetensors", "-", "-o", "-", stdin=big_cell_csv.read_bytes())
    assert len(read_csv_text(result.stdout_bytes.decode())["logit"]) == 300
    invoke(
        "train",
        "-",
        "--drop",
        "note",
        "--solver",
        "fofo",
        "-o",
        tmp_path / "s.safetensors",
        stdin=big_cell_csv.read_bytes(),
    )
