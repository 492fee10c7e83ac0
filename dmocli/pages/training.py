"""The training page (`dmo train --html`, `dmo report train.json`, `dmo report MODEL`): the operating point a model
was trained to, the held-out evidence behind it and what it was trained on.

From a train report it is drawn from the report alone (its `figures` and `importance`, heldout_figures.py), so the
page `--html` writes at the run and the page `dmo report` draws later from the JSON are the same bytes. From a
model file, the same figures come from the held-out curve the file keeps, and the figures at the threshold from
that curve too; what only the report knows (the options, the folds, the data) the page says it does not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dmocli.heldout_figures import HeldOutFigures, TopImportance
from dmocli.models.modelfile import DmoModel
from dmocli.pages.document import Page, Table
from dmocli.pages.score_plots import Curve, histogram_figure, threshold_figure
from dmocli.pages.training_plots import (
    METRIC_OF,
    certified_pr_figure,
    class_floors_figure,
    folds_figure,
    importance_figure,
    reliability_pair_figure,
)
from dmocli.report import binary_split

SPLIT_WORDS = {
    "cv": "the out-of-fold scores of cross-fitting (each row scored by a model that did not train on it)",
    "val": "the validation rows",
    "data": "the labeled rows of a later dmo threshold MODEL DATA",
    "train": "the training rows themselves (optimistic: no rows were held out)",
}


def training_page(report: Mapping[str, Any], model: DmoModel | None, *, model_sha256: str | None) -> str:
    """The page of a train report; with `model`, of a model file (REPORT then holds only its path and when it
    was written: `model_facts`)."""
    if model is not None:
        report = {**model_facts(model), **report}
    facts = _facts(report, model_sha256, from_model=model is not None)
    page = Page(f"Training of {report.get('model') or 'a model'}", kind="training", facts=facts)
    split_name = _operating_split(report)
    split = (report.get("splits") or {}).get(split_name)
    if "class_operating_point" in report or (split is not None and "per_class" in split):
        _classes(page, report, split)
    else:
        _binary(page, report, split_name, split)
    cv = report.get("cv")
    if cv and cv.get("per_fold"):
        page.section("Cross-fitting folds", anchor="cross-fitting")
        page.text(
            f"{cv['folds']} folds: each fold's rows were scored by a model trained on the others; the operating "
            "point was searched once on all the out-of-fold scores; each fold's own cut shows how much it moves."
        )
        page.figure(folds_figure(cv, beta=float(report.get("beta") or 1.0)))
    _importance(page, report)
    _splits(page, report)
    _options_and_data(page, report)
    return page.html()


def model_facts(model: DmoModel) -> dict[str, Any]:
    """What a model file says of its training, as the train report's keys: its problem, threshold, classes,
    architecture and parameters, its held-out figures and the split at its threshold (from the held-out curve),
    its importance (models/importance.py) and the summary of its report's splits."""
    info, meta = model.info, model.metadata()
    facts: dict[str, Any] = {
        "dmocli_version": meta["dmocli_version"],
        "solver": model.solver,
        "problem": meta.get("problem"),
        "target": meta.get("target"),
        "beta": meta.get("beta"),
        "confidence": info.get("confidence"),
        "certified": info.get("certified"),
        "seed": info.get("seed"),
        "threshold": model.threshold,
        "label_col": model.labels.to_dict().get("label_col"),
        "classes": list(model.labels.classes),
        "positive": model.labels.to_dict().get("positive"),
        "architecture": model.architecture.to_dict(),
        "params": info.get("params"),
        "n_features": model.preprocessor.n_features,
        "rows": info.get("rows"),
        "summary": info.get("summary"),
        "importance": TopImportance.of(model).to_dict(),
    }
    if model.calibration is not None:
        facts["calibration"] = model.calibration.to_dict()
    heldout = model.heldout
    if model.binary and heldout is not None and model.threshold is not None:
        figures = HeldOutFigures.of_curve(heldout, model.calibration)
        facts["figures"] = None if figures is None else figures.to_dict()
        facts["splits"] = {heldout.split: _split_at_threshold(model)}
        facts["operating_point"] = {"split": heldout.split}
    if model.class_offsets is not None:
        facts["class_offsets"] = [float(v) for v in model.class_offsets]
    return facts


