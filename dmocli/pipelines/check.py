"""Every data problem of a training table in one pass: what `dmo check` prints and what the first `dmo train` on a
messy table refuses, all at once (label column, ids, dates, amounts written as text, missing values, ...), each
with its fix; and, when there is none, what train would make of the columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa

from dmocli.data import reading, sources
from dmocli.errors import DmoError
from dmocli.operating_point.gain import GainMatrix, check_amounts
from dmocli.operating_point.problems import Problem
from dmocli.options import TrainOptions, option_errors, refuse
from dmocli.pipelines.review_banding import band_problem_refusal
from dmocli.pipelines.time_blocks import shuffled_time_warning, time_problems
from dmocli.prep.columns import ColumnPlan, case_variant_warning, survey_columns, text_column_warning
from dmocli.prep.derive import Derivation
from dmocli.prep.features import Preprocessor, case_variant_groups
from dmocli.prep.labels import LabelSpec, infer_label_spec, label_counts, stray_classes
from dmocli.report import envelope
from dmocli.solvers import get_solver
from dmocli.solvers.base import Solver


@dataclass
class Survey:
    """What the columns of a table become, and every problem and warning found on the way. `labels`,
    `problem` and `pre` are usable only when `problems` is empty."""

    n_rows: int
    plan: ColumnPlan
    labels: LabelSpec | None
    problem: Problem | None
    pre: Preprocessor
    problems: list[str]
    warnings: list[str]
    table: pa.Table | None = None  # the table as the preprocessing reads it: dates as parts, numbers parsed

    def refuse(self, source: object) -> None:
        """One DmoError naming every problem, each with its fix."""
        if self.problems:
            if len(self.problems) == 1:
                raise DmoError(f"{source} has a problem to fix before training: {self.problems[0]}")
            listed = "; ".join(f"({i}) {problem}" for i, problem in enumerate(self.problems, 1))
            raise DmoError(f"{source} has {len(self.problems)} problems to fix before training: {listed}")


def resolve_problem(opts: TrainOptions, n_classes: int) -> Problem | None:
    """The binary problem to solve, or None for multi-class (the default for a label of over two classes
    without --positive, and fpor/frop/ofbs on such a label: per-class offsets, pipelines/multiclass.py)."""
    kind, budget = opts.problem, opts.max_alert_rate is not None or opts.max_alerts is not None
    if kind is None:
        kind = ("alerts" if budget else "ofbs") if (n_classes <= 2 or opts.positive is not None) else "multiclass"
    if budget and (kind == "multiclass" or (n_classes > 2 and opts.positive is None)):
        raise DmoError(
            "an alert budget bounds a binary model's threshold: give --positive CLASS, or leave the budget out"
        )
    if kind == "multiclass":
        refuse(multiclass_conflicts(opts))
        return None
    if kind == "value" and n_classes > 2 and opts.positive is None:
        raise DmoError(
            "--problem value weighs a binary decision (flag or not) and applies to binary labels; give --positive "
            "CLASS (one class against the rest)"
        )
    if n_classes > 2 and opts.positive is None:  # a multi-class operating point: pipelines/multiclass.py checks it
        return None
    if kind == "alerts" and opts.target is not None:
        raise DmoError("--target applies to fpor/frop; an alert budget alone maximizes recall within it")
    # beside a budget, --confidence certifies it where the problem has no metric of its own to bound
    confidence = opts.confidence if not budget or kind in ("fpor", "frop") else None
    return Problem.from_options(kind, opts.target, opts.beta, confidence)


def multiclass_conflicts(opts: TrainOptions) -> list[str]:
    """The binary-problem options a multi-class problem would ignore: every one, for one message."""
    conflicts = []
    if opts.target is not None:
        conflicts.append("--target applies to fpor/frop, not to --problem multiclass")
    if opts.positive is not None:
        conflicts.append(
            "--positive picks the positive class of a binary problem; --problem multiclass keeps every class"
        )
    if opts.confidence is not None:
        conflicts.append("--confidence bounds the constrained metric of fpor/frop, not --problem multiclass")
    if opts.beta != 1.0:
        conflicts.append(
            f"--beta {opts.beta:g} weighs recall in a binary problem's F-beta; --problem multiclass "
            "keeps every class and reports macro F1 (leave --beta out, or give --positive)"
        )
    return conflicts


def solved_problem(opts: TrainOptions, n_classes: int, solver: Solver) -> Problem | None:
    """resolve_problem, refused when the solver does not solve it."""
    problem = resolve_problem(opts, n_classes)
    if opts.review_budget is not None and problem is None:
        raise DmoError(
            "--review-budget splits a binary model's one score in three; a multi-class model has none: leave it out "
            "(or give --positive CLASS for one class against the rest)"
        )
    if opts.review_budget is not None and band_problem_refusal(problem.kind) is not None:
        raise DmoError(band_problem_refusal(problem.kind))
    if problem is None and not solver.multiclass:
        raise DmoError(f"solver {solver.name} is binary; give --problem fpor|frop|ofbs (and --positive for >2 classes)")
    if problem is not None and problem.trained_as.kind not in solver.problems:
        raise DmoError(
            f"solver {solver.name} does not solve --problem {problem.kind} (it solves: {', '.join(solver.problems)})"
        )
    return problem


def effective_impute(opts: TrainOptions) -> str:
    """--impute as the preprocessing applies it: trees route missing values themselves, so for gbdt NaN is kept
    unless --impute median asks to fill it."""
    return "keep" if opts.model == "gbdt" and opts.impute == "none" else opts.impute


def survey(table: pa.Table, opts: TrainOptions, solver: Solver) -> Survey:
    """Plan the columns, infer the label and fit the preprocessing of `table` as train does, gathering every
    problem instead of stopping at the first. With --dates parts or --parse-numbers, the derived columns replace
    their sources first (prep/derive.py), a value that does not read named by its row and left missing."""
    derive, problems = survey_derivation(table.schema, lambda columns: table.select(columns).to_batches(), opts)
    table = derive.apply(table, strict=False)
    plan, found = survey_columns(table.schema, opts.label_col, not_features(opts, table.schema), opts.embedding_col)
    problems += found
    warnings: list[str] = []
    labels = problem = None
    if opts.label_col in table.schema.names:
        labels, problem, found, warnings = survey_labels(table.column(opts.label_col), opts, solver)
        problems += found
        problems += _gain_problems(table, opts, labels)
    trees = opts.model == "gbdt"  # one feature of level indices per text column, not one per level
    pre, found = Preprocessor.survey(
        table.to_batches(), plan, impute=effective_impute(opts), categorical_codes=trees, fold_case=opts.fold_case
    )
    problems += found
    pre.derive = derive or None
    for name, levels in pre.categorical.items():
        if any(f"'{name}'" in p for p in found):
            continue
        wide = None if trees else text_column_warning(name, len(levels), table.num_rows)
        warnings += [w for w in (wide, case_variant_warning(name, case_variant_groups(levels))) if w]
    warnings = derive.warnings() + warnings  # first: date parts dropped as constant in every row
    return Survey(table.num_rows, plan, labels, problem, pre, problems, warnings, table)


def gain_values(table: pa.Table, gain: GainMatrix, labels: np.ndarray, *, where: str) -> np.ndarray:
    """The columns `gain` names, as float64 (rows, columns) in `gain.columns` order; a column `where` lacks, or one
    that is not numeric, is one DmoError, and so is a labeled row's missing or negative amount (gain.check_amounts).
    An unlabeled row's amount is not read by any decision: it may be missing."""
    missing = [name for name in gain.columns if name not in table.schema.names]
    if missing:
        raise DmoError(f"--gain names column(s) {', '.join(missing)}, which {where} lacks; give it the column(s)")
    values = np.empty((table.num_rows, len(gain.columns)), dtype=np.float64)
    labeled = labels >= 0
    for i, name in enumerate(gain.columns):
        column = table.column(name)
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise DmoError(
                f"--gain column {name!r} of {where} is {column.type}, not numbers; give amounts as numbers "
                "(--parse-numbers reads '$1,234.50')"
            )
        values[:, i] = column.to_numpy(zero_copy_only=False).astype(np.float64)
        losses = any(cell.loss and cell.column == name for cell in gain.cells)
        check_amounts(name, values[labeled, i], losses=losses)
    return values


