"""Benchmark ERO against WCE+TA, SigmoidF1 (OFBS) and the TFCO-style Lagrangian on the binary sets.

For every (set, problem, model, seed, solver) it trains with `dmocli.train`
(validation split = the set's val.parquet, used by the solvers for iterate
selection), then scores the model on train and test twice: at the solver's
own decision (logit 0, "before TA") and after exact threshold adjustment on
the training split ("TA", the paper's protocol). `--authors` adds ERO runs
with the published protocol (`--param protocol=authors`) for the speed
comparison, `--ero-protocols fast,thorough` runs ERO once per preset, and
`--step-timing SET` prints what one full-batch step of the model costs. Results are written after every run, \
so a cut-short run keeps
what it measured.

    python bench/ero.py --data-dir /work/shared/data --models linear --seeds 0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dmocli import TrainOptions, train  # noqa: E402
from dmocli.errors import DmoError  # noqa: E402
from dmocli.models.modelfile import DmoModel  # noqa: E402
from dmocli.operating_point.search import search  # noqa: E402
from dmocli.report import binary_split_report  # noqa: E402
from dmocli.solvers.ero.solver import ERO  # noqa: E402

SETS = ("page_blocks0", "segment0", "abalone19", "yeast4", "satimage", "ada")
PROBLEMS = {"fpor": 0.8, "frop": 0.8, "ofbs": None}
SOLVERS = ("ero", "wce", "sigmoid-f1", "lagrangian")


def score(model: DmoModel, data_dir: Path) -> dict:
    """Metrics on train and test at the solver's own threshold (0) and at the train-TA threshold."""
    logits, labels = {}, {}
    for split in ("train", "test"):
        table = pq.read_table(data_dir / f"{split}.parquet")
        logits[split], _ = model.logits(table)
        labels[split] = model.labels.encode(table.column(model.labels.column))
    problem = model.problem
    ta = search(logits["train"], labels["train"], problem).threshold
    out = {}
    for name, threshold in (("own", 0.0), ("ta", ta)):
        for split in ("train", "test"):
            r = binary_split_report(logits[split], labels[split], threshold=threshold, problem=problem)
            out[f"{name}_{split}"] = {
                "objective": r[problem.objective_name],
                "constraint": r[problem.constraint_name] if problem.constraint_name else None,
                "feasible": r["feasible"],
                "precision": r["precision"],
                "recall": r["recall"],
            }
    return out


def run_one(
    data_root: Path, dataset: str, problem: str, model: str, seed: int, solver: str, args, params: dict
) -> dict:
    data_dir = data_root / dataset
    opts = TrainOptions(
        problem=problem,
        target=PROBLEMS[problem],
        solver=solver,
        model=model,
        width=args.width,
        depth=args.depth,
        val=data_dir / "val.parquet",
        device=args.device,
        seed=seed,
        params=params,
        allow_infeasible=True,
    )
    out_path = args.out.parent / f"{args.out.stem}_model.safetensors"
    started = time.perf_counter()
    fitted, report = train(data_dir / "train.parquet", opts, output=out_path)
    wall = time.perf_counter() - started
    trace = report.get("solver_trace", {})
    return {
        "set": dataset,
        "problem": problem,
        "model": model,
        "seed": seed,
        "solver": solver,
        "protocol": params.get("protocol", "fast" if solver == "ero" else None),
        "fit_seconds": report["fit_seconds"],
        "wall_seconds": wall,
        "warm_start_steps": trace.get("warm_start_steps"),
        "warm_start_seconds": trace.get("warm_start_seconds"),
        "outer_iterations": trace.get("outer_iterations"),
        "selected_outer": trace.get("selected_outer"),
        "inner_steps_total": trace.get("inner_steps_total"),
        "mode": trace.get("mode"),
        **score(fitted, data_dir),
    }


def fmt(cell: dict) -> str:
    if cell["constraint"] is None:
        return f"{cell['objective']:.3f}"
    return f"{cell['objective']:.3f}/{cell['constraint']:.3f}{'' if cell['feasible'] else '*'}"


def _rank(cell: dict) -> tuple[float, float]:
    """The problem's own order: feasible before infeasible; then the objective, or (infeasible) the constraint."""
    if cell["constraint"] is None:
        return (1.0, round(cell["objective"], 12))
    if cell["feasible"]:
        return (1.0, round(cell["objective"], 12))
    return (0.0, round(cell["constraint"], 12))