def _split_at_threshold(model: DmoModel) -> dict[str, Any]:
    """The held-out rows' counts, metrics and intervals at the model's threshold, from its held-out curve."""
    heldout = model.heldout
    assert heldout is not None and model.threshold is not None
    scores = heldout.scores.astype(np.float64)
    positives, negatives = heldout.positives.astype(np.int64), heldout.negatives.astype(np.int64)
    logits = np.concatenate([np.repeat(scores, positives), np.repeat(scores, negatives)])
    labels = np.concatenate([np.ones(int(positives.sum()), np.int64), np.zeros(int(negatives.sum()), np.int64)])
    return binary_split(
        logits, labels, threshold=float(model.threshold), problem=model.problem, calibration=model.calibration
    ).to_dict()


def _operating_split(report: Mapping[str, Any]) -> str:
    point = report.get("operating_point") or report.get("class_operating_point") or {}
    splits = report.get("splits") or {}
    if point.get("split") in splits:
        return str(point["split"])
    return next((name for name in ("cv", "val", "train") if name in splits), "train")


def _facts(report: Mapping[str, Any], model_sha256: str | None, *, from_model: bool) -> dict[str, str]:
    return {
        "model file": str(report.get("model") or "none written"),
        "model sha256": model_sha256 or str(report.get("model_sha256") or "not known (no model file was written)"),
        "made": made_words(report, from_model=from_model),
        "dmo version": str(report.get("dmocli_version")),
        "data": str(report.get("data") or "not in a model file"),
        "operating point": problem_words(report),
    }


def made_words(report: Mapping[str, Any], *, from_model: bool) -> str:
    """When the page's input was written, from the input alone (never the render clock, never a file's mtime): a
    train report's `written_at`, the model file's time of writing; a model file keeps no date (its bytes are the
    same for the same training: a date inside would break that), so its page says so."""
    if from_model:
        return "not kept: a model file stores no date (its bytes are reproducible); its train report's written_at does"
    written = report.get("written_at")
    return f"model file and report written {written}" if written else "not recorded (no model file was written)"


def problem_words(report: Mapping[str, Any]) -> str:
    """The problem and its target in words."""
    problem, target = report.get("problem"), report.get("target")
    if problem == "fpor":
        return f"fpor: precision >= {target:g}, as much recall as that allows"
    if problem == "frop":
        return f"frop: recall >= {target:g}, as much precision as that allows"
    if problem == "ofbs":
        return f"ofbs: the best F{report.get('beta') or 1:g}"
    return str(problem)


def _binary(page: Page, report: Mapping[str, Any], split_name: str, split: Mapping[str, Any] | None) -> None:
    page.section("The operating point", anchor="operating-point-summary")
    if split is None:
        page.text("The report has no split at the threshold: nothing to draw.", css_class="note")
        return
    for line, css in _binary_words(report, split_name, split):
        page.text(line, css_class=css)
    figures = report.get("figures")
    if figures is None:
        page.text(
            "No held-out figures: this model keeps no held-out curve (or the report was written by a dmo before "
            "the pages), so only the figures at the threshold are shown.",
            css_class="note",
        )
        return
    curve = Curve.of(figures, split)
    page.figures(certified_pr_figure(curve, split, report), threshold_figure(curve, split, report))
    page.section("Calibration and scores", anchor="calibration")
    calibration = report.get("calibration") or {}
    if calibration:
        page.text(
            f"The probability map (Platt: probability = sigmoid({calibration.get('slope', 1):.4g} x logit + "
            f"{calibration.get('intercept', 0):.4g})) was fitted on the {calibration.get('fitted_on', 'held-out')} "
            "rows."
        )
    level = float(split.get("interval_level") or 0.95)
    page.figures(reliability_pair_figure(figures, level), histogram_figure(figures, split))


