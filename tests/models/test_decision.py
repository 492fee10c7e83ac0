"""A model's decision is one immutable value (models/decision.py): `dmo threshold`'s re-fit, re-target, multi-class
re-fit and `--adapt` write a new model from a new Decision and leave the model they loaded as it was.

Each library call below is handed a model the test holds (the call's own `load_model` returns it), and the model's
whole written content (metadata, the held-out curve's and the class offsets' tensors, the decision object itself)
is compared before and after; the file the call writes must have moved, or the test would prove nothing.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_binary_frame, make_gaussian_classes

import dmocli.use.adapt
import dmocli.use.apply
from dmocli import Problem, TrainOptions, train
from dmocli.engines.choice import LOCAL
from dmocli.models.decision import Decision
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.use.adapt import adapt_to_rate
from dmocli.use.apply import refit_threshold
from dmocli.use.class_refit import refit_class_offsets


def _snapshot(model: DmoModel) -> tuple[Any, ...]:
    """Everything the model file would hold of the model's decision, deeply copied, and the decision's identity."""
    decision = model.decision
    curve = {} if decision.heldout is None else decision.heldout.tensors()
    return (
        id(decision),
        json.dumps(model.metadata(), sort_keys=True, default=str),
        {name: array.tobytes() for name, array in curve.items()},
        None if decision.class_offsets is None else decision.class_offsets.tobytes(),
    )


def _binary_model(tmp_path: Path) -> tuple[Path, Path]:
    """A linear model trained on generated rows (FPOR 0.6, validation split), and fresh rows of the same kind."""
    path, fresh = tmp_path / "binary.safetensors", tmp_path / "fresh.parquet"
    frame = make_binary_frame(800, seed=0)
    opts = TrainOptions(problem="fpor", target=0.6, val_frac=0.3, seed=0, device="cpu")
    train(pa.Table.from_pandas(frame, preserve_index=False), opts, path)
    make_binary_frame(600, seed=1, pos_frac=0.3).to_parquet(fresh)
    return path, fresh


def test_refit_and_retarget_leave_the_loaded_model_as_it_was(tmp_path, monkeypatch):
    """A re-fit on DATA and a re-target on the held-out curve each write a model at another threshold, problem and
    info, while the model they were handed keeps its own."""
    path, fresh = _binary_model(tmp_path)
    held = load_model(path)
    monkeypatch.setattr(dmocli.use.apply, "load_model", lambda _path: held)
    before = _snapshot(held)
    for data, problem in ((fresh, Problem("frop", 0.7)), (None, Problem("frop", 0.5))):
        out = tmp_path / "moved.safetensors"
        refit_threshold(path, data, problem, out, allow_infeasible=True, allow_train_rows=True)
        moved = load_model(out)
        assert moved.threshold != held.threshold and moved.problem == problem
        assert moved.info["threshold_fitted_on"] != held.info.get("threshold_fitted_on")
        assert _snapshot(held) == before


def test_adapt_leaves_the_loaded_model_as_it_was(tmp_path, monkeypatch):
    """`--adapt NEW` (a positive rate twice the training one) writes a model at a new threshold with an `adapted`
    section; the model it was handed keeps its threshold and info."""
    path, fresh = _binary_model(tmp_path)
    held = load_model(path)
    monkeypatch.setattr(dmocli.use.adapt, "load_model", lambda _path: held)
    before = _snapshot(held)
    out = tmp_path / "adapted.safetensors"
    adapt_to_rate(path, out, new_data=fresh, allow_infeasible=True)
    adapted = load_model(out)
    assert adapted.threshold != held.threshold and "adapted" in adapted.info and "adapted" not in held.info
    assert _snapshot(held) == before


def test_a_multiclass_refit_leaves_the_loaded_model_as_it_was(tmp_path):
    """Re-searching a multi-class model's class offsets on other rows writes new offsets and info; the model handed
    to it keeps its own offsets (a read-only array) and info."""
    path, val = tmp_path / "classes.safetensors", tmp_path / "val.parquet"
    frame = make_gaussian_classes(900, seed=0, d=4, sep=0.7)  # rare outer classes: a recall floor moves offsets
    opts = TrainOptions(problem="frop", target=0.6, seed=0, device="cpu", allow_infeasible=True)
    train(pa.Table.from_pandas(frame, preserve_index=False), opts, path)
    make_gaussian_classes(600, seed=5, d=4, sep=0.7).to_parquet(val)
    held = load_model(path)
    assert np.any(held.class_offsets != 0)  # the case under test: an operating point of class offsets
    before = _snapshot(held)
    out = tmp_path / "refit.safetensors"
    refit_class_offsets(
        held,
        model_path=path,
        data=val,
        problem=Problem("frop", 0.7),
        output=out,
        confidence=None,
        allow_infeasible=True,
        report_path=None,
        engine=LOCAL,
        started=time.perf_counter(),
    )
    refitted = load_model(out)
    assert not np.array_equal(refitted.class_offsets, held.class_offsets)
    assert refitted.info["threshold_fitted_on"] != held.info.get("threshold_fitted_on")
    assert _snapshot(held) == before


def test_a_decision_refuses_assignment_and_a_new_one_shares_the_network(tmp_path):
    """Frozen: no field can be assigned, `info` takes no entry, the class offsets no value; `with_decision` gives a
    new model over the same network and preprocessing, and the model still pickles (a fitted DmoClassifier)."""
    path, _ = _binary_model(tmp_path)
    model = load_model(path)
    decision = model.decision
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.threshold = 0.0
    with pytest.raises(TypeError):
        decision.info["confidence"] = 0.9
    with pytest.raises(AttributeError):
        model.threshold = 0.0  # the model's decision fields are read from its decision
    offsets = np.zeros(3)
    with_offsets = Decision(class_offsets=offsets)
    with pytest.raises(ValueError, match="read-only"):
        with_offsets.class_offsets[0] = 1.0
    offsets[0] = 1.0  # the caller's array stays its own
    assert with_offsets.class_offsets[0] == 0.0

    moved = model.with_decision(dataclasses.replace(decision, threshold=decision.threshold + 1.0))
    assert moved is not model and moved.network is model.network and moved.preprocessor is model.preprocessor
    assert moved.threshold == model.threshold + 1.0 and model.decision is decision

    copied = pickle.loads(pickle.dumps(model))
    assert _snapshot(copied)[1:] == _snapshot(model)[1:]
    assert copied.decision.certificate == decision.certificate
