"""The CUDA paths, run where a CUDA device is present (skipped with the reason shown elsewhere: CI has none).

The rest of the suite pins `--device cpu` wherever it compares against exact
numbers. These tests train and extract on `--device cuda` and check the
results against the CPU runs or an independent criterion: tensors, models
and the per-row ERO state moved to the device, autocast in extraction, and
model files written from GPU training that `evaluate` (always on CPU)
loads and reproduces.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from conftest import make_binary_frame, make_gaussian_classes, run_dmo

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run it on a GPU machine)")


def _train(tmp_path: Path, frame: pd.DataFrame, *args: str, val: pd.DataFrame | None = None) -> tuple[Path, dict]:
    data, model, report = tmp_path / "train.parquet", tmp_path / "m.safetensors", tmp_path / "r.json"
    frame.to_parquet(data)
    extra: list[str | Path] = []
    if val is not None:
        val.to_parquet(tmp_path / "val.parquet")
        extra = ["--val", tmp_path / "val.parquet"]
    run_dmo("train", data, *extra, *args, "-o", model, "--report", report, check=True)
    return model, json.loads(report.read_text())


def _evaluate_on_cpu(model: Path, frame: pd.DataFrame, tmp_path: Path) -> dict:
    frame.to_parquet(tmp_path / "eval.parquet")
    return json.loads(run_dmo("evaluate", model, tmp_path / "eval.parquet", "--json", check=True).stdout)


@pytest.mark.parametrize("mode", ["minibatch", "full"])
def test_ero_on_cuda_meets_its_target_and_its_model_file_reproduces_on_cpu(tmp_path, mode):
    frame = make_binary_frame(n=1200, d=4, pos_frac=0.2, seed=2, sep=2.5)
    val = make_binary_frame(n=400, d=4, pos_frac=0.2, seed=3, sep=2.5)
    model, report = _train(
        tmp_path,
        frame,
        "--solver",
        "ero",
        "--problem",
        "frop",
        "--target",
        "0.8",
        "--model",
        "mlp",
        "--width",
        "16",
        "--depth",
        "2",
        "--device",
        "cuda",
        "--param",
        f"mode={mode}",
        "--param",
        "batch-size=256",
        "--param",
        "outer=3",
        "--allow-infeasible",
        val=val,
    )
    assert report["device"].startswith("cuda") and report["solver_trace"]["mode"] == mode
    assert report["before_adjustment"]["train"]["recall"] >= 0.8
    trained = report["splits"]["val"]
    evaluated = _evaluate_on_cpu(model, val, tmp_path)["splits"]["data"]
    assert abs(evaluated["tp"] - trained["tp"]) <= 1 and abs(evaluated["fp"] - trained["fp"]) <= 1


def test_wce_multiclass_on_cuda_matches_the_cpu_accuracy(tmp_path):
    frame = make_gaussian_classes(3000, seed=0, d=6, sep=1.0)
    accuracy = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        out.mkdir()
        model, report = _train(out, frame, "--solver", "wce", "--model", "mlp", "--width", "16", "--device", device)
        assert report["device"].startswith(device)
        accuracy[device] = _evaluate_on_cpu(model, frame, out)["splits"]["data"]["accuracy"]
    assert accuracy["cuda"] == pytest.approx(accuracy["cpu"], abs=0.03)


def test_lus_one_command_on_cuda(tmp_path):
    frame = make_gaussian_classes(20_000, seed=1, d=5)
    model, report = _train(tmp_path, frame, "--solver", "lus", "--gamma", "4", "--device", "cuda")
    traces = report["solver_trace"].get("fold_traces", [report["solver_trace"]])  # one per cross-fitting fold
    assert report["device"].startswith("cuda") and all(trace["kept_rows"] < len(frame) / 4 for trace in traces)
    assert _evaluate_on_cpu(model, frame, tmp_path)["splits"]["data"]["accuracy"] > 0.8


def test_adsh_on_cuda_matches_the_cpu_accuracy(tmp_path):
    from test_adsh_cli import FAST, partly_labeled

    frame, truth = partly_labeled()
    every_row = frame.assign(label=truth)
    accuracy = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        out.mkdir()
        model, report = _train(
            out, frame, "--solver", "adsh", "--model", "mlp", "--width", "16", "--device", device, *FAST
        )
        assert report["device"].startswith(device) and len(report["solver_trace"]["thresholds"]) == 4
        accuracy[device] = _evaluate_on_cpu(model, every_row, out)["splits"]["data"]["accuracy"]
    assert accuracy["cuda"] == pytest.approx(accuracy["cpu"], abs=0.05)
    assert accuracy["cuda"] > 0.5  # three classes


def test_adam_is_fused_on_cuda_only():
    from dmocli.solvers.loop import adam

    layer = torch.nn.Linear(3, 1)
    assert not adam(layer.parameters(), lr=1e-3).defaults["fused"]
    assert adam(layer.cuda().parameters(), lr=1e-3).defaults["fused"] is True


# ---- extract: CUDA against the CPU float32 run ---------------------------------------------------
@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from test_extract import build_env

    return build_env(tmp_path_factory.mktemp("cuda-extract"))


def _features(path: Path) -> np.ndarray:
    col = pq.read_table(path).column("features").combine_chunks()
    return col.values.to_numpy().reshape(len(col), -1)


@pytest.mark.parametrize("kind", ["imgs", "texts"])
def test_extract_on_cuda_matches_cpu_in_fp32_and_stays_close_in_bf16(models, kind):
    model = models["dino" if kind == "imgs" else "bert"]
    runs = {}
    for device, dtype in (("cpu", "fp32"), ("cuda", "fp32"), ("cuda", "auto"), ("cuda", "bf16")):
        out = models["root"] / f"{kind}-{device}-{dtype}.parquet"
        report = json.loads(
            run_dmo(
                "extract",
                models[kind],
                "-o",
                out,
                "--model",
                model,
                "--device",
                device,
                "--dtype",
                dtype,
                "--json",
                check=True,
            ).stdout
        )
        assert report["device"].startswith(device)
        runs[(device, dtype)] = (report, _features(out))
    cpu = runs[("cpu", "fp32")][1]
    np.testing.assert_allclose(runs[("cuda", "fp32")][1], cpu, rtol=1e-3, atol=1e-3)
    # auto is bf16 for images only (text in bf16 ran slower than fp32 on an H100: docs/gpu.md)
    auto_bf16 = kind == "imgs" and torch.cuda.is_bf16_supported()
    assert runs[("cuda", "auto")][0]["dtype"] == ("bfloat16" if auto_bf16 else "float32")
    report, half = runs[("cuda", "bf16")]
    assert report["dtype"] == "bfloat16"
    cosine = (half * cpu).sum(1) / (np.linalg.norm(half, axis=1) * np.linalg.norm(cpu, axis=1))
    assert cosine.min() > 0.99


def _xgboost_has_cuda() -> bool:
    try:
        import xgboost

        return bool(xgboost.build_info().get("USE_CUDA"))
    except ImportError:
        return False


@pytest.mark.skipif(not _xgboost_has_cuda(), reason="needs XGBoost built with CUDA: pip install 'dmocli[gbdt-gpu]'")
@pytest.mark.parametrize("solver", ["wce", "ero"])
def test_gbdt_on_cuda_trains_on_the_gpu_and_matches_the_cpu_quality(tmp_path, solver):
    """XGBoost's CUDA histogram trees behind `--device cuda`; the model file scores on CPU (evaluate) as well
    as the CPU-trained trees do."""
    frame, test = make_binary_frame(3000, d=6, seed=4), make_binary_frame(2000, d=6, seed=5)
    args = ("--model", "gbdt", "--solver", solver, "--problem", "fpor", "--target", "0.7", "--cv", "0")
    scores = {}
    for device in ("cuda", "cpu"):
        folder = tmp_path / device
        folder.mkdir()
        model, report = _train(folder, frame, *args, "--device", device, val=make_binary_frame(1000, d=6, seed=6))
        trace = report["solver_trace"].get("warm_start", report["solver_trace"])
        assert trace["device"] == device
        scores[device] = _evaluate_on_cpu(model, test, folder)["splits"]["data"]["average_precision"]
    assert scores["cuda"] == pytest.approx(scores["cpu"], abs=0.02)
