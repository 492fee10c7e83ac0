"""The figures of issue 49's closing-note table, measured on one checkout by rules anyone can rerun.

Rerun (about 2 minutes on 2 cores; the traced commands train one small model first):

    mkdir -p /tmp/identity/base_src && git archive 3e516ca | tar -x -C /tmp/identity/base_src   # the commit before
    python bench/architecture_metrics.py --checkout /tmp/identity/base_src --json bench/results/architecture_base.json
    python bench/architecture_metrics.py --checkout /work/main --json bench/results/architecture_after.json

The rules:

**Paths followed (`paths`).** Each command (`monitor --gate --chunk-col week`, `threshold --adapt`, `threshold
--prior`, `threshold` re-targeted on the stored curve, `threshold MODEL DATA`, `evaluate --gate`, `predict` to
CSV) runs in a fresh child process (`PYTHONPATH=CHECKOUT`, `dmocli.cli.process.main(ARGS)`, the code `dmo`
runs) under `sys.setprofile` and `threading.setprofile`, on a wce linear model trained on sample_data/ (with
--val) and the derived `shifted.parquet` of bench/identity.py. A *call* is a Python `call` event whose code
object's file lies inside CHECKOUT/dmocli/; calls made while a module body runs (an import: any `<module>` frame
on the stack) are not counted, nor the `<module>` frames themselves, so what is measured is the command's path,
not what importing costs. From the calls of the main thread:

- `files`: the distinct dmocli files with at least one call (any thread), and `lines`: their total line count
  (every line of each file, as `wc -l` counts). This is "the files one reads to follow the command".
- `steps` and `returns`, on the *first-call sequence*: each dmocli function (code object) taken once, at its first
  call, in call order, mapped to its file; consecutive entries in the same file merged into one step. `steps` is
  the length of that merged sequence; `returns` counts the steps whose file already appeared at an earlier step
  (the path had been in that module, left it, and comes back). Taking each function once makes the figure what a
  reader following the code meets (a loop over record batches does not inflate it) and independent of the data's
  size.
- `steps_all` and `returns_all`: the same on every call (not only first calls), for reference.
- `sequence`: the merged first-call sequence itself, in the JSON, so a figure can be checked by eye.
- `files_core`, `lines_core`, `steps_core`, `returns_core` (and `core_sequence`): the same with the machinery
  every command passes through left out (PLUMBING: the layer-0 modules `errors`, `version`, `constraints`,
  `options`, `command_options`, `progress`, the package `__init__`; `data/`; `cli/` outside `cli/commands/`),
  the first-call sequence filtered before merging. This is nearer to what a reader follows by hand.

**In-place mutations of a model (`model_mutations`).** In every dmocli/ module except models/modelfile.py (the
class's own construction and lazy network), an assignment (`=`, augmented, annotated; each element of a tuple
target counted) whose target is an attribute or item rooted at a *model expression*, or a call of a mutating
method (`update`, `setdefault`, `pop`, `clear`, `append`, `extend`, `insert`, `__setitem__`) on an attribute
rooted at one, or `setattr(MODEL, ...)`. A model expression is a name `model`, an attribute `X.model` (e.g.
`chosen.model`), or a name that the same function binds to a `DmoModel` (a parameter annotated `DmoModel`, or
an assignment from a call of `load_model`, `DmoModel.load`, `read_model` or `model_input`...). A target that is the
name itself (`model = ...`) rebinds, it does not mutate, and is not counted. Each site is listed, and so is the
wide net behind the heuristic (`field_assignments`: any assignment to an attribute named like a DmoModel field on
a receiver other than `self`, whatever it is called), so a mutation through another name can be seen.

**String-key reads (`string_keys`).** `X["literal"]` in a load context (a subscript whose slice is a str
constant, not an assignment target or `del`) and `X.get("literal", ...)` calls; in cli/ and in the package, per
file, the top 3 files of each.

**Functions returning dicts (`dict_returns`).** Function definitions whose return annotation is
`dict[str, Any]` (or `Dict[str, Any]`), and, separately, any `dict`/`dict[...]`/`Dict[...]` annotation.

**Largest modules and functions.** The five largest .py files by line count, and the five largest functions by
`end_lineno - lineno + 1` of the `def` (decorators not counted; methods and nested functions too).

**Repeated blocks (`duplicates`).** The `duplicates` command on the checkout's dmocli/ folder, the first line's
counts parsed and every row kept: `duplicates --repo CHECKOUT/dmocli --most 200 --seconds 120`.

**Rule sites (`rule_sites`).** Where each of issue 49's duplicated rules is written, by a regular expression per
rule (RULES below), counted per file. A regex is blunt; the matched lines are listed so the figures can be read.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent

COMMANDS: dict[str, list[str]] = {
    "monitor": ["monitor", "model.safetensors", "data/shifted.parquet", "--gate", "--chunk-col", "week",
                "--report", "monitor.json"],
    "threshold_adapt": ["threshold", "model.safetensors", "--adapt", "data/shifted.parquet", "-o", "adapt.safetensors",
                        "--report", "adapt.json"],
    "threshold_prior": ["threshold", "model.safetensors", "--prior", "0.25", "-o", "prior.safetensors"],
    "threshold_retarget": ["threshold", "model.safetensors", "-p", "frop", "-a", "0.7", "-o", "retarget.safetensors",
                           "--report", "retarget.json"],
    "threshold_refit": ["threshold", "model.safetensors", "data/test.parquet", "-o", "refit.safetensors",
                        "--report", "refit.json"],
    "evaluate": ["evaluate", "model.safetensors", "data/test.parquet", "--gate", "--report", "evaluate.json"],
    "predict": ["predict", "model.safetensors", "data/test.parquet", "-o", "predictions.csv"],
}  # fmt: skip
TRAIN = ["train", "data/train.parquet", "--val", "data/val.parquet", "-s", "wce", "-m", "linear", "--seed", "0",
         "-p", "fpor", "-a", "0.8", "-o", "model.safetensors"]  # fmt: skip

# The `_core` figures leave out the machinery every command passes through: the package's layer-0 modules, data/
# (reading and writing tables) and cli/ outside cli/commands/ (parsing, exit codes, printing).
PLUMBING_FILES = {"__init__.py", "__main__.py", "errors.py", "version.py", "constraints.py", "options.py",
                  "command_options.py", "progress.py"}  # fmt: skip
PLUMBING_FOLDERS = ("data/",)

LOADERS = {"load_model", "load", "read_model", "model_input", "loaded_model", "read_model_file"}
MUTATORS = {"update", "setdefault", "pop", "clear", "append", "extend", "insert", "__setitem__"}

# issue 49's rules written in several places: a regex per rule, matched line by line in dmocli/.
RULES: dict[str, str] = {
    "gate limits defined": r"^\s*(RATE_DRIFT_FACTOR|PSI_MAJOR|PSI_MODERATE|DRIFT_ALPHA)\s*(:[^=]*)?=",
    "gate verdict functions": r"def \w*(gate|verdict)\w*\(",
    "shift formula r*TPR + (1-r)*FPR": r"\(1(\.0)? - [\w.]+\) \* \w*fp",
    "confidence range checks": r"def check\w*confidence\w*\(|not 0(\.0)? < confidence < 1",
    "--new-rows needs --confidence checks": r"\(NEW_ROWS_WITHOUT_CONFIDENCE\)",
    "one of --adapt/--prior checks": r"give one of .*--adapt|give --adapt NEW or --prior",
}


# ---- the traced child --------------------------------------------------------------------------------------


def trace_child(args: list[str], package: str, out: str) -> None:
    """Run ARGS as `dmo` does, in this process, recording every dmocli call; write them to OUT as JSON."""
    import threading

    calls: list[tuple[int, str, int]] = []  # (thread id, file, id of the code object)
    depth: dict[int, int] = {}  # per thread: how many <module> frames are running (an import)
    prefix = package.rstrip("/") + "/"

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        code = frame.f_code
        tid = threading.get_ident()
        if code.co_name == "<module>":
            depth[tid] = depth.get(tid, 0) + (1 if event == "call" else -1)
            return
        if event == "call" and not depth.get(tid) and code.co_filename.startswith(prefix):
            calls.append((tid, code.co_filename[len(prefix) :], id(code)))

    main_thread = threading.get_ident()
    from dmocli.cli.process import main  # imported before tracing: the CLI's import is not the command's path

    threading.setprofile(profile)
    sys.setprofile(profile)
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    Path(out).write_text(json.dumps({"rc": code, "main": main_thread, "calls": calls}))


# ---- paths -------------------------------------------------------------------------------------------------


def is_plumbing(file: str) -> bool:
    """The machinery every command passes through (PLUMBING), left out of the `_core` figures."""
    return (
        file in PLUMBING_FILES
        or file.startswith(PLUMBING_FOLDERS)
        or (file.startswith("cli/") and not file.startswith("cli/commands/"))
    )


def merged(files: list[str]) -> list[str]:
    return [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]


def returns(sequence: list[str]) -> int:
    """Steps of a merged sequence whose file appeared at an earlier step."""
    seen: set[str] = set()
    count = 0
    for f in sequence:
        count += f in seen
        seen.add(f)
    return count


def line_count(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def measure_paths(checkout: Path, work: Path) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    from identity import write_inputs  # the same derived inputs as the identity check

    write_inputs(work / "data")
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
    trained = subprocess.run([sys.executable, "-m", "dmocli", "--no-progress", *TRAIN], cwd=work, env=env,
                             capture_output=True, text=True)  # fmt: skip
    if trained.returncode != 0:
        sys.exit(f"architecture_metrics: training failed: {trained.stderr.strip()}")
    package = (checkout / "dmocli").resolve()
    paths = {}
    for name, args in COMMANDS.items():
        out = work / f"{name}.trace.json"
        proc = subprocess.run(
            [sys.executable, __file__, "--trace-child", str(package), str(out), "--", "--no-progress", *args],
            cwd=work, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if not out.exists():
            sys.exit(f"architecture_metrics: tracing {name} failed: {proc.stderr.strip()[-2000:]}")
        trace = json.loads(out.read_text())
        main_calls = [(f, c) for tid, f, c in trace["calls"] if tid == trace["main"]]
        first: list[str] = []
        seen_codes: set[int] = set()
        for f, c in main_calls:
            if c not in seen_codes:
                seen_codes.add(c)
                first.append(f)
        sequence = merged(first)
        every = merged([f for f, _ in main_calls])
        entered = sorted({f for _, f, _ in trace["calls"]})
        core = [f for f in entered if not is_plumbing(f)]
        core_sequence = merged([f for f in first if not is_plumbing(f)])
        paths[name] = {
            "args": args,
            "rc": trace["rc"],
            "files": len(entered),
            "lines": sum(line_count(package / f) for f in entered),
            "steps": len(sequence),
            "returns": returns(sequence),
            "steps_all": len(every),
            "returns_all": returns(every),
            "functions": len(seen_codes),
            "files_core": len(core),
            "lines_core": sum(line_count(package / f) for f in core),
            "steps_core": len(core_sequence),
            "returns_core": returns(core_sequence),
            "entered": entered,
            "sequence": sequence,
            "core_sequence": core_sequence,
        }
    return paths


# ---- static figures ----------------------------------------------------------------------------------------


def modules(package: Path) -> dict[str, ast.Module]:
    return {
        str(p.relative_to(package)): ast.parse(p.read_text(), filename=str(p))
        for p in sorted(package.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def _mutates_model(target: ast.AST, names: set[str]) -> bool:
    """Whether TARGET (an attribute or item) hangs, at any depth, from a model expression: a name of NAMES or an
    attribute `X.model`. TARGET itself is not looked at: `chosen.model = m` rebinds chosen's attribute."""
    node = target.value if isinstance(target, (ast.Attribute, ast.Subscript)) else None
    while node is not None:
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Attribute) and node.attr == "model":
            return True
        node = node.value if isinstance(node, (ast.Attribute, ast.Subscript)) else None
    return False


