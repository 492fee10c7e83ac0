"""Inputs that ended in exit 1 or a misleading message (issue 33, items 7 and 8): one line naming the problem and
its fix, exit 2. In-process: the messages and codes are the point, not the process."""

from __future__ import annotations

import numpy as np
from conftest import make_binary_frame


def test_a_table_with_no_column_that_could_be_the_label(dmo, tmp_path):
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    code, _, stderr = dmo("train", tmp_path / "bad.csv", "--problem", "fpor", "--target", "0.8", "-o", tmp_path / "m")
    assert code == 2 and "no label column 'label'" in stderr and "--label-col" in stderr, stderr
    assert stderr.count("\n") == 1 and not (tmp_path / "m").exists()


def test_new_rows_in_scientific_notation_is_read_as_the_number_it_is(dmo, tmp_path):
    make_binary_frame(n=200).to_parquet(tmp_path / "d.parquet")
    args = ["train", tmp_path / "d.parquet", "--problem", "fpor", "--target", "0.6", "--confidence", "0.9"]
    code, _, stderr = dmo(*args, "--new-rows", "1e18", "-o", tmp_path / "m")
    assert code == 2 and "more than 1,000,000,000 rows" in stderr and "whole number" not in stderr, stderr
    code, _, stderr = dmo(*args, "--new-rows", "2.5", "-o", tmp_path / "m")
    assert code == 2 and "must be a whole number" in stderr, stderr


def test_a_number_column_made_text_by_a_nul_byte_is_named_with_its_cause(dmo, tmp_path):
    rng = np.random.default_rng(0)
    rows = [f"{rng.normal():.3f}{chr(0) if i == 5 else ''},{rng.normal():.3f},{int(i % 5 == 0)}" for i in range(300)]
    (tmp_path / "nul.csv").write_text("x,y,label\n" + "\n".join(rows) + "\n")
    for command in ("check", "train"):
        code, stdout, stderr = dmo(command, tmp_path / "nul.csv", "--problem", "ofbs", "-o", tmp_path / "m")
        said = stdout + stderr  # check lists the problems on stdout, train names them on stderr
        assert code == 2 and "NUL byte" in said and "--drop x" in said, (command, said)
    assert not (tmp_path / "m").exists()
