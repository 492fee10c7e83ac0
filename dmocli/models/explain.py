"""Why a row scored as it did: each original column's additive contribution to the row's logit.

A fraud analyst has to say why a row was flagged, so `dmo predict --explain K`, `DmoClassifier.explain` and
`dmo info --features` give, per feature column of the model (`explained_columns`: a categorical column's one-hot
levels and an embedding's dimensions added into one; the columns `--dates parts` and `--parse-numbers` derive, as
`when.hour` and `when.days_since`, each its own), a contribution to the logit the decision compares with the
threshold (binary models: the positive class's logit; multi-class: the logit of the class the model decides
on, its class offsets applied, as `dmo predict` writes it; the offset itself is no column's). Contributions plus
the row's `bias` sum to that logit. How each model family is split up:

- linear: w_j * x_j on the standardized inputs, `bias` the intercept: exact.
- gbdt: XGBoost's own `pred_contribs` (TreeSHAP), `bias` its base value: exact.
- mlp: integrated gradients from the all-zero encoded row (every numeric column at its training mean, no
  categorical level) with 64 midpoint steps; `bias` is the network's logit at that row. They add up to the
  logit to the accuracy of the 64-step integral (a piecewise-linear ReLU network: close, not exact).

A `--cv-transfer ensemble` model (the K fold models) averages its members' logits, or, for a calibrated binary
model, their probabilities. Its contributions are the members' contributions weighted along the straight path
from the members' biases to their logits by the ensemble's own derivative (a 1-D integral per row, Gauss-Legendre
quadrature of 32 nodes, exact to float rounding for this smooth map), so they still add up to its logit: for an
average of logits every member weighs 1/K.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli.errors import DmoError
from dmocli.models.stored_network import LinearLayer
from dmocli.prep.features import Preprocessor

if TYPE_CHECKING:
    import torch

    from dmocli.models.modelfile import DmoModel

IG_STEPS = 64  # integrated-gradient midpoints for mlp models
PATH_NODES = 32  # Gauss-Legendre nodes of the ensemble's path integral
CHUNK = 2048  # rows per integrated-gradient pass: IG_STEPS x CHUNK x inputs floats at a time

METHODS = {
    "linear": "exact: coefficient x standardized input, summed over a column's one-hot levels",
    "gbdt": "exact: XGBoost's pred_contribs (TreeSHAP), summed over a column's one-hot levels",
    "mlp": f"integrated gradients from the all-zero encoded row (training means, no level), {IG_STEPS} steps",
}


@dataclass
class Contributions:
    """Per row and feature column, the contribution to the explained logit; `values.sum(1) + bias` is that logit.

    Attributes
    ----------
    columns : list of str
        The model's feature columns, in its order (`explained_columns`).
    values : ndarray (n, len(columns)), float64
    bias : ndarray (n,), float64
        The part no column explains: the intercept, XGBoost's base value, or the mlp's logit at the zero row.
    target : ndarray (n,), int64
        The logit explained: 0 for a binary model's positive logit, else the index of the class decided on.
    method : str
    """

    columns: list[str]
    values: np.ndarray
    bias: np.ndarray
    target: np.ndarray
    method: str

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Each row's largest contributions by absolute value, at most k (the model's column count where it has
        fewer, never a padded rank): (names (n, k') object, values (n, k') float64)."""
        order = np.argsort(-np.abs(self.values), axis=1, kind="stable")[:, : shown_count(len(self.columns), k)]
        return np.asarray(self.columns, dtype=object)[order], np.take_along_axis(self.values, order, axis=1)

    def top_columns(self, k: int) -> dict[str, np.ndarray]:
        """`top(k)` as the named columns `dmo predict --explain k` writes, in its order (`rank_columns`)."""
        names, values = self.top(k)
        columns: dict[str, np.ndarray] = {}
        for i in range(names.shape[1]):
            feature, contribution = rank_columns(i + 1)
            columns[feature], columns[contribution] = names[:, i], values[:, i]
        return columns


