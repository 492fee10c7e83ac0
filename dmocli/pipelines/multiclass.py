"""The multi-class step after training, the counterpart of settle_threshold: no threshold to fit (the decision is
the arg-max of the logits), but a probability map fitted on held-out logits, the split reports, and the folds'
figures of --cv.

The map is fitted where the binary threshold would be: on the out-of-fold logits
of --cv, else on the validation split, else on the training rows (overconfident,
and said so). dmocli/operating_point/multiclass_calibration.py has the map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmocli.operating_point.multiclass_calibration import MulticlassCalibration, fit_temperature_bias
from dmocli.pipelines.cross_fit import CrossFitted
from dmocli.report import multiclass_split_report


@dataclass
class SettledClasses:
    """What a multi-class training adds to its report (threshold: null, splits, calibration), its warnings, and the
    probability map the model file keeps."""

    report: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    calibration: MulticlassCalibration | None = None


def settle_classes(
    logits: dict[str, np.ndarray], truth: dict[str, np.ndarray], classes: list[Any], calibrate: bool = True
) -> SettledClasses:
    """The probability map fitted on the held-out logits ("cv", else "val", else "train"), and every split's
    arg-max metrics with probabilities through it. Not with `calibrate` False: on rows of a `dmo subsample` file,
    whose class rates are not the population's."""
    held_out = next((name for name in ("cv", "val", "train") if name in logits), None)
    settled = SettledClasses()
    if held_out is not None and calibrate:
        settled.calibration = fit_temperature_bias(logits[held_out], truth[held_out], held_out)
    if settled.calibration is not None and held_out == "train":
        settled.warnings.append(OVERCONFIDENT)
    settled.report["threshold"] = None
    settled.report["splits"] = {
        name: multiclass_split_report(logits[name], truth[name], classes, settled.calibration) for name in logits
    }
    if settled.calibration is not None:
        settled.report["calibration"] = settled.calibration.to_dict()
    return settled


def multiclass_cv_report(crossed: CrossFitted, classes: list[Any], pooled_val: bool) -> dict[str, Any]:
    """The report's `cv` section of a multi-class model: each fold's arg-max figures on its out-of-fold logits
    (the spread one validation split of that size would have shown)."""
    per_fold = []
    for fold in range(int(crossed.folds.max()) + 1):
        held = crossed.folds == fold
        split = multiclass_split_report(crossed.logits[held], crossed.y[held], classes)
        per_fold.append(
            {"fold": fold, "n": split["n"], **{k: split[k] for k in ("accuracy", "balanced_accuracy", "macro_f1")}}
        )
    return {
        "folds": int(crossed.folds.max()) + 1,
        "per_fold": per_fold,
        "fit_seconds": crossed.seconds,
        "pooled_val": pooled_val,
    }


OVERCONFIDENT = (
    "the class probabilities were calibrated on the rows the model was trained on, so they are overconfident (new "
    "data will usually do worse); give --val FILE, or --cv K where the solver can be refitted per fold"
)
