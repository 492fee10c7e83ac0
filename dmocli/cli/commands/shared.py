"""Declared options as the pipeline functions take them: the engine as one EngineChoice, and --strict with the
tolerance --max-unseen sets."""

from __future__ import annotations

from typing import Any


def engine_choice(options: Any) -> Any:
    """--engine, --scheduler and --workers as the EngineChoice the pipelines take."""
    from dmocli.engines.choice import EngineChoice

    return EngineChoice(options.engine, options.scheduler, options.workers)


def strictness(options: Any) -> dict[str, Any]:
    """--strict and --max-unseen as the pipelines take them: --max-unseen alone asks for the check it sets the
    tolerance of."""
    from dmocli.prep.drift import DEFAULT_MAX_UNSEEN

    return {
        "strict": options.strict or options.max_unseen is not None,
        "max_unseen": DEFAULT_MAX_UNSEEN if options.max_unseen is None else options.max_unseen,
    }


def write_report_page(html: Any, report: dict[str, Any]) -> None:
    """--html of train, evaluate and monitor: the page of the run's report (pages/inputs.py report_page), written
    atomically; nothing without --html. The pages load matplotlib, so they are imported only when asked for."""
    if html is None:
        return
    from dmocli.pages.inputs import report_page
    from dmocli.pages.write import write_page

    write_page(report_page(report), html)
