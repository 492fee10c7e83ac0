"""ERO's settings: the `--param` keys, the three presets they override, and the checks that depend on the
model kind. The algorithm is in dmocli/solvers/ero/solver.py."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple

from dmocli.errors import DmoError
from dmocli.solvers.boosting import TreeParams


@dataclass
class Settings:
    """Concrete ERO hyper-parameters after applying a preset."""

    warm_steps: int
    warm_lr: float
    warm_patience: int
    warm_balanced: bool
    warm_start: str  # bce (the loop below) | wce (the wce solver, with its defaults)
    warm_monitor: (
        str  # wce warm start: early-stop on the train or the val loss; auto: val when a monitored split is given
    )
    warm_epochs: int  # wce warm start: most epochs (its patience is warm_patience // 4 epochs)
    init: str  # ta | predictions | random
    outer: int
    outer_patience: int  # 0: run every outer iteration
    inner_steps: int
    inner_patience: int
    inner_tol: float
    inner_rule: str  # best | window
    inner_epochs: int
    lr: float
    lr_s: float
    mu0: float
    mu_init: float
    growth: float
    lam: float
    violation_tol: float
    reg_weighting: str  # none | balanced
    bias_projection: bool
    # best (strict arg-max on the monitored split) | within-noise (WithinNoiseIterate) | train (arg-max on train)
    selection: str


class ByModel(NamedTuple):
    """A preset value that depends on the model kind."""

    linear: Any
    mlp: Any


# fmt: off
# The settings of the two base presets, side by side; ByModel(linear, mlp) where they differ by model kind.
# `thorough` is fast with the authors' kind of warm start for the MLP (see _preset).
PRESETS: dict[str, dict[str, Any]] = {
    #                   authors                      fast
    "warm_steps":      (3000,                        ByModel(150, 1000)),
    "warm_lr":         (ByModel(1e-3, 1e-4),         ByModel(3e-2, 3e-3)),
    "warm_patience":   (50,                          40),
    "warm_balanced":   (False,                       True),
    "warm_start":      ("bce",                       "wce"),
    "warm_monitor":    ("train",                     "auto"),
    "warm_epochs":     (300,                         300),
    "init":            ("random",                    "ta"),
    "outer":           (50,                          5),
    "outer_patience":  (0,                           3),
    "inner_steps":     (1000,                        100),
    "inner_patience":  (50,                          15),
    "inner_tol":       (0.0,                         1e-3),
    "inner_rule":      ("best",                      "window"),
    "inner_epochs":    (20,                          10),
    "lr":              (ByModel(1e-3, 1e-4),         ByModel(1e-2, 1e-3)),
    "lr_s":            (0.1,                         0.1),
    "mu0":             (100.0,                       100.0),
    "mu_init":         (100.0,                       100.0),
    "growth":          (1.3,                         1.3),
    "lam":             (1.0,                         1.0),
    "violation_tol":   (1e-5,                        1e-5),
    "reg_weighting":   ("none",                      "none"),
    "bias_projection": (False,                       True),
    "selection":       ("best",                      ByModel("within-noise", "best")),
}
# fmt: on


def preset(protocol: str, model: str) -> Settings:
    """The settings of `--param protocol=...` for a model kind (linear | mlp)."""
    mlp = model == "mlp"
    if protocol == "thorough":
        # The train problem, solved hard: the authors' kind of warm start (plain BCE, full batch, early-stopped on
        # the training loss) at 10x their learning rate for 1/10 of their steps, then the fast penalty phase,
        # keeping the best iterate on train. Linear: fast's warm start (wce's exact optimum) is kept.
        warm = dict(warm_start="bce", warm_balanced=False, warm_lr=1e-3, warm_steps=300, warm_patience=50)
        return replace(preset("fast", model), selection="train", **(warm if mlp else {}))
    column = {"authors": 0, "fast": 1}[protocol]
    values = {name: pair[column] for name, pair in PRESETS.items()}
    return Settings(**{name: (getattr(v, model) if isinstance(v, ByModel) else v) for name, v in values.items()})


@dataclass
class EroParams(TreeParams):
    """ERO's `--param` keys (and the trees', for --model gbdt); None means: the preset's value."""

    protocol: str = field(
        default="fast",
        metadata={
            "choices": ("fast", "thorough", "authors"),
            "help": "preset: fast (default), thorough (best train objective: over-fits) or authors "
            "(the paper's protocol); the options below override it",
        },
    )
    warm_steps: int | None = field(
        default=None, metadata={"min": 1, "help": "bce warm start: Adam steps (authors 3000; None = from the preset)"}
    )
    warm_lr: float | None = field(default=None, metadata={"positive": True, "help": "warm-start learning rate"})
    warm_patience: int | None = field(
        default=None, metadata={"min": 1, "help": "warm-start early-stopping patience (steps)"}
    )
    warm_balanced: bool | None = field(
        default=None, metadata={"help": "weight the warm-start BCE by inverse class frequency"}
    )
    warm_start: str | None = field(
        default=None,
        metadata={
            "choices": ("bce", "wce"),
            "help": "bce (plain/balanced BCE Adam loop: authors) or wce (the wce solver: fast, thorough; "
            "exact L-BFGS for the linear model)",
        },
    )
    warm_monitor: str | None = field(
        default=None,
        metadata={
            "choices": ("train", "val", "auto"),
            "help": "wce warm start: early-stop on the train or the val loss, or auto (fast: val when a monitored "
            "split is given, else train)",
        },
    )
    warm_epochs: int | None = field(
        default=None,
        metadata={"min": 1, "help": "wce warm start: most epochs (its patience is warm-patience // 4 epochs)"},
    )
    init: str | None = field(
        default=None,
        metadata={
            "choices": ("ta", "predictions", "random"),
            "help": "s start: ta (bias moved to the TA threshold, s = predictions), predictions, random",
        },
    )
    outer: int | None = field(
        default=None, metadata={"min": 1, "help": "outer (penalty update) iterations (authors 50)"}
    )
    outer_patience: int | None = field(
        default=None,
        metadata={
            "min": 0,
            "help": "stop after this many outer iterations without a better monitored iterate once train-feasible "
            "(0: never)",
        },
    )
    inner_steps: int | None = field(
        default=None, metadata={"min": 1, "help": "max Adam steps per penalty subproblem, full batch (authors 1000)"}
    )
    inner_patience: int | None = field(
        default=None, metadata={"min": 1, "help": "subproblem early-stopping patience in steps (authors 50)"}
    )
    inner_tol: float | None = field(
        default=None,
        metadata={
            "min": 0,
            "help": "subproblem stops when F fell by less than this (relative) over the patience window",
        },
    )
    inner_rule: str | None = field(
        default=None,
        metadata={
            "choices": ("best", "window"),
            "help": "subproblem stopping: best (no new best for patience steps, authors) or window (fast)",
        },
    )
    inner_epochs: int | None = field(
        default=None, metadata={"min": 1, "help": "max epochs per subproblem in mini-batch mode"}
    )
    lr: float | None = field(
        default=None,
        metadata={"positive": True, "help": "Adam learning rate for the model (authors 1e-3 linear, 1e-4 mlp)"},
    )
    lr_s: float | None = field(
        default=None, metadata={"positive": True, "help": "Adam learning rate for s (authors 0.1)"}
    )
    mu0: float | None = field(default=None, metadata={"min": 0, "help": "initial penalty on the metric constraint"})
    mu_init: float | None = field(default=None, metadata={"min": 0, "help": "initial per-row penalty mu_i"})
    growth: float | None = field(default=None, metadata={"min": 1, "help": "penalty update factor (authors 1.3)"})
    lam: float | None = field(
        default=None,
        metadata={"min": 0, "help": "initial weight of the BCE agreement regularizer (grows by the same factor)"},
    )
    violation_tol: float | None = field(
        default=None, metadata={"min": 0, "help": "a row counts as violating when c_i exceeds this"}
    )
    reg_weighting: str | None = field(
        default=None,
        metadata={
            "choices": ("none", "balanced"),
            "help": "regularizer row weights: none (authors' code) or balanced (paper)",
        },
    )
    bias_projection: bool | None = field(
        default=None,
        metadata={"help": "judge each outer iterate with its bias at the exact train-optimal value (fast: on)"},
    )
    selection: str | None = field(
        default=None,
        metadata={
            "choices": ("best", "within-noise", "train"),
            "help": "iterate kept: best (monitored arg-max: authors, fast mlp), within-noise (best train "
            "objective within one standard error of it: fast linear) or train (best on train, validation "
            "unused: thorough)",
        },
    )
    mode: str = field(
        default="auto",
        metadata={
            "choices": ("auto", "full", "minibatch"),
            "help": "full, minibatch, or auto (full batch while rows x activations per row "
            "<= full-batch-max-activations)",
        },
    )
    batch_size: int = field(
        default=0, metadata={"min": 0, "help": "rows per step in mini-batch mode (0: n/8 clipped to 256..8192)"}
    )
    full_batch_max_activations: float = field(
        default=5e7,
        metadata={
            "positive": True,
            "help": "auto mode: largest rows x (inputs + layer outputs) trained full batch (memory, ~0.2 GB "
            "per float32 copy)",
        },
    )
    folding: int = field(
        default=0,
        metadata={
            "min": 0,
            "help": "K >= 2 and no validation split: hold out fold `fold` of a stratified K-fold partition of "
            "train for iterate selection",
            "models": ("linear", "mlp"),  # selects a network's iterate; gbdt holds out --param stop-frac of DATA
            "torchrun": False,  # one process's fold; under torchrun the rows are spread over every process
        },
    )
    fold: int = field(default=0, metadata={"min": 0, "help": "which fold to hold out (0..K-1) with folding"})
    tree_rounds: int = field(
        default=10,
        metadata={"min": 1, "models": ("gbdt",), "help": "gbdt: boosting rounds per outer iteration (docs/ero.md)"},
    )
    s_steps: int = field(
        default=10, metadata={"min": 1, "models": ("gbdt",), "help": "gbdt: Adam steps on s before each boosting round"}
    )