def label(row: dict) -> str:
    """Solver name, with the ERO preset unless it is the default: ero, ero(thorough), ero(authors)."""
    return row["solver"] + (f"({row['protocol']})" if row["solver"] == "ero" and row["protocol"] != "fast" else "")


def summarize(rows: list[dict]) -> dict:
    """The benchmark's targets (docs/ero.md), counted over the runs that were made (for every ERO preset but
    authors)."""
    fast = [r for r in rows if r["protocol"] != "authors"]
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in fast:
        by_key.setdefault((r["set"], r["problem"], r["model"], r["seed"]), {})[label(r)] = r
    feas_ok = feas_total = 0
    wins: dict[str, list[int]] = {}
    for (dataset, problem, model, seed), runs in by_key.items():
        wce = runs.get("wce")
        for name, ero in runs.items():
            if not name.startswith("ero"):
                continue
            if problem != "ofbs" and any(r["ta_train"]["feasible"] for r in runs.values()):
                feas_total += 1
                feas_ok += bool(ero["own_train"]["feasible"])
            if wce is not None:
                w = wins.setdefault(f"{name}/{problem}/{model}", [0, 0, 0])
                w[0] += int(_rank(ero["own_train"]) >= _rank(wce["ta_train"]))
                w[1] += int(_rank(ero["own_test"]) >= _rank(wce["ta_test"]))
                w[2] += 1
    speed = []
    for r in rows:
        if r["protocol"] == "authors":
            for f in fast:
                if f["solver"] == "ero" and all(f[k] == r[k] for k in ("set", "problem", "model", "seed")):
                    speed.append(
                        {
                            "set": r["set"],
                            "problem": r["problem"],
                            "model": r["model"],
                            "seed": r["seed"],
                            "preset": f["protocol"],
                            "authors_seconds": r["fit_seconds"],
                            "preset_seconds": f["fit_seconds"],
                            "speedup": r["fit_seconds"] / max(f["fit_seconds"], 1e-9),
                            "authors_train_objective": r["own_train"]["objective"],
                            "authors_train_feasible": r["own_train"]["feasible"],
                            "preset_train_objective": f["own_train"]["objective"],
                            "preset_train_feasible": f["own_train"]["feasible"],
                            "equal_or_better_on_train": _rank(f["own_train"]) >= _rank(r["own_train"]),
                        }
                    )
    return {
        "ero_feasible_before_ta_where_any_feasible_after_ta": [feas_ok, feas_total],
        "ero_before_ta_ge_wce_ta[train, test, of]": wins,
        "authors_vs_presets": speed,
    }


