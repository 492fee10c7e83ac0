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
