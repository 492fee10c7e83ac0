"""The one scored pass (dmocli/scoring/scored_pass.py): every row reaches each accumulator once and in order, a Dask
run merges to the local one bit for bit, standard input is read as a file is, and a missing column is refused in one
line before any row is read. A real linear model trained on generated rows with a categorical column."""

from __future__ import annotations

import io
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import make_binary_frame

from dmocli import load_model
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.scoring import scored_pass
from dmocli.scoring.accumulators import LabeledLogits, LevelTotals, Logits, RowHashes, labeled_scores
from dmocli.scoring.scored_pass import Scored, ScoredTable


def _frame(n: int, seed: int) -> pd.DataFrame:
    frame = make_binary_frame(n=n, d=3, pos_frac=0.3, seed=seed)
    frame["colour"] = np.random.default_rng(seed).choice(["red", "blue", "green"], size=n)
    frame["row"] = np.arange(n)  # not a feature the model sees once dropped below
    return frame


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("scored_pass")
    _frame(800, seed=0).drop(columns="row").to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.7, cv=3, seed=0), output=root / "m.st")
    new = _frame(1050, seed=1)
    new.loc[new.index[::7], "colour"] = "violet"  # a level the model never saw: counted per batch
    new["label"] = new["label"].astype("Int64")
    new.loc[new.index[::5], "label"] = pd.NA  # unlabeled rows: counted, left out of the labeled logits
    new.to_parquet(root / "new.parquet")
    (root / "parts").mkdir()
    for i, start in enumerate((0, 400, 750)):
        new.iloc[start : (400, 750, 1050)[i]].to_parquet(root / "parts" / f"part{i}.parquet")
    return root, new


class Recorder:
    """An accumulator that keeps what it is handed: each batch's first row, its `row` ids and logits."""

    def __init__(self) -> None:
        self.parts: list[tuple[int | None, np.ndarray, np.ndarray]] = []

    def take(self, scored: Scored) -> tuple[int | None, np.ndarray, np.ndarray]:
        return scored.first_row, scored.batch.column("row").to_numpy(), scored.logits

    def merge(self, part: tuple[int | None, np.ndarray, np.ndarray]) -> None:
        self.parts.append(part)


def test_every_row_reaches_each_accumulator_once_in_order(trained, monkeypatch):
    root, new = trained
    monkeypatch.setattr(scored_pass, "BATCH_ROWS", 100)  # 11 batches of the 1,050 rows
    model = load_model(root / "m.st")
    recorder, logits = Recorder(), Logits()
    rows = ScoredTable(model, root / "new.parquet").run(
        [recorder, logits], columns=[*model.preprocessor.input_columns, "row"]
    )
    assert rows == 1050 and len(recorder.parts) == 11
    firsts = [first for first, _, _ in recorder.parts]
    assert firsts == list(range(0, 1050, 100))
    ids = np.concatenate([part_ids for _, part_ids, _ in recorder.parts])
    np.testing.assert_array_equal(ids, np.arange(1050))  # each row once, in the file's order
    whole, _ = model.logits(pa.Table.from_pandas(new))
    np.testing.assert_array_equal(logits.result(), whole.astype(np.float32))  # the same bits as one whole batch


def test_labeled_scores_keep_the_labeled_rows_and_count_the_rest(trained):
    root, new = trained
    model = load_model(root / "m.st")
    scores = labeled_scores(model, root / "new.parquet", hashed=True)
    labeled = new["label"].notna().to_numpy()
    assert scores.unlabeled == int((~labeled).sum()) and scores.y.size == int(labeled.sum())
    np.testing.assert_array_equal(scores.y, new["label"][labeled].astype(int).to_numpy())
    whole, _ = model.logits(pa.Table.from_pandas(new))
    np.testing.assert_array_equal(scores.logits, whole[labeled])
    assert scores.levels.unseen == {"colour": int((new["colour"] == "violet").sum())}
    assert scores.row_hashes is not None and scores.row_hashes.shape == (labeled.sum(),)


def test_dask_partitions_merge_to_the_local_result(trained):
    pytest.importorskip("distributed")
    root, _ = trained
    model = load_model(root / "m.st")
    dask = EngineChoice("dask", workers=2)
    columns = [*model.preprocessor.input_columns, model.labels.column, "row"]
    found = {}
    for name, engine in (("local", EngineChoice()), ("dask", dask)):
        kept = [Recorder(), LabeledLogits(), LevelTotals(), RowHashes(2, every_row=True)]
        table = ScoredTable(model, root / "parts", engine=engine)
        rows = table.run(kept, columns=columns, labeled=True, positions=True)
        found[name] = (rows, *kept)
    (rows, recorder, labeled, levels, hashes), (d_rows, d_recorder, d_labeled, d_levels, d_hashes) = found.values()
    assert rows == d_rows == 1050
    assert [first for first, _, _ in d_recorder.parts] == [0, 400, 750]  # each partition's first row in the data
    np.testing.assert_array_equal(np.concatenate(labeled.logits), np.concatenate(d_labeled.logits))
    np.testing.assert_array_equal(np.concatenate(labeled.labels), np.concatenate(d_labeled.labels))
    assert labeled.unlabeled == d_labeled.unlabeled and levels.levels.to_dict() == d_levels.levels.to_dict()
    np.testing.assert_array_equal(hashes.result(), d_hashes.result())
    local_ids = np.concatenate([ids for _, ids, _ in recorder.parts])
    np.testing.assert_array_equal(local_ids, np.concatenate([ids for _, ids, _ in d_recorder.parts]))


def test_standard_input_is_scored_as_the_file_is(trained, monkeypatch):
    root, new = trained
    model = load_model(root / "m.st")
    text = new.drop(columns="label").to_csv(index=False).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    from_stdin, from_file = Logits(), Logits()
    ScoredTable(model, "-").run([from_stdin], columns=model.preprocessor.input_columns)
    ScoredTable(model, root / "new.parquet").run([from_file], columns=model.preprocessor.input_columns)
    assert from_stdin.result().size == 1050
    np.testing.assert_allclose(from_stdin.result(), from_file.result(), rtol=0, atol=1e-5)  # CSV's decimal text


def test_a_missing_column_is_refused_in_one_line_with_the_callers_problems(trained, tmp_path):
    root, new = trained
    model = load_model(root / "m.st")
    new.drop(columns=["f1", "label"]).to_parquet(tmp_path / "short.parquet")
    with pytest.raises(DmoError) as caught:
        labeled_scores(model, tmp_path / "short.parquet")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("data is missing column(s) the model was trained on: f1")
    assert "; no label column 'label' in" in message
