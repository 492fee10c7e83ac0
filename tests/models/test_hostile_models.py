"""Model files that lie: every stored value a decision is made from is checked on load (issue 33).

Each probe edits one tensor or metadata field of a real model file and loads it through the library and through
`dmo predict` and `dmo info` in this process: one line naming the file and exit 2, never exit 0 with NaN output
and never exit 1. A model replaced while it is loaded gives one model or the other, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from conftest import make_binary_frame
from safetensors.numpy import load_file, save_file

from dmocli.errors import DmoError
from dmocli.models import modelfile
from dmocli.models.modelfile import load_model

Tensors = dict[str, np.ndarray]
Metadata = dict[str, Any]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Binary models of each family (a 2-fold linear ensemble with its probability map, a single MLP, a 2-fold
    gbdt ensemble, and a second linear model for the swap), and the data they score."""
    pytest.importorskip("xgboost")
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("hostile")
    make_binary_frame(n=400, seed=3).to_parquet(root / "data.parquet")
    base = dict(problem="ofbs", seed=0)
    specs = {
        "linear": dict(cv=2),
        "other": dict(cv=2, seed=1, problem="frop", target=0.9),
        "mlp": dict(model="mlp", width=4, depth=1, cv=0, params={"max-epochs": "3"}),
        "gbdt": dict(model="gbdt", cv=2, params={"rounds": "5"}),
    }
    for name, spec in specs.items():
        train(root / "data.parquet", TrainOptions(**{**base, **spec}), output=root / f"{name}.st")
    return {**{name: root / f"{name}.st" for name in specs}, "data": root / "data.parquet"}


def rewritten(
    source: Path, target: Path, tensors: Callable[[Tensors], None] | None = None, meta_text: str = ""
) -> Path:
    """`source` written to `target` with its tensors edited in place by `tensors`, or its metadata text replaced."""
    stored = modelfile.read_model_file(source)
    edited = dict(stored.tensors)
    if tensors is not None:
        tensors(edited)
    text = meta_text or json.dumps(stored.metadata)
    save_file(edited, str(target), metadata={modelfile.METADATA_KEY: text})
    return target


def with_metadata(source: Path, target: Path, edit: Callable[[Metadata], None]) -> Path:
    """`source` with its metadata edited by `edit` (json writes NaN and Infinity as JavaScript does)."""
    meta = modelfile.read_metadata(source)
    edit(meta)
    return rewritten(source, target, meta_text=json.dumps(meta))


def set_tensor(name: str, value: Callable[[np.ndarray], np.ndarray]) -> Callable[[Tensors], None]:
    def edit(tensors: Tensors) -> None:
        tensors[name] = value(tensors[name].copy())

    return edit


def poison(value: float) -> Callable[[np.ndarray], np.ndarray]:
    def edit(array: np.ndarray) -> np.ndarray:
        array.flat[0] = value
        return array

    return edit


def tree_leaf(value: str, n_features: int | None = None) -> Callable[[Tensors], None]:
    """Member 0's booster with its first leaf set to `value` (XGBoost's JSON reads Infinity and NaN), or its
    feature count changed."""
    import xgboost

    def edit(tensors: Tensors) -> None:
        booster = xgboost.Booster(model_file=bytearray(tensors["members.0.booster"].tobytes()))
        model = json.loads(bytes(booster.save_raw(raw_format="json")))
        learner = model["learner"]
        tree = learner["gradient_booster"]["model"]["trees"][0]
        tree["split_conditions"][tree["left_children"].index(-1)] = "LEAF"
        if n_features is not None:
            learner["learner_model_param"]["num_feature"] = str(n_features)
        text = json.dumps(model).replace('"LEAF"', value)
        rebuilt = xgboost.Booster(model_file=bytearray(text.encode()))
        tensors["members.0.booster"] = np.frombuffer(bytes(rebuilt.save_raw(raw_format="ubj")), dtype=np.uint8)

    return edit


def deep_json(depth: int = 100_000) -> str:
    return '{"format": "dmocli-model", "format_version": 1, "info": ' + "[" * depth + "]" * depth + "}"