def _gain_problems(table: pa.Table, opts: TrainOptions, labels: LabelSpec | None) -> list[str]:
    """--problem value's gain columns of DATA, read as train reads them (gain_values): what is wrong, in one line."""
    if opts.problem != "value" or labels is None:
        return []
    try:
        gain_values(table, GainMatrix.parse(opts.gain), labels.encode(table.column(opts.label_col)), where="DATA")
    except DmoError as exc:
        return [str(exc)]
    return []


def survey_derivation(
    schema: pa.Schema, read: Callable[[list[str]], Iterable[pa.RecordBatch]], opts: TrainOptions
) -> tuple[Derivation, list[str]]:
    """The derivation --dates and --parse-numbers ask for, fitted on `read(columns)`'s batches of DATA (the label
    and --drop columns left as they are), with every value that does not read named by its row."""
    return Derivation.survey(
        schema,
        read,
        exclude=[opts.label_col, *not_features(opts, schema)],
        dates_mode=opts.dates,
        parse_numbers=opts.parse_numbers,
    )


def not_features(opts: TrainOptions, schema: pa.Schema) -> tuple[str, ...]:
    """The columns left out of the features: --drop's, and --time-col's, which orders the rows and is never a
    feature (where DATA has it: a missing one is named by pipelines/time_blocks.py, not as a --drop)."""
    time_col = opts.time_col
    if time_col is None or time_col == opts.label_col or time_col not in schema.names or time_col in opts.drop:
        return tuple(opts.drop)
    return (*opts.drop, time_col)


