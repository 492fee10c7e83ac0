"""What a model file must hold before it scores a row: the stored values a decision is made from are checked on load.

A NaN or infinite weight, bias, probability map, tree leaf or feature mean made every prediction NaN (or every row
positive) with exit 0; an integer weight, a zero or negative scale or a threshold beyond float32 was cast or used
silently and changed the decisions. Each check raises ValueError naming the value; the loader turns it into one line
naming the file (exit 2).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli.models.architecture import Architecture
from dmocli.models.stored_network import linear_tensors
from dmocli.prep.features import Preprocessor

if TYPE_CHECKING:
    from torch import nn

FLOAT32_MAX = float(np.finfo(np.float32).max)  # logits are float32: a threshold beyond it decides every row alike
TREE_TENSOR = "booster"  # a gbdt member's one tensor: its booster's bytes (models/trees.py)
MEMBER_MAP = "member_map"  # an ensemble's (slope, intercept) probability map (models/networks.py)
CLASS_OFFSETS = "class_offsets"  # a multi-class operating point's offsets (operating_point/class_offsets.py)


def check_tensors(arch: Architecture, tensors: dict[str, np.ndarray]) -> None:
    """Every tensor has the name, dtype and shape the architecture builds, and every float is finite.

    The expected names, dtypes and shapes are those of a freshly built network of the stored architecture, so a
    new layer type is checked without a rule of its own; a tree model's booster bytes have any length.
    """
    expected = _expected_tensors(arch)
    stray = sorted(set(tensors) - set(expected) - {MEMBER_MAP})
    missing = sorted(set(expected) - set(tensors))
    if stray or missing:
        raise ValueError(
            f"tensors do not match the stored architecture (missing {missing[:3]}, unexpected {stray[:3]})"
        )
    for name, (dtype, shape) in expected.items():
        stored = tensors[name]
        if stored.dtype != dtype:
            raise ValueError(f"tensor {name!r} is {stored.dtype}, the architecture stores {dtype}")
        if shape is not None and stored.shape != shape:
            raise ValueError(f"tensor {name!r} has shape {stored.shape}, the architecture needs {shape}")
        if np.issubdtype(stored.dtype, np.floating) and not np.isfinite(stored).all():
            raise ValueError(f"tensor {name!r} holds values that are not finite (NaN or infinite)")
    if MEMBER_MAP in tensors:
        _check_member_map(arch, tensors[MEMBER_MAP])


def _expected_tensors(arch: Architecture) -> dict[str, tuple[np.dtype, tuple[int, ...] | None]]:
    """Name -> (dtype, shape) of the tensors a network of `arch` saves (shape None: any length, trees' bytes)."""
    if arch.kind == "gbdt":
        names = [TREE_TENSOR] if arch.members == 1 else [f"members.{i}.{TREE_TENSOR}" for i in range(arch.members)]
        return {name: (np.dtype(np.uint8), None) for name in names}
    if arch.kind == "linear":  # without torch: a linear model loads and scores in numpy (models/stored_network.py)
        return linear_tensors(arch)
    from dmocli.models.networks import build_network

    state = build_network(arch).state_dict()
    return {
        name: (np.dtype(str(value.dtype).removeprefix("torch.")), tuple(value.shape)) for name, value in state.items()
    }


def _check_member_map(arch: Architecture, member_map: np.ndarray) -> None:
    """The ensemble's probability map: two finite float64 numbers, only in a binary ensemble."""
    if arch.members < 2 or arch.n_outputs != 1:
        raise ValueError("a probability map (member_map) is only stored with a binary ensemble")
    if member_map.dtype != np.float64 or member_map.shape != (2,):
        raise ValueError(f"member_map is {member_map.dtype} {member_map.shape}, not two float64 numbers")
    if not np.isfinite(member_map).all():
        raise ValueError("member_map holds values that are not finite (NaN or infinite)")


def check_class_offsets(offsets: np.ndarray | None, binary: bool, n_classes: int) -> None:
    """A multi-class operating point's offsets: one finite float64 per class, only in a multi-class model (a NaN
    offset would send every row to class 0, an offset missing for a class would shift the others' decisions)."""
    if offsets is None:
        return
    if binary:
        raise ValueError("class offsets are only stored with a multi-class model")
    if offsets.dtype != np.float64 or offsets.shape != (n_classes,):
        raise ValueError(f"class_offsets is {offsets.dtype} {offsets.shape}, not {n_classes} float64 numbers")
    if not np.isfinite(offsets).all() or (np.abs(offsets) > FLOAT32_MAX).any():
        raise ValueError("class_offsets holds values that are not finite numbers within the logits' range")


def check_threshold(threshold: Any) -> None:
    """A binary model's threshold: a finite number within float32's range, the range of the logits it cuts."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"threshold {threshold!r} is not a finite number")
    if abs(threshold) > FLOAT32_MAX:
        raise ValueError(f"threshold {threshold!r} is beyond the float32 range of the logits")


def check_preprocessing(pre: Preprocessor, feature_columns: Any) -> None:
    """Feature statistics that standardize without NaN or a sign flip: finite means and fills, scales > 0; the
    stored feature columns: the preprocessor's, named once each."""
    if not isinstance(feature_columns, list) or not feature_columns:
        raise ValueError("feature_columns is empty or not a list")
    if len(set(map(str, feature_columns))) != len(feature_columns):
        raise ValueError("feature_columns names a column twice")
    if feature_columns != pre.input_columns:
        raise ValueError("feature_columns does not match the preprocessing's columns")
    for name, values in (("mean", pre.mean), ("fill", pre.fill), ("scale", pre.scale)):
        numbers = _numbers(name, values)
        if not np.isfinite(numbers).all():
            raise ValueError(f"preprocessing.{name} holds values that are not finite")
        if name == "scale" and (numbers <= 0).any():
            raise ValueError("preprocessing.scale holds a value that is not positive")
    dense = pre.n_dense
    for name, values in (("mean", pre.mean), ("scale", pre.scale)):
        if len(values) not in ((0, dense) if pre.embedding else (dense,)):
            raise ValueError(f"{dense} dense features but {len(values)} preprocessing.{name} values")
    if pre.fill and len(pre.fill) != dense:
        raise ValueError(f"{dense} dense features but {len(pre.fill)} preprocessing.fill values")


def _numbers(name: str, values: Any) -> np.ndarray:
    """A stored list as float64, refusing anything that is not a plain number (a string, a bool, a nested list)."""
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise ValueError(f"preprocessing.{name} is not a list of numbers")
    return np.asarray(values, dtype=np.float64)


def check_trees(network: nn.Module, arch: Architecture) -> None:
    """Each booster parses, reads `arch.n_inputs` features, and has finite leaves and base score."""
    for member in getattr(network, "members", [network]):
        booster = member.xgb_booster()
        if booster.num_features() != arch.n_inputs:
            raise ValueError(f"the trees read {booster.num_features()} features, the model has {arch.n_inputs}")
        model = json.loads(bytes(booster.save_raw(raw_format="json")))["learner"]
        if not _finite_text(model["learner_model_param"]["base_score"]):
            raise ValueError("the trees' base score is not finite")
        boosted = model["gradient_booster"]
        for tree in boosted.get("gbtree", boosted)["model"]["trees"]:  # dart keeps its trees one level down
            leaves = np.asarray(tree["left_children"]) == -1
            if not np.isfinite(np.asarray(tree["split_conditions"], dtype=np.float64)[leaves]).all():
                raise ValueError("a tree holds a leaf value that is not finite")


def _finite_text(text: str) -> bool:
    """XGBoost writes base_score as text: "[5E-1]" (a vector in recent versions) or "5E-1"."""
    values = np.asarray(json.loads(text) if text.startswith("[") else [text], dtype=np.float64)
    return bool(np.isfinite(values).all())


def check_review_threshold(review: Any, threshold: float, banded: bool) -> None:
    """A review band's lower cut: a finite number within float32's range, at or below the threshold (equal: an
    empty band), given exactly where `info.review_band` says how it was chosen."""
    if review is None and not banded:
        return
    if review is None or not banded:
        raise ValueError("review_threshold and info.review_band come together: one is missing")
    check_threshold(review)
    if review > threshold:
        raise ValueError(f"review_threshold {review!r} is above the threshold {threshold!r}")


def _review_band(name: str, value: Any) -> None:
    """`--review-budget`'s section: the budget (a share of rows), the level its band was certified at and the
    band's held-out share (and its bound) that `dmo info` and `dmo monitor` read."""
    _object(name, value, ("budget", "confidence", "volume", "volume_bound", "rows"))
    _probability(f"{name}.budget", value["budget"])
    if value["confidence"] is not None:
        _probability(f"{name}.confidence", value["confidence"])
    _real(f"{name}.volume", value["volume"], 0.0, 1.0)
    if value["volume_bound"] is not None:
        _real(f"{name}.volume_bound", value["volume_bound"], 0.0, 1.0)
    _whole(f"{name}.rows", value["rows"], 1)
    if value.get("next_rows") is not None:
        _whole(f"{name}.next_rows", value["next_rows"], 1)


# ---- the model file's `info`: every entry a command reads, checked in one place --------------------------------
MAX_COUNT = 2**53  # a stored count above it has no exact float64 (10**400 overflowed monitor's arithmetic)


def check_metadata(meta: dict[str, Any], tensors: dict[str, np.ndarray]) -> None:
    """The header entries the loader does not parse into a checked object (the problem, the labels' bookkeeping,
    the versions and rule `dmo info` prints), then every `info` entry (check_info). A ValueError names the entry."""
    for key, check in _HEADER_FIELDS.items():
        if meta.get(key) is not None:
            check(key, meta[key])
    _kind("solver", meta.get("solver"), str)
    labels = meta.get("labels")
    _object("labels", labels, ("column", "classes"))
    _kind("labels.column", labels["column"], str)
    _kind("labels.classes", labels["classes"], list)
    if labels.get("trim_text") is not None:
        _kind("labels.trim_text", labels["trim_text"], bool)
    counts = labels.get("counts", [])
    _kind("labels.counts", counts, list)
    if counts and len(counts) != len(labels["classes"]):
        raise ValueError(f"labels.counts has {len(counts)} counts for {len(labels['classes'])} classes")
    for i, count in enumerate(counts):
        _whole(f"labels.counts[{i}]", count)
    impute = meta.get("preprocessing", {}).get("impute", "none") if isinstance(meta.get("preprocessing"), dict) else 0
    if impute not in IMPUTE:
        raise ValueError(f"preprocessing.impute is {impute!r:.40}, not one of {', '.join(IMPUTE)}")
    check_info(meta.get("info") or {}, tensors)


IMPUTE = ("none", "median", "keep")  # prep/features.py: Preprocessor.survey's choices


def check_info(info: Any, tensors: dict[str, np.ndarray]) -> None:
    """Every entry of the metadata's `info` that a command reads (dmo info, info --features, threshold, predict,
    evaluate, monitor) has its type and range, and the held-out curve's counts agree with its tensors. An absent
    optional entry is what an older file holds; an entry no command reads is left as it is. A ValueError names the
    entry (`info.adapted.new_rate`), which the loader turns into one line (exit 2)."""
    if not isinstance(info, dict):
        raise ValueError("info is not a JSON object")
    for key, check in _INFO_FIELDS.items():
        if info.get(key) is not None:
            check(f"info.{key}", info[key])
    if "heldout" in info:
        _check_heldout_counts(info["heldout"], tensors)


def _whole(name: str, value: Any, low: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise ValueError(f"{name} is {value!r:.40}, not a whole number from {low} to 2**53")


def _real(
    name: str, value: Any, low: float = -FLOAT32_MAX, high: float = FLOAT32_MAX, *, open_ends: bool = False
) -> None:
    """A finite number within [low, high] ((low, high) with `open_ends`)."""
    inside = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    inside = inside and (low < value < high if open_ends else low <= value <= high)
    if not inside:
        bounds = f"({low:g}, {high:g})" if open_ends else f"[{low:g}, {high:g}]"
        raise ValueError(f"{name} is {value!r:.40}, not a finite number in {bounds}")


def _probability(name: str, value: Any) -> None:
    """A level or a rate strictly between 0 and 1 (a confidence, a positive rate)."""
    _real(name, value, 0.0, 1.0, open_ends=True)


def _kind(name: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"{name} is {type(value).__name__} {value!r:.40}, not {kind.__name__}")


def _number(name: str, value: Any) -> None:
    """A JSON number of any value (a figure shown, never decided on: NaN is how a report writes an undefined one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} is {type(value).__name__} {value!r:.40}, not a number")


def _integer(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} is {type(value).__name__} {value!r:.40}, not a whole number")


def _object(name: str, value: Any, required: tuple[str, ...] = ()) -> None:
    _kind(name, value, dict)
    missing = [key for key in required if key not in value]
    if missing:
        raise ValueError(f"{name} lacks {', '.join(missing)}")


def _summary(name: str, value: Any) -> None:
    """Split name -> figures (precision, recall, feasible, ...): what `dmo info` lists."""
    _object(name, value)
    for split, figures in value.items():
        _object(f"{name}.{split}", figures)
        for key, figure in figures.items():
            if figure is not None and not isinstance(figure, bool):
                _number(f"{name}.{split}.{key}", figure)


def _calibration(name: str, value: Any) -> None:
    """What `dmo info` prints of the probability map (its numbers are checked with the model, _check_consistent)."""
    _object(name, value, ("method", "fitted_on"))
    _kind(f"{name}.method", value["method"], str)
    _kind(f"{name}.fitted_on", value["fitted_on"], str)


def _adapted(name: str, value: Any) -> None:
    """`dmo threshold --adapt/--prior`'s section: the rates and the threshold it moved from; how the cut was carried
    (absent in files adapted before it was kept)."""
    _object(name, value, ("new_rate", "training_rate", "old_threshold"))
    _probability(f"{name}.new_rate", value["new_rate"])
    _probability(f"{name}.training_rate", value["training_rate"])
    _real(f"{name}.old_threshold", value["old_threshold"])
    carried = value.get("carried")
    if carried not in (None, "share", "score"):
        raise ValueError(f"{name}.carried is {carried!r}, not 'share' or 'score'")
    for key in ("expected_share", "curve_threshold"):
        if value.get(key) is not None or carried == "share":  # a cut carried by share says by which, and from where
            _real(f"{name}.{key}", value[key], *((0.0, 1.0) if key == "expected_share" else ()))


def _model_selection(name: str, value: Any) -> None:
    """`--model auto`'s section: each candidate's out-of-fold figure, the one kept (among them), the levels."""
    _object(name, value, ("rule", "candidates", "chosen", "confidence", "confidence_per_candidate"))
    _kind(f"{name}.rule", value["rule"], str)
    _kind(f"{name}.candidates", value["candidates"], list)
    kinds = []
    for i, candidate in enumerate(value["candidates"]):
        where = f"{name}.candidates[{i}]"
        _object(where, candidate, ("model", "objective", "feasible", "threshold"))
        _kind(f"{where}.model", candidate["model"], str)
        _number(f"{where}.objective", candidate["objective"])
        _kind(f"{where}.feasible", candidate["feasible"], bool)
        if candidate["threshold"] is not None:
            _number(f"{where}.threshold", candidate["threshold"])
        kinds.append(candidate["model"])
    if value["chosen"] not in kinds:
        raise ValueError(f"{name}.chosen {value['chosen']!r} is none of its candidates {kinds}")
    for key in ("confidence", "confidence_per_candidate"):
        if value[key] is not None:
            _probability(f"{name}.{key}", value[key])


def _profile(name: str, value: Any) -> None:
    """The drift profile's row counts are exact in float64: 10**400 passed as a whole number and overflowed
    monitor's and info --features' arithmetic. The rest of its form (non-negative whole counts, edges, levels)
    is shift/drift_profile.Profile.from_dict's, which names it as the drift profile's; this walks what has a form."""
    if not isinstance(value, dict):
        return
    entries = [
        (f"{name}.{kind}.{column}", entry)
        for kind in ("numeric", "categorical")
        if isinstance(value.get(kind), dict)
        for column, entry in value[kind].items()
    ]
    entries += [(f"{name}.score", value.get("score"))]
    for where, entry in entries:
        if not isinstance(entry, dict):
            continue
        counts = entry.get("counts") if isinstance(entry.get("counts"), list) else []
        for key, count in [*((f"counts[{i}]", c) for i, c in enumerate(counts)), *_scalar_counts(entry)]:
            if isinstance(count, int) and not isinstance(count, bool) and abs(count) > MAX_COUNT:
                raise ValueError(f"{where}.{key} is about 2**{count.bit_length()}, more rows than 2**53: not a count")


def _scalar_counts(entry: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(key, entry[key]) for key in ("missing", "other", "unseen") if key in entry]


def _check_heldout_counts(heldout: Any, tensors: dict[str, np.ndarray]) -> None:
    """The held-out curve's `rows` and `positives` are its count tensors' sums: a file whose counts contradict them
    made monitor report a rate of 1.0 and threshold run out of memory."""
    _object("info.heldout", heldout, ("rows", "positives", "certified_rows"))
    _whole("info.heldout.rows", heldout["rows"], 1)
    _whole("info.heldout.positives", heldout["positives"])
    _whole("info.heldout.certified_rows", heldout["certified_rows"], 1)
    counts = {name: tensors.get(f"heldout.{name}") for name in ("positives", "negatives")}
    if (
        any(c is None or c.dtype.kind != "u" or c.ndim != 1 for c in counts.values())
        or len({c.size for c in counts.values()} | {getattr(tensors.get("heldout.scores"), "size", -1)}) != 1
    ):
        return  # named by the curve's own check (operating_point/heldout.py)
    positives, negatives = (int(c.sum(dtype=np.uint64)) for c in counts.values())
    if (positives, positives + negatives) != (heldout["positives"], heldout["rows"]):
        raise ValueError(
            f"info.heldout says {heldout['rows']} rows and {heldout['positives']} positives, its curve counts "
            f"{positives + negatives} and {positives}"
        )


_HEADER_FIELDS = {
    "target": _probability,
    "beta": lambda name, value: _real(name, value, 0.0, FLOAT32_MAX, open_ends=True),
    "decision_rule": lambda name, value: _kind(name, value, str),
    "dmocli_version": lambda name, value: _kind(name, value, str),
    "problem": lambda name, value: _kind(name, value, str),
}
_INFO_FIELDS = {
    "seed": _integer,
    "confidence": _probability,
    "new_rows": lambda name, value: _whole(name, value, 1),
    "certified": lambda name, value: _kind(name, value, bool),
    "params": _object,
    "rows": _whole,
    "epochs": _whole,
    "threshold_fitted_on": lambda name, value: _kind(name, value, str),
    "summary": _summary,
    "calibration": _calibration,
    "adapted": _adapted,
    "model_selection": _model_selection,
    "profile": _profile,
    "review_band": _review_band,
}