# (family, probe name, edit of the tensors or of the metadata, words the message must hold)
TENSOR_PROBES = [
    ("linear", "weight NaN", set_tensor("members.0.0.weight", poison(np.nan)), "not finite"),
    ("linear", "bias inf", set_tensor("members.1.0.bias", poison(np.inf)), "not finite"),
    ("linear", "weight int32", set_tensor("members.0.0.weight", lambda a: a.astype(np.int32)), "int32"),
    ("linear", "weight float64", set_tensor("members.0.0.weight", lambda a: a.astype(np.float64)), "float64"),
    ("linear", "weight float16", set_tensor("members.0.0.weight", lambda a: a.astype(np.float16)), "float16"),
    ("linear", "weight wider", set_tensor("members.0.0.weight", lambda a: np.hstack([a, a])), "shape"),
    ("linear", "member_map NaN", set_tensor("member_map", poison(np.nan)), "member_map"),
    ("linear", "member_map -inf", set_tensor("member_map", poison(-np.inf)), "member_map"),
    ("linear", "member_map shape", set_tensor("member_map", lambda a: np.append(a, 1.0)), "member_map"),
    ("linear", "member_map float32", set_tensor("member_map", lambda a: a.astype(np.float32)), "member_map"),
    ("linear", "stray tensor", lambda t: t.update(extra=np.zeros(2, np.float32)), "unexpected"),
    ("linear", "missing tensor", lambda t: t.pop("members.1.0.bias"), "missing"),
    ("mlp", "hidden weight NaN", set_tensor("0.weight", poison(np.nan)), "not finite"),
    ("mlp", "running variance inf", set_tensor("1.running_var", poison(np.inf)), "not finite"),
    ("mlp", "batch count as float", set_tensor("1.num_batches_tracked", lambda a: a.astype(np.float32)), "float32"),
    ("mlp", "member_map in a single model", lambda t: t.update(member_map=np.zeros(2)), "member_map"),
    ("linear", "held-out score NaN", set_tensor("heldout.scores", poison(np.nan)), "held-out curve"),
    ("linear", "held-out scores unsorted", set_tensor("heldout.scores", lambda a: a[::-1].copy()), "held-out curve"),
    ("linear", "held-out counts float", set_tensor("heldout.positives", lambda a: a.astype(np.float32)), "held-out"),
    ("linear", "held-out counts short", set_tensor("heldout.negatives", lambda a: a[1:]), "held-out curve"),
    ("linear", "fingerprint unsorted", set_tensor("training_rows.sketch", lambda a: a[::-1].copy()), "fingerprint"),
    ("linear", "fingerprint as int32", set_tensor("training_rows.sketch", lambda a: a.astype(np.int32)), "fingerprint"),
    ("gbdt", "leaf inf", tree_leaf("Infinity"), "leaf value"),
    ("gbdt", "leaf NaN", tree_leaf("NaN"), "leaf value"),
    ("gbdt", "booster of another feature count", tree_leaf("0.5", n_features=3), "features"),
    ("gbdt", "booster bytes as float32", set_tensor("members.1.booster", lambda a: a.astype(np.float32)), "float32"),
    ("gbdt", "booster bytes garbage", set_tensor("members.1.booster", lambda a: a[: len(a) // 2]), "corrupt"),
]


def preprocessing(field: str, value: Any) -> Callable[[Metadata], None]:
    return lambda meta: meta["preprocessing"].__setitem__(field, value)


def first_value(field: str, value: Any) -> Callable[[Metadata], None]:
    return lambda meta: meta["preprocessing"][field].__setitem__(0, value)


METADATA_PROBES = [
    ("mean NaN", first_value("mean", float("nan")), "preprocessing.mean"),
    ("mean inf", first_value("mean", float("inf")), "preprocessing.mean"),
    ("mean as text", first_value("mean", "0.5"), "preprocessing.mean"),
    ("scale zero", first_value("scale", 0.0), "preprocessing.scale"),
    ("scale negative", first_value("scale", -2.0), "preprocessing.scale"),
    ("scale inf", first_value("scale", float("inf")), "preprocessing.scale"),
    ("fill NaN", preprocessing("fill", [float("nan")] * 4), "preprocessing.fill"),
    ("fill short", preprocessing("fill", [0.0]), "preprocessing.fill"),
    ("means short", preprocessing("mean", [0.0]), "preprocessing.mean"),
    ("threshold inf", lambda m: m.update(threshold=float("inf")), "threshold"),
    ("threshold NaN", lambda m: m.update(threshold=float("nan")), "threshold"),
    ("threshold beyond float32", lambda m: m.update(threshold=1e39), "float32"),
    ("threshold as text", lambda m: m.update(threshold="0.5"), "threshold"),
    ("threshold true", lambda m: m.update(threshold=True), "threshold"),
    ("calibration slope NaN", lambda m: m["info"]["calibration"].update(slope=float("nan")), "calibration"),
    ("format foreign", lambda m: m.update(format="other-model"), "format"),
    ("format missing", lambda m: m.pop("format"), "format"),
    ("feature_columns empty", lambda m: m.update(feature_columns=[]), "feature_columns"),
    ("feature_columns repeated", lambda m: m.update(feature_columns=["f0", "f0", "f1", "f2"]), "twice"),
    ("feature_columns other", lambda m: m.update(feature_columns=["a", "b", "c", "d"]), "feature_columns"),
]


def assert_refused_everywhere(path: Path, data: Path, dmo, words: str) -> None:
    """The library raises DmoError naming the file and `words`; `predict` and `info` exit 2 with that one line."""
    with pytest.raises(DmoError, match=str(path.name)) as raised:
        load_model(path)
    assert words in str(raised.value), str(raised.value)
    out = path.with_suffix(".csv")
    for args in (["predict", path, data, "-o", out], ["info", path]):
        code, stdout, stderr = dmo(*args)
        assert code == 2, (args, code, stderr)
        assert stderr.count("\n") == 1 and path.name in stderr and "Traceback" not in stderr, stderr
    assert not out.exists()


@pytest.mark.parametrize("family,probe,edit,words", TENSOR_PROBES, ids=[f"{f}: {p}" for f, p, _, _ in TENSOR_PROBES])
def test_tensors_that_lie_are_refused(models, tmp_path, dmo, family, probe, edit, words):
    path = rewritten(models[family], tmp_path / "m.st", tensors=edit)
    assert_refused_everywhere(path, models["data"], dmo, words)


@pytest.mark.parametrize("probe,edit,words", METADATA_PROBES, ids=[p for p, _, _ in METADATA_PROBES])
def test_metadata_that_lies_is_refused(models, tmp_path, dmo, probe, edit, words):
    path = with_metadata(models["linear"], tmp_path / "m.st", edit)
    assert_refused_everywhere(path, models["data"], dmo, words)


def test_metadata_nested_too_deeply_is_refused(models, tmp_path, dmo):
    path = rewritten(models["linear"], tmp_path / "m.st", meta_text=deep_json())
    assert_refused_everywhere(path, models["data"], dmo, "nested too deeply")


def test_a_fifo_is_not_called_missing(models, tmp_path, dmo):
    fifo = tmp_path / "m.st"
    os.mkfifo(fifo)
    code, _, stderr = dmo("predict", fifo, models["data"], "-o", tmp_path / "p.csv")  # must not block on the open
    assert code == 2 and "not a regular file" in stderr, stderr


def test_every_untouched_family_still_loads_and_scores_finite(models, tmp_path):
    from dmocli import predict

    for family in ("linear", "mlp", "gbdt"):
        out = tmp_path / f"{family}.parquet"
        predict(models[family], models["data"], out)
        import pyarrow.parquet as pq

        assert np.isfinite(pq.read_table(out).column("logit").to_numpy()).all()


def test_a_file_replaced_right_after_it_is_read_gives_the_model_that_was_read(models, tmp_path, monkeypatch):
    """The deterministic swap: the file is replaced by another model between the read and everything after it
    (where the old loader opened the path a second time for the weights). The loaded model is wholly the first."""
    live = tmp_path / "live.st"
    shutil.copyfile(models["linear"], live)
    expected = load_model(models["linear"])
    real_read = modelfile.read_model_file

    def read_then_swap(path: Any) -> Any:
        stored = real_read(path)
        shutil.copyfile(models["other"], tmp_path / "swap.tmp")
        os.replace(tmp_path / "swap.tmp", live)
        return stored

    monkeypatch.setattr(modelfile, "read_model_file", read_then_swap)
    loaded = load_model(live)
    assert loaded.threshold == expected.threshold
    assert loaded.info == expected.info
    for name, value in expected.module().state_dict().items():
        assert np.array_equal(loaded.module().state_dict()[name].numpy(), value.numpy()), name
    assert load_file(str(live)).keys() == load_file(str(models["other"])).keys()  # the swap did happen


def test_predictions_while_the_file_is_swapped_in_a_tight_loop_are_one_model_or_the_other(models, tmp_path):
    """100 predict runs against a file replaced in a loop by one model, then the other (rename, as a deploy does):
    every output is one of the two models' own outputs."""
    from dmocli import predict

    digests = {}
    for name in ("linear", "other"):
        predict(models[name], models["data"], tmp_path / f"{name}.csv")
        digests[hashlib.md5((tmp_path / f"{name}.csv").read_bytes()).hexdigest()] = name
    assert len(digests) == 2
    live, stop = tmp_path / "live.st", threading.Event()
    shutil.copyfile(models["linear"], live)

    def swap() -> None:
        while not stop.is_set():
            for name in ("other", "linear"):
                shutil.copyfile(models[name], tmp_path / ".swap")
                os.replace(tmp_path / ".swap", live)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    seen: dict[str, int] = {}
    try:
        for run in range(100):
            out = tmp_path / f"p{run}.csv"
            predict(live, models["data"], out)
            name = digests.get(hashlib.md5(out.read_bytes()).hexdigest(), "mixed")
            seen[name] = seen.get(name, 0) + 1
    finally:
        stop.set()
        swapper.join()
    assert set(seen) <= {"linear", "other"}, seen
    assert sum(seen.values()) == 100
