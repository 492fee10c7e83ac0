"""`dmo check`: a whole `dmo train` command line (TrainOptions, the options that decide the data checks used),
one call of `pipelines.check.check`, and every finding with its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dmocli.cli.declared import CHECKED_OPTIONS, takes_options
from dmocli.cli.output import emit
from dmocli.options import TrainOptions


@takes_options(TrainOptions, used=CHECKED_OPTIONS, check=False)
def check(
    data: Path = typer.Argument(..., help="Training table to check: parquet file, directory of parquet files, or CSV."),
    options: TrainOptions = None,  # type: ignore[assignment]  # made from train's options by takes_options
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Every problem `dmo train` would refuse DATA for, each with its fix, in one run (exit 2 when there are
    any); or what train would make of its columns. It takes a whole `dmo train` command line: the options that
    decide the data checks are used, the others (listed apart below) only checked for their values.

    Example: dmo check fraud.csv --label-col is_fraud --drop transaction_id
    """
    from dmocli.pipelines.check import check as run_check
    from dmocli.report import failure

    result = run_check(data, options)
    if not result["ok"]:  # with --json, the error every failure's report carries
        result = {**result, **failure(2, "bad_input", _check_findings(result)[0].rstrip(":"))}
    emit(result, as_json, _check_findings(result))
    if not result["ok"]:
        raise typer.Exit(2)


def _check_findings(report: dict[str, Any]) -> list[str]:
    problems = report["problems"]
    if problems:
        head = "a problem" if len(problems) == 1 else f"{len(problems)} problems"
        return [f"{report['data']}: {head} to fix before `dmo train` takes it:"] + [
            f"  {i}. {problem}" for i, problem in enumerate(problems, 1)
        ]
    columns = report["columns"]
    kinds = []
    if columns["numeric"]:
        kinds.append(f"{len(columns['numeric'])} numeric ({', '.join(columns['numeric'])})")
    if columns["categorical"]:
        levels = ", ".join(f"{name}: {n} levels" for name, n in columns["categorical"].items())
        kinds.append(f"{len(columns['categorical'])} text, one-hot ({levels})")
    if columns["embedding"]:
        kinds.append(f"the vector column {columns['embedding']}")
    classes = report["classes"]
    positive = f", positive {report['positive']!r}" if report["positive"] is not None else ""
    counts = ", ".join(f"{c!r}: {n}" for c, n in zip(classes, report["class_counts"]))
    return [
        f"{report['data']}: ok, train would take it ({report['rows']} rows)",
        f"  label '{report['label_col']}': {counts}{positive}; problem {report['problem']}",
        f"  features: {report['n_features']} from {'; '.join(kinds)}"
        + (f"; missing values filled ({report['impute']})" if report["impute"] != "none" else ""),
    ] + [f"  {name}: read as {how['read']}" for name, how in columns.get("derived", {}).items()]