def _model_names(function: ast.AST) -> set[str]:
    """Names a function binds to a DmoModel: `model`, parameters annotated DmoModel, results of a loader."""
    names = {"model"}
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
            if a.annotation is not None and "DmoModel" in ast.unparse(a.annotation):
                names.add(a.arg)
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in LOADERS:
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "DmoModel" in ast.unparse(node.annotation):
                names.add(node.target.id)
    return names


def model_mutations(trees: dict[str, ast.Module]) -> dict[str, Any]:
    sites = []
    for rel, tree in trees.items():
        if rel == "models/modelfile.py":
            continue
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        counted: set[tuple[int, int]] = set()
        for function in functions:
            names = _model_names(function)
            for node in ast.walk(function):
                targets: list[ast.AST] = []
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        targets += t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                    targets = [node.target]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    owner = node.func.value
                    if node.func.attr in MUTATORS and isinstance(owner, (ast.Attribute, ast.Subscript)):
                        targets = [owner]
                    if node.func.attr == "__setattr__" and node.args:
                        targets = [ast.Attribute(value=node.args[0], attr="?")]
                elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" and node.args:
                    targets = [ast.Attribute(value=node.args[0], attr="?")]
                for t in targets:
                    if not _mutates_model(t, names):
                        continue
                    key = (getattr(t, "lineno", node.lineno), getattr(t, "col_offset", node.col_offset))
                    if key in counted:  # a nested function is walked with its parent too
                        continue
                    counted.add(key)
                    sites.append({"file": rel, "line": key[0], "target": ast.unparse(t)})
    per_file = Counter(s["file"] for s in sites)
    return {
        "count": len(sites),
        "modules": len(per_file),
        "per_file": dict(per_file.most_common()),
        "sites": sites,
        "field_assignments": field_assignments(trees),
    }