WARM_PARAMS = {
    "bce": ("warm_steps", "warm_lr", "warm_patience", "warm_balanced"),
    "wce": ("warm_patience", "warm_monitor", "warm_epochs"),
}


def _refuse_unused_warm_params(given: dict[str, Any], warm_start: str, model: str) -> None:
    """A warm-start parameter the chosen warm start does not read would be ignored: refuse it. The linear
    model's wce warm start is the exact optimum (L-BFGS) and reads none of them."""
    used = WARM_PARAMS[warm_start] if warm_start == "bce" or model != "linear" else ()
    unused = [key for params in WARM_PARAMS.values() for key in params if key in given and key not in used]
    if not unused:
        return
    keys = ", ".join(dict.fromkeys(key.replace("_", "-") for key in unused))
    if model == "linear" and all(key in WARM_PARAMS["wce"] and key not in WARM_PARAMS["bce"] for key in unused):
        raise DmoError(
            f"--param {keys} applies to the MLP's wce warm start only; the linear model's wce warm start "
            "is the exact optimum and the bce one reads no such parameter: drop it"
        )
    what = (
        "the linear model's wce warm start (the exact optimum)"
        if warm_start == "wce" and model == "linear"
        else f"the {warm_start} warm start"
    )
    other = "bce" if warm_start == "wce" else "wce"
    raise DmoError(f"--param {keys} does not apply to {what}; drop it, or add --param warm-start={other}")


def settings_for(params: EroParams, model: str) -> Settings:
    """The preset for `params.protocol` and the model kind, with explicitly given values on top."""
    base = preset(params.protocol, model)
    given = {f.name: getattr(params, f.name) for f in fields(Settings) if getattr(params, f.name) is not None}
    out = replace(base, **given)
    _refuse_unused_warm_params(given, out.warm_start, model)
    if out.selection == "train" and params.folding:
        raise DmoError(
            "--param selection=train keeps the best iterate on the training rows, so a held-out fold "
            "(folding) would go unused: drop folding or use selection=best"
        )
    return out