def markdown(rows: list[dict]) -> str:
    """One row per (set, problem, model, seed): each solver's train/test objective/constraint (* = infeasible)
    and fit seconds.

    ERO at its own decision (before TA), the baselines after TA on train (the paper's protocol).
    """
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        by_key.setdefault((r["model"], r["problem"], r["set"], r["seed"]), {})[label(r)] = r
    names = [
        n
        for n in ("ero", "ero(thorough)", "ero(authors)", "wce", "lagrangian", "sigmoid-f1")
        if any(n in runs for runs in by_key.values())
    ]
    lines = [
        "| model | problem | set | seed | " + " | ".join(f"{n} train | {n} test | {n} s" for n in names) + " |",
        "|---" * (4 + 3 * len(names)) + "|",
    ]
    for (model, problem, dataset, seed), runs in sorted(by_key.items()):
        cells = []
        for n in names:
            r = runs.get(n)
            side = "own" if n.startswith("ero") else "ta"
            cells += [fmt(r[f"{side}_train"]), fmt(r[f"{side}_test"]), f"{r['fit_seconds']:.0f}"] if r else ["", "", ""]
        lines.append(f"| {model} | {problem} | {dataset} | {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed_markdown(rows: list[dict]) -> str:
    """Every ERO run on a (set, problem, model, seed) that also has an authors' run: seconds, steps, own-decision
    train objective."""
    keys = {(r["set"], r["problem"], r["model"], r["seed"]) for r in rows if r["protocol"] == "authors"}
    lines = [
        "| set | problem | model | seed | ERO preset | fit s | warm-start steps (s) | penalty steps | outer | "
        "train objective/constraint (own decision) | test |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["solver"] == "ero" and (r["set"], r["problem"], r["model"], r["seed"]) in keys:
            lines.append(
                f"| {r['set']} | {r['problem']} | {r['model']} | {r['seed']} | {r['protocol']} | "
                f"{r['fit_seconds']:.1f} | {r.get('warm_start_steps')} ({r.get('warm_start_seconds') or 0:.1f}) | "
                f"{r['inner_steps_total']} | {r['outer_iterations']} | {fmt(r['own_train'])} | {fmt(r['own_test'])} |"
            )
    return "\n".join(lines)


def step_timing(data_dir: Path, args, repeats: int = 50) -> list[dict]:
    """Milliseconds per full-batch forward, BCE Adam step and ERO penalty step of the model on one set's train split.

    The steps ERO's loops take, without the loops: what a leaner loop could at best save.
    """
    import numpy as np
    import torch.nn.functional as F

    from dmocli.models.networks import Architecture, build_network
    from dmocli.operating_point.problems import Problem
    from dmocli.solvers.ero.penalty import RowAdam, penalty_value
    from dmocli.solvers.relaxation import soft_counts

    table = pq.read_table(data_dir / "train.parquet").to_pandas()
    y = torch.as_tensor(table.pop("label").to_numpy() == 1)
    raw = table.to_numpy(np.float32)
    X = torch.as_tensor((raw - raw.mean(0)) / (raw.std(0) + 1e-6))
    n, n_pos = X.shape[0], int(y.sum())
    torch.manual_seed(0)
    network = build_network(Architecture(args.step_model, X.shape[1], 1, args.width, args.depth))
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-4)
    s, s_adam, problem = torch.rand(n), RowAdam(n, torch.device("cpu")), Problem("frop", 0.8)
    row_penalty, row_reg = torch.full((n,), 100.0) * torch.where(y, (n - n_pos) / n, n_pos / n), torch.ones(n)

    def forward() -> None:
        with torch.no_grad():
            network(X)

    def bce_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.binary_cross_entropy_with_logits(network(X).squeeze(-1), y.float()).backward()
        optimizer.step()

    def ero_step() -> None:
        s_rows = s.detach().requires_grad_(True)
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            totals = soft_counts(s, y)
        loss, _ = penalty_value(
            network(X).squeeze(-1),
            s_rows,
            positive_rows=y,
            totals=totals,
            scale=1.0,
            problem=problem,
            n_pos=n_pos,
            row_penalty=row_penalty,
            row_reg=row_reg,
            mu0=100.0,
        )
        loss.backward()
        optimizer.step()
        s_adam.step(s, slice(None), s_rows.grad, 0.1)

    out = []
    for name, fn in (
        ("forward (eval pass)", forward),
        ("BCE step: forward, backward, Adam", bce_step),
        ("ERO penalty step: + s, penalty terms, RowAdam", ero_step),
    ):
        for _ in range(5):
            fn()
        started = time.perf_counter()
        for _ in range(repeats):
            fn()
        out.append({"what": name, "rows": n, "ms_per_step": (time.perf_counter() - started) / repeats * 1e3})
    return out


def _warm_up_torch() -> None:
    """Pay torch's one-time lazy imports (the first optimizer step loads several hundred modules) before timing."""
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([weight])
    (weight * 2).sum().backward()
    optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--problems", default="fpor,frop,ofbs")
    parser.add_argument("--models", default="linear,mlp")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--solvers", default=",".join(SOLVERS))
    parser.add_argument(
        "--authors", default="", help="comma list of SET:PROBLEM:MODEL to also run with protocol=authors"
    )
    parser.add_argument(
        "--ero-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra --param for the (fast) ero runs, e.g. selection=best (repeatable; for ablations)",
    )
    parser.add_argument(
        "--authors-max-outer", type=int, default=0, help="cap the authors' outer iterations (0: 50, the protocol)"
    )
    parser.add_argument("--ero-protocols", default="fast", help="comma list of ERO presets to run (fast, thorough)")
    parser.add_argument(
        "--step-timing",
        default="",
        metavar="SET",
        help="only time single full-batch steps of --step-model on SET's train split",
    )
    parser.add_argument("--step-model", default="mlp")
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: fastest on a shared 2-core box)"
    )
    parser.add_argument(
        "--budget", type=float, default=0, help="stop starting new runs after this many seconds (0: no limit)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ero.json")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="only combine these result files (runs made in parallel): "
        "per-set markdown table and summary, written to --out",
    )
    args = parser.parse_args()
    if args.merge:
        rows = [r for path in args.merge for r in json.loads(path.read_text())["runs"]]
        print(markdown(rows))
        summary = summarize(rows)
        if summary["authors_vs_presets"]:
            print(speed_markdown(rows))
        print(json.dumps(summary, indent=1))
        args.out.write_text(
            json.dumps({"runs": rows, "summary": summary, "merged_from": [str(p) for p in args.merge]}, indent=1)
        )
        return
    torch.set_num_threads(args.threads)
    _warm_up_torch()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.step_timing:
        timing = step_timing(args.data_dir / args.step_timing, args)
        print(
            f"| step ({args.step_model} {args.depth} x {args.width}, {args.step_timing}, {timing[0]['rows']} rows, "
            "full batch) | ms |\n|---|---|"
        )
        for t in timing:
            print(f"| {t['what']} | {t['ms_per_step']:.1f} |")
        args.out.write_text(
            json.dumps({"step_timing": timing, "set": args.step_timing, "threads": args.threads}, indent=1)
        )
        return

    jobs = []
    skipped: set[str] = set()
    for seed in map(int, args.seeds.split(",")):
        for model in args.models.split(","):
            for dataset in args.sets.split(","):
                for problem in args.problems.split(","):
                    for solver in args.solvers.split(","):
                        if solver == "sigmoid-f1" and problem != "ofbs":
                            continue
                        if solver != "ero":
                            jobs.append((dataset, problem, model, seed, solver, {}))
                            continue
                        for protocol in args.ero_protocols.split(","):
                            extra = {
                                **({"protocol": protocol} if protocol != "fast" else {}),
                                **dict(kv.split("=", 1) for kv in args.ero_param),
                            }
                            try:  # an --ero-param that does not apply to this model (or preset) is refused
                                ERO().check_params(ERO().parse_params(extra), model)
                            except DmoError as exc:
                                skipped.add(f"ero {model} {protocol}: {exc}")
                                continue
                            jobs.append((dataset, problem, model, seed, solver, extra))
    for line in sorted(skipped):
        print(f"skipped {line}")
    for spec in filter(None, args.authors.split(",")):
        dataset, problem, model = spec.split(":")
        params = {"protocol": "authors"}
        if args.authors_max_outer:
            params["outer"] = str(args.authors_max_outer)
        jobs.append((dataset, problem, model, 0, "ero", params))

    rows: list[dict] = []
    started = time.perf_counter()
    print(
        f"{'set':13s} {'prob':4s} {'model':6s} s {'solver':14s} {'train own':>14s} {'test own':>14s} "
        f"{'train TA':>14s} {'test TA':>14s} {'fit s':>7s}"
    )
    for dataset, problem, model, seed, solver, params in jobs:
        if args.budget and time.perf_counter() - started > args.budget:
            print(f"budget of {args.budget:.0f} s spent: {len(jobs) - len(rows)} runs not started")
            break
        row = run_one(args.data_dir, dataset, problem, model, seed, solver, args, params)
        rows.append(row)
        print(
            f"{dataset:13s} {problem:4s} {model:6s} {seed} {label(row):14s} {fmt(row['own_train']):>14s} "
            f"{fmt(row['own_test']):>14s} {fmt(row['ta_train']):>14s} {fmt(row['ta_test']):>14s} "
            f"{row['fit_seconds']:7.1f}",
            flush=True,
        )
        args.out.write_text(
            json.dumps(
                {"runs": rows, "summary": summarize(rows), "threads": args.threads, "jobs_planned": len(jobs)}, indent=1
            )
        )
    summary = summarize(rows)
    if summary["authors_vs_presets"]:
        print(speed_markdown(rows))
    print(json.dumps(summary, indent=1))
    args.out.write_text(
        json.dumps({"runs": rows, "summary": summary, "threads": args.threads, "jobs_planned": len(jobs)}, indent=1)
    )


if __name__ == "__main__":
    main()