def field_assignments(trees: dict[str, ast.Module]) -> list[str]:
    """The wide net behind the heuristic: every assignment to an attribute named like a DmoModel field (the
    annotated names of its class body) on a receiver other than `self`, outside models/modelfile.py, whatever the
    receiver is called. Listed for reading, not counted as mutations: many are other objects' fields."""
    fields: set[str] = set()
    for node in ast.walk(trees["models/modelfile.py"]):
        if isinstance(node, ast.ClassDef) and node.name == "DmoModel":
            fields = {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    hits = []
    for rel, tree in trees.items():
        if rel == "models/modelfile.py":
            continue
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            for t in [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]:
                if isinstance(t, ast.Attribute) and t.attr in fields and ast.unparse(t.value) != "self":
                    hits.append(f"{rel}:{t.lineno} {ast.unparse(t)}")
    return hits


def string_keys(trees: dict[str, ast.Module]) -> dict[str, Any]:
    per_file: Counter[str] = Counter()
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                per_file[rel] += 1
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                per_file[rel] += 1
    cli = Counter({f: n for f, n in per_file.items() if f.startswith("cli/")})
    return {
        "package": sum(per_file.values()),
        "cli": sum(cli.values()),
        "top_package": per_file.most_common(3),
        "top_cli": cli.most_common(3),
        "per_file": dict(per_file.most_common()),
    }


def dict_returns(trees: dict[str, ast.Module]) -> dict[str, Any]:
    exact, any_dict = [], []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
                text = ast.unparse(node.returns).replace(" ", "")
                if text.strip("'\"") in ("dict[str,Any]", "Dict[str,Any]"):
                    exact.append(f"{rel}:{node.lineno} {node.name}")
                if re.match(r"^['\"]?(dict|Dict)(\[|$|['\"])", text):
                    any_dict.append(f"{rel}:{node.lineno} {node.name}")
    return {"dict_str_any": len(exact), "any_dict": len(any_dict), "functions": exact}


def largest(package: Path, trees: dict[str, ast.Module]) -> dict[str, Any]:
    sizes = sorted(((line_count(package / rel), rel) for rel in trees), reverse=True)
    functions = []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))
    functions.sort(key=lambda x: (-x[0], x[1]))
    return {
        "modules": [{"file": f, "lines": n} for n, f in sizes[:5]],
        "functions": [{"function": f, "lines": n} for n, f in functions[:5]],
        "package_lines": sum(n for n, _ in sizes),
        "package_files": len(sizes),
        "modules_over_500": [{"file": f, "lines": n} for n, f in sizes if n > 500],
        "functions_over_80": [{"function": f, "lines": n} for n, f in functions if n > 80],
    }


