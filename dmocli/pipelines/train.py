"""`dmo train`: check every option before any data is read, then dispatch to the in-memory or the streaming
pipeline (and, under torchrun, form the process group).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dmocli.data import outputs, sources
from dmocli.engines import torchrun
from dmocli.engines.choice import ENGINES
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.alert_budget import AlertBudget
from dmocli.operating_point.gain import GainMatrix
from dmocli.options import (
    AUTO_CANDIDATES,
    MODEL_AUTO,
    MODEL_CHOICES,
    PROBLEM_CHOICES,
    TrainOptions,
    choice_list,
    option_errors,
    refuse,
)
from dmocli.pipelines.in_memory import train_in_memory
from dmocli.pipelines.in_memory_load import NOT_PARQUET
from dmocli.pipelines.model_choice import auto_problems, train_auto
from dmocli.pipelines.time_blocks import time_col_problems
from dmocli.solvers import available, get_solver, solver_class
from dmocli.solvers.base import InMemorySolver, Solver, SolverParams, StreamingSolver

if TYPE_CHECKING:  # torch loads with the in-memory path only; the numpy streaming solvers start without it
    pass


def default_model_path(data: str | Path) -> Path:
    """DATA's name without its data suffix (.parquet, .csv, .csv.gz, ...) + .dmo.safetensors, beside DATA.

    Only the data suffix goes: sales.2024.parquet and sales.2025.parquet must
    not both become sales.dmo.safetensors, the second replacing the first.
    """
    data = Path(data).resolve()  # `dmo train .` is named after the directory, not ""
    name = data.name
    suffix = next((s for s in (*sources.PARQUET_SUFFIXES, *sources.CSV_SUFFIXES) if name.lower().endswith(s)), "")
    if data.is_file() and suffix:
        name = name[: -len(suffix)]
    return data.parent / f"{name}.dmo.safetensors"


def _check_solver_param(solver: Solver, name: str, applies_to: str) -> None:
    """A `train` option that is a shortcut for `--param NAME=...` of one solver: refuse it for the others."""
    if name not in solver.Params.__dataclass_fields__:
        raise DmoError(f"{applies_to}, not to {solver.name}")


def train(
    data: sources.Source, opts: TrainOptions, output: str | Path | None = None, report_path: str | Path | None = None
) -> tuple[DmoModel, dict[str, Any]]:
    """Train on `data` and write the model (and report); returns both. Raises DmoError on bad input.

    `data` is a path, or a pyarrow Table or pandas DataFrame (the Python API); with a table and no
    `output`, nothing is written and the model is only returned. Every option,
    and every `--param` of the solver, is checked before any data is read.
    """
    started = time.perf_counter()
    data = sources.accept(data)
    solver, params = check_options(opts)
    if opts.model in ("gbdt", MODEL_AUTO):
        from dmocli.models.stored_network import import_xgboost

        import_xgboost()  # an optional dependency: say which extra to install before any data is read
    if sources.is_stdin(opts.val) or sources.is_stdin(opts.unlabeled_truth):
        raise DmoError("only DATA can be read from standard input ('-'); give --val and --unlabeled-truth as files")
    if sources.is_stdin(data):
        if not solver.streaming:
            raise DmoError(
                f"DATA '-' (standard input) is read in one pass, which only the streaming solvers "
                f"({_solvers_that('streaming')}) can learn from; save the data to a file for solver {opts.solver}"
            )
        if output is None:
            raise DmoError("DATA '-' (standard input) has no file name to name the model after; give -o MODEL")
    if output is not None:
        output = Path(output)
    elif not isinstance(data, pa.Table):
        output = default_model_path(data)
    if not torchrun.secondary():  # only process 0 of a torchrun group writes
        outputs.check_outputs(
            {"-o": output, "--report": report_path, "--plot": opts.plot},
            {"DATA": data, "--val": opts.val, "--unlabeled-truth": opts.unlabeled_truth},
        )
    outputs.refuse_misnamed_model(output)
    _check_cv(opts, solver)
    if torchrun.launched():
        _check_distributed(data, opts, solver)
    if opts.model == MODEL_AUTO:  # trains in one process, in memory: auto_problems refused the rest
        assert isinstance(solver, InMemorySolver)
        return train_auto(
            data, opts, solver=solver, params=params, output=output, report_path=report_path, started=started
        )
    if opts.engine == "dask":
        from dmocli.pipelines.dask_trees import train_trees_on_dask

        return train_trees_on_dask(
            data, opts, solver=solver, params=params, output=output, report_path=report_path, started=started
        )
    if isinstance(solver, StreamingSolver):
        from dmocli.pipelines.streaming import train_streaming

        return train_streaming(data, opts, solver=solver, params=params, output=output, report_path=report_path)
    assert isinstance(solver, InMemorySolver)
    from dmocli.engines.torch_distributed import start

    group = start(opts.device) if torchrun.launched() else None
    try:
        return train_in_memory(
            data,
            opts,
            solver=solver,
            params=params,
            output=output,
            report_path=report_path,
            started=started,
            group=group,
        )
    finally:
        if group is not None:
            group.close()


def check_options(opts: TrainOptions) -> tuple[Solver, SolverParams]:
    """The solver and its parsed `--param`s, once every option is checked against its declaration and the solver's:
    the declared choices and ranges, the --model kinds the solver declares for the --engine (`Solver.engines`),
    each `--param`'s declared scope, and the options this run would ignore; every problem in one message.
    Reads no data, so `dmo solvers --json` can be checked against it without training."""
    problems = option_errors(opts)
    try:
        solver = get_solver(opts.solver)
    except DmoError as exc:  # the checks below need a solver: refuse now, with every option problem found
        refuse([*problems, str(exc)])
        raise
    auto = opts.model == MODEL_AUTO
    problems += auto_problems(opts, solver) if auto else _capability_problems(opts, solver)
    problems += _problem_kind_problems(opts, solver)
    try:  # an alert budget's N <= M, which no rule between options says
        AlertBudget.asked(opts.max_alert_rate, opts.max_alerts, opts.per_rows)
    except DmoError as exc:
        problems.append(str(exc))
    params = None
    try:
        params = solver.parse_params(_solver_params(opts, solver))
    except DmoError as exc:
        problems.append(str(exc))
    if params is not None:
        problems += _auto_param_problems(opts, solver, params) if auto else _param_scope_problems(opts, params)
    problems += _inapplicable_options(opts, solver)
    problems += time_col_problems(opts, solver, distributed=torchrun.launched())
    if opts.engine == "dask":
        problems += _dask_problems(opts)
    refuse(problems)
    assert params is not None  # parse_params raised otherwise, and refuse with it
    if not auto:  # each candidate's were checked, and collected, above
        solver.check_params(params, opts.model)
    return solver, params


def _capability_problems(opts: TrainOptions, solver: Solver) -> list[str]:
    """--model and --engine against what the solver declares it trains (`Solver.models`, `Solver.dask_models`)."""
    if opts.model not in MODEL_CHOICES or opts.engine not in ENGINES:
        return []  # an unknown kind or engine: the choice check has named it
    if opts.model in solver.engines().get(opts.engine, ()):
        return []
    if opts.engine == "local":
        trains = ", ".join(name for name in available() if opts.model in solver_class(name).models)
        return [f"solver {solver.name} does not train --model {opts.model} (solvers that do: {trains})"]
    on_engine = " or ".join(
        f"--model {model} --solver {name}"
        for name in available()
        for model in solver_class(name).engines().get(opts.engine, ())
    )
    return [
        f"--engine {opts.engine} trains {on_engine}, not --model {opts.model} --solver {solver.name} (other models "
        "train in one process, or under torchrun)"
    ]


def _problem_kind_problems(opts: TrainOptions, solver: Solver) -> list[str]:
    """A given --problem against what the solver declares it solves (`Solver.problems`, `Solver.multiclass`); the
    default, which depends on the labels, is checked once they are read (pipelines/check.py:solved_problem)."""
    if opts.problem == "multiclass" and not solver.multiclass:
        multiclass = [name for name in available() if solver_class(name).multiclass]
        return [
            f"solver {solver.name} learns one class against the rest (for --problem multiclass use "
            f"--solver {choice_list(multiclass)})"
        ]
    if opts.problem == "value":  # trained as ofbs: the gains decide the cut (problems.Problem.trained_as)
        return _value_problems(opts, solver)
    if opts.problem in PROBLEM_CHOICES and opts.problem != "multiclass" and opts.problem not in solver.problems:
        return [
            f"solver {solver.name} does not solve --problem {opts.problem} (it solves: {', '.join(solver.problems)})"
        ]
    return []


def _value_problems(opts: TrainOptions, solver: Solver) -> list[str]:
    """--problem value: its --gain read, and the paths that carry no per-row gains refused (the streaming solvers,
    Dask, torchrun, --model auto, which chooses on F-beta or the target's metric); the solver trains as for ofbs."""
    problems = []
    if opts.gain is not None:
        try:
            GainMatrix.parse(opts.gain)
        except DmoError as exc:
            problems.append(str(exc))
    if "ofbs" not in solver.problems:
        problems.append(f"solver {solver.name} does not solve --problem value (it trains for ofbs, which it does not)")
    elif isinstance(solver, StreamingSolver) or opts.engine == "dask" or torchrun.launched():
        problems.append(
            "--problem value reads each held-out row's gains in one process, in memory; choose an in-memory solver "
            "(e.g. --solver wce) without --engine dask or torchrun"
        )
    if opts.model == MODEL_AUTO:
        problems.append("--model auto chooses on F-beta or the target's metric, not on value: choose --model")
    return problems


def _param_scope_problems(opts: TrainOptions, params: SolverParams) -> list[str]:
    """`--param`s changed from their default outside their declared scope (field metadata `models`, `torchrun`):
    they would be ignored, or cannot hold; the keys of one scope named together."""
    defaults = type(params)()
    by_scope: dict[tuple[str, ...], list[str]] = {}
    one_process = []
    for spec in dataclasses.fields(params):
        if getattr(params, spec.name) == getattr(defaults, spec.name):
            continue
        models = spec.metadata.get("models")
        if models is not None and opts.model not in models:
            by_scope.setdefault(tuple(models), []).append(spec.name)
        if spec.metadata.get("torchrun") is False and torchrun.launched():
            one_process.append(spec.name)
    problems = [
        f"{_as_typed(opts, names)} applies to --model {choice_list(models)}, not to --model {opts.model}: drop it"
        for models, names in by_scope.items()
    ]
    if one_process:
        problems.append(
            f"{_as_typed(opts, one_process)} holds out rows of one process, not under torchrun: drop it "
            "(give --val FILE)"
        )
    return problems


def _auto_param_problems(opts: TrainOptions, solver: Solver, params: SolverParams) -> list[str]:
    """--model auto trains every candidate with the same `--param`s: one that only a candidate's family takes
    would be ignored by (or refused for) the other, so the user is told to choose that family's --model. Each
    changed key is tried alone, so the message names its family; keys fine alone but not together are refused
    as the candidate's own check words it."""
    defaults = type(params)()
    by_family: dict[tuple[str, ...], list[str]] = {}
    for spec in dataclasses.fields(params):
        if getattr(params, spec.name) == getattr(defaults, spec.name):
            continue
        alone = dataclasses.replace(defaults, **{spec.name: getattr(params, spec.name)})
        takes = tuple(kind for kind in AUTO_CANDIDATES if not _param_refusals(opts, solver, alone, kind))
        if takes != AUTO_CANDIDATES:
            by_family.setdefault(takes, []).append(spec.name)
    problems = [
        f"{_as_typed(opts, names)} applies to --model {' or '.join(takes)} only, and --model auto trains "
        f"{' and '.join(AUTO_CANDIDATES)} with the same --param values: choose --model {' or '.join(takes)}"
        if takes
        else f"{_as_typed(opts, names)} applies to neither {' nor '.join(AUTO_CANDIDATES)}, which --model auto "
        "trains: drop it"
        for takes, names in by_family.items()
    ]
    if problems:
        return problems
    return [problem for kind in AUTO_CANDIDATES for problem in _param_refusals(opts, solver, params, kind)]


def _param_refusals(opts: TrainOptions, solver: Solver, params: SolverParams, kind: str) -> list[str]:
    """What `--model KIND` would refuse of `params`: their declared scope, and the solver's own check."""
    problems = _param_scope_problems(dataclasses.replace(opts, model=kind), params)
    try:
        solver.check_params(params, kind)
    except DmoError as exc:
        problems.append(str(exc))
    return problems


def _as_typed(opts: TrainOptions, names: list[str]) -> str:
    """`--param` keys as the user gave them: `--folding` for a train option that set one, else `--param a, b`."""
    flags = [_SHORTCUTS[name] for name in names if name in _SHORTCUTS and getattr(opts, name) is not None]
    keys = [name.replace("_", "-") for name in names if not (name in _SHORTCUTS and getattr(opts, name) is not None)]
    return ", ".join([*flags, *([f"--param {', '.join(keys)}"] if keys else [])])


def _inapplicable_options(opts: TrainOptions, solver: Solver) -> list[str]:
    """Options this run would ignore or cannot combine, found from the options alone, so that they are named
    in one message with every other problem of the command line."""
    problems = []
    if opts.val is not None and opts.val_frac:
        problems.append("give either --val FILE or --val-frac, not both")
    if opts.unlabeled_truth is not None and not solver.uses_unlabeled:
        problems.append(
            f"--unlabeled-truth applies to solvers that use unlabeled rows ({_solvers_that('uses_unlabeled')}), "
            f"not {solver.name}"
        )
    if opts.scheduler is not None and opts.engine != "dask":
        problems.append("--scheduler names a Dask scheduler; add --engine dask")
    if not solver.streaming and (opts.epochs is not None or opts.plot is not None):
        problems.append(
            f"--epochs and --plot apply to the streaming solvers ({_solvers_that('streaming')}), not to {solver.name}"
        )
    return problems


def _solvers_that(capability: str) -> str:
    """The solvers whose declared `capability` holds, for a message: `fofo, lr, ofo`."""
    return ", ".join(name for name in available() if getattr(get_solver(name), capability))


_SHORTCUTS = {"gamma": "--gamma", "folding": "--folding"}  # train options that set one solver's --param


def _solver_params(opts: TrainOptions, solver: Solver) -> dict[str, str]:
    """The `--param` strings, with the train options that are shortcuts for one solver's parameter added."""
    raw_params = dict(opts.params)
    if opts.gamma is not None:
        _check_solver_param(solver, "gamma", "--gamma applies to --solver lus")
        raw_params["gamma"] = repr(float(opts.gamma))
    if opts.folding is not None:
        _check_solver_param(solver, "folding", "--folding applies to --solver ero")
        if opts.val is not None or opts.val_frac:
            raise DmoError("--folding holds out part of DATA for iterate selection; give it without --val/--val-frac")
        raw_params["folding"] = str(opts.folding)
    return raw_params


def _check_distributed(data: sources.Source, opts: TrainOptions, solver: Solver) -> None:
    """What training under torchrun cannot do yet, refused alike by every process before the group forms (no file is
    looked at here: a node that cannot see DATA must fail inside ProcessGroup.agree, where its message is shown)."""
    if opts.model == "gbdt":
        raise DmoError(
            "--model gbdt trains in one process (XGBoost's own threads, or --device cuda); run it without torchrun"
        )
    if not solver.distributed:
        spread = ", ".join(name for name in available() if solver_class(name).distributed)
        raise DmoError(
            f"solver {solver.name} trains in one process; under torchrun only these train on several: "
            f"{spread} (run dmo train without torchrun)"
        )
    if isinstance(data, pa.Table):
        raise DmoError(NOT_PARQUET)
    if opts.val_frac:
        raise DmoError(
            "--val-frac holds out rows spread over every process; under torchrun give --val FILE, or --cv K "
            "(the default without --val)"
        )


def _dask_problems(opts: TrainOptions) -> list[str]:
    """What training on Dask workers (XGBoost's Dask interface) cannot combine with, found before any data is read
    (which solvers and models it trains: `Solver.dask_models`)."""
    problems = []
    if opts.cv:
        problems.append(
            "--cv refits per fold, which --engine dask does not; drop --cv (held-out rows set the threshold)"
        )
    if opts.val_frac:
        problems.append("--engine dask holds out --param stop-frac of every file; drop --val-frac")
    if torchrun.launched():
        problems.append("--engine dask starts its own workers; run it without torchrun")
    return problems


def _check_cv(opts: TrainOptions, solver: Solver) -> None:
    """What --cv K cannot be combined with, refused before any data is read."""
    if not opts.cv:
        return
    if solver.streaming:
        raise DmoError(f"--cv refits the model per fold; solver {solver.name} streams once: give --val FILE instead")
    if solver.uses_unlabeled:
        raise DmoError(f"--cv applies to solvers trained on labeled rows; for {solver.name} give --val FILE")
    if opts.val_frac:
        raise DmoError("give either --cv K or --val-frac, not both (--cv already holds out every row once)")
    if opts.adjust is False:
        raise DmoError("--cv fits the threshold on out-of-fold scores; --no-adjust keeps the solver's own: drop one")
