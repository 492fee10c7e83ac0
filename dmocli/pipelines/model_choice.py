"""`dmo train --model auto`: linear or trees, chosen by the out-of-fold constrained objective.

Each candidate (options.AUTO_CANDIDATES) is trained as `dmo train --model KIND` would train it, with the same
options and seed, so the same folds: their out-of-fold curves are paired, and each one's exact threshold and
objective on it is an honest estimate of what that kind does on new rows. The one that reaches the target with
the better objective is kept (a tie goes to the simpler, linear); its model file and report are the candidate's
own (`architecture.kind` linear or gbdt), with a `model_selection` section added to the report and to the file's
`info` (its decision's, `dmo info` shows it), so no other command needs to know that a choice was made.

With `--confidence C` the choice is itself a look at the data: keeping the better of two certified thresholds
could keep one whose certificate failed. Each candidate is certified at 1 - (1 - C) / 2 instead, so that by the
union bound both certificates hold together with probability at least C, and so does the chosen one's.

DATA is read once; it is prepared once per candidate, because the preprocessing depends on the model kind (trees
keep missing values and take a text column's levels as categories, the linear model one-hot levels); --val, when
given with --cv K, is read per candidate for the same reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from dmocli.data import reading, sources
from dmocli.engines import torchrun
from dmocli.errors import DmoError, UnreachableTarget
from dmocli.models.modelfile import DmoModel
from dmocli.options import AUTO_CANDIDATES, CV_AUTO, MODEL_AUTO, TrainOptions
from dmocli.pipelines.in_memory import train_loaded
from dmocli.pipelines.in_memory_load import Loaded, load
from dmocli.pipelines.report_parts import CandidateModel, ModelSelectionSection, extended
from dmocli.pipelines.saving import finish, refuse_with_report
from dmocli.solvers import available, solver_class
from dmocli.solvers.base import InMemorySolver, Solver, SolverParams

RULE = "out-of-fold objective, feasible first; ties to linear"
MULTICLASS = "--model auto compares binary operating points; for multi-class labels choose --model linear or gbdt"


def candidate_confidence(confidence: float | None) -> float | None:
    """The level each candidate is certified at for the chosen one to hold at `confidence` (a union bound)."""
    if confidence is None:
        return None
    return round(1 - (1 - confidence) / len(AUTO_CANDIDATES), 12)  # 0.95 for 0.9, not 0.9500000000000001


def auto_problems(opts: TrainOptions, solver: Solver) -> list[str]:
    """What `--model auto` cannot combine with, from the options alone (the `--param`s are checked per candidate
    in pipelines/train.py): a solver that does not train both candidates in memory, Dask, torchrun, multi-class
    options, and any setting that leaves no out-of-fold rows to choose on."""
    problems = []
    if not solver.selects_model:
        able = ", ".join(name for name in available() if solver_class(name)().selects_model)
        problems.append(
            f"solver {solver.name} does not train both {' and '.join(AUTO_CANDIDATES)} in memory, which --model "
            f"{MODEL_AUTO} chooses between (solvers that do: {able})"
        )
    if opts.engine != "local":
        problems.append(f"--model auto trains in one process, not on --engine {opts.engine}: choose --model gbdt")
    if torchrun.launched():
        problems.append("--model auto trains in one process (as gbdt does); run it without torchrun")
    if opts.problem == "multiclass" or opts.class_target or opts.focus is not None:
        problems.append(MULTICLASS)
    missing_folds = _without_folds(opts)
    if missing_folds is not None:
        problems.append(f"--model auto chooses on out-of-fold rows, and {missing_folds}: give --cv K (K >= 2)")
    return problems


def _without_folds(opts: TrainOptions) -> str | None:
    """The option that leaves the threshold without out-of-fold rows (as pipelines/in_memory.py:_folds decides),
    or None. --cv auto may decide on one held-out split once it has counted the positives: refused too, before
    any data is read."""
    if opts.cv == 0:
        return "--cv 0 cross-fits none"
    if opts.cv == CV_AUTO:
        return "--cv auto may hold out one split instead"
    if opts.folding or opts.params.get("folding"):
        return "--folding holds out ERO's own fold instead"
    if opts.cv is not None:
        return None
    if opts.adjust is False:
        return "--no-adjust keeps the solver's own threshold"
    if opts.val is not None or opts.val_frac:
        return "--val or --val-frac without --cv fits the threshold on those rows alone"
    return None


@dataclass(frozen=True)
class _Outcome:
    """One candidate trained: its model and report, or the refusal of its unreachable target (with its report)."""

    part: CandidateModel
    model: DmoModel | None
    report: dict[str, Any]
    refusal: UnreachableTarget | None


def train_auto(
    data: sources.Source,
    opts: TrainOptions,
    *,
    solver: InMemorySolver,
    params: SolverParams,
    output: Path | None,
    report_path: str | Path | None,
    started: float,
) -> tuple[DmoModel, dict[str, Any]]:
    """Train every candidate on one read of DATA, keep the better (see the module docstring), and write its model
    and its report with `model_selection`; when no candidate reaches the target, refuse with the better one's
    report, as `dmo train --model KIND` would (exit 3)."""
    from dmocli.models.networks import resolve_device

    table = reading.read_table(data)  # a Table passed in is kept as is
    device = resolve_device(opts.device)
    level = candidate_confidence(opts.confidence)
    outcomes = []
    for kind in AUTO_CANDIDATES:
        candidate = dataclasses.replace(opts, model=kind, confidence=level)
        outcomes.append(
            _train_candidate(data, table, candidate, solver=solver, params=params, device=device, started=started)
        )
    kept = best([outcome.part for outcome in outcomes])
    chosen = next(outcome for outcome in outcomes if outcome.part is kept)
    section = ModelSelectionSection(
        rule=RULE,
        candidates=tuple(outcome.part for outcome in outcomes),
        chosen=chosen.part.model,
        confidence=opts.confidence,
        confidence_per_candidate=level,
    )
    if chosen.refusal is not None:
        # its report already carries the refusal's keys; the selection joins them, and the whole run's time
        refuse_with_report(chosen.refusal, extended(chosen.report, section), report_path, started)
    assert chosen.model is not None  # a candidate without a refusal has its model
    report = extended({**chosen.report, "model": None if output is None else str(output)}, section)
    # the file says it was chosen, and why its certificate's level is above the one asked (`dmo info`)
    decision = chosen.model.decision
    selected = {**decision.info, "model_selection": report["model_selection"]}
    model = chosen.model.with_decision(dataclasses.replace(decision, info=selected))
    return finish(model, report, output=output, report_path=report_path, started=started)


def best(candidates: Sequence[CandidateModel]) -> CandidateModel:
    """The rule (RULE): a candidate that reaches the target beats one that does not, then the higher objective;
    of equals, the first, which AUTO_CANDIDATES orders simplest first."""
    return max(candidates, key=lambda candidate: (candidate.feasible, candidate.objective))  # max keeps the first


def _train_candidate(
    data: sources.Source,
    table: pa.Table,
    opts: TrainOptions,
    *,
    solver: InMemorySolver,
    params: SolverParams,
    device: Any,
    started: float,
) -> _Outcome:
    """One candidate, trained as `dmo train --model KIND` trains it, written nowhere; a multi-class label or a
    class too small to cross-fit is refused here, once the labels are known."""
    try:
        model, report = train_loaded(
            _binary(load(data, opts, solver, None, table=table)),  # held by train_loaded alone, as in_memory does
            data,
            opts,
            solver=solver,
            params=params,
            output=None,
            report_path=None,
            started=started,
            group=None,
            device=device,
        )
    except UnreachableTarget as refusal:
        assert refusal.report is not None  # the tail attaches the report of the refused run
        model, report, refused = None, refusal.report, refusal
    else:
        refused = None
    point = report["operating_point"]
    if point.get("split") != "cv":
        raise DmoError(
            "--model auto chooses on out-of-fold rows, and a class has fewer than 2 labeled rows, too few to "
            "cross-fit: add labeled rows of it, or choose --model linear or gbdt"
        )
    reached = point["feasible"] is not False  # None: OFBS has no target to miss
    part = CandidateModel(
        model=opts.model, objective=point["objective"], feasible=reached, threshold=point["threshold"]
    )
    return _Outcome(part, model, report, refused)


def _binary(loaded: Loaded) -> Loaded:
    """DATA as prepared, refused when its labels are multi-class (known only once read)."""
    if loaded.problem is None:
        raise DmoError(MULTICLASS)
    return loaded


def summary_line(report: dict[str, Any]) -> str:
    """`dmo train`'s line for the choice: the kept kind, its out-of-fold objective at the target, the others'."""
    selection = report["model_selection"]
    chosen = selection["chosen"]
    metric = {"fpor": "recall", "frop": "precision", "alerts": "recall"}.get(report["problem"], f"F{report['beta']:g}")
    bound = {"fpor": "precision", "frop": "recall"}.get(report["problem"])
    at = f" at {bound} >= {report['target']:g}" if bound is not None else ""
    at += " within the alert budget" if "alert_budget" in report else ""  # the budget narrows every candidate's cuts
    by_kind = {candidate["model"]: candidate for candidate in selection["candidates"]}
    others = "; ".join(f"{kind} {_figure(by_kind[kind], metric, '')}" for kind in by_kind if kind != chosen)
    level = selection["confidence_per_candidate"]
    certified = "" if level is None else f"; each certified at {level:g} for {selection['confidence']:g}"
    return f"model auto: {chosen} (out-of-fold {_figure(by_kind[chosen], metric, at)}; {others}{certified})"


def _figure(candidate: dict[str, Any], metric: str, at: str) -> str:
    """A candidate's objective, or, where its target was out of reach, that fact first and the figure said to be
    its closest cut's (a bare figure beside a met target read as one too)."""
    if candidate["feasible"]:
        return f"{metric} {candidate['objective']:.2f}{at}"
    return f"out of reach{at} ({metric} {candidate['objective']:.2f} at its closest cut, which misses the target)"