def duplicates(package: Path) -> dict[str, Any]:
    command = ["duplicates", "--repo", str(package), "--most", "200", "--seconds", "120"]
    text = subprocess.run(command, capture_output=True, text=True).stdout
    lines = text.splitlines()
    head = lines[0] if lines else ""
    number = lambda pattern: int(m.group(1)) if (m := re.search(pattern, head)) else 0  # noqa: E731
    pairs = 0 if head.startswith("no duplicates") else number(r"^(\d+) pairs?")
    shape = number(r"\((\d+) by shape alone")
    return {
        "command": " ".join(command),
        "pairs": pairs,
        "identical": pairs - shape,
        "shape_only": shape,
        "boilerplate": number(r"(\d+) of those marked boilerplate"),
        "first_line": head,
        "rows": [line for line in lines[1:] if re.match(r"^D\d+ ", line)],
        "notes": [line for line in lines[1:] if not re.match(r"^D\d+ ", line)],
    }


def rule_sites(package: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for rule, pattern in RULES.items():
        hits = []
        for p in sorted(package.rglob("*.py")):
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if re.search(pattern, line, flags=re.IGNORECASE):
                    hits.append(f"{p.relative_to(package)}:{i}: {line.strip()[:100]}")
        files = Counter(h.split(":")[0] for h in hits)
        found[rule] = {"pattern": pattern, "sites": len(hits), "modules": len(files), "hits": hits}
    return found


# ---- report ------------------------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> None:
    print(f"checkout {result['checkout']}  commit {result['commit'][:10]}  dirty dmocli/: {result['dmocli_dirty']}")
    print("\npaths: files entered, their lines, steps, returns to a module left (first calls); core: the same")
    print("without the plumbing; all: steps / returns over every call")
    for name, p in result["paths"].items():
        core = f"files {p['files_core']:3} lines {p['lines_core']:6} steps {p['steps_core']:3}"
        core += f" returns {p['returns_core']:3}"
        print(f"  {name:19} rc={p['rc']} files {p['files']:3} lines {p['lines']:6} steps {p['steps']:4} "
              f"returns {p['returns']:3} | core: {core} | all {p['steps_all']}/{p['returns_all']}")  # fmt: skip
    m = result["model_mutations"]
    print(f"\nin-place model mutations: {m['count']} sites in {m['modules']} modules {m['per_file']}")
    print(f"  wide net (attributes named like a DmoModel field, any receiver): {len(m['field_assignments'])}")
    s = result["string_keys"]
    print(f"string-key reads: package {s['package']} (top {s['top_package']}); cli/ {s['cli']} (top {s['top_cli']})")
    d = result["dict_returns"]
    print(f"functions returning dict[str, Any]: {d['dict_str_any']} (any dict annotation: {d['any_dict']})")
    big = result["largest"]
    print("largest modules: " + ", ".join(f"{x['file']} {x['lines']}" for x in big["modules"]))
    print("largest functions: " + ", ".join(f"{x['function']} {x['lines']}" for x in big["functions"]))
    print(f"package: {big['package_files']} files, {big['package_lines']} lines")
    dup = result["duplicates"]
    print(f"repeated blocks >= 6 lines: {dup['pairs']} pairs ({dup['identical']} identical, {dup['shape_only']} "
          f"shape only, {dup['boilerplate']} boilerplate)  [{dup['command']}]")  # fmt: skip
    print("rule sites (regex; see JSON for the lines):")
    for rule, r in result["rule_sites"].items():
        print(f"  {rule:40} {r['sites']} sites in {r['modules']} modules")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--trace-child":
        package, out, _, *args = sys.argv[2:]
        trace_child(args, package, out)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, required=True, help="repository root whose dmocli/ is measured")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    package = checkout / "dmocli"
    git = ["git", "-C", str(checkout)]
    trees = modules(package)
    with tempfile.TemporaryDirectory(prefix="dmo-arch-") as work:
        paths = measure_paths(checkout, Path(work))
    result = {
        "checkout": str(checkout),
        "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
        "dmocli_dirty": bool(
            subprocess.run([*git, "status", "--porcelain", "--", "dmocli"], capture_output=True, text=True).stdout
        ),
        "paths": paths,
        "model_mutations": model_mutations(trees),
        "string_keys": string_keys(trees),
        "dict_returns": dict_returns(trees),
        "largest": largest(package, trees),
        "duplicates": duplicates(package),
        "rule_sites": rule_sites(package),
    }
    table(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
