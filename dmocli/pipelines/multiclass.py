"""The multi-class step after training, the counterpart of settle_threshold: the class offsets of a multi-class
operating point (--problem fpor|frop|ofbs on a label of over two classes, without --positive) searched on held-out
logits, the probability map fitted on the same logits, the split reports, and the folds' figures of --cv.

Both are fitted where the binary threshold would be: on the out-of-fold logits
of --cv, else on the validation split, else on the training rows (optimistic,
and said so). dmocli/operating_point/class_offsets.py has the search,
dmocli/operating_point/multiclass_calibration.py the map. Without such a problem
(--problem multiclass, the default) the decision stays the arg-max of the logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmocli.errors import UnreachableTarget, option_hint
from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.class_offsets_guard import guarded_offsets
from dmocli.operating_point.multiclass_calibration import MulticlassCalibration, fit_temperature_bias
from dmocli.operating_point.problems import OFBS_HAS_NO_BOUND
from dmocli.options import TrainOptions, refuse, target_problem
from dmocli.pipelines.cross_fit import CrossFitted
from dmocli.pipelines.report_parts import (
    CalibrationSection,
    ClassOperatingPointSection,
    MulticlassCvSection,
    ReportPart,
    SplitsSection,
)
from dmocli.pipelines.thresholding import MULTICLASS_FIELDS
from dmocli.report import multiclass_split_report


@dataclass
class SettledClasses:
    """What a multi-class training adds to its report (the operating point if one was searched, the splits with
    threshold null, the probability map), its warnings, and what the model file keeps."""

    splits: SplitsSection
    warnings: list[str] = field(default_factory=list)
    operating_point: ClassOperatingPointSection | None = None  # None: the arg-max, no offsets searched
    calibration: MulticlassCalibration | None = None
    offsets: np.ndarray | None = None  # the class offsets of an operating point, for the model file
    problem: ClassProblem | None = None
    refusal: UnreachableTarget | None = None  # an unreachable floor without --allow-infeasible (exit 3)

    def parts(self) -> tuple[ReportPart, ...]:
        """The report's sections: the operating point (if searched), the splits, the probability map."""
        searched = () if self.operating_point is None else (self.operating_point,)
        return (*searched, self.splits, CalibrationSection(calibration=self.calibration))

    def problem_fields(self) -> dict[str, Any]:
        """The report's problem fields: the operating point's where one was searched, else the arg-max's."""
        point = self.operating_point
        return dict(MULTICLASS_FIELDS) if point is None else problem_report_fields(point.problem)


def class_problem(opts: TrainOptions, classes: list[Any], binary: bool) -> ClassProblem | None:
    """The multi-class operating point the options ask for (None: the arg-max, --problem multiclass), every
    problem of --target, --class-target, --focus, --beta and --confidence against the classes in one message."""
    kind = opts.problem
    asks = bool(opts.class_target) or opts.focus is not None
    if binary or kind in (None, "multiclass"):
        if asks:
            refuse(
                [
                    "--class-target and --focus apply to --problem fpor|frop|ofbs on a label of over two classes "
                    "(without --positive)"
                ]
            )
        return None
    names = [str(c) for c in classes]
    problems: list[str] = []
    floors: list[float | None] = [opts.target] * len(classes) if kind != "ofbs" else [None] * len(classes)
    for name, text in opts.class_target.items():
        try:
            floor = float(text)
        except ValueError:
            floor = math.nan
        if name not in names:
            problems.append(f"--class-target {name}={text}: {name!r} is not a class (classes: {', '.join(names[:10])})")
        elif target_problem(floor) is not None:
            problems.append(f"--class-target {name}={text}: the floor must be in (0, 1), e.g. 0.8")
        else:
            floors[names.index(name)] = floor
    focus = None
    if opts.focus is not None:
        if opts.focus not in names:
            problems.append(f"--focus {opts.focus!r} is not a class (classes: {', '.join(names[:10])})")
        else:
            focus = names.index(opts.focus)
            floors = [floors[k] if k == focus else None for k in range(len(classes))]
            if opts.class_target and set(opts.class_target) != {opts.focus}:
                problems.append("--focus constrains one class; give --class-target for that class only, or --target")
    if kind == "ofbs" and (opts.target is not None or opts.class_target):
        problems.append("--target and --class-target apply to fpor/frop; --problem ofbs maximizes macro F-beta")
    if kind == "ofbs" and opts.confidence is not None:
        problems.append(OFBS_HAS_NO_BOUND)
    if kind != "ofbs" and all(floor is None for floor in floors):
        problems.append(
            f"--problem {kind} on {len(classes)} classes needs --target A (every class's floor) or "
            "--class-target CLASS=A"
        )
    if opts.new_rows is not None and focus is None:
        problems.append(
            "--new-rows applies to a binary certificate (or --focus); a multi-class one is of the "
            "population values: drop --new-rows"
        )
    refuse(problems)
    return ClassProblem(kind, tuple(floors), opts.beta, focus)


