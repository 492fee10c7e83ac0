"""One-pass (streaming) F-measure solvers: FOFO and the paper's baselines OFO and LR.

All three share the posterior learner, online logistic regression by
mini-batch SGD, and differ only in the threshold that turns eta_t(x_t) into
a prediction (docs/algorithms.md#fofo):

* fofo: the learned threshold of Liu et al. (NeurIPS 2018), staged SGD on Q(theta);
* ofo:  Busa-Fekete et al. (2015), threshold = online F of past predictions / (1+b^2);
* lr:   fixed threshold 0.5.

Online protocol. The logistic model is per-row SGD (step lr/sqrt(t) at row
t) vectorized over mini-batches of about sqrt(t) rows, at most `batch-size`
(OnlineLogistic). For every row of a mini-batch, eta_t = sigmoid(w.x_t) uses
the weights from before that mini-batch, i.e. learned from earlier rows only;
its prediction is made with a threshold that depends only on earlier rows
too; only then are the mini-batch's labels used (one update, the sum of the
per-row steps, then the threshold recurrence). Mini-batching thus delays the
logistic update by fewer than batch-size rows but never lets a label inform
its own prediction; with batch-size 1 it is the paper's per-row algorithm.

The streaming pipeline (dmocli/pipelines/streaming.py) feeds these solvers; they never
see the whole data.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import numpy as np

from dmocli.models.architecture import linear_state
from dmocli.solvers.base import FitContext, SolverParams, Stream, StreamFitResult, StreamingSolver
from dmocli.solvers.online.thresholds import FofoThreshold, ofo_predictions

CURVE_POINTS = 200
PROBABILITY_FLOOR = 1e-7  # a learned threshold of 0 would be logit -inf; clamp so the model file stays finite


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) in place, in z's precision; exp overflowing to inf gives the right limit 0
    (callers silence that overflow warning once around their loop, not per call).

    numpy rather than scipy.special.expit: the streaming path imports
    neither scipy nor torch, which would double its start-up.
    """
    np.exp(np.negative(z, out=z), out=z)
    z += 1
    return np.reciprocal(z, out=z)


