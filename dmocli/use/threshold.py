"""`dmo threshold`, the one entry: the options ThresholdOptions declares (dmocli/command_options.py: their
constraints and the rules between them) decide which way MODEL's operating point moves, and this function takes it.

- --adapt NEW or --prior R: the model's own problem at a new positive rate, on the held-out curve it keeps
  (use/adapt.py);
- DATA given: the threshold searched again on DATA's labeled rows (use/apply.py), or a multi-class model's class
  offsets (use/class_refit.py);
- neither: the threshold re-targeted on the held-out curve MODEL keeps, for --problem/--target or its own problem.

On every path a certified model's new threshold is certified again at MODEL's confidence unless --confidence asks
another or --no-confidence drops it (use/recertify.py). What no option rule can say is checked here, with the
declared refusals, in one message: DATA (an argument) beside --adapt, and the problem asked."""

from __future__ import annotations

from pathlib import Path

from dmocli.command_options import ThresholdOptions
from dmocli.data import sources
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.operating_point.alert_budget import AlertBudget
from dmocli.operating_point.problems import Problem
from dmocli.options import option_errors, refuse
from dmocli.use.adapt import adapt_to_rate
from dmocli.use.apply import refit
from dmocli.use.results.threshold import ThresholdResult


def threshold(
    model_path: str | Path,
    data: sources.Source | None,
    opts: ThresholdOptions,
    *,
    output: str | Path,
    report_path: str | Path | None = None,
) -> ThresholdResult:
    """MODEL's operating point moved as `opts` ask, written to `output` (and the report to `report_path`): every
    refusal of the options found before any reading, in one message (exit 2); an unreachable target exits 3 with
    its report."""
    problems = option_errors(opts)
    if opts.adapt is not None or opts.prior is not None:
        if data is not None:
            problems.append("--adapt and --prior move the threshold on the held-out scores MODEL keeps: leave DATA out")
        refuse(problems)
        return adapt_to_rate(
            model_path,
            output,
            new_data=opts.adapt,
            prior=opts.prior,
            confidence=opts.confidence,
            no_confidence=bool(opts.no_confidence),
            allow_infeasible=opts.allow_infeasible,
            report_path=report_path,
            new_rows=opts.new_rows,
        )
    asked, budget = None, None
    try:
        budget = AlertBudget.asked(opts.max_alert_rate, opts.max_alerts, opts.per_rows)
        if opts.problem is not None:
            beta = 1.0 if opts.beta is None else opts.beta
            # beside a budget, --confidence certifies it where the problem has no metric of its own to bound
            bounds = budget is None or opts.problem in ("fpor", "frop")
            asked = Problem.from_options(opts.problem, opts.target, beta, opts.confidence if bounds else None)
    except DmoError as exc:
        problems.append(str(exc))
    refuse(list(dict.fromkeys(problems)))  # the Problem repeats a declared refusal word for word: once is enough
    # --new-rows' value is checked now; whether a --confidence goes with it (maybe MODEL's), refit checks once it
    # has read MODEL.
    return refit(
        model_path,
        data,
        asked,
        output,
        confidence=opts.confidence,
        no_confidence=bool(opts.no_confidence),
        allow_infeasible=opts.allow_infeasible,
        report_path=report_path,
        engine=EngineChoice(opts.engine, opts.scheduler, opts.workers),
        new_rows=opts.new_rows,
        allow_train_rows=opts.allow_train_rows,
        gain=opts.gain,
        budget=budget,
        review_budget=opts.review_budget,
    )
