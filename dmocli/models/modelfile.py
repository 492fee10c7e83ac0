"""The model file: one .safetensors with weights and a JSON metadata header.

Loading reads tensors and JSON only (safetensors never unpickles), checks
the format version, and keeps the network as its stored tensors: a linear or
gbdt model scores from them in numpy (models/stored_network.py), so loading
and scoring it never imports torch; an mlp builds its torch layers on first use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from safetensors.numpy import save, save_file

from dmocli.data.outputs import atomic_path, is_special, reader_gone_is_an_error
from dmocli.errors import DmoError, first_line
from dmocli.models.architecture import Architecture
from dmocli.models.decision import Decision
from dmocli.models.file_checks import (
    CLASS_OFFSETS,
    check_class_offsets,
    check_metadata,
    check_preprocessing,
    check_review_threshold,
    check_tensors,
    check_threshold,
    check_trees,
)
from dmocli.models.file_reading import METADATA_KEY, StoredModel, read_model_file
from dmocli.models.stored_network import StoredNetwork
from dmocli.operating_point.calibration import Calibration, probability
from dmocli.operating_point.class_offsets import ClassProblem, decide
from dmocli.operating_point.heldout import TENSOR_PREFIX as HELDOUT_PREFIX
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.multiclass_calibration import MulticlassCalibration, class_probabilities
from dmocli.operating_point.problems import Problem
from dmocli.prep.features import LevelCounts, Preprocessor
from dmocli.prep.labels import LabelSpec
from dmocli.prep.row_fingerprint import TENSOR_NAME as FINGERPRINT
from dmocli.prep.row_fingerprint import check_sketch
from dmocli.shift.drift_profile import Profile
from dmocli.version import __version__

if TYPE_CHECKING:  # imported on use: writing, loading and scoring a linear or gbdt model never loads torch
    import torch

FORMAT_NAME = "dmocli-model"
FORMAT_VERSION = 1


@dataclass
class DmoModel:
    """A trained classifier: preprocessing, network, labels, and its decision (models/decision.py), which the
    properties below read; `with_decision` gives the model at another operating point."""

    # a trained torch module, or the stored tensors: a loaded file's, or from a numpy solver its state dict
    network: torch.nn.Module | StoredNetwork | dict[str, np.ndarray]
    architecture: Architecture
    preprocessor: Preprocessor
    labels: LabelSpec
    solver: str
    decision: Decision  # the operating point, its held-out curve and the file's info (models/decision.py)
    training_rows: np.ndarray | None = None  # the sketch of its training rows (prep/row_fingerprint.py)
    profile: Profile | None = None  # its training rows' features and held-out scores, for drift checks (info.profile)

    @property
    def binary(self) -> bool:
        return self.labels.binary

    def with_decision(self, decision: Decision) -> DmoModel:
        """This model at another operating point: a new model sharing the network, preprocessing and profile, so
        that moving the operating point (`dmo threshold`) leaves the model it started from as it was."""
        return dataclasses.replace(self, decision=decision)

    @property
    def threshold(self) -> float | None:
        """The decision's threshold on the logit scale (binary models; None for a multi-class one)."""
        return self.decision.threshold

    @property
    def review_threshold(self) -> float | None:
        """The lower cut of the decision's review band on the logit scale (None: no band; binary models)."""
        return self.decision.review_threshold

    @property
    def problem(self) -> Problem | None:
        return self.decision.problem

    @property
    def class_offsets(self) -> np.ndarray | None:
        return self.decision.class_offsets

    @property
    def class_problem(self) -> ClassProblem | None:
        return self.decision.class_problem

    @property
    def heldout(self) -> HeldOutCurve | None:
        """The held-out curve the threshold was searched on (binary models whose file keeps one)."""
        return self.decision.heldout

    @property
    def info(self) -> Mapping[str, Any]:
        """The model file's `info` as the decision left it (read-only: a new decision replaces it)."""
        return self.decision.info

    def stored_heldout(self, model_path: str | Path) -> HeldOutCurve:
        """The held-out curve the model file keeps, for a command that reads it instead of labeled rows (monitor,
        `--adapt`, a re-target), or one line saying why there is none and what to give instead."""
        if self.heldout is None:
            raise DmoError(
                f"{model_path} keeps no held-out scores (written before dmocli stored them, or trained with "
                "--cv-transfer rank before they were carried to the saved model's scale); give labeled DATA"
            )
        return self.heldout

    @property
    def curve_off_scale(self) -> bool:
        """Whether the stored held-out curve is not on the model's own scale: a gbdt `--cv` ensemble (which averages
        its members' probabilities, far below each member's score at the top) whose curve keeps the out-of-fold
        scores (not carried to its own by rank, `HeldOutCurve.carried`: only `--cv-transfer rank` is): a cut from
        such a curve can lie above every score the model gives, so `--adapt` carries its cut by the share of NEW.
        Linear and mlp ensembles average probabilities too, but their members nearly agree, and carrying their cuts
        by share measured no better (docs/measurements.md): their curve is taken as on their scale."""
        ensemble = self.architecture.members > 1 and getattr(self.network, "member_map", None) is not None
        curve = self.heldout
        return ensemble and self.architecture.kind == "gbdt" and curve is not None and not curve.carried

    def module(self) -> torch.nn.Module:
        """The torch network, built on first use from the stored tensors (a loaded file, a numpy solver's state)."""
        if isinstance(self.network, dict):
            self.network = StoredNetwork(self.architecture, self.network)
        if isinstance(self.network, StoredNetwork):
            self.network = _network_from_state(self.architecture, self.network.state, self.network.device)
        return self.network

    def members(self) -> list[Any]:
        """The member networks (a single network is its own one member), without building torch layers from a
        loaded file's tensors: a gbdt member gives `size()` and `xgb_booster()` either way."""
        if isinstance(self.network, dict):
            self.network = StoredNetwork(self.architecture, self.network)
        return list(getattr(self.network, "members", [self.network]))

    def logits(self, batch: pa.RecordBatch | pa.Table) -> tuple[np.ndarray, LevelCounts]:
        """Logits for a batch of raw rows, and the counts of unseen or missing categorical levels."""
        features, levels = self.preprocessor.transform(batch)
        return self.logits_of_features(features), levels

    def logits_of_features(self, features: np.ndarray) -> np.ndarray:
        """Logits of encoded rows (n, n_features), as `logits` gives them for the raw rows: a linear or gbdt model
        from its stored tensors in numpy (the bits torch's path gives: models/stored_network.py), an mlp by torch."""
        if isinstance(self.network, dict):
            self.network = StoredNetwork(self.architecture, self.network)
        if isinstance(self.network, StoredNetwork) and self.network.numpy_scored:
            return self.network.logits(np.ascontiguousarray(features, dtype=np.float32))
        import torch

        from dmocli.models.networks import logits_of

        network = self.module()
        device = next(network.buffers(), None) if self.architecture.kind == "gbdt" else next(network.parameters())
        device = device.device if device is not None else torch.device("cpu")
        # Row-major, as training scores its splits: a column-major matrix takes another matmul path whose sums
        # round differently (1e-6), and the report's AP and threshold would not be the ones evaluate finds.
        out = logits_of(network, torch.from_numpy(np.ascontiguousarray(features)).to(device))
        return out.float().cpu().numpy()

    @property
    def calibration(self) -> Calibration | MulticlassCalibration | None:
        """The map from a binary model's logit to P(positive | x), or from a multi-class model's logits to
        P(class | x), when training fitted one (files written before it have none: their probabilities are the
        logit's sigmoid or the logits' softmax, as they were)."""
        stored = self.info.get("calibration")
        if self.binary:
            return Calibration.from_dict(stored)
        return MulticlassCalibration.from_dict(stored, len(self.labels.classes))

    def probability(self, logits: np.ndarray) -> np.ndarray:
        """P(positive | x) of a binary model's logits (calibrated where the model file says how)."""
        return probability(logits, self.calibration)

    def class_probabilities(self, logits: np.ndarray) -> np.ndarray:
        """P(class | x), (n, K), of a multi-class model's logits (calibrated where the model file says how). Its
        arg-max may differ from decide's, the arg-max of the logits (plus the class offsets where there are)."""
        return class_probabilities(logits, self.calibration)

    def decide(self, logits: np.ndarray) -> np.ndarray:
        if self.binary:
            return (logits >= self.threshold).astype(np.int8)
        return decide(logits, self.class_offsets)

    def metadata(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "dmocli_version": __version__,
            "solver": self.solver,
            **(self.problem.to_dict() if self.problem else {"problem": None, "target": None, "beta": None}),
            "threshold": self.threshold,
            **({"review_threshold": self.review_threshold} if self.review_threshold is not None else {}),
            "decision_rule": "logit >= threshold"
            if self.binary
            else "argmax over class logits" + (" + class_offsets" if self.class_offsets is not None else ""),
            **(
                {"class_problem": self.class_problem.to_dict(self.labels.classes)}
                if self.class_problem is not None
                else {}
            ),
            "labels": self.labels.to_dict(),
            "feature_columns": self.preprocessor.input_columns,
            "preprocessing": self.preprocessor.to_dict(),
            "architecture": self.architecture.to_dict(),
            "info": {
                **self.info,
                **({"heldout": self.heldout.info()} if self.heldout is not None else {}),
                **({"profile": self.profile.to_dict()} if self.profile is not None else {}),
            },
        }

    def save(self, path: str | Path) -> str:
        """Write the model file atomically; returns the sha256 of its bytes (the identity a history and a page
        name it by)."""
        if isinstance(self.network, (dict, StoredNetwork)):
            state = self.network if isinstance(self.network, dict) else self.network.state
            tensors = {k: np.ascontiguousarray(v) for k, v in state.items()}
        else:
            tensors = {k: v.detach().cpu().contiguous().numpy() for k, v in self.network.state_dict().items()}
        if self.heldout is not None:
            tensors.update(self.heldout.tensors())
        if self.training_rows is not None:
            tensors[FINGERPRINT] = self.training_rows
        if self.class_offsets is not None:
            tensors[CLASS_OFFSETS] = np.asarray(self.class_offsets, dtype=np.float64)
        meta = json.dumps(self.metadata(), default=_json_default)
        with atomic_path(path) as tmp:
            if is_special(tmp):  # save_file replaces the path it is given, which would replace /dev/null itself
                written = save(tensors, metadata={METADATA_KEY: meta})
                with reader_gone_is_an_error(path), open(tmp, "wb") as out:
                    out.write(written)
                return hashlib.sha256(written).hexdigest()
            save_file(tensors, str(tmp), metadata={METADATA_KEY: meta})
            return file_sha256(tmp)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in blocks (a model file may be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _network_from_state(arch: Architecture, state: dict[str, Any], device: torch.device | str) -> torch.nn.Module:
    import torch

    from dmocli.models.networks import build_network

    network = build_network(arch)
    network.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
    return network.to(device).eval()


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The dmo metadata as the file stores it (one read; no check beyond the file's framing)."""
    return read_model_file(path).metadata


def load_model(path: str | Path, device: torch.device | str = "cpu") -> DmoModel:
    """The model in the file at `path`, every stored value checked (models/file_checks.py)."""
    return load_stored_model(path, device)[0]


def load_stored_model(path: str | Path, device: torch.device | str = "cpu") -> tuple[DmoModel, StoredModel]:
    """The model and what the one read of its file gave (its metadata as stored, its modification time).

    Any value that would make a decision wrong or not a number is one message naming the file, not a model that
    scores every row NaN: a foreign, hand-edited or damaged file exits 2 here, never 0 or 1 at predict time."""
    stored = read_model_file(path)
    meta = stored.metadata
    if meta.get("format") != FORMAT_NAME:
        raise DmoError(f"{path} is not a dmo model file (format {meta.get('format')!r}, not {FORMAT_NAME!r})")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise DmoError(
            f"{path} has model format version {version!r}; this dmocli reads version {FORMAT_VERSION} "
            "(retrain or use a matching dmocli)"
        )
    try:  # a hand-edited or foreign file: any malformed field is one message, not a crash at predict time
        arch = Architecture.from_dict(meta["architecture"])
        weights = {
            name: value
            for name, value in stored.tensors.items()
            if not name.startswith(HELDOUT_PREFIX) and name not in (FINGERPRINT, CLASS_OFFSETS)
        }
        check_tensors(arch, weights)
        network: StoredNetwork | torch.nn.Module = StoredNetwork(arch, weights, device)
        if not network.numpy_scored:  # an mlp: its torch layers, whose load checks the tensors once more
            network = _network_from_state(arch, weights, device)
        info = meta.get("info") or {}
        check_metadata(meta, stored.tensors)  # every entry a command reads, its type, range and counts
        heldout = HeldOutCurve.from_file(stored.tensors, info["heldout"]) if "heldout" in info else None
        profile = _stored_profile(info.get("profile"))
        training_rows = stored.tensors.get(FINGERPRINT)
        if training_rows is not None:
            check_sketch(training_rows)
        problem = Problem(meta["problem"], meta.get("target"), meta.get("beta") or 1.0) if meta.get("problem") else None
        preprocessor, labels = Preprocessor.from_dict(meta["preprocessing"]), LabelSpec.from_dict(meta["labels"])
        class_offsets = stored.tensors.get(CLASS_OFFSETS)
        check_class_offsets(class_offsets, labels.binary, len(labels.classes))
        decision = Decision(
            threshold=meta.get("threshold"),
            review_threshold=meta.get("review_threshold"),
            problem=problem,
            class_offsets=class_offsets,
            class_problem=None
            if class_offsets is None
            else ClassProblem.from_dict(meta.get("class_problem"), labels.classes),
            heldout=heldout,
            info={key: value for key, value in info.items() if key not in STORED_APART},  # metadata() writes them
        )
        model = DmoModel(
            network=network,
            architecture=arch,
            preprocessor=preprocessor,
            labels=labels,
            solver=str(meta["solver"]),
            decision=decision,
            training_rows=training_rows,
            profile=profile,
        )
        check_preprocessing(model.preprocessor, meta.get("feature_columns"))
        _check_profile(model.profile, model.preprocessor)
        _check_consistent(model)
        if arch.kind == "gbdt":
            check_trees(network, arch)
    except (DmoError, KeyError, TypeError, AttributeError, ValueError, RuntimeError, RecursionError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else first_line(exc)
        raise DmoError(f"{path} has corrupt or inconsistent dmo metadata ({detail}); retrain the model") from exc
    return model, stored


STORED_APART = ("heldout", "profile")  # info entries a loaded model holds apart (decision.heldout, profile)


def _stored_profile(stored: Any) -> Profile | None:
    """The drift profile `info.profile` holds (None in files written before it was stored); anything malformed in
    it is a ValueError that says it is the profile, since its own messages name no field of the file."""
    if stored is None:
        return None
    try:
        if not isinstance(stored, dict):
            raise ValueError("not a JSON object")
        return Profile.from_dict(stored)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        detail = f"no field {exc}" if isinstance(exc, KeyError) else first_line(exc)
        raise ValueError(f"the drift profile (info.profile) is malformed: {detail}") from exc


def _check_profile(profile: Profile | None, pre: Preprocessor) -> None:
    """A drift profile of the model's own feature columns, its levels read as the model reads them: one naming
    other columns (a hand-edited or mixed-up file) would only fail later, in the middle of `dmo monitor`."""
    if profile is None:
        return
    if list(profile.numeric) != pre.numeric or list(profile.categorical) != list(pre.categorical):
        raise ValueError("the drift profile's columns are not the model's feature columns")
    if (profile.trim_text, profile.fold_case) != (pre.trim_text, pre.fold_case):
        raise ValueError("the drift profile matches levels otherwise than the model does")


def _check_consistent(model: DmoModel) -> None:
    """The stored pieces fit together: feature statistics per feature, a network as wide as the features,
    one output per class (or one logit and a finite threshold for a binary model)."""
    pre, labels, arch = model.preprocessor, model.labels, model.architecture
    if not isinstance(pre.categorical, dict) or not isinstance(labels.classes, list) or len(labels.classes) < 2:
        raise ValueError("classes or categorical levels are malformed")
    if not pre.embedding and not len(pre.mean) == len(pre.scale) == len(pre.numeric):
        raise ValueError(f"{len(pre.numeric)} numeric columns but {len(pre.mean)} means and {len(pre.scale)} scales")
    if pre.n_features != arch.n_inputs or labels.n_outputs != arch.n_outputs:
        raise ValueError("the network's input or output size does not match the features or classes")
    if labels.binary and labels.positive != labels.classes[-1]:
        raise ValueError(f"positive class {labels.positive!r} is not the model's second class {labels.classes[-1]!r}")
    if labels.binary:
        check_threshold(model.threshold)
        check_review_threshold(model.review_threshold, model.threshold, "review_band" in model.info)
    stored = model.info.get("calibration")
    if stored is not None and not labels.binary:
        MulticlassCalibration.from_dict(stored, len(labels.classes))  # raises on any malformed stored value
    elif stored is not None:
        if not isinstance(stored, dict) or stored.get("method", "platt") != "platt":
            raise ValueError("the probability calibration is malformed")
        calibration = Calibration.from_dict(stored)  # a slope or intercept that is not a number raises here
        if not (math.isfinite(calibration.slope) and math.isfinite(calibration.intercept)):
            raise ValueError("the probability calibration holds a value that is not finite")