def _binary_words(report: Mapping[str, Any], split_name: str, split: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """What the operating point is, on which rows it was measured and what its certificate promises, in words."""
    lines: list[tuple[str, str | None]] = [
        (
            f"Rows scoring at or above logit {float(split['threshold']):.6g} (probability "
            f"{float(split['threshold_probability']):.4f}) are flagged. Measured on "
            f"{SPLIT_WORDS.get(split_name, split_name)} ({int(split['n']):,} rows, {int(split['n_pos']):,} positive): "
            f"precision {float(split['precision']):.4f}, recall {float(split['recall']):.4f}, "
            f"F{float(split['beta']):g} {float(split['f_beta']):.4f}.",
            None,
        )
    ]
    metric, target = METRIC_OF.get(str(report.get("problem"))), report.get("target")
    if metric is None:
        return lines
    feasible = split.get("feasible")
    met = f"The {metric} target {target:g} is {'met' if feasible else 'missed'} on these rows."
    lines.append((met, "met" if feasible else "missed"))
    point, confidence = report.get("operating_point") or {}, report.get("confidence")
    if confidence is not None and point.get("constraint_bound") is not None:
        words = (
            f"Certified: {metric} >= {target:g} with probability {confidence:g} ({point.get('certificate')}); the "
            f"certified lower bound is {float(point['constraint_bound']):.4f}"
        )
        sample = point.get("new_rows")
        words += "." if sample is None else f", for the {metric} measured on {sample:,} new rows."
        lines.append((words, "met" if point.get("feasible") else "missed"))
    elif confidence is not None:
        state = {True: "certified", False: "not certified"}.get(report.get("certified"), "certificate not recorded")
        lines.append((f"--confidence {confidence:g}: {state} (the model file keeps no bound).", None))
    else:
        interval = split.get(f"{metric}_interval")
        if interval is not None:
            lines.append(
                (
                    f"Not certified (no --confidence): the {metric} on new rows like these lies in "
                    f"[{interval[0]:.4f}, {interval[1]:.4f}] (95% Clopper-Pearson).",
                    "note",
                )
            )
    return lines


def _classes(page: Page, report: Mapping[str, Any], split: Mapping[str, Any] | None) -> None:
    page.section("Per class", anchor="classes")
    point = report.get("class_operating_point")
    if point is not None:
        offsets = ", ".join(f"{e['class']} {float(e['offset']):+.3f}" for e in point["per_class"])
        page.text(
            f"The class offsets ({point['kind']}, added to each class's logit before the arg-max): {offsets}. "
            + ("Every floor is met." if point.get("feasible") else f"Below the floor: {point.get('below_floor')}."),
            css_class="met" if point.get("feasible") else "missed",
        )
        page.figure(class_floors_figure(point))
    elif split is not None and "per_class" in split:
        page.text("The arg-max of the class logits (no class floors were asked).")
        page.figure(class_floors_figure(_argmax_point(split)))
    else:
        offsets = report.get("class_offsets")
        page.text(
            "A multi-class model file keeps no held-out rows per class"
            + ("" if offsets is None else f"; its class offsets: {', '.join(f'{v:+.3f}' for v in offsets)}")
            + " (the train report has the per-class figures).",
            css_class="note",
        )


def _argmax_point(split: Mapping[str, Any]) -> dict[str, Any]:
    """A split's per-class arrays as class_floors_figure's entries, with no offset and no floor."""
    per = split["per_class"]
    return {
        "kind": "argmax",
        "per_class": [
            {
                "class": name,
                "support": per["support"][k],
                "predicted": per["predicted"][k],
                "precision": per["precision"][k],
                "recall": per["recall"][k],
                "precision_interval": per["precision_interval"][k],
                "recall_interval": per["recall_interval"][k],
            }
            for k, name in enumerate(split["classes"])
        ],
    }


def _importance(page: Page, report: Mapping[str, Any]) -> None:
    page.section("Feature importance", anchor="feature-importance")
    importance = report.get("importance")
    if not importance or not importance.get("columns"):
        page.text(
            "The train report of an mlp keeps no importance (integrated gradients cost seconds at training): dmo "
            "report MODEL, or dmo info MODEL --features, measures it from the model file.",
            css_class="note",
        )
        return
    page.figure(importance_figure(importance))


def _splits(page: Page, report: Mapping[str, Any]) -> None:
    splits = report.get("splits") or {}
    if not splits:
        summary = report.get("summary") or {}
        if summary:
            page.section("Splits", anchor="splits")
            names = sorted({key for values in summary.values() for key in values})
            page.table(
                Table(
                    "The model file's summary of its train report's splits",
                    ["split", *names],
                    [[name, *[values.get(key) for key in names]] for name, values in summary.items()],
                )
            )
        return
    page.section("Splits", anchor="splits")
    binary = all("per_class" not in split for split in splits.values())
    keys = (
        ("n", "n_pos", "tp", "fp", "precision", "recall", "f_beta", "average_precision", "roc_auc", "feasible")
        if binary
        else ("n", "accuracy", "balanced_accuracy", "macro_f1", "macro_precision", "macro_recall", "log_loss")
    )
    rows = [[name, *[split.get(key) for key in keys]] for name, split in splits.items()]
    if binary:
        for row, split in zip(rows, splits.values()):
            row.extend([(split.get("calibration") or {}).get("brier"), (split.get("calibration") or {}).get("ece")])
    page.table(
        Table(
            "Each split at the operating point (train: the training rows, optimistic; cv: out-of-fold; val: held out)",
            ["split", *keys, *(("brier", "ece") if binary else ())],
            rows,
        )
    )


def _options_and_data(page: Page, report: Mapping[str, Any]) -> None:
    page.section("Options and data", anchor="options")
    architecture = report.get("architecture") or {}
    options = [
        ["solver", report.get("solver")],
        ["model", architecture.get("kind")],
        ["ensemble members", architecture.get("members")],
        ["problem", report.get("problem")],
        ["target", report.get("target")],
        ["beta", report.get("beta")],
        ["confidence", report.get("confidence")],
        ["seed", report.get("seed")],
        ["cross-fitting folds", (report.get("cv") or {}).get("folds")],
        ["validation data", report.get("val")],
        ["validation share", report.get("val_frac")],
        ["device", report.get("device")],
    ]
    page.table(Table("The training options", ["option", "value"], [row for row in options if row[1] is not None]))
    params = report.get("params") or {}
    if params:
        page.table(
            Table(
                "The solver's parameters (after defaults)",
                ["parameter", "value"],
                [[k, _cell(v)] for k, v in params.items()],
            )
        )
    classes = report.get("classes") or []
    data = [
        ["data", report.get("data")],
        ["label column", report.get("label_col")],
        ["classes", ", ".join(str(c) for c in classes) if classes else None],
        ["positive class", report.get("positive")],
        ["feature inputs (encoded)", report.get("n_features")],
        ["training rows", report.get("rows") or ((report.get("splits") or {}).get("train") or {}).get("n")],
        ["positive training rows", ((report.get("splits") or {}).get("train") or {}).get("n_pos")],
        ["fit seconds", report.get("fit_seconds")],
    ]
    page.table(Table("The data", ["what", "value"], [row for row in data if row[1] is not None]))
    unseen = report.get("unseen_levels") or {}
    if unseen:
        page.table(
            Table("Validation rows at levels the training data never had", ["column", "rows"], sorted(unseen.items()))
        )
    for warning in report.get("warnings") or []:
        page.text(f"Warning: {warning}", css_class="note")


def _cell(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