def settle_classes(
    logits: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    classes: list[Any],
    calibrate: bool = True,
    *,
    problem: ClassProblem | None = None,
    confidence: float | None = None,
    allow_infeasible: bool = False,
) -> SettledClasses:
    """The probability map fitted on the held-out logits ("cv", else "val", else "train"), the offsets of
    `problem` searched on the same logits, and every split's metrics at the offsets (at the arg-max without a
    problem) with probabilities through the map. Not with `calibrate` False: on rows of a `dmo subsample` file,
    whose class rates are not the population's."""
    held_out = next((name for name in ("cv", "val", "data", "train") if name in logits), None)  # data: threshold
    warnings: list[str] = []
    calibration = offsets = section = refusal = None
    if held_out is not None and calibrate:
        calibration = fit_temperature_bias(logits[held_out], truth[held_out], held_out)
    if calibration is not None and held_out == "train":
        warnings.append(OVERCONFIDENT)
    if problem is not None and held_out is not None:
        point, choice = guarded_offsets(logits[held_out], truth[held_out], problem, confidence)
        offsets = point.offsets
        section = ClassOperatingPointSection(
            problem=problem, point=point, classes=classes, split=held_out, guard=choice
        )
        if held_out == "train":
            warnings.append(OPTIMISTIC_OFFSETS)
        if point.below:
            message = unreachable_message(point.to_dict(problem, classes), problem, confidence, held_out)
            if allow_infeasible:
                kept = option_hint("--allow-infeasible", "allow_infeasible=True")
                warnings.append(f"{message}; the closest offsets are kept ({kept})")
            else:
                refusal = UnreachableTarget(
                    f"{message}; lower the floors, add rows of those classes, or pass "
                    f"{option_hint('--allow-infeasible', 'allow_infeasible=True')} to keep the closest offsets",
                    best_achievable=None,
                )
    splits = {
        name: multiclass_split_report(logits[name], truth[name], classes, calibration=calibration, offsets=offsets)
        for name in logits
    }
    return SettledClasses(
        splits=SplitsSection(threshold=None, splits=splits),
        warnings=warnings,
        operating_point=section,
        calibration=calibration,
        offsets=offsets,
        problem=problem,
        refusal=refusal,
    )


def problem_report_fields(problem: ClassProblem) -> dict[str, Any]:
    """The report's problem fields of a multi-class operating point: its kind, the floor when every constrained
    class shares one (else null: the per-class floors are in class_operating_point), and beta."""
    floors = {problem.floors[k] for k in problem.constrained()}
    return {"problem": problem.kind, "target": floors.pop() if len(floors) == 1 else None, "beta": problem.beta}


def unreachable_message(point: dict[str, Any], problem: ClassProblem, confidence: float | None, where: str) -> str:
    """Which classes stay below their floor on the held-out logits, with the best each reached there."""
    what = problem.constraint_name
    measured = "bound" if confidence is not None else what
    below = [row for row in point["per_class"] if row["meets_floor"] is False]
    listed = ", ".join(
        f"{row['class']} {row['bound'] if confidence is not None else row[what]:.4f} < {row['floor']:g}"
        for row in below
    )
    scores = "out-of-fold logits" if where == "cv" else f"{where} split"
    return (
        f"{what} floor{'s' if len(below) > 1 else ''} not {'certified' if confidence else 'reachable'} on the "
        f"{scores} for {len(below)} class{'es' if len(below) > 1 else ''} (best achievable {measured} with every "
        f"other floor held as far as it can be: {listed})"
    )


def multiclass_cv_report(crossed: CrossFitted, classes: list[Any], pooled_val: bool) -> MulticlassCvSection:
    """The report's `cv` section of a multi-class model: each fold's arg-max figures on its out-of-fold logits
    (the spread one validation split of that size would have shown)."""
    per_fold = []
    for fold in range(int(crossed.folds.max()) + 1):
        held = crossed.folds == fold
        split = multiclass_split_report(crossed.logits[held], crossed.y[held], classes)
        per_fold.append(
            {"fold": fold, "n": split["n"], **{k: split[k] for k in ("accuracy", "balanced_accuracy", "macro_f1")}}
        )
    return MulticlassCvSection(per_fold=per_fold, fit_seconds=crossed.seconds, pooled_val=pooled_val)


OPTIMISTIC_OFFSETS = (
    "the class offsets were searched on the rows the model was trained on, so the operating point is optimistic "
    "(new data will usually do worse); give --val FILE, or --cv K where the solver can be refitted per fold"
)

OVERCONFIDENT = (
    "the class probabilities were calibrated on the rows the model was trained on, so they are overconfident (new "
    "data will usually do worse); give --val FILE, or --cv K where the solver can be refitted per fold"
)
