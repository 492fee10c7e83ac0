"""Issue 36's comparison over every fresh draw: several `bench/gbdt_small.py` result files pooled.

One run of gbdt_small.py holds 10 resplits per size, and the paired difference between two methods that fit the
same kind of trees (dmo gbdt and XGBoost fixed + out-of-fold threshold) has a standard error of 0.01 to 0.02 per
size at that count: its sign flips from one set of resplits to the next. Pooling runs on disjoint resplit seeds
(each file's `first_resplit`..+`resplits`; a draw present in two files is counted once, from the first) gives
the paired differences on every draw, per size and pooled, with 95 % intervals: what the draws can and cannot
tell apart.

    python bench/gbdt_small_pooled.py gbdt_small_confirm_60 gbdt_small_final_70 --name gbdt_small_pooled \
        --rename gbdt_small_confirm_60:sub=dmo_gbdt,dmo_gbdt=dmo_gbdt_fullshare
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, print_table, write_results  # noqa: E402
from gbdt_small import BASE_METHODS, method_table, paired, within_best  # noqa: E402

Z95 = 1.96


def pooled_runs(names: list[str], renames: dict[str, dict[str, str]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every run row of the named result files, a (set, size, seed, method, problem) counted once, each file's
    methods renamed as `renames[file]` says (a run whose default was then a variant: `sub` -> `dmo_gbdt`); and the
    methods present in every file (only those are compared: a method missing from one file has fewer draws)."""
    runs, seen, method_sets = [], set(), []
    for name in names:
        payload = json.loads((RESULTS / f"{name}.json").read_text())
        renamed = renames.get(name, {})
        file_runs = [{**r, "method": renamed.get(r["method"], r["method"])} for r in payload["runs"]]
        method_sets.append({r["method"] for r in file_runs})
        for r in file_runs:
            key = (r["set"], r["size"], r["seed"], r["method"], r["problem"])
            if key not in seen:
                seen.add(key)
                runs.append(r)
    common = set.intersection(*method_sets)
    order = [m for m in dict.fromkeys(r["method"] for r in runs) if m in common]
    return [r for r in runs if r["method"] in common], order


def with_interval(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each paired row with its 95 % interval (normal approximation over draws)."""
    for row in rows:
        if row["se"] is not None:
            row["low95"], row["high95"] = row["difference"] - Z95 * row["se"], row["difference"] + Z95 * row["se"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="bench/results/NAME.json files of gbdt_small.py (NAME only)")
    parser.add_argument("--reference", default="dmo_gbdt")
    parser.add_argument(
        "--rename",
        action="append",
        default=[],
        help="FILE:OLD=NEW,...: a method of one result file under another name (applied at once, not in turn)",
    )
    parser.add_argument(
        "--best-among",
        nargs="*",
        default=list(BASE_METHODS),
        help="the methods a set's best is taken from (default: issue 36's five; variants and controls are probes)",
    )
    parser.add_argument("--name", default="gbdt_small_pooled", help="results file bench/results/NAME.json")
    args = parser.parse_args()
    renames = {}
    for spec in args.rename:
        name, _, pairs = spec.partition(":")
        renames[name] = dict(item.split("=", 1) for item in pairs.split(",") if item)
    runs, methods = pooled_runs(args.results, renames)
    others = [m for m in methods if m != args.reference]
    by_size = method_table(runs, methods, "size")
    pairs_by_size = with_interval(paired(runs, args.reference, others, "size"))
    pairs_pooled = with_interval(paired(runs, args.reference, others, None))
    best = within_best(runs, args.reference, [m for m in methods if m in args.best_among])
    print(f"{len(args.results)} result files, methods in all of them: {', '.join(methods)}")
    print("by size: mean objective (0 where refused or missed on test), SE over draws, feasibility (FPOR, FROP)")
    print_table(by_size, ["size", "method", "draws", "mean_score", "se", "refused", "feasible"])
    print(f"\npaired: {args.reference} minus baseline, per size (95 % interval)")
    print_table(pairs_by_size, ["size", "baseline", "draws", "difference", "se", "low95", "high95"])
    print(f"\npaired: {args.reference} minus baseline, pooled (95 % interval)")
    print_table(pairs_pooled, ["pooled", "baseline", "draws", "difference", "se", "low95", "high95"])
    print(f"\n{args.reference} against the best method of each set (paired SE)")
    print_table(best, ["set", "best", "best_score", "difference", "se", "within_one_se"])
    path = write_results(
        args.name,
        {
            "results": args.results,
            "renames": renames,
            "reference": args.reference,
            "methods": methods,
            "by_size": by_size,
            "paired_by_size": pairs_by_size,
            "paired_pooled": pairs_pooled,
            "within_best": best,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
