"""`dmo train` under torchrun (2 CPU processes, gloo): the same model as one process, one output, one message.

Every launch is a real `torchrun --standalone --nproc-per-node 2 --no-python dmo train ...` subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import dmo_command, make_binary_frame, make_gaussian_classes, run_dmo
from safetensors.numpy import load_file

from dmocli import load_model
from dmocli.data import reading

# ERO's outer and inner steps cut to what the tests' assertions need (the processes agree, the result is feasible):
# each step is a gloo all-reduce, and the defaults' 5 x 100 are a run's worth, not a test's.
SHORT_ERO = ["--param", "outer=2", "--param", "inner-steps=40"]


def torchrun_dmo(*args: str | os.PathLike, processes: int = 2, timeout: float = 300) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
        "--no-python",
        *dmo_command(),
        *map(str, args),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env={**env, "PYTHONHASHSEED": "0"})


def uneven_parquet_dir(frame: pd.DataFrame, root: Path) -> Path:
    """Three files of different sizes and row-group sizes: the processes' row ranges cut through files and groups."""
    root.mkdir()
    cuts = [0, len(frame) * 3 // 10, len(frame) * 8 // 10, len(frame)]
    for i, (start, stop) in enumerate(zip(cuts, cuts[1:])):
        pq.write_table(
            pa.Table.from_pandas(frame.iloc[start:stop], preserve_index=False),
            root / f"part{i}.parquet",
            row_group_size=[70, 130, 110][i],
        )
    return root


def with_category(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(1, "shop", np.random.default_rng(seed).choice(["north", "south", "east"], len(frame)))
    return frame


def test_minibatches_never_end_on_a_single_row():
    import torch

    from dmocli.solvers.loop import minibatches

    for n, batch in ((65, 32), (64, 32), (33, 32), (97, 32), (10, 3)):
        sizes = [b.numel() for b in minibatches(n, batch, torch.Generator().manual_seed(0), torch.device("cpu"))]
        assert sum(sizes) == n and min(sizes) > 1
        assert sorted(
            torch.cat(list(minibatches(n, batch, torch.Generator().manual_seed(0), torch.device("cpu")))).tolist()
        ) == list(range(n))


def test_read_rows_is_a_slice_of_read_table(tmp_path):
    frame = with_category(make_binary_frame(n=500), 1)
    data = uneven_parquet_dir(frame, tmp_path / "data")
    whole = reading.read_table(data)
    for start, stop in ((0, 500), (0, 1), (149, 151), (140, 401), (499, 500), (250, 250)):
        assert reading.read_rows(data, start, stop).equals(whole.slice(start, stop - start))
        assert reading.read_rows(data, start, stop, batch_size=16).equals(whole.slice(start, stop - start))


def _weights_close(a: Path, b: Path, tol: float) -> None:
    """The same weights up to `tol`; the same training rows' fingerprint; held-out curves of the same rows (their
    distinct scores differ with the weights' float noise, so their counts are compared, not the scores)."""
    left, right = load_file(a), load_file(b)
    assert left.keys() == right.keys()
    for key in left:
        if key.startswith("heldout."):
            assert left[key].sum(dtype=np.int64) == right[key].sum(dtype=np.int64) or key == "heldout.scores", key
        elif key == "training_rows.sketch":
            assert np.array_equal(left[key], right[key])
        else:
            np.testing.assert_allclose(left[key], right[key], atol=tol, rtol=0)


@pytest.fixture(scope="module")
def linear_wce_runs(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The default linear model trained on the same rows by one process and by two (--val, --report): the folder,
    and the one- and two-process runs. Two tests read it; one launch serves both."""
    root = tmp_path_factory.mktemp("linear-wce")
    frame = with_category(make_binary_frame(n=1200, seed=3), 2)
    data = uneven_parquet_dir(frame, root / "data")
    val = root / "val.parquet"
    with_category(make_binary_frame(n=400, seed=4), 5).to_parquet(val)
    common = ["--problem", "frop", "--target", "0.7", "--val", val, "--json"]
    one = run_dmo("train", data, "-o", root / "one.safetensors", *common, check=True)
    two = torchrun_dmo("train", data, "-o", root / "two.safetensors", "--report", root / "two.json", *common)
    assert two.returncode == 0, two.stderr
    return root, one, two


def test_linear_wce_on_two_processes_is_the_one_process_model(linear_wce_runs):
    root, one, two = linear_wce_runs
    _weights_close(root / "one.safetensors", root / "two.safetensors", 1e-6)  # the same convex optimum
    single, dist = json.loads(one.stdout), json.loads(two.stdout)  # process 0 alone prints the report
    assert dist["distributed"] == {"world_size": 2, "backend": "gloo"}
    assert dist == json.loads((root / "two.json").read_text())
    assert dist["threshold"] == pytest.approx(single["threshold"], abs=1e-5)
    assert dist["splits"]["train"]["n"] == 1200  # the threshold search and report saw both processes' rows
    for split in ("train", "val"):
        assert dist["splits"][split]["tp"] == single["splits"][split]["tp"]
        assert dist["splits"][split]["fp"] == single["splits"][split]["fp"]
    assert sorted(p.name for p in root.iterdir()) == [
        "data",
        "one.safetensors",
        "two.json",
        "two.safetensors",
        "val.parquet",
    ]
    scored = run_dmo("evaluate", root / "two.safetensors", root / "val.parquet", "--json", check=True)
    assert json.loads(scored.stdout)["splits"]["data"]["tp"] == single["splits"]["val"]["tp"]


def test_torchrun_processes_keep_the_one_process_profile(linear_wce_runs):
    """Each process counts every process's rows in the pass that fits the preprocessing: the profile is the one
    process's, exactly, though each process trains on its own share of the rows."""
    root, _, _ = linear_wce_runs
    one, distributed = (load_model(root / f"{name}.safetensors").profile for name in ("one", "two"))
    assert distributed.numeric == one.numeric and distributed.categorical == one.categorical
    assert distributed.numeric["f0"].rows == 1200 and distributed.score.rows == one.score.rows == 400


def test_multiclass_linear_matches_and_the_mlp_is_reproducible(tmp_path):
    frame = make_gaussian_classes(900, seed=2, d=6)
    data = uneven_parquet_dir(frame, tmp_path / "multi")
    folds = ["--cv", "2"]  # cross-fitted as by default, in fewer folds
    one = run_dmo("train", data, "-o", tmp_path / "one.safetensors", "--json", *folds, check=True)
    two = torchrun_dmo("train", data, "-o", tmp_path / "two.safetensors", "--json", *folds)
    assert two.returncode == 0, two.stderr
    _weights_close(tmp_path / "one.safetensors", tmp_path / "two.safetensors", 1e-6)
    assert (
        json.loads(two.stdout)["splits"]["train"]["accuracy"] == json.loads(one.stdout)["splits"]["train"]["accuracy"]
    )

    binary = uneven_parquet_dir(make_binary_frame(n=800, seed=6), tmp_path / "binary")
    mlp = ["--model", "mlp", "--width", "16", "--problem", "ofbs", "--param", "max-epochs=10", "--seed", "3"]
    mlp += ["--cv", "3"]
    runs = [torchrun_dmo("train", binary, "-o", tmp_path / f"mlp{i}.safetensors", "--json", *mlp) for i in (1, 2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    assert (tmp_path / "mlp1.safetensors").read_bytes() == (tmp_path / "mlp2.safetensors").read_bytes()
    report = json.loads(runs[0].stdout)
    all_positive_f1 = 2 * 0.15 / 1.15
    folds = report["solver_trace"]["fold_traces"]  # the saved model is the 3 fold models (--cv-transfer ensemble)
    assert len(folds) == report["architecture"]["members"] == 3 and all(fold["epochs"] == 10 for fold in folds)
    assert report["splits"]["train"]["f1"] > 2 * all_positive_f1


def test_ero_on_two_processes_solves_the_one_process_problem(tmp_path):
    """Full batch, the union of the processes' batches is every row: the same penalty steps as one process (up
    to float summation order), so the same train objective and feasibility. Mini-batch and the MLP (BatchNorm,
    no --val: the iterate is judged on the sharded training rows) must agree across processes and finish."""
    frame = make_binary_frame(n=1500, seed=8, pos_frac=0.12)
    data = uneven_parquet_dir(frame, tmp_path / "data")
    val = tmp_path / "val.parquet"
    make_binary_frame(n=500, seed=9, pos_frac=0.12).to_parquet(val)
    common = ["--solver", "ero", "--problem", "frop", "--target", "0.75", "--val", val, *SHORT_ERO, "--json"]
    one = run_dmo("train", data, "-o", tmp_path / "one.safetensors", *common, check=True)
    two = torchrun_dmo("train", data, "-o", tmp_path / "two.safetensors", *common)
    assert two.returncode == 0, two.stderr
    single, dist = (json.loads(r.stdout)["solver_trace"] for r in (one, two))
    assert dist["mode"] == "full" and dist["batch_size"] == 750  # each process's whole share per step
    assert dist["train_before_ta"]["feasible"] and single["train_before_ta"]["feasible"]
    assert dist["train_before_ta"]["objective"] == pytest.approx(single["train_before_ta"]["objective"], abs=0.01)
    assert dist["train_before_ta"]["n_pos"] == single["train_before_ta"]["n_pos"]  # counted over both processes

    mlp = torchrun_dmo(
        "train",
        data,
        "-o",
        tmp_path / "mlp.safetensors",
        "--solver",
        "ero",
        "--problem",
        "frop",
        "--target",
        "0.75",
        "--model",
        "mlp",
        "--width",
        "16",
        "--param",
        "mode=minibatch",
        "--param",
        "batch-size=128",
        "--param",
        "warm-epochs=40",
        "--param",
        "outer=2",
        "--cv",
        "0",  # the iterate judged on the sharded training rows; cross-fitted ERO is tested below
        "--json",
    )
    assert mlp.returncode == 0, mlp.stderr
    trace = json.loads(mlp.stdout)["solver_trace"]
    assert trace["monitored_split"] == "train" and trace["mode"] == "minibatch"
    assert trace["train_before_ta"]["feasible"]


def test_the_smoothed_baselines_on_two_processes_take_the_one_process_steps(tmp_path):
    frame = make_binary_frame(n=1200, seed=11, pos_frac=0.15)
    data = uneven_parquet_dir(frame, tmp_path / "data")
    common = ["--solver", "lagrangian", "--problem", "frop", "--target", "0.75", "--param", "steps=100", "--json"]
    common += ["--cv-transfer", "apply"]  # the steps of the fit on all rows, after the folds
    one = run_dmo("train", data, "-o", tmp_path / "one.safetensors", *common, check=True)
    two = torchrun_dmo("train", data, "-o", tmp_path / "two.safetensors", *common)
    assert two.returncode == 0, two.stderr
    single, dist = (json.loads(r.stdout) for r in (one, two))
    assert (
        dist["solver_trace"]["batch_size"] == 600 and dist["solver_trace"]["steps"] == single["solver_trace"]["steps"]
    )
    assert dist["solver_trace"]["final_multiplier"] == pytest.approx(
        single["solver_trace"]["final_multiplier"], rel=1e-3
    )
    _weights_close(tmp_path / "one.safetensors", tmp_path / "two.safetensors", 1e-3)


def _cv_matches(dist: dict, single: dict) -> None:
    """The same out-of-fold operating point, counts and per-fold points as one process (thresholds up to the
    L-BFGS optimum's float noise)."""
    assert dist["operating_point"]["split"] == single["operating_point"]["split"] == "cv"
    assert dist["threshold"] == pytest.approx(single["threshold"], abs=1e-5)
    for split in ("cv", "train"):
        for key in ("n", "n_pos", "tp", "fp"):
            assert dist["splits"][split][key] == single["splits"][split][key], (split, key)
    assert dist["cv"]["folds"] == single["cv"]["folds"]
    assert dist["cv"]["threshold_spread"] == pytest.approx(single["cv"]["threshold_spread"], abs=1e-5)
    for ours, theirs in zip(dist["cv"]["per_fold"], single["cv"]["per_fold"], strict=True):
        assert {k: ours[k] for k in ("fold", "n", "n_pos", "precision", "recall", "feasible")} == {
            k: theirs[k] for k in ("fold", "n", "n_pos", "precision", "recall", "feasible")
        }
        assert ours["threshold"] == pytest.approx(theirs["threshold"], abs=1e-5)


def test_cross_fitting_on_two_processes_is_the_one_process_cross_fitting(tmp_path):
    """The folds are dealt from every process's labels as one process deals them, so with the linear model (each
    fold's fit the same L-BFGS optimum) two processes give one process's out-of-fold threshold, counts and cv
    section. Without --val the default --cv 5 applies under torchrun too; with --val and --cv its rows are
    shared between the processes and pooled into the folds, as one process pools them."""
    from jsonschema import Draft202012Validator

    import dmocli

    frame = with_category(make_binary_frame(n=900, seed=21, pos_frac=0.12), 3)
    data = uneven_parquet_dir(frame, tmp_path / "data")
    val = tmp_path / "val.parquet"
    with_category(make_binary_frame(n=301, seed=22, pos_frac=0.12), 4).to_parquet(val)
    for name, extra in (("default", []), ("pooled", ["--cv", "3", "--val", val])):
        common = ["--problem", "fpor", "--target", "0.7", "--json", *extra]
        one = run_dmo("train", data, "-o", tmp_path / f"{name}1.safetensors", *common, check=True)
        two = torchrun_dmo("train", data, "-o", tmp_path / f"{name}2.safetensors", *common)
        assert two.returncode == 0, two.stderr
        single, dist = json.loads(one.stdout), json.loads(two.stdout)
        Draft202012Validator(dmocli.report_schema()).validate(dist)
        _cv_matches(dist, single)
        _weights_close(tmp_path / f"{name}1.safetensors", tmp_path / f"{name}2.safetensors", 1e-6)
        assert dist["splits"]["cv"]["n"] == (900 if name == "default" else 1201)  # --val's rows counted once
        assert dist["cv"]["folds"] == (5 if name == "default" else 3) and dist["cv"]["pooled_val"] == bool(extra)


def test_cross_fitted_mlp_and_ero_on_two_processes_finish_and_repeat(tmp_path):
    """Each fold's fit is the distributed one (DDP with join for the uneven shares; ERO's per-row s on each
    process; class weights and counts over both processes): the same seed gives the same model and the same cv
    section. DATA sorted by label leaves process 1 no positive row in any fold: its fits must neither fail nor
    wait forever."""
    frame = make_binary_frame(n=700, seed=23, pos_frac=0.15).sort_values("label", ascending=False, kind="stable")
    data = uneven_parquet_dir(frame.reset_index(drop=True), tmp_path / "data")
    mlp = ["--model", "mlp", "--width", "8", "--problem", "ofbs", "--cv", "3", "--param", "max-epochs=4", "--json"]
    runs = [torchrun_dmo("train", data, "-o", tmp_path / f"mlp{i}.safetensors", *mlp) for i in (1, 2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    assert (tmp_path / "mlp1.safetensors").read_bytes() == (tmp_path / "mlp2.safetensors").read_bytes()
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["cv"]["per_fold"] == second["cv"]["per_fold"] and first["threshold"] == second["threshold"]
    assert sum(fold["n"] for fold in first["cv"]["per_fold"]) == 700

    ero = ["--solver", "ero", "--problem", "frop", "--target", "0.75", "--cv", "3", *SHORT_ERO, "--json"]
    run = torchrun_dmo("train", data, "-o", tmp_path / "ero.safetensors", *ero)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["operating_point"]["split"] == "cv" and report["splits"]["cv"]["n"] == 700
    assert report["splits"]["cv"]["recall"] >= 0.75


@pytest.mark.parametrize("case", ["solver", "csv", "val-frac", "cv"])
def test_what_cannot_train_distributed_is_one_line_from_process_zero(tmp_path, case):
    frame = make_binary_frame(n=200)
    data = tmp_path / "data.parquet"
    frame.to_parquet(data)
    args = {
        "solver": [data, "--solver", "fofo"],
        "val-frac": [data, "--val-frac", "0.2"],
        "cv": [data, "--cv", "150"],
    }.get(case)
    if args is None:
        frame.to_csv(tmp_path / "data.csv", index=False)
        args = [tmp_path / "data.csv"]
    proc = torchrun_dmo("train", *args, "-o", tmp_path / "m.safetensors", "--problem", "ofbs")
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("dmo: error:")]
    expected = {
        "solver": "under torchrun only these train on several: ero, lagrangian, sigmoid-f1, wce",
        "csv": "convert DATA to parquet",
        "val-frac": "give --val FILE",
        "cv": "--cv 150 needs at least 150 rows of every class; class 1 has",  # counted over both processes
    }[case]
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr.split("dmo: error:")[0]  # torchrun's own report comes after ours
    assert not (tmp_path / "m.safetensors").exists()


def test_unlabeled_rows_at_the_end_still_leave_every_process_labeled_rows(tmp_path):
    """--drop-unlabeled with the last half of DATA unlabeled: the processes share the labeled rows, so the
    MLP (BatchNorm) trains on both; a usage error is one line, from process 0 only."""
    frame = make_binary_frame(n=600, seed=12)
    frame["label"] = frame["label"].astype("float64")
    frame.loc[300:, "label"] = np.nan
    data = tmp_path / "half.parquet"
    frame.to_parquet(data, row_group_size=64)
    proc = torchrun_dmo(
        "train",
        data,
        "-o",
        tmp_path / "m.safetensors",
        "--drop-unlabeled",
        "--model",
        "mlp",
        "--width",
        "8",
        "--param",
        "max-epochs=3",
        "--problem",
        "ofbs",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["splits"]["train"]["n"] == 300

    usage = torchrun_dmo("train", data, "--seed", "abc")
    lines = [line for line in usage.stderr.splitlines() if line.startswith("dmo: error:")]
    assert len(lines) == 1 and "seed" in lines[0], usage.stderr


def test_train_help_is_printed_by_process_zero_only():
    pages = {}
    for rank in ("0", "1"):
        env = {**os.environ, "RANK": rank, "WORLD_SIZE": "2", "LOCAL_RANK": rank}
        proc = subprocess.run([*dmo_command(), "train", "--help"], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        pages[rank] = proc.stdout
    assert "torchrun" in pages["0"] and pages["1"] == ""


def test_other_commands_ignore_torchruns_variables(tmp_path, binary_parquet):
    """A user's own distributed job that calls `dmo evaluate`: its errors are printed, at once."""
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
    proc = subprocess.run(
        [*dmo_command(), "evaluate", str(tmp_path / "missing.safetensors"), str(binary_parquet)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and "missing.safetensors" in proc.stderr


def _agree_worker(rank: int, world: int, store: str, results: str) -> None:
    import torch.distributed as dist

    from dmocli.engines.torch_distributed import ProcessGroup
    from dmocli.errors import DmoError

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    import torch

    group = ProcessGroup(rank=rank, world_size=world, backend="gloo", device=torch.device("cpu"))
    out = {"ok": group.agree(lambda: rank * 10)}

    def fails_on_one() -> int:
        if rank == 1:
            raise DmoError("column x of part7.parquet cannot be read")
        return rank

    try:
        group.agree(fails_on_one)
    except DmoError as exc:
        out["error"] = str(exc)

    def fails_everywhere() -> None:
        raise DmoError("DATA has no rows")

    try:
        group.agree(fails_everywhere)
    except DmoError as exc:
        out["everywhere"] = str(exc)
    rows = group.gather_rows(torch.arange(rank + 2, dtype=torch.float32))
    out["rows"] = rows.tolist()
    out["sum"] = group.sum_int(rank + 1)
    from dmocli.solvers.loop import lbfgs_dtype

    share = torch.zeros(1, 1).expand(2**24, 1)  # 2^24 values here (float64 alone), 3 x 2^24 in all: float32
    out["dtypes"] = [str(lbfgs_dtype(share)), str(lbfgs_dtype(share, group))]
    Path(results, f"{rank}.json").write_text(json.dumps(out))
    group.close()


def test_a_failure_on_one_process_stops_every_process_with_its_message(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_agree_worker, args=(3, str(tmp_path / "store"), str(tmp_path)), nprocs=3, join=True)
    outcomes = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(3)]
    for rank, out in enumerate(outcomes):
        assert out["ok"] == rank * 10
        assert out["error"] == "column x of part7.parquet cannot be read (process 1 of 3)"
        assert out["everywhere"] == "DATA has no rows"  # the same on every process: no process to name
        assert out["rows"] == [0, 1, 0, 1, 2, 0, 1, 2, 3]
        assert out["sum"] == 6
        assert out["dtypes"] == ["torch.float64", "torch.float32"]  # every process sums in one dtype


def _placement_worker(rank: int, world: int, store: str, results: str) -> None:
    """One process's share of 40 DATA rows and of 5 pooled --val rows (1, 2, 2), as in_memory makes them."""
    import torch
    import torch.distributed as dist

    from dmocli.engines.torch_distributed import ProcessGroup
    from dmocli.pipelines.shared_folds import Placement, val_share
    from dmocli.prep.dataset import Prepared, stratified_folds

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    group = ProcessGroup(rank=rank, world_size=world, backend="gloo", device=torch.device("cpu"))
    start, stop = group.row_range(np.ones(40, dtype=bool))
    val = val_share(Prepared(np.zeros((5, 1), np.float32), np.arange(100, 105)), group)
    own = np.concatenate([np.arange(start, stop), val.y])  # each row's value: its one-process index (val: 100+)
    placement = Placement.of(own.size, 5, group)
    y = np.arange(45) % 3 % 2
    folds = stratified_folds(y, 4, seed=7)
    out = {
        "gathered": placement.gathered(own).tolist(),
        "folds": placement.own_folds(folds, 4).tolist(),
        "expected": folds[np.concatenate([np.arange(start, stop), 40 + val.y - 100])].tolist(),
    }
    Path(results, f"{rank}.json").write_text(json.dumps(out))
    group.close()


def test_the_processes_rows_take_one_process_order_and_folds(tmp_path):
    """DATA's rows in rank order, then --val's shares: gathered values come back in one process's order, and
    each process's folds are its rows' folds in one process's dealing."""
    import torch.multiprocessing as mp

    mp.spawn(_placement_worker, args=(3, str(tmp_path / "store"), str(tmp_path)), nprocs=3, join=True)
    outcomes = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(3)]
    for out in outcomes:
        assert out["gathered"] == [*range(40), *range(100, 105)]
        assert out["folds"] == out["expected"]
    assert sum(len(out["folds"]) for out in outcomes) == 45


def test_a_fold_that_leaves_a_process_too_few_training_rows_is_refused_alike_everywhere():
    from types import SimpleNamespace

    from dmocli.errors import DmoError
    from dmocli.pipelines.shared_folds import Placement

    folds = np.array([0, 1, 1, 0, 1, 2, 2, 0])  # process 0 holds rows 0 and 1, one of them in fold 0
    for rank in (0, 1):
        placement = Placement(SimpleNamespace(rank=rank, world_size=2), np.arange(8), [2, 6])
        with pytest.raises(DmoError, match="--cv 3: without fold 0, process 0 of 2 keeps 1 of its 2 rows to train on"):
            placement.own_folds(folds, 3)
    shared = Placement(SimpleNamespace(rank=1, world_size=2), None, [4, 4])  # no --val pooled: rank order
    assert shared.own_folds(folds, 3).tolist() == [1, 2, 2, 0]