class OnlineLogistic:
    """Online logistic regression: per-row SGD with step lr / sqrt(t) at row t, vectorized over mini-batches.

    A mini-batch of b rows starting at row t takes the sum of the b per-row steps with every gradient at the
    batch's starting weights: w -= lr / sqrt(t) * sum_i (p_i - y_i) x_i. With b = 1 this is the paper's
    per-row algorithm; larger b only delays each update by fewer than b rows. b grows with sqrt(t) up to
    batch_size (see _size), so a batch's step on its mean gradient, lr * b / sqrt(t), never exceeds the
    per-row algorithm's first step lr: short streams learn as the per-row algorithm does (a fixed 256 rows
    scored by the all-zero start and ~12 steps for 3,000 rows left the posterior, and FOFO's threshold, far
    off), long ones run at mini-batch speed. Batch bounds depend on the row index only: a batch that
    straddles two chunks (record batches, files) scores its rows as they come and updates once complete.

    With `average`, predictions use the per-row running average of the iterates (Polyak-Ruppert), as the
    paper's eq. (5) allows; memory is O(d).
    """

    def __init__(self, n_features: int, lr: float, batch_size: int, average: bool):
        self.w = np.zeros(n_features, dtype=np.float32)
        self.b = 0.0
        self.w_avg = np.zeros(n_features, dtype=np.float32)
        self.b_avg = 0.0
        self.lr = lr
        self.batch_size = batch_size
        self.average = average
        self.steps = 0
        self.seen = 0  # rows whose labels were used (completed batches)
        self._open = 0  # rows of the current, incomplete batch scored so far
        self._grad_w = np.zeros(n_features, dtype=np.float32)
        self._grad_b = 0.0

    def _size(self, seen: int | None = None) -> int:
        """Rows of the batch starting after `seen` rows (default: now): batch_size once it is at most
        sqrt(seen) and divides seen, else the largest power of two that does both. Growing only at multiples
        keeps every later batch on multiples of batch_size, so 64k-row chunks need no re-cutting copies."""
        seen = self.seen if seen is None else seen
        root = math.isqrt(seen)
        if self.batch_size <= root and seen % self.batch_size == 0:
            return self.batch_size
        size = 1 << max(0, min(root, self.batch_size).bit_length() - 1)  # the largest power of two <= both
        while seen % size:
            size >>= 1
        return size

    def whole_batches(self, rows: int) -> int:
        """How many of the next `rows` rows fill whole mini-batches (fit_stream cuts chunks there, so a batch
        never straddles two chunks and the float sums, hence the model, do not depend on the chunking)."""
        seen, used = self.seen, 0
        while (size := self._size(seen)) < self.batch_size and used + size <= rows:
            used, seen = used + size, seen + size
        if size == self.batch_size:
            used += (rows - used) // size * size
        return used

    def process(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """eta for every row, each computed before its own mini-batch's labels update the weights."""
        eta = np.empty(X.shape[0])  # float64: the threshold recurrences run in double precision
        y = y.astype(np.float32)  # float32 residuals keep the gradient product in float32
        # Per-call overhead is the cost here (~4,000 batches per million rows), hence one errstate for the
        # loop and sum() rather than mean().
        with np.errstate(over="ignore"):
            start = 0
            while start < X.shape[0]:  # loop over mini-batches, not rows
                size = self._size()
                stop = min(X.shape[0], start + size - self._open)
                Xb = X[start:stop]
                z = Xb @ self.w
                z += self.b
                p = _sigmoid(z)
                if self.average and self.steps:
                    z_avg = Xb @ self.w_avg
                    z_avg += self.b_avg
                    eta[start:stop] = _sigmoid(z_avg)
                else:
                    eta[start:stop] = p
                residual = p - y[start:stop]
                self._grad_w += residual @ Xb
                self._grad_b += float(residual.sum())
                self._open += stop - start
                if self._open == size:
                    self.finish_batch()
                start = stop
        return eta

    def finish_batch(self) -> None:
        """Apply the current batch's update (also called at the end of a pass for a partial last batch)."""
        if not self._open:
            return
        step = self.lr / math.sqrt(self.seen + 1)
        self.w -= step * self._grad_w
        self.b -= step * self._grad_b
        self.steps += 1
        self.seen += self._open
        if self.average:
            share = self._open / self.seen
            self.w_avg += (self.w - self.w_avg) * share
            self.b_avg += (self.b - self.b_avg) * share
        self._grad_w[:] = 0
        self._grad_b = 0.0
        self._open = 0

    def weights(self) -> tuple[np.ndarray, float]:
        return (self.w_avg, self.b_avg) if self.average and self.steps else (self.w, self.b)


class OnlineScore:
    """Confusion counts of the online predictions of one pass and a bounded curve of online F vs rows seen.

    The curve keeps at most 2 * CURVE_POINTS points for any stream length:
    when full, every other point is dropped and the spacing doubles.
    """

    def __init__(self, beta: float, expected_rows: int | None, rows_before: int = 0):
        self.b2 = beta * beta
        self.tp = self.fp = self.fn = self.tn = 0
        self.rows_before = rows_before
        self.interval = max(1, (expected_rows or 1024) // CURVE_POINTS)
        self.curve_rows: list[int] = []
        self.curve_f: list[float] = []

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def f_beta(self) -> float:
        den = (1 + self.b2) * self.tp + self.b2 * self.fn + self.fp
        return (1 + self.b2) * self.tp / den if den else 0.0

    def add(self, pred: np.ndarray, y: np.ndarray) -> None:
        pred = pred.astype(bool)
        yb = y.astype(bool)
        seen = self.n
        marks = np.arange(self.interval - seen % self.interval - 1, y.size, self.interval)
        if marks.size:
            tp = self.tp + np.cumsum(pred & yb)[marks]
            pos = self.tp + self.fn + np.cumsum(yb)[marks]
            predicted = self.tp + self.fp + np.cumsum(pred)[marks]
            den = self.b2 * pos + predicted
            f = np.divide((1 + self.b2) * tp, den, out=np.zeros(marks.size), where=den > 0)
            self.curve_rows.extend((self.rows_before + seen + marks + 1).tolist())
            self.curve_f.extend(f.tolist())
            while len(self.curve_rows) > 2 * CURVE_POINTS:
                self.curve_rows, self.curve_f = self.curve_rows[1::2], self.curve_f[1::2]
                self.interval *= 2
        tp = int((pred & yb).sum())
        fp = int(pred.sum()) - tp
        pos = int(yb.sum())
        self.tp += tp
        self.fp += fp
        self.fn += pos - tp
        self.tn += y.size - tp - fp - (pos - tp)

    def to_dict(self) -> dict[str, Any]:
        n_pos = self.tp + self.fn
        predicted = self.tp + self.fp
        return {
            "n": self.n,
            "n_pos": n_pos,
            "tp": self.tp,
            "fp": self.fp,
            "tn": self.tn,
            "fn": self.fn,
            "precision": self.tp / predicted if predicted else 0.0,
            "recall": self.tp / n_pos if n_pos else 0.0,
            "f_beta": self.f_beta,
            "beta": math.sqrt(self.b2),
        }


class OnlineSolver(StreamingSolver):
    """Base of the one-pass solvers (fofo, ofo, lr): one online logistic regression; subclasses supply the
    threshold rule."""

    @dataclass
    class Params(SolverParams):
        lr: float = field(
            default=2.0,
            metadata={
                "positive": True,
                "help": "SGD step of the logistic model at row t is lr/sqrt(t) (the paper's initial step)",
            },
        )
        batch_size: int = field(
            default=256,
            metadata={
                "min": 1,
                "help": "most rows per SGD mini-batch; batches grow as sqrt(rows seen) up to it "
                "(1 = the per-row algorithm)",
            },
        )
        average: bool = field(default=False, metadata={"help": "predict with the averaged logistic iterate"})
        stats_rows: int = field(
            default=262_144,
            metadata={
                "min": 0,
                "help": "standardization statistics from evenly spaced parquet row groups of about this many rows "
                "(0: every row, an extra full pass; CSV and string columns always use every row)",
            },
        )

    @abc.abstractmethod
    def threshold_rule(self, beta: float, n: int | None, params: OnlineSolver.Params) -> "ThresholdRule":
        """How predictions are made from the posterior while the stream is read, and the threshold kept."""

    def fit_stream(self, stream: Stream, ctx: FitContext) -> StreamFitResult:
        """`stream.epochs` passes; with stream.n unknown (None), FOFO's stages follow the doubling scheme."""
        batches, n, n_features, epochs, progress = (
            stream.batches,
            stream.n,
            stream.n_features,
            stream.epochs,
            stream.progress,
        )
        p = ctx.params
        beta = ctx.problem.beta
        learner = OnlineLogistic(n_features, p.lr, max(1, p.batch_size), p.average)
        rule = self.threshold_rule(beta, n, p)
        passes: list[dict[str, Any]] = []
        curve_rows: list[int] = []
        curve_f: list[float] = []
        rows_before = 0
        for epoch in range(epochs):
            if epoch:
                rule.restart(n)
            score = OnlineScore(beta, n, rows_before)
            for X, y in _whole_batches(batches(), learner):
                eta = learner.process(X, y)
                pred = rule.decide(eta, y)
                score.add(pred, y)
                if progress is not None:
                    progress(rows_before + score.n, score.f_beta)
            learner.finish_batch()
            passes.append(score.to_dict())
            curve_rows += score.curve_rows
            curve_f += score.curve_f
            rows_before += score.n
        w, b = learner.weights()
        theta = float(np.clip(rule.final, PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR))
        online = {
            **passes[0],
            "passes": passes,
            "final_threshold_probability": theta,
            "curve": {"rows": curve_rows, "f_beta": curve_f},
        }
        trace = {"epochs": epochs, "rows": rows_before, "sgd_steps": learner.steps, **rule.trace()}
        return StreamFitResult(
            weights=linear_state(w, b), threshold=math.log(theta / (1 - theta)), trace=trace, online=online
        )


def _whole_batches(
    batches: Iterable[tuple[np.ndarray, np.ndarray]], learner: OnlineLogistic
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Re-cut the stream at the learner's mini-batch boundaries (the rest waits for the next chunk): the
    model depends on the row sequence only, not on how the file happens to be split (row groups, CSV
    blocks, several files). Lazy: each cut is computed after the learner has processed the piece before."""
    carry: tuple[np.ndarray, np.ndarray] | None = None
    for X, y in batches:
        if carry is not None:
            X, y = np.concatenate([carry[0], X]), np.concatenate([carry[1], y])
        cut = learner.whole_batches(len(y))
        if cut:
            yield X[:cut], y[:cut]
        carry = (X[cut:], y[cut:]) if cut < len(y) else None
    if carry is not None:
        yield carry


class ThresholdRule:
    """Turns eta into predictions, one chunk at a time, learning from the chunk's labels afterwards."""

    final: float

    def decide(self, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def restart(self, n: int | None) -> None:
        """Called at the start of every pass after the first."""

    def trace(self) -> dict[str, Any]:
        return {}


class FofoRule(ThresholdRule):
    def __init__(self, beta: float, n: int | None):
        self.learner = FofoThreshold(beta, n)

    @property
    def final(self) -> float:
        return self.learner.average

    def decide(self, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
        return eta >= self.learner.process(eta, y)

    def restart(self, n: int | None) -> None:
        self.learner.restart(n)

    def trace(self) -> dict[str, Any]:
        s = self.learner.schedule
        return {
            "stages": s.stages,
            "stage_rows": s.stage_rows,
            "doubling": self.learner.doubling,
            "schedule_restarts": self.learner.restarts,
            "recurrence_iterations": self.learner.iterations,
        }


class OfoRule(ThresholdRule):
    def __init__(self, beta: float):
        self.b2 = beta * beta
        self.tp = self.pos = self.predicted = 0
        self.iterations = 0

    @property
    def final(self) -> float:
        den = self.b2 * self.pos + self.predicted
        return self.tp / den if den else 0.0

    def decide(self, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
        pred, _, iterations = ofo_predictions(eta, y, tp0=self.tp, pos0=self.pos, predicted0=self.predicted, b2=self.b2)
        self.iterations += iterations
        self.tp += int((pred & (y == 1)).sum())
        self.pos += int(y.sum())
        self.predicted += int(pred.sum())
        return pred

    def trace(self) -> dict[str, Any]:
        return {"recurrence_iterations": self.iterations}


class FixedRule(ThresholdRule):
    final = 0.5

    def decide(self, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
        return eta >= self.final


class Fofo(OnlineSolver):
    name = "fofo"
    summary = "FOFO (Liu et al. 2018): one-pass online logistic regression with a learned F-optimal threshold"

    @dataclass
    class Params(OnlineSolver.Params):
        horizon: str = field(
            default="auto",
            metadata={
                "choices": ("auto", "doubling"),
                "help": "auto: stage schedule from the row count; doubling: doubling scheme as if n were unknown",
            },
        )

    def threshold_rule(self, beta: float, n: int | None, params: OnlineSolver.Params) -> ThresholdRule:
        return FofoRule(beta, n if params.horizon == "auto" else None)


class Ofo(OnlineSolver):
    name = "ofo"
    summary = "OFO (Busa-Fekete et al. 2015): online logistic regression, threshold = online F / (1+beta^2)"

    def threshold_rule(self, beta: float, n: int | None, params: OnlineSolver.Params) -> ThresholdRule:
        return OfoRule(beta)


class OnlineLR(OnlineSolver):
    name = "lr"
    summary = "online logistic regression thresholded at probability 0.5 (FOFO's baseline)"

    def threshold_rule(self, beta: float, n: int | None, params: OnlineSolver.Params) -> ThresholdRule:
        return FixedRule()