def survey_labels(
    column: pa.ChunkedArray, opts: TrainOptions, solver: Solver
) -> tuple[LabelSpec | None, Problem | None, list[str], list[str]]:
    """The label spec and problem train would take from the label column, with every problem and warning of it
    (spec and problem None where there are problems of the labels themselves)."""
    try:
        counts = label_counts(column, opts.label_col)  # missing and blank labels left out
    except DmoError as exc:  # no class can be named in a label of that type
        return None, None, [str(exc)], []
    labels = problem = None
    problems, warnings = [], []
    try:
        problem = solved_problem(opts, len(counts), solver)
        labels = infer_label_spec(
            column, opts.label_col, positive=opts.positive, binary=problem is not None, counts=counts
        )
        warnings += stray_classes(counts)
    except DmoError as exc:
        problems.append(str(exc))
    n_unlabeled = len(column) - sum(counts.values())
    if n_unlabeled and not solver.uses_unlabeled and not opts.drop_unlabeled:
        problems.append(unlabeled_problem(n_unlabeled, solver.name))
    if not n_unlabeled and solver.uses_unlabeled:  # found by train only after encoding: named here with the rest
        problems.append(
            f"solver {solver.name} needs unlabeled rows (missing labels) and the data has none; add rows with "
            "an empty label, or train with --solver wce"
        )
    return labels, problem, problems, warnings


def unlabeled_problem(n_unlabeled: int, solver: str) -> str:
    return (
        f"{n_unlabeled} rows have no label; solver {solver} cannot use unlabeled rows "
        "(pass --drop-unlabeled to ignore them, or use --solver adsh/fixmatch)"
    )


def check(data: sources.Source, opts: TrainOptions) -> dict[str, Any]:
    """`dmo check`: the survey of DATA as a report; `ok` is whether `dmo train` with these options would take
    the data (the caller exits 2 when not). Every option is checked as train checks it, all at once; DATA is read
    whole, whichever the solver (a streaming one refuses the same problems, batch by batch)."""
    problems = option_errors(opts)
    try:
        solver = get_solver(opts.solver)
    except DmoError as exc:
        refuse([*problems, str(exc)])
        raise
    refuse(problems)
    table = reading.read_table(data)
    found = survey(table, opts, solver)
    plan, pre, labels = found.plan, found.pre, found.labels
    found.problems += time_problems(table, opts, labels)
    found.warnings += shuffled_time_warning(table, opts)
    report = envelope(
        "check",
        data=sources.describe(data),
        ok=not found.problems,
        problems=found.problems,
        warnings=found.warnings,
        rows=found.n_rows,
        label_col=opts.label_col,
    )
    if found.problems:
        return report
    report.update(
        classes=labels.classes if labels else None,
        positive=labels.positive if labels else None,
        class_counts=labels.counts if labels else None,
        problem=found.problem.kind if found.problem else "multiclass",
        n_features=pre.n_features,
        columns={
            "numeric": plan.numeric,
            "categorical": {name: len(levels) for name, levels in pre.categorical.items()},
            "embedding": plan.embedding,
            "dropped": list(opts.drop),
            **({"derived": pre.derive.report()} if pre.derive else {}),
        },
        impute=opts.impute,
    )
    return report
