"""`dmo info MODEL`: the options InfoOptions declares (dmocli/command_options.py), and what a model file holds
(`pipelines.model_info.model_info`), as a few lines for a person or, with --json, a report of the shared schema
(docs/report-schema.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.table import Table

from dmocli.cli.declared import takes_options
from dmocli.cli.output import out, print_json
from dmocli.command_options import InfoOptions


@takes_options(InfoOptions)
def info(
    model: Path = typer.Argument(..., help="Model file (.safetensors) written by dmo train or dmo threshold."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    options: InfoOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
) -> None:
    """What a model file holds: problem, threshold, classes, features and how it was trained.

    Example: dmo info model.safetensors --features
    """
    from dmocli.use.model_info import model_info

    report = model_info(model, **dataclasses.asdict(options))
    if as_json:
        print_json(report)
        return
    for line in _info_lines(report):
        out.print(line, markup=False)
    if options.features:
        _print_importance(report["importance"])


def _print_importance(importance: dict[str, Any]) -> None:
    """The columns, most important first, with a linear model's coefficients (levels: the 5 largest): a table on a
    terminal, and where stdout is a pipe or file, the same rows as plain aligned lines, one per column, never
    wrapped (a table laid out for an 80-column terminal split each long row over several lines)."""
    out.print(f"\nimportance: {importance['method']}", markup=False)
    linear = any("coefficient" in column or "levels" in column for column in importance["columns"])
    headings = ["column", "kind", "importance", *(["coefficient"] if linear else [])]
    rows = [
        [
            column["name"],
            column["kind"],
            "" if column["importance"] is None else f"{column['importance']:.4g}",
            *([_coefficient_text(column)] if linear else []),
        ]
        for column in importance["columns"]
    ]
    if not (out.is_terminal and _is_tty(out.file)):  # FORCE_COLOR on a pipe still lays out for 80 columns
        for line in _plain_lines([headings, *rows]):
            out.print(line, markup=False, soft_wrap=True)
        return
    table = Table(show_edge=False)
    for heading in headings:
        table.add_column(heading)
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _is_tty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _plain_lines(rows: list[list[str]]) -> list[str]:
    """Rows as lines of cells padded to their column's widest, two spaces apart (the last cell unpadded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _coefficient_text(column: dict[str, Any]) -> str:
    def number(value: Any) -> str:
        return f"{value:+.4g}" if isinstance(value, float) else "[" + ", ".join(f"{v:+.3g}" for v in value) + "]"

    if "coefficient" in column:
        return f"{number(column['coefficient'])} per std ({number(column['per_unit'])} per unit)"
    if "levels" in column:
        levels = sorted(column["levels"], key=lambda level: -np.max(np.abs(level["coefficient"])))
        more = len(levels) - 5
        return ", ".join(f"{lv['level']} {number(lv['coefficient'])}" for lv in levels[:5]) + (
            f", {more} more" if more > 0 else ""
        )
    return ""


def _info_lines(report: dict[str, Any]) -> list[str]:
    training, features, arch = report["training"], report["features"], report["architecture"]
    problem = report["problem"]
    if report["target"] is not None:
        problem += f", target {report['target']:g}"
    if report["confidence"] is not None:
        sample = "the population value" if report["new_rows"] is None else f"on {report['new_rows']:,} new rows"
        problem += f" at confidence {report['confidence']:g} ({sample})"
        if report["certified"] is False:
            problem += "; NOT certified: the closest threshold was kept (--allow-infeasible)"
    lines = [
        f"model: {report['model']}  (trained with dmocli {training['dmocli_version']}, written {training['date']})",
        f"problem: {problem}",
    ]
    if report["threshold"] is not None:
        lines.append(
            f"threshold: logit {report['threshold']:.6g} (probability {report['threshold_probability']:.4g}); "
            f"decision: {report['decision_rule']}"
        )
    if report.get("adapted") is not None:
        lines.append(_adapted_line(report["adapted"]))
    if report.get("model_selection") is not None:
        from dmocli.pipelines.model_choice import summary_line

        lines.append(summary_line(report))
    positive = "" if report["positive"] is None else f", positive {report['positive']!r}"
    lines.append(f"label: column {report['label_col']!r}, classes {report['classes']!r}{positive}")
    kinds = [col["name"] + ("" if col["kind"] == "numeric" else f" ({col['kind']})") for col in features["columns"]]
    lines.append(f"features: {features['n_columns']} columns, {features['n_inputs']} inputs: {', '.join(kinds)}")
    if arch["kind"] == "gbdt":
        lines.append(f"model: gbdt (boosted trees), {report['n_trees']:,} trees, {report['n_parameters']:,} nodes")
    else:
        shape = "" if arch["kind"] == "linear" else f", width {arch['width']}, depth {arch['depth']}"
        lines.append(f"network: {arch['kind']}{shape}, {report['n_parameters']:,} parameters")
    lines.append(_probability_line(training["calibration"]))
    rows = "" if training["rows"] is None else f", {training['rows']:,} rows"
    lines.append(f"training: solver {training['solver']}{rows}, seed {training['seed']}")
    for split, figures in training["summary"].items():
        shown = ", ".join(f"{key} {value:.4f}" for key, value in figures.items() if isinstance(value, float))
        lines.append(f"  {split}: {shown}")
    return lines


def _probability_line(calibration: dict[str, Any] | None) -> str:
    """How the model's probabilities are made from its logits, and on which rows the map was fitted."""
    if calibration is None:
        return "probabilities: uncalibrated (the logits' sigmoid or softmax)"
    if calibration["method"] == "platt":
        mapping = f"sigmoid({calibration['slope']:.4g} x logit {calibration['intercept']:+.4g})"
    else:
        bias = ", ".join(f"{b:+.3g}" for b in calibration["bias"])
        mapping = f"softmax(logits / {calibration['temperature']:.4g} + [{bias}])"
    return f"probabilities: {mapping}, fitted on {calibration['fitted_on']}"


def _adapted_line(adapted: dict[str, Any]) -> str:
    """Where `dmo threshold --adapt/--prior` moved the threshold from, for which rate, and how the curve's cut became
    the model's (files adapted before `carried` was kept say only the rates)."""
    line = (
        f"adapted: to the positive rate {adapted['new_rate']:.4f} (trained at {adapted['training_rate']:.4f}), "
        f"from the threshold {adapted['old_threshold']:.6g}"
    )
    if adapted.get("carried") == "share":
        line += (
            f"; the held-out curve's cut {adapted['curve_threshold']:.6g} carried to the model's scores by the share "
            f"of NEW it should flag ({adapted['expected_share']:.4f})"
        )
    elif adapted.get("carried") == "score":
        line += "; the held-out curve's cut, kept as it is"
    return line
