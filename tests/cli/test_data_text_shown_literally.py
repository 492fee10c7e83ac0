"""Names and values from the data are printed as text (issue 45, review 9): `[/]` in a column, class, level or chunk
value made monitor, info --features and multi-class train exit 1 (rich's MarkupError) half-way through the summary,
with the model thrown away; `[week 1]` vanished; an escape sequence in a column name reached the terminal raw.

One table carries the hostile texts as column names, label classes, text levels and chunk values, and goes through
every command that prints them: each ends with its intended status, shows each text literally (control characters
as their escapes), prints no ESC or BEL byte, and writes its files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_dmo

from dmocli.cli.output import shown

EVIL = "evil\x1b]0;PWNED\x07\x1b[2J"
TEXTS = ["[/]", "[week 1]", "[bold]x[/bold]", EVIL]


def _table(n: int, seed: int, classes: list[str]) -> pd.DataFrame:
    """Numeric columns named by TEXTS, a text column and a chunk column whose values are TEXTS, and a label of
    `classes` that the first numeric column tells apart."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, len(classes), size=n)
    frame = pd.DataFrame({name: rng.normal(size=n) + (i == 0) * 2.0 * y for i, name in enumerate(TEXTS)})
    frame["level"] = [TEXTS[(k + int(rng.integers(0, 2))) % len(TEXTS)] for k in y]
    frame["chunk"] = [TEXTS[i * len(TEXTS) // n] for i in range(n)]
    frame["label"] = [classes[k] for k in y]
    return frame


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("texts")
    _table(500, 0, ["[/]", "[bold]x[/bold]"]).to_parquet(root / "binary.parquet")
    _table(400, 1, ["[/]", "[bold]x[/bold]"]).to_parquet(root / "binary_new.parquet")
    _table(600, 2, TEXTS).to_parquet(root / "multi.parquet")
    return root


def assert_shown(proc, code: int, *texts: str) -> None:
    """Exit `code`, no ESC or BEL byte anywhere, no traceback, and every text as `shown` prints it."""
    printed = proc.stdout + proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "\x1b" not in printed and "\x07" not in printed and "Traceback" not in printed, printed
    for text in texts:
        assert shown(text) in printed, (text, printed)


def test_the_evil_name_is_shown_escaped():
    assert shown(EVIL) == "evil\\x1b]0;PWNED\\x07\\x1b[2J"
    assert shown("[/]") == "[/]" and shown("a\nb") == "a\\nb" and shown("\nimportance\n") == "\nimportance\n"


def test_binary_train_then_every_command(folder):
    model, report = folder / "b.st", folder / "b.json"
    trained = run_dmo(
        "train", folder / "binary.parquet", "--positive", "[/]", "-p", "fpor", "--target", "0.6", "-o", model,
        "--report", report,
    )  # fmt: skip
    assert_shown(trained, 0)
    assert model.exists() and json.loads(report.read_text())["command"] == "train"
    assert_shown(run_dmo("check", folder / "binary.parquet", "--positive", "[/]"), 0, *TEXTS)
    assert_shown(run_dmo("info", model, "--features"), 0, *TEXTS)
    assert_shown(run_dmo("evaluate", model, folder / "binary_new.parquet", "--report", folder / "e.json"), 0)
    assert (folder / "e.json").exists()
    monitored = run_dmo(
        "monitor", model, folder / "binary_new.parquet", "--chunk-col", "chunk", "--report", folder / "m.json"
    )
    assert_shown(monitored, 0, *TEXTS)
    assert (folder / "m.json").exists()


def test_predict_warns_and_refuses_with_the_names_shown(folder):
    model = folder / "p.st"
    run_dmo("train", folder / "binary.parquet", "--positive", "[/]", "-o", model, check=True)
    new = _table(200, 5, ["[/]", "[bold]x[/bold]"])
    new["level"] = "[new level]"  # unseen: a warning that names the column and the level
    new.to_parquet(folder / "unseen.parquet")
    assert_shown(run_dmo("predict", model, folder / "unseen.parquet", "-o", folder / "p.parquet"), 0, "level")
    assert (folder / "p.parquet").exists()
    new.drop(columns=[EVIL]).to_parquet(folder / "missing.parquet")
    refused = run_dmo("predict", model, folder / "missing.parquet", "-o", folder / "q.parquet")
    assert_shown(refused, 2, EVIL)  # the error line names the missing column, escaped
    assert refused.stderr.count("\n") == 1


def test_multiclass_train_with_hostile_classes(folder):
    model, report = folder / "mc.st", folder / "mc.json"
    trained = run_dmo(
        "train", folder / "multi.parquet", "-p", "frop", "--target", "0.5", "-o", model, "--report", report
    )
    assert_shown(trained, 0, *TEXTS)  # the class offsets' line names every class
    assert model.exists() and json.loads(report.read_text())["command"] == "train"
    assert_shown(run_dmo("info", model, "--features"), 0, *TEXTS)
    assert_shown(run_dmo("check", folder / "multi.parquet"), 0, *TEXTS)
    assert_shown(run_dmo("evaluate", model, folder / "multi.parquet"), 0)
