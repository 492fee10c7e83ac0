"""Cross-fitting under torchrun: the folds one process would deal, each process fitting and scoring its own rows.

Each process holds a contiguous share of DATA's labeled rows (ProcessGroup.row_range) and, when --val is
pooled into the folds, a contiguous share of --val's rows (every process has read --val whole). The labels of
every process are gathered once (one integer per row; the training logits are gathered at that size anyway)
and the folds are dealt from them exactly as one process deals them (prep/dataset.py `stratified_folds`, the
same seed, the rows in one process's order: DATA's, then --val's). Fold k is then the same rows whatever the
number of processes, so a model whose fit does not depend on how the rows are shared (the linear model's
L-BFGS optimum) gives one process's out-of-fold scores, threshold and `cv` section. The seed is not offset by
the rank: the folds are one draw, made alike on every process from the same labels, then sliced; a per-process
draw would tie the folds to the process count. The out-of-fold scores are gathered back into that order, so
every process runs the same threshold search and writes the same report as one process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dmocli.errors import DmoError
from dmocli.prep.dataset import Prepared

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup

MIN_TRAINING_ROWS = 2  # what the final fit asks of every process (the MLP's BatchNorm cannot train on one row)


@dataclass
class Placement:
    """Where every process's rows sit among the labeled rows in one process's order (DATA's rows, then the
    pooled --val rows)."""

    group: ProcessGroup
    # the one-process index of each row, the processes' rows concatenated in rank order; None: that order is
    # one process's already (no --val pooled), and no index array of every row is held
    order: np.ndarray | None
    counts: list[int]  # rows per process, in rank order

    @classmethod
    def of(cls, n_rows: int, pooled_val: int, group: ProcessGroup) -> Placement:
        """`n_rows`: this process's rows, its DATA rows followed by its share of `pooled_val` --val rows."""
        start, stop = _val_range(pooled_val, group)
        shares = group.gather_json([n_rows - (stop - start), start, stop])
        counts = [own + stop - start for own, start, stop in shares]
        if not pooled_val:
            return cls(group, None, counts)
        data_rows = sum(own for own, _, _ in shares)
        first = np.cumsum([0, *(own for own, _, _ in shares)])
        order = np.concatenate(
            [
                np.concatenate([np.arange(first[r], first[r] + own), data_rows + np.arange(start, stop)])
                for r, (own, start, stop) in enumerate(shares)
            ]
        ).astype(np.int64)
        return cls(group, order, counts)

    def gathered(self, values: np.ndarray) -> np.ndarray:
        """Every process's `values` of its rows (first axis), in one process's order, on every process."""
        import torch

        parts = self.group.gather_rows(torch.from_numpy(np.ascontiguousarray(values))).numpy()
        if self.order is None:
            return parts
        out = np.empty_like(parts)
        out[self.order] = parts
        return out

    def _rows_of(self, rank: int) -> np.ndarray | slice:
        """The one-process indices of process `rank`'s rows."""
        start = sum(self.counts[:rank])
        rows = slice(start, start + self.counts[rank])
        return rows if self.order is None else self.order[rows]

    def own_folds(self, every_fold: np.ndarray, k: int) -> np.ndarray:
        """This process's rows' folds. Refused alike on every process (each sees every fold): a fold whose
        training part leaves some process fewer than MIN_TRAINING_ROWS rows, which its fit cannot train on."""
        for rank in range(self.group.world_size):
            folds = every_fold[self._rows_of(rank)]
            training = self.counts[rank] - np.bincount(folds, minlength=k)
            if training.min() < MIN_TRAINING_ROWS:
                fold = int(np.argmin(training))
                raise DmoError(
                    f"--cv {k}: without fold {fold}, process {rank} of {self.group.world_size} keeps "
                    f"{int(training[fold])} of its {self.counts[rank]} rows to train on (each process needs "
                    f"{MIN_TRAINING_ROWS}); lower --cv, or start fewer processes"
                )
        return every_fold[self._rows_of(self.group.rank)]


def val_share(val: Prepared, group: ProcessGroup | None) -> Prepared:
    """The --val rows this process pools into its folds (one process: all): each row is then trained on and
    held out once over the group, not once per process."""
    if group is None:
        return val
    start, stop = _val_range(val.n, group)
    return val.take(np.arange(start, stop))


def _val_range(n_val: int, group: ProcessGroup) -> tuple[int, int]:
    """This process's contiguous share of n_val pooled --val rows (sizes differ by at most one)."""
    return group.row_range(np.ones(n_val, dtype=bool)) if n_val else (0, 0)
