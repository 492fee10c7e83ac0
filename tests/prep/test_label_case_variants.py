"""Label values that differ only in case (yes, YES) are refused by train and check, with or without --positive, and
a case variant of the positive class never counts as a negative (issue 45, hostile 6)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_binary_frame

from dmocli.errors import DmoError
from dmocli.prep.labels import LabelSpec, infer_label_spec

SPELLINGS = {1: ("yes", "YES"), 0: ("no", "NO")}


def _frame(n: int = 240, *, variant_every: int = 5):
    """A binary table whose label is yes/no, every `variant_every`-th row written upper-case."""
    frame = make_binary_frame(n=n, seed=7, pos_frac=0.3)
    frame["y"] = [SPELLINGS[int(v)][i % variant_every == 0] for i, v in enumerate(frame.pop("label"))]
    return frame


@pytest.mark.parametrize("command", ["train", "check"])
@pytest.mark.parametrize("positive", [[], ["--positive", "yes"]])
def test_case_variants_of_labels_are_refused(dmo, tmp_path, command, positive):
    frame = _frame()
    frame.to_csv(tmp_path / "f.csv", index=False)
    n_upper = int((frame["y"] == "YES").sum())
    out = ["-o", tmp_path / "m.st"] if command == "train" else []
    code, stdout, err = dmo(command, tmp_path / "f.csv", "--label-col", "y", *positive, *out)
    said = err if command == "train" else stdout  # check lists the problems it found on stdout
    assert code == 2, err
    assert f"'YES' ({n_upper} rows)" in said and "differ only in case" in said
    assert command == "check" or err.count("\n") == 1  # one line
    assert not (tmp_path / "m.st").exists()


def test_check_json_lists_the_case_variants_as_a_problem(dmo, tmp_path):
    _frame().to_csv(tmp_path / "f.csv", index=False)
    code, stdout, _ = dmo("check", tmp_path / "f.csv", "--label-col", "y", "--positive", "yes", "--json")
    report = json.loads(stdout)
    assert code == 2 and not report["ok"]
    assert any("differ only in case" in p for p in report["problems"])


def test_multiclass_one_vs_rest_refuses_a_variant_of_any_class(dmo, tmp_path):
    """Three classes a, b, c with 'B' beside 'b': refused with --positive a (one-vs-rest), as without it."""
    frame = make_binary_frame(n=300, seed=3)
    frame["label"] = np.array(["a", "b", "c", "B"])[np.arange(300) % 4]
    frame.to_parquet(tmp_path / "d.parquet")
    for positive in ([], ["--positive", "a"], ["--positive", "b"]):
        code, _, err = dmo("train", tmp_path / "d.parquet", *positive, "-o", tmp_path / "m.st")
        assert code == 2 and "'B' (75 rows) and 'b' (75 rows)" in err, (positive, err)


def test_labels_written_one_way_still_train(dmo, tmp_path):
    frame = _frame()
    frame["y"] = frame["y"].str.lower()
    frame.to_csv(tmp_path / "f.csv", index=False)
    code, _, err = dmo("train", tmp_path / "f.csv", "--label-col", "y", "--positive", "yes", "-o", tmp_path / "m.st")
    assert code == 0, err


def test_a_case_variant_of_the_positive_class_is_no_negative_at_evaluate_time():
    """A one-vs-rest model (positive 'yes' of yes/no/maybe) meets 'YES' in evaluate data: refused, not a negative."""
    spec = infer_label_spec(pa.array(["yes", "no", "maybe", "no"]), "y", positive="yes", binary=True)
    assert spec.classes == ["not yes", "yes"]
    assert spec.encode(pa.array(["yes", "no", "maybe"])).tolist() == [1, 0, 0]
    with pytest.raises(DmoError, match="'YES'.*differ only in case from the positive class 'yes'"):
        spec.encode(pa.array(["yes", "YES", "no"]))
    stored = infer_label_spec(pa.array(["yes", "no", "no"]), "y", positive="yes", binary=True).to_dict()
    two_class = LabelSpec.from_dict(stored)
    with pytest.raises(DmoError, match="'YES'"):
        two_class.encode(pa.array(["yes", "YES", "no"]))
