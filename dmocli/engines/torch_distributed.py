"""`dmo train` across processes started by torchrun (torch.distributed: an existing engine for training on \
several machines).

    torchrun --nproc-per-node 4 --no-python dmo train data/ -o model.safetensors

torchrun starts the command once per process and sets RANK, WORLD_SIZE,
LOCAL_RANK and the rendezvous address; with WORLD_SIZE > 1 `train` joins the
process group (NCCL on CUDA, one GPU per local rank; gloo on CPU). Every
process makes the same global decisions from a streaming pass over the whole
data (classes, standardization, categorical levels: exactly what one process
would fit), then holds only its own contiguous range of rows in memory.
Solvers that support it reduce their gradients over the group; process 0
gathers the training logits for the threshold search and alone writes the
model and report.

No pickling: everything that crosses processes is a tensor, text travelling
as UTF-8 bytes.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from dmocli.engines.torchrun import alone, int_env
from dmocli.errors import DmoError

T = TypeVar("T")
# Long enough for every process's streaming pass over large data before the first collective after it.
TIMEOUT = datetime.timedelta(hours=2)


@dataclass
class ProcessGroup:
    """This process's place in the group and the collectives `train` and the solvers use."""

    rank: int
    world_size: int
    backend: str
    device: torch.device  # where this process trains (cuda:LOCAL_RANK under NCCL)

    @property
    def primary(self) -> bool:
        return self.rank == 0

    @property
    def _wire(self) -> torch.device:
        """Where collective tensors must live: NCCL moves CUDA tensors only, gloo CPU ones."""
        return self.device if self.backend == "nccl" else torch.device("cpu")

    def largest_share(self, n_rows: int) -> int:
        """The most rows of n_rows that one process holds: what sizes its memory and its batches."""
        return -(-n_rows // self.world_size)

    def row_range(self, used: np.ndarray) -> tuple[int, int]:
        """This rank's contiguous range of rows, holding its equal share (sizes differ by at most one) of the
        rows marked in `used` (the labeled ones: unlabeled rows that --drop-unlabeled drops, all at the end of
        DATA say, must not leave a process without rows)."""
        return _share(used, self.rank, self.world_size)

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise sum over all processes (a new tensor on `tensor`'s device)."""
        wired = tensor.detach().to(self._wire, copy=True)
        dist.all_reduce(wired, op=dist.ReduceOp.SUM)
        return wired.to(tensor.device)

    def sum_int(self, value: int) -> int:
        return int(self.sum(torch.tensor([value], dtype=torch.int64)).item())

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Replace each parameter's gradient by its sum over all processes (one flat all-reduce)."""
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return
        flat = self.sum(torch.cat([g.reshape(-1) for g in grads]))
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def max(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise maximum over all processes."""
        wired = tensor.detach().to(self._wire, copy=True)
        dist.all_reduce(wired, op=dist.ReduceOp.MAX)
        return wired.to(tensor.device)

    def from_rank_zero(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank 0's value of `tensor` on every process: a decision every process must take alike even where the
        numbers behind it could differ in the last bits between machines."""
        wired = tensor.detach().to(self._wire, copy=True)
        dist.broadcast(wired, src=0)
        return wired.to(tensor.device)

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers everywhere: the model every process goes on with is the one written."""
        for tensor in [*module.parameters(), *module.buffers()]:
            wired = tensor.detach().to(self._wire, copy=True)
            dist.broadcast(wired, src=0)
            with torch.no_grad():
                tensor.copy_(wired.to(tensor.device))

    def gather_rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every process's rows (first axis) concatenated in rank order, on every process."""
        return torch.cat(self._gather_parts(tensor)).to(tensor.device)

    def gather_json(self, value: Any) -> list[Any]:
        """A JSON-serializable value from every process, in rank order, on every process."""
        data = torch.frombuffer(bytearray(json.dumps(value).encode()), dtype=torch.uint8)  # never empty: "null"
        return [json.loads(bytes(part.tolist()).decode()) for part in self._gather_parts(data)]

    def _gather_parts(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every process's rows of `tensor`, one CPU tensor per rank (padded to the longest on the wire)."""
        counts = self._all_gather(torch.tensor([tensor.shape[0]], dtype=torch.int64)).tolist()
        longest = max(counts)
        padded = torch.zeros((longest, *tensor.shape[1:]), dtype=tensor.dtype)
        padded[: tensor.shape[0]] = tensor.detach().cpu()
        parts = self._all_gather(padded).reshape(self.world_size, longest, *tensor.shape[1:])
        return [parts[r, : counts[r]] for r in range(self.world_size)]

    def agree(self, step: Callable[[], T]) -> T:
        """Run a step that may fail on some processes only (their rows); if it failed anywhere, every process
        raises the lowest failing rank's DmoError, so all exit alike instead of the others waiting forever."""
        try:
            result, message = step(), None
        except DmoError as exc:
            result, message = None, str(exc)
        messages = self.gather_json(message)
        failed = [rank for rank, text in enumerate(messages) if text is not None]
        if not failed:
            return result  # type: ignore[return-value]
        first = messages[failed[0]]
        if len(failed) == self.world_size and len(set(messages)) == 1:
            raise DmoError(first)  # the same for every process (the options, DATA itself): no process to name
        raise DmoError(f"{first} (process {failed[0]} of {self.world_size})")

    def _all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        wired = tensor.to(self._wire)
        parts = [torch.empty_like(wired) for _ in range(self.world_size)]
        dist.all_gather(parts, wired)
        return torch.cat(parts).cpu()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def _share(used: np.ndarray, rank: int, world_size: int) -> tuple[int, int]:
    positions = np.flatnonzero(used)
    bounds = [0, *(int(positions[r * positions.size // world_size]) for r in range(1, world_size)), len(used)]
    return bounds[rank], bounds[rank + 1]


class OneProcess:
    """ProcessGroup's collectives for a process that is the whole group, so a solver reads the same with or
    without torchrun: sums and gathers of one process are the values themselves."""

    rank, world_size, primary = 0, 1, True

    def row_range(self, used: np.ndarray) -> tuple[int, int]:
        return 0, len(used)

    def largest_share(self, n_rows: int) -> int:
        return n_rows

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach()

    max = gather_rows = from_rank_zero = sum

    def sum_int(self, value: int) -> int:
        return value

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        pass

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        pass


def start(device_option: str) -> ProcessGroup:
    """Join the group torchrun set up. --device auto/cuda takes GPU LOCAL_RANK (NCCL); cpu uses gloo."""
    local_rank = int_env("LOCAL_RANK", 0)
    if device_option.startswith("cuda:"):
        raise DmoError(
            f"--device {device_option} names one GPU, but under torchrun each process takes GPU "
            "LOCAL_RANK; use --device cuda or auto"
        )
    if device_option not in ("auto", "cpu", "cuda"):
        raise DmoError(f"--device {device_option!r} is not known (use auto, cpu or cuda)")
    cuda = device_option != "cpu" and torch.cuda.is_available()
    if device_option == "cuda" and not cuda:
        raise DmoError("--device cuda was asked for but no CUDA device is available (use --device auto or cpu)")
    if cuda and local_rank >= torch.cuda.device_count():
        raise alone(
            DmoError(
                f"process with LOCAL_RANK {local_rank} has no GPU of its own ({torch.cuda.device_count()} "
                "visible); start at most that many processes per node (--nproc-per-node)"
            )
        )
    device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(device)
    if not dist.is_available():
        raise DmoError("this torch build has no torch.distributed; train in one process (run dmo without torchrun)")
    try:
        dist.init_process_group(backend, timeout=TIMEOUT)
    except (RuntimeError, ValueError) as exc:
        raise alone(
            DmoError(
                f"cannot join the torchrun process group: {str(exc).splitlines()[0] if str(exc) else exc} "
                "(start the command with torchrun, or unset WORLD_SIZE to train in one process)"
            )
        ) from exc
    return ProcessGroup(rank=dist.get_rank(), world_size=dist.get_world_size(), backend=backend, device=device)
