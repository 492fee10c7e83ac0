"""`dmo train`: the options TrainOptions declares (dmocli/options.py), one call of `pipelines.train.train`, and
its summary: the model, threshold, rules that decided (rounds, --cv auto), certificate, figures per split, the
outlook of the target on new rows and what to do when it is out of reach."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import typer

from dmocli.cli.commands.shared import write_report_page
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, report_on_refusal
from dmocli.cli.report_lines import outlook_line, split_lines, value_line
from dmocli.engines import torchrun
from dmocli.options import TrainOptions


@takes_options(TrainOptions, check=False)
def train(
    data: Path = typer.Argument(
        ...,
        help="Training table: parquet file, directory of parquet files, or CSV; `-` reads a CSV (or gzip CSV) "
        "from standard input, in one pass (fofo, ofo, lr).",
    ),
    *,
    options: TrainOptions = None,  # type: ignore[assignment]  # the declared options, made by takes_options
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Model file to write (default: DATA's name + .dmo.safetensors)."
    ),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Write the training page here: one self-contained HTML file (docs/pages.md)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Train a classifier and fit its threshold for the chosen operating point.

    Example: dmo train --problem frop --target 0.8 data.parquet

    On several processes or machines (wce, ero, sigmoid-f1, lagrangian; parquet DATA):
    torchrun --nproc-per-node 4 --no-python dmo train data/ --val val.parquet
    """
    from dmocli.pipelines.train import train as run_train

    opts = options
    if html is not None:
        _check_page(html, {"-o": output, "--report": report}, {"DATA": data, "--val": opts.val})
    with report_on_refusal(as_json and not torchrun.secondary()):
        _, result = run_train(data, opts, output=output, report_path=report)
    if torchrun.secondary():  # under torchrun, process 0 prints for the group
        return
    write_report_page(html, result)
    header = [f"model: {result['model']}  (solver {result['solver']}, {result['wall_seconds']:.1f} s)"]
    if result.get("threshold") is not None:
        header.append(f"threshold (logit): {result['threshold']:.6g}")
    if "class_operating_point" in result:
        from dmocli.use.results.threshold import offsets_text  # imported on use: `dmo --help` reads no arrow

        header.append(offsets_text(result["class_operating_point"]))
    if "online" in result:
        o = result["online"]
        header.append(
            f"online: F{o['beta']:g} {o['f_beta']:.4f}  precision {o['precision']:.4f}  recall {o['recall']:.4f}  "
            f"(first pass, {o['n']} rows, {o['rows_per_second']:,.0f} rows/s)"
        )
    split = (result.get("operating_point") or {}).get("split", "train")
    outlook = outlook_line(result, split, math.inf)  # the population's value, as --confidence certifies by default
    lines = header + _model_choice_line(result) + _rounds_rule_line(result) + _cv_rule_line(result)
    lines += _time_blocks_lines(result)
    lines += _certificate_line(result) + _alert_budget_line(result) + _review_band_line(result)
    lines += split_lines(result) + outlook + value_line(result)
    lines += _infeasible_note(result)
    emit(result, as_json, lines)


def _check_page(html: Path, outputs: dict[str, Path | None], inputs: dict[str, Any]) -> None:
    """--html: an .html name, writable, and none of the other paths, refused before any data is read."""
    from dmocli.data.outputs import check_outputs
    from dmocli.pages.write import refuse_misnamed_page

    check_outputs({"--html": html, **outputs}, inputs)
    refuse_misnamed_page(html, "--html")


def _model_choice_line(report: dict[str, Any]) -> list[str]:
    """--model auto: the kind kept and the candidates' out-of-fold objectives (pipelines/model_choice.py)."""
    if "model_selection" not in report:
        return []
    from dmocli.pipelines.model_choice import summary_line

    return [summary_line(report)]


def _rounds_rule_line(report: dict[str, Any]) -> list[str]:
    """For trees: early stopping or the fixed schedule, and the held-out positives that decided (solvers/boosting)."""
    if (report.get("architecture") or {}).get("kind") != "gbdt":
        return []
    from dmocli.solvers.boosting import rule_line

    line = rule_line(report.get("solver_trace") or {})
    return [line] if line else []


def _cv_rule_line(report: dict[str, Any]) -> list[str]:
    """What --cv auto decided, folds or one held-out split, and the positives it decided on (pipelines/cv_auto.py)."""
    if "cv_rule" not in report:
        return []
    from dmocli.pipelines.cv_auto import rule_line

    return [rule_line(report["cv_rule"])]


def _time_blocks_lines(report: dict[str, Any]) -> list[str]:
    """--time-col: each block's period, rows and positives, and the held-out period (pipelines/time_blocks.py)."""
    if "time_blocks" not in report:
        return []
    from dmocli.pipelines.time_blocks import summary_lines

    return summary_lines(report)


def _certificate_line(report: dict[str, Any]) -> list[str]:
    """What a --confidence certificate promises, in one line: on how many new rows, or of the population value."""
    point = report.get("operating_point") or {}
    if not point.get("certificate") or not point.get("feasible") or report["problem"] not in ("fpor", "frop"):
        return []  # an alert budget's certificate has its own line (_alert_budget_line)
    metric = {"fpor": "precision", "frop": "recall"}[report["problem"]]
    # --model auto: the chosen candidate's certificate holds at the level asked, each candidate's at a higher one
    level = (report.get("model_selection") or {}).get("confidence") or report["confidence"]
    sample = point["new_rows"]
    where = "in the population" if sample is None else f"measured on {sample:,} new rows"
    change = (
        f"--new-rows N promises the {metric} measured on N new rows instead, stricter for a small N"
        if sample is None
        else "--new-rows inf: the population's value"
    )
    return [
        f"certified: {metric} {where} >= {report['target']:g} with probability {level:g} "
        f"({change}; docs/operating-points.md)"
    ]


def _alert_budget_line(report: dict[str, Any]) -> list[str]:
    """--max-alert-rate / --max-alerts: the share flagged, its certified bound and the alerts a period brings."""
    if "alert_budget" not in report:
        return []
    from dmocli.operating_point.alert_budget import summary_line

    return [summary_line(report["alert_budget"])]


def _review_band_line(report: dict[str, Any]) -> list[str]:
    """--review-budget: the band's lower cut, its share against the budget and what its rows hold."""
    if "review_band" not in report:
        return []
    from dmocli.pipelines.review_banding import summary_line

    return [summary_line(report["review_band"])]


def _infeasible_note(report: dict[str, Any]) -> list[str]:
    """One line under train's figures where a split shows feasible=False: what it means and what to do, so a
    newcomer need not look it up."""
    missed = [name for name, s in report.get("splits", {}).items() if s.get("feasible") is False]
    metric = {"fpor": "precision", "frop": "recall"}.get(report.get("problem", ""))
    if not missed or metric is None:
        return []
    fixes = ["lower --target", "train on more labeled rows"]  # only the fixes this run has not tried already
    if report.get("solver") != "ero":
        fixes.append("try --solver ero")
    advice = f"{', '.join(fixes[:-1])} or {fixes[-1]}"
    if report.get("confidence") is None:
        advice += ", and add --confidence 0.95 for a threshold that holds the target on new data"
    return [
        f"note: feasible=False means {metric} is below the target {report['target']:g} on {' and '.join(missed)} "
        f"at this threshold, so new data may miss it too; {advice}"
    ]
