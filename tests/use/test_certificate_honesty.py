"""Certificates stay true through every step (issue 46): no `dmo threshold` path leaves a model file whose `dmo info`
shows a certificate it no longer has. A certified model's new threshold is certified again at its confidence by
default (--adapt, --prior, a re-target to another problem, a re-fit on DATA), or the run ends with exit 3 naming
--no-confidence among the ways out; --no-confidence (or a problem with no bound, ofbs) drops it, and the summary,
the report and `dmo info` say so (dmocli/use/recertify.py). Real models trained here on generated rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import make_binary_frame
from test_time_col import drifting

from dmocli import TrainOptions, train

CONFIDENCE = 0.9


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A model certified for precision >= 0.7 at confidence 0.9, labeled rows it has not seen, unlabeled rows at
    a higher positive rate, and a model with no certificate."""
    root = tmp_path_factory.mktemp("honesty")
    make_binary_frame(n=3000, d=4, pos_frac=0.2, seed=1, sep=2.5).to_parquet(root / "train.parquet")
    make_binary_frame(n=1500, d=4, pos_frac=0.2, seed=2, sep=2.5).to_parquet(root / "holdout.parquet")
    new = make_binary_frame(n=1500, d=4, pos_frac=0.35, seed=3, sep=2.5).drop(columns="label")
    new.to_parquet(root / "new.parquet")
    opts = TrainOptions(problem="fpor", target=0.7, confidence=CONFIDENCE, seed=0, cv=3)
    train(root / "train.parquet", opts, output=root / "certified.st")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.7, seed=0, cv=3), output=root / "plain.st")
    return {"root": root, "model": root / "certified.st", "plain": root / "plain.st"}


def info_of(dmo, model: Path) -> dict[str, Any]:
    code, out, err = dmo("info", model, "--json")
    assert code == 0, err
    return json.loads(out)


def moved(dmo, tables: dict[str, Path], name: str, *args: str | Path) -> tuple[dict[str, Any], list[str]]:
    """`dmo threshold ARGS -o NAME.st --report NAME.json`, which must succeed: its report and its summary."""
    out_model, report = tables["root"] / f"{name}.st", tables["root"] / f"{name}.json"
    code, out, err = dmo("threshold", *args, "-o", out_model, "--report", report)
    assert code == 0, err
    return json.loads(report.read_text()), out.splitlines()


def certificate_in_report(report: dict[str, Any]) -> dict[str, Any]:
    """What a threshold report says the new file's certificate is: its level, the sample it is about, whether it
    was met, and the level of MODEL's certificate it dropped."""
    confidence = report["confidence"]
    section = report.get("adapted") or report.get("operating_point") or {}
    return {
        "confidence": confidence,
        "new_rows": section.get("new_rows") if confidence is not None else None,
        "certified": report["feasible"] if confidence is not None else None,
        "dropped_confidence": report.get("dropped_confidence"),
    }


def certificate_in_info(info: dict[str, Any]) -> dict[str, Any]:
    return {key: info.get(key) for key in ("confidence", "new_rows", "certified", "dropped_confidence")}


def test_an_adapted_certified_model_is_certified_again_at_its_confidence(dmo, tables) -> None:
    report, lines = moved(dmo, tables, "adapted", tables["model"], "--adapt", tables["root"] / "new.parquet")
    info = info_of(dmo, tables["root"] / "adapted.st")
    assert report["confidence"] == info["confidence"] == CONFIDENCE and report["feasible"] is True
    assert info["certified"] is True and "dropped_confidence" not in info
    assert any(line.startswith("certified (feasible=True) for the precision") for line in lines)
    shown = dmo("info", tables["root"] / "adapted.st")[1].splitlines()[1]
    assert shown == f"problem: fpor, target 0.7 at confidence {CONFIDENCE:g} (the population value)"


def test_an_adaptation_that_cannot_be_certified_exits_3_with_the_ways_out(dmo, tables) -> None:
    out_model = tables["root"] / "never.st"
    code, _, err = dmo("threshold", tables["model"], "--prior", "0.002", "-o", out_model)
    assert code == 3 and not out_model.exists()
    assert "not certified" in err and "--no-confidence" in err and "--allow-infeasible" in err


