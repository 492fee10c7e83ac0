"""`dmo monitor`: the options MonitorOptions declares (dmocli/command_options.py), one call of
`use.monitor.monitor`, and its result's figures with the gate's verdict (MonitorResult.lines); --html draws the
monitoring page (dmocli/pages/monitoring.py) of the run's report, or without NEW of the --history file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dmocli.cli.commands.shared import engine_choice, write_report_page
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit
from dmocli.command_options import MonitorOptions


@takes_options(MonitorOptions)
def monitor(
    model: Path = typer.Argument(..., help="Model file (.safetensors) written by dmo train or dmo threshold."),
    data: Optional[Path] = typer.Argument(
        None,
        help="New rows, labels not needed (`-`: a CSV on standard input; --engine dask: parquet). Left out with "
        "--history H.parquet: print that history.",
    ),
    *,
    options: MonitorOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    html: Optional[Path] = typer.Option(
        None,
        "--html",
        help="Write the monitoring page here: one self-contained HTML file (docs/pages.md); without NEW, of the "
        "--history file's periods.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Estimate a model's operating point on new unlabeled rows: their positive rate, precision and recall at
    the model's threshold, and drift.

    Example: dmo monitor fraud.safetensors march.parquet --gate --time-col created_at --every week --history h.parquet
    """
    from dmocli.data.outputs import check_outputs
    from dmocli.pages.write import refuse_misnamed_page
    from dmocli.use import history
    from dmocli.use.monitor import monitor as run_monitor
    from dmocli.use.results.monitor import MonitorGateFailed

    if html is not None:  # a page that cannot be written, or not under an .html name, is refused before NEW is read
        check_outputs({"--html": html}, {})
        refuse_misnamed_page(html, "--html")
    if data is None:  # the history's table, periods in order, estimated beside realized
        shown = history.shown(options.history, model)
        if html is not None:
            from dmocli.pages.monitoring import monitoring_input, monitoring_page
            from dmocli.pages.write import write_page

            write_page(monitoring_page(monitoring_input([options.history])), html)
        emit(shown, as_json, history.table_lines(shown))
        return

    try:
        result = run_monitor(
            model,
            data,
            gate=options.gate,
            chunk_col=options.chunk_col,
            chunk_size=options.chunk_size,
            confidence=options.confidence,
            report_path=report,
            engine=engine_choice(options),
            allow_train_rows=options.allow_train_rows,
            time_col=options.time_col,
            every=options.every,
            history=options.history,
        )
    except MonitorGateFailed as failed:  # the figures and every reason, as a pass prints them; then the message
        write_report_page(html, failed.report)
        emit(failed.report, as_json, failed.result.lines())
        raise
    write_report_page(html, result.to_dict())
    emit(result.to_dict(), as_json, result.lines())