def rank_columns(rank: int) -> tuple[str, str]:
    """The two output columns of a rank (1 is the largest): the feature's name and its contribution to the logit.
    `explain_<i>_contribution`, not `_value`: the number is what the feature added to the logit, not its value."""
    return f"explain_{rank}_feature", f"explain_{rank}_contribution"


def check_k(k: int) -> None:
    """--explain K: a count of columns per row (the Python API's; the CLI's is declared in PredictOptions)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise DmoError(f"--explain {k!r} is how many contributions to write per row: give a whole number from 1")


def shown_count(columns: int, k: int) -> int:
    """How many contributions a row gets for `--explain k` of a model of `columns` feature columns: k, at most
    every column (`--explain 1000` of 10 columns writes 10 ranks, not 990 empty ones, and `--explain 10000000`
    allocates nothing for ranks no model has)."""
    return min(int(k), columns)


def explained_columns(pre: Preprocessor) -> list[str]:
    """The columns contributions are given for: the model's feature columns as the encoding sees them (a date
    column's derived parts each by name, a categorical column once, an embedding once). `pre.input_columns` names
    the raw columns a table must hold instead, where a date column stands for all its parts."""
    return [pre.embedding] if pre.embedding else [*pre.numeric, *pre.categorical]


def column_groups(pre: Preprocessor) -> np.ndarray:
    """For each encoded input, the index of its column in `explained_columns(pre)`."""
    if pre.embedding:
        return np.zeros(pre.embedding_dim, dtype=np.int64)
    groups = list(range(len(pre.numeric)))
    for index, levels in enumerate(pre.categorical.values(), start=len(pre.numeric)):
        groups += [index] * (1 if pre.categorical_codes else len(levels))
    return np.asarray(groups, dtype=np.int64)


def contributions(model: DmoModel, features: np.ndarray) -> Contributions:
    """The contributions of encoded rows (the preprocessor's output) to the model's logits of them."""
    features = np.ascontiguousarray(features, dtype=np.float32)
    if model.architecture.kind == "mlp":
        model.module()  # integrated gradients need torch layers; a linear or gbdt model's stored members do not
    members = model.members()
    network = model.network  # the ensemble's probability map, stored or torch's: `_ensemble` takes either
    logits = model.logits_of_features(features)
    # multi-class: the class decided on (offsets applied), which the plain arg-max of the logits is not when an
    # offset moves the decision
    target = np.zeros(len(features), dtype=np.int64) if model.binary else model.decide(logits).astype(np.int64)
    parts = [_member(model, member, features, target) for member in members]
    if len(parts) == 1:
        encoded, bias = parts[0]
    else:
        encoded, bias = _ensemble(parts, getattr(network, "member_map", None))
    groups = column_groups(model.preprocessor)
    columns = explained_columns(model.preprocessor)
    values = np.zeros((len(features), len(columns)))
    np.add.at(values.T, groups, encoded.T)
    return Contributions(columns, values, bias, target, METHODS[model.architecture.kind])


def _member(model: DmoModel, member: Any, features: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One network's (per encoded input contributions (n, d), bias (n,)) to its logit of `target`."""
    kind = model.architecture.kind
    if kind == "gbdt":
        return _tree_contributions(member, features, target, model.preprocessor.feature_types)
    if kind == "linear":
        weight, bias = linear_weights(member)
        return weight[target] * features, bias[target]  # (n, d): the explained logit's row
    return _integrated_gradients(member, features, target)


def linear_weights(member: Any) -> tuple[np.ndarray, np.ndarray]:
    """A linear member's weight (k, d) and bias (k,) in float64: a loaded file's numpy layer (stored_network's
    LinearLayer) or a trained torch one (an nn.Sequential whose first layer is the nn.Linear)."""
    layer = member if isinstance(member, LinearLayer) else member[0]
    return as_array(layer.weight).astype(np.float64), as_array(layer.bias).astype(np.float64)


def as_array(value: Any) -> np.ndarray:
    """A stored numpy array as it is, a torch tensor (a trained network's) copied out to numpy."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def _tree_contributions(
    member: Any, features: np.ndarray, target: np.ndarray, feature_types: list[str] | None
) -> tuple[np.ndarray, np.ndarray]:
    """XGBoost's TreeSHAP values of the explained margin, and its bias column."""
    import xgboost

    typed = {"feature_types": feature_types, "enable_categorical": True} if feature_types else {}
    matrix = xgboost.DMatrix(features, missing=np.nan, **typed)
    shap = member.xgb_booster().predict(matrix, pred_contribs=True).astype(np.float64)
    if shap.ndim == 3:  # multi-class: (n, K, d + 1)
        shap = shap[np.arange(len(features)), target]
    return shap[:, :-1], shap[:, -1]


def _integrated_gradients(
    member: torch.nn.Module, features: np.ndarray, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Integrated gradients of the target logit from the zero row, midpoint rule; bias: the logit at zero."""
    import torch

    was_training = member.training
    member.eval()
    device = next(member.parameters()).device
    alphas = (torch.arange(IG_STEPS, dtype=torch.float32, device=device) + 0.5) / IG_STEPS
    values = np.zeros(features.shape, dtype=np.float64)
    try:
        with torch.enable_grad():
            for start in range(0, len(features), CHUNK):
                x = torch.from_numpy(features[start : start + CHUNK]).to(device)
                rows = torch.from_numpy(target[start : start + CHUNK]).to(device)
                path = (alphas[:, None, None] * x[None]).reshape(-1, x.shape[1]).requires_grad_(True)
                out = member(path).reshape(IG_STEPS, len(x), -1)
                chosen = out.gather(2, rows[None, :, None].expand(IG_STEPS, -1, 1)).sum()
                (grad,) = torch.autograd.grad(chosen, path)
                mean_grad = grad.reshape(IG_STEPS, len(x), -1).mean(dim=0)
                values[start : start + len(x)] = (x * mean_grad).double().cpu().numpy()
        with torch.inference_mode():
            at_zero = member(torch.zeros(1, features.shape[1], device=device)).double().cpu().numpy()[0]
    finally:
        member.train(was_training)
    return values, at_zero[target]


def _ensemble(parts: list[tuple[np.ndarray, np.ndarray]], member_map: Any) -> tuple[np.ndarray, np.ndarray]:
    """Members' contributions combined into the ensemble's: weight_k = the integral over t in [0, 1] of the
    ensemble logit's derivative in member k's logit, along z(t) = bias + t (logit - bias). Then the weighted
    contributions add up to L(logit) - L(bias), and L(bias) is the bias (docs: module docstring)."""
    contributions = np.stack([values for values, _ in parts])  # (K, n, d)
    biases = np.stack([bias for _, bias in parts])  # (K, n)
    if member_map is None:  # the logits' mean: linear, each member weighs 1/K
        return contributions.mean(axis=0), biases.mean(axis=0)
    slope, intercept = (float(v) for v in as_array(member_map))
    logits = biases + contributions.sum(axis=2)  # each member's logit, (K, n)
    nodes, node_weights = np.polynomial.legendre.leggauss(PATH_NODES)
    nodes, node_weights = (nodes + 1) / 2, node_weights / 2  # on [0, 1]
    weights = np.zeros_like(biases)
    for t, w in zip(nodes, node_weights):
        weights += w * _map_gradient(slope * (biases + t * (logits - biases)) + intercept) * slope
    combined = np.einsum("kn,knd->nd", weights, contributions)
    return combined, _mapped_logit(slope * biases + intercept)


def _map_gradient(mapped: np.ndarray) -> np.ndarray:
    """d/dm_k of logit(mean_k sigmoid(m_k)), (K, n): (1 - p_k) p_k / sum p + p_k (1 - p_k) / sum (1 - p), in logs."""
    from scipy.special import log_expit, softmax

    up, down = log_expit(mapped), log_expit(-mapped)
    return np.exp(down) * softmax(up, axis=0) + np.exp(up) * softmax(down, axis=0)


def _mapped_logit(mapped: np.ndarray) -> np.ndarray:
    """logit(mean_k sigmoid(m_k)), as the ensemble computes it (networks.FoldEnsemble.forward; log K cancels)."""
    from scipy.special import log_expit, logsumexp

    return logsumexp(log_expit(mapped), axis=0) - logsumexp(log_expit(-mapped), axis=0)