def test_no_confidence_drops_the_certificate_and_every_output_says_so(dmo, tables) -> None:
    report, lines = moved(dmo, tables, "dropped", tables["model"], "--prior", "0.3", "--no-confidence")
    info = info_of(dmo, tables["root"] / "dropped.st")
    assert report["confidence"] is None and report["dropped_confidence"] == CONFIDENCE
    assert info["confidence"] is None and info["dropped_confidence"] == CONFIDENCE
    assert any("certificate was dropped" in line for line in lines)
    shown = dmo("info", tables["root"] / "dropped.st")[1].splitlines()[1]
    assert "NOT certified: dmo threshold dropped the certificate at confidence 0.9" in shown


def test_no_confidence_with_a_confidence_is_refused(dmo, tables) -> None:
    code, _, err = dmo("threshold", tables["model"], "--prior", "0.3", "--no-confidence", "--confidence", "0.95",
                       "-o", tables["root"] / "x.st")  # fmt: skip
    assert code == 2 and "--no-confidence drops the certificate" in err


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (("-p", "frop", "-a", "0.6"), True),  # another problem: certified at MODEL's confidence
        (("-p", "frop", "-a", "0.6", "--no-confidence"), False),
        (("-p", "ofbs"), False),  # no bound to certify: dropped, and said
    ],
)
def test_a_retarget_keeps_the_certificate_unless_asked_or_unbounded(dmo, tables, args, kept) -> None:
    name = "retarget-" + "-".join(arg.strip("-") for arg in args)
    report, _ = moved(dmo, tables, name, tables["model"], *args)
    info = info_of(dmo, tables["root"] / f"{name}.st")
    assert info["confidence"] == (CONFIDENCE if kept else None) == report["confidence"]
    assert info.get("dropped_confidence") == (None if kept else CONFIDENCE)


PATHS = {
    "own problem, held-out curve": ("{model}",),
    "another problem": ("{model}", "-p", "frop", "-a", "0.6"),
    "another confidence and sample": ("{model}", "-p", "fpor", "-a", "0.7", "--confidence", "0.95", "--new-rows",
                                      "2000"),
    "on DATA": ("{model}", "{holdout}"),
    "on DATA, dropped": ("{model}", "{holdout}", "-p", "fpor", "-a", "0.7", "--no-confidence"),
    "own problem, dropped": ("{model}", "--no-confidence"),
    "adapt": ("{model}", "--adapt", "{new}"),
    "prior": ("{model}", "--prior", "0.3"),
    "prior, dropped": ("{model}", "--prior", "0.3", "--no-confidence"),
    "uncertified model": ("{plain}", "-p", "frop", "-a", "0.6"),
    "uncertified model adapted": ("{plain}", "--prior", "0.3"),
    "a dropped file certified again": ("{root}/dropped-again-base.st", "--confidence", "0.9"),
}  # fmt: skip


@pytest.mark.parametrize("path", PATHS)
def test_info_shows_exactly_the_certificate_the_report_gave(dmo, tables, path: str) -> None:
    """Every threshold path: the new file's `dmo info` certificate is the one its report states."""
    root = tables["root"]
    if path == "a dropped file certified again":
        moved(dmo, tables, "dropped-again-base", tables["model"], "--no-confidence")
    places = {"model": tables["model"], "plain": tables["plain"], "root": root, "holdout": root / "holdout.parquet",
              "new": root / "new.parquet"}  # fmt: skip
    args = [arg.format(**places) for arg in PATHS[path]]
    name = "walk-" + path.replace(" ", "-").replace(",", "")
    report, _ = moved(dmo, tables, name, *args, "--allow-infeasible", *(["--allow-train-rows"] if len(args) > 1 and
                      args[1].endswith(".parquet") else []))  # fmt: skip
    info = info_of(dmo, root / f"{name}.st")
    assert certificate_in_info(info) == certificate_in_report(report)


def test_a_time_col_model_says_out_of_time_scores(tmp_path: Path, dmo) -> None:
    drifting(1200, 0).to_csv(tmp_path / "train.csv", index=False)
    code, _, err = dmo("train", tmp_path / "train.csv", "--time-col", "created_at", "-p", "fpor", "-a", "0.6",
                       "-o", tmp_path / "m.st")  # fmt: skip
    assert code == 0, err
    code, out, err = dmo("threshold", tmp_path / "m.st", "-p", "frop", "-a", "0.6", "-o", tmp_path / "r.st", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["data"] == f"the held-out out-of-time scores stored in {tmp_path / 'm.st'}"
    assert "out-of-fold" not in out
    assert info_of(dmo, tmp_path / "r.st")["training"]["threshold_fitted_on"] == report["data"]
