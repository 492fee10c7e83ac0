"""`dmo train --time-col COL` (dmocli/pipelines/time_blocks.py): forward chaining holds out the later blocks in
time, each scored by a model of the blocks before it; the threshold is the exact search on their pooled scores;
--val must be a later period; `dmo check` warns where shuffled folds meet a time column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_dmo
from jsonschema import Draft202012Validator

import dmocli
from dmocli.options import TrainOptions
from dmocli.pipelines import in_memory
from dmocli.pipelines.time_blocks import DEFAULT_BLOCKS

VALIDATOR = Draft202012Validator(dmocli.report_schema())
FPOR = ("--problem", "fpor", "--target", "0.6")
WARNING = "created_at looks like time; --time-col created_at fits the threshold on later rows"


def drifting(n: int, seed: int, *, start: str = "2024-01-01", days: float = 120) -> pd.DataFrame:
    """Rows whose feature drifts over `days` from `start`, every time distinct (seconds apart at least), written in
    a shuffled order so that only the sort puts them in time."""
    rng = np.random.default_rng(seed)
    seconds = np.sort(rng.choice(int(days * 86_400), size=n, replace=False))
    times = pd.Timestamp(start) + pd.to_timedelta(seconds, unit="s")
    x1 = rng.normal(size=n) + np.linspace(0, 1.5, n)
    x2 = rng.normal(size=n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(1.5 * x1 - x2 - 1.5)))).astype(int)
    frame = pd.DataFrame({"created_at": times.strftime("%Y-%m-%d %H:%M:%S"), "x1": x1, "x2": x2, "label": y})
    return frame.sample(frac=1, random_state=seed).reset_index(drop=True)


def train_report(*args: str | Path) -> dict:
    proc = run_dmo("train", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [error.message for error in VALIDATOR.iter_errors(report)] == []
    return report


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("time")
    paths = {"train": root / "train.csv", "later": root / "later.csv", "root": root}
    drifting(1200, 0).to_csv(paths["train"], index=False)
    drifting(400, 1, start="2024-06-01", days=30).to_csv(paths["later"], index=False)
    return paths


def test_the_held_out_rows_are_exactly_the_later_blocks(data: dict[str, Path]) -> None:
    frame = pd.read_csv(data["train"])
    report = train_report(data["train"], "--time-col", "created_at", "--cv", "4", *FPOR, "-o", data["root"] / "m.st")
    section = report["time_blocks"]
    ordered = frame.sort_values("created_at", kind="stable")  # every time distinct: 4 blocks of 300 exactly
    for block, chunk in zip(section["blocks"], [ordered.iloc[i : i + 300] for i in range(0, 1200, 300)]):
        assert block["first"] == chunk["created_at"].iloc[0].replace(" ", "T")
        assert block["last"] == chunk["created_at"].iloc[-1].replace(" ", "T")
        assert (block["rows"], block["positives"]) == (300, int(chunk["label"].sum()))
        assert block["held_out"] == (block["block"] > 1)
    later = ordered.iloc[300:]
    held = section["held_out"]
    assert (held["first"], held["rows"], held["positives"]) == (section["blocks"][1]["first"], 900, later.label.sum())
    cv = report["splits"]["cv"]
    assert (cv["n"], cv["tp"] + cv["fn"]) == (900, held["positives"])  # the search ran on those rows alone
    assert report["operating_point"]["split"] == "cv" and report["cv"]["transfer"] == "apply"
    assert [fold["fold"] for fold in report["cv"]["per_fold"]] == [1, 2, 3]  # each later block's own cut
    assert report["splits"]["train"]["n"] == 1200  # the model saved is trained on every row
    assert report["n_features"] == 2  # created_at orders the rows and is no feature


def test_the_summary_names_each_block_and_the_held_out_period(data: dict[str, Path]) -> None:
    proc = run_dmo("train", data["train"], "--time-col", "created_at", *FPOR, "-o", data["root"] / "s.st")
    assert proc.returncode == 0, proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert sum(line.startswith("block ") for line in lines) == DEFAULT_BLOCKS
    assert any(line.startswith("held out: ") and "960 rows" in line for line in lines)


def leaky(n_blocks: int, per_block: int, seed: int) -> pd.DataFrame:
    """Each block in time has its own two levels of `code`, one for its positives and one for its negatives: a model
    that saw a block's rows scores them perfectly; one trained on earlier blocks knows none of its levels, and has
    only the weak `x` to go on."""
    rng = np.random.default_rng(seed)
    rows = []
    for block in range(n_blocks):
        y = (rng.uniform(size=per_block) < 0.3).astype(int)
        for i in range(per_block):
            day = pd.Timestamp("2024-01-01") + pd.Timedelta(days=block * 30) + pd.Timedelta(minutes=i)
            rows.append((day.isoformat(), f"b{block}_{'pos' if y[i] else 'neg'}", rng.normal() + 0.3 * y[i], y[i]))
    return pd.DataFrame(rows, columns=["created_at", "code", "x", "label"]).sample(frac=1, random_state=seed)


def test_no_block_is_scored_by_a_model_that_saw_it_or_a_later_one(tmp_path: Path) -> None:
    path = tmp_path / "leaky.csv"
    leaky(4, 250, seed=2).to_csv(path, index=False)
    chained = train_report(path, "--time-col", "created_at", "--cv", "4", "-o", tmp_path / "t.st")
    shuffled = train_report(path, "--cv", "4", "--dates", "parts", "-o", tmp_path / "s.st")
    assert shuffled["splits"]["cv"]["average_precision"] > 0.99  # the levels give every row away when seen
    assert chained["splits"]["cv"]["average_precision"] < 0.7  # never seen: only x scores the later blocks
    assert chained["splits"]["cv"]["n"] == 750


def test_the_threshold_is_the_exact_search_on_the_pooled_out_of_time_scores(monkeypatch, data) -> None:
    caught = []
    chain = in_memory.forward_chain
    monkeypatch.setattr(in_memory, "forward_chain", lambda *a, **k: caught.append(chain(*a, **k)) or caught[-1])
    frame = pd.read_csv(data["train"])
    _, report = dmocli.train(frame, TrainOptions(problem="fpor", target=0.6, time_col="created_at", cv=3))
    scores, labels = caught[0].logits, caught[0].y
    cuts = np.unique(scores)  # brute force: every cut, recall maximized where precision >= 0.6
    flagged = scores[None, :] >= cuts[:, None]
    tp = (flagged & (labels == 1)).sum(axis=1)
    precision = tp / flagged.sum(axis=1)
    best = tp[precision >= 0.6].max()
    assert report["splits"]["cv"]["tp"] == best
    at = scores >= np.float32(report["threshold"])
    assert (at & (labels == 1)).sum() == best and (labels[at] == 1).mean() >= 0.6
    assert labels.size == 800  # blocks 2 and 3 of 3


def test_val_must_follow_the_training_period(data: dict[str, Path]) -> None:
    report = train_report(data["train"], "--time-col", "created_at", "--val", data["later"], *FPOR, "-o",
                          data["root"] / "v.st")  # fmt: skip
    assert report["operating_point"]["split"] == "val" and "cv" not in report
    assert report["time_blocks"]["held_out_by"] == "val" and report["time_blocks"]["held_out"]["rows"] == 400
    proc = run_dmo("train", data["later"], "--time-col", "created_at", "--val", data["train"], "-o", data["root"] / "x")
    assert proc.returncode == 2
    message = proc.stderr.strip()
    assert "does not follow DATA's 2024-06-01" in message and "covers 2024-01-01" in message
    assert len(message.splitlines()) == 1


def test_the_same_seed_gives_the_same_bytes(data: dict[str, Path]) -> None:
    outputs = []
    for name in ("a", "b"):
        model = data["root"] / f"{name}.st"
        report = train_report(data["train"], "--time-col", "created_at", "--model", "mlp", *FPOR, "-o", model)
        kept = {
            key: value
            for key, value in report.items()
            if not key.endswith("seconds") and key not in ("model", "written_at")
        }
        kept["cv"] = {key: value for key, value in report["cv"].items() if key != "fit_seconds"}
        outputs.append((model.read_bytes(), kept))
    assert outputs[0] == outputs[1]


def test_gbdt_chains_forward_too(data: dict[str, Path]) -> None:
    pytest.importorskip("xgboost")
    report = train_report(data["train"], "--time-col", "created_at", "--model", "gbdt", *FPOR, "-o",
                          data["root"] / "g.st")  # fmt: skip
    assert report["architecture"]["kind"] == "gbdt" and "members" not in report["architecture"]
    assert report["splits"]["cv"]["n"] == 960 and report["cv"]["transfer"] == "apply"


def test_check_warns_of_a_time_column_under_shuffled_folds(data: dict[str, Path]) -> None:
    shuffled = json.loads(run_dmo("check", data["train"], "--dates", "parts", "--json").stdout)
    assert shuffled["ok"] and [w for w in shuffled["warnings"] if "looks like time" in w] == [WARNING]
    chained = json.loads(run_dmo("check", data["train"], "--time-col", "created_at", "--json").stdout)
    assert chained["ok"] and not any("looks like time" in w for w in chained["warnings"])
    assert chained["columns"]["numeric"] == ["x1", "x2"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--solver", "fofo"), "streams once"),
        (("--model", "auto"), "one model kind"),
        (("--cv", "auto"), "--cv auto"),
        (("--cv", "0"), "--cv 0"),
        (("--val-frac", "0.2"), "--val-frac"),
        (("--time-col", "label"), "names the label column"),
    ],
)
def test_what_cannot_chain_forward_is_refused_in_one_line(data, extra: tuple[str, ...], named: str) -> None:
    args = ("--time-col", "created_at", *extra) if extra[0] != "--time-col" else extra
    proc = run_dmo("train", data["train"], *args, "-o", data["root"] / "r.st")
    assert proc.returncode == 2 and named in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_row_without_a_time_is_refused_and_counted(tmp_path: Path) -> None:
    frame = drifting(300, 3)
    frame.loc[[4, 9, 11], "created_at"] = ["", "yesterday", None]
    frame.to_csv(tmp_path / "gaps.csv", index=False)
    proc = run_dmo("train", tmp_path / "gaps.csv", "--time-col", "created_at", "-o", tmp_path / "g.st")
    assert proc.returncode == 2 and "3 row(s) of DATA have no readable time" in proc.stderr
    assert "data row(s) 5 (empty), 10 'yesterday', 12 (empty)" in proc.stderr
    check = run_dmo("check", tmp_path / "gaps.csv", "--time-col", "created_at", "--json")
    assert check.returncode == 2 and any("no readable time" in p for p in json.loads(check.stdout)["problems"])


def test_a_multi_class_label_is_refused(tmp_path: Path) -> None:
    frame = drifting(300, 4).assign(label=lambda f: np.arange(len(f)) % 3)
    frame.to_csv(tmp_path / "three.csv", index=False)
    proc = run_dmo("train", tmp_path / "three.csv", "--time-col", "created_at", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "--positive CLASS" in proc.stderr


def test_a_number_column_orders_the_rows_and_the_estimator_takes_it(data: dict[str, Path]) -> None:
    frame = pd.read_csv(data["train"])
    frame["period"] = pd.to_datetime(frame.pop("created_at")).dt.month  # 1..5: the cuts move to month changes
    model = dmocli.DmoClassifier(problem="fpor", target=0.6, time_col="period", cv=3)
    model.fit(frame.drop(columns="label"), frame["label"])
    section = model.report_["time_blocks"]
    assert section["kind"] == "number" and len(section["blocks"]) == 3
    firsts = [int(block["first"]) for block in section["blocks"]]
    lasts = [int(block["last"]) for block in section["blocks"]]
    assert all(last < first for last, first in zip(lasts, firsts[1:]))  # no month in two blocks
    assert model.predict(frame.drop(columns="label")).shape == (len(frame),)
