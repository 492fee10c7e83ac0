"""The output rules every command shares: outputs written under a temporary name and renamed (never left
half-written), output paths checked against the inputs and each other before any work, and suffixes that
say what a file holds."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import tempfile
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from dmocli.data.sources import CSV_SUFFIXES, DATA_SUFFIXES, PARQUET_SUFFIXES, Source, is_csv_file, is_stdin
from dmocli.errors import DmoError, ReaderStopped, UnreachableTarget

# Renames held back until a whole command has succeeded (outputs_together); None: each output is renamed when done.
_HELD_RENAMES: ContextVar[list[tuple[Path, Path]] | None] = ContextVar("held_renames", default=None)


@contextlib.contextmanager
def outputs_together() -> Iterator[None]:
    """Every output written inside the block appears only when the whole block succeeds: all of them, or none.

    A model file renamed into place before its --report (or the JSON on standard output) failed to be written
    left a model that no report describes; a run that fails on its last output now leaves every output as it was.
    A refused target (exit 3) counts as done: its report is what the caller asked for. So does a reader of
    standard output that went away (ReaderStopped, `dmo train ... | head -n 1`): the files were complete before
    their summary was printed, and a stopped reader is no reason to throw them away.
    """
    held: list[tuple[Path, Path]] = []
    token = _HELD_RENAMES.set(held)
    try:
        yield
    except (UnreachableTarget, ReaderStopped):
        _rename_all(held)
        raise
    else:
        _rename_all(held)
    finally:
        _HELD_RENAMES.reset(token)
        for tmp, _ in held:
            if tmp.exists():
                tmp.unlink()


@contextlib.contextmanager
def renamed_at_once() -> Iterator[None]:
    """Outputs written inside the block are renamed into place as soon as each is complete, even inside
    outputs_together: checkpoints (extract's shards) that a later run resumes from must outlive a failed run."""
    token = _HELD_RENAMES.set(None)
    try:
        yield
    finally:
        _HELD_RENAMES.reset(token)


def _rename_all(held: list[tuple[Path, Path]]) -> None:
    for tmp, target in held:
        os.replace(tmp, target)


def is_special(path: Path) -> bool:
    """An existing output that is not a regular file or folder (/dev/null, a named pipe, /dev/stdout's link):
    it is written into, as shell users expect, since a rename would replace the device or pipe itself."""
    try:
        mode = os.stat(path).st_mode  # follows links
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _real_target(path: Path) -> Path:
    """Where a regular output goes: through a symbolic link to the file it names (the link stays a link)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def _stops_deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM for the few lines between creating a file and arming its removal: a stop that
    landed there would leave the file behind. Held stops are raised again when the block ends.

    Python runs its signal handlers in the main thread whatever thread the kernel chose, so a signal mask on this
    thread does not hold them while pyarrow's or OpenMP's threads exist (measured: the probe file left behind by
    a SIGTERM under load); replacing the handlers for the block does. Outside the main thread handlers cannot be
    replaced, and a stop's handler does not run there anyway."""
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {stop: signal.getsignal(stop) for stop in stops}
    if threading.current_thread() is not threading.main_thread() or None in previous.values():
        yield
        return
    held: list[int] = []
    for stop in stops:
        signal.signal(stop, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
        for signum in held:
            signal.raise_signal(signum)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only on success.

    A crash or a bad input half-way leaves the old file (or nothing) behind,
    never a truncated output that a batch job could pick up. A link is followed
    (its target is replaced, the link kept); a device or pipe is written into.
    """
    target = Path(path)
    if is_special(target):
        yield target
        return
    target = _real_target(target)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise DmoError(_missing_directory(directory, "-o path"))
    if not os.access(directory, os.W_OK):
        raise DmoError(f"cannot write to {directory} (permission denied; choose a writable output path)")
    held = _HELD_RENAMES.get()
    tmp: Path | None = None
    try:
        with _stops_deferred():  # a held stop is raised as this block ends: tmp is set and the finally removes it
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
            os.close(fd)
            tmp = Path(tmp_name)
        yield tmp
        mask = os.umask(0)  # mkstemp (and safetensors) make the file private (0600): give it the mode any new
        os.umask(mask)  # file of the user gets, so a batch job's other readers can open it
        os.chmod(tmp, 0o666 & ~mask)
        if held is None:
            os.replace(tmp, target)
        else:
            held.append((tmp, target))
    finally:  # failed (or stopped) before the rename: remove what was made; renamed or held: nothing to remove
        if tmp is not None and tmp.exists() and all(tmp != waiting for waiting, _ in held or ()):
            tmp.unlink()


def check_writable(path: str | os.PathLike) -> None:
    """Fail before any expensive work if the output cannot be written."""
    target = Path(path)
    if target.is_dir():
        raise DmoError(f"output path {target} is a directory (give a file name)")
    if is_special(target):
        if not os.access(target, os.W_OK):
            raise DmoError(f"cannot write to {target} (permission denied; choose a writable output path)")
        return
    target = _real_target(target)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise DmoError(_missing_directory(directory, "output path"))
    if not os.access(directory, os.W_OK):
        raise DmoError(f"cannot write to {directory} (permission denied; choose a writable output path)")
    _probe(directory)


def _missing_directory(directory: Path, what: str) -> str:
    """Why an output's folder is unusable: it is missing, or a file stands where it should be."""
    if directory.exists():
        return f"{directory} is a file, not a directory, so no output can go inside it (choose another {what})"
    return f"output directory does not exist: {directory} (create it or choose another {what})"


def _probe(directory: Path) -> None:
    """Create and remove one empty file where the output's temporary file will go: permission bits do not show
    a read-only mount, a full disk's inode table or a pseudo-filesystem such as /proc (where root passes every
    access check), and those must fail now, not after training."""
    try:
        with _stops_deferred(), tempfile.NamedTemporaryFile(dir=directory, prefix=".dmo-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise DmoError(f"cannot create files in {directory} ({reason}); choose a writable output path") from None


def check_outputs(outputs: dict[str, str | os.PathLike | None], inputs: dict[str, Source | None]) -> None:
    """check_writable for every output, then check_distinct, every problem in one message. Keys name the options
    in messages ("-o", "DATA")."""
    problems = []
    for flag, path in outputs.items():
        if path is None:
            continue
        checks = [check_writable, refuse_misnamed_plot] if flag == "--plot" else [check_writable]
        for check in checks:
            try:
                check(path)
            except DmoError as exc:
                problems.append(str(exc))
    if problems:
        raise DmoError("; ".join(dict.fromkeys(problems)))  # two outputs in one missing folder: said once
    check_distinct(outputs, inputs)


def refuse_misnamed_plot(path: str | os.PathLike) -> None:
    """`--plot pr.txt`: the plot is a PNG whatever the name says, and a viewer or a later step would be misled by
    any other suffix."""
    if not is_special(Path(path)) and Path(path).suffix.lower() != ".png":
        raise DmoError(f"--plot {path} is drawn as a PNG image; name it with .png (e.g. pr.png)")


PART_PREFIX = "part-"  # the files of a directory output written partition by partition (the Dask engine)


def check_parts_output(output: str | os.PathLike, inputs: dict[str, Source | None]) -> None:
    """-o of a pass that writes a directory of part files: it may replace its own earlier output on a
    re-run, but never a directory that holds anything else (a user's data folder given as -o by mistake)."""
    target = Path(output)
    if is_special(target):
        raise DmoError(
            f"--engine dask writes a directory of part files, but -o {output} is a device or pipe; give a "
            "directory name, or --engine local"
        )
    resolved = target.resolve()
    here = Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise DmoError(
            f"-o {output} is the working directory or holds it, and the output replaces that directory; "
            "give a new directory name"
        )
    for name, source in inputs.items():
        if (
            source is not None
            and not isinstance(source, pa.Table)
            and not is_stdin(source)
            and resolved in Path(source).resolve().parents
        ):
            raise DmoError(
                f"{name} {source} is inside the -o directory {target}, which the output replaces "
                "(choose another output path)"
            )
    check_distinct({"-o": target}, inputs, directories=True)
    if not target.is_dir():
        check_writable(target)
        return
    foreign = [
        p.name
        for p in target.iterdir()
        if not (p.is_file() and p.name.startswith(PART_PREFIX) and p.suffix == ".parquet")
    ]
    if foreign:
        raise DmoError(
            f"output path {target} is a directory with other files than the part-*.parquet files dmo "
            f"writes ({', '.join(sorted(foreign)[:3])}); give a new path, or remove it"
        )
    check_writable(target.parent / f"{target.name}.new")  # the parent must take the staging directory


def check_distinct(
    outputs: dict[str, str | os.PathLike | None], inputs: dict[str, Source | None], directories: bool = False
) -> None:
    """Refuse an output that would replace an input or another output.

    Outputs are written atomically, so a wrong path never leaves a half-written
    file, but `-o data.parquet` would still swap the user's data for a model,
    and a report named like the model would replace it. A parquet output
    inside an input directory would be read as data by the next run, and so
    would any output when `directories` (the outputs are directories of parquet parts).
    """
    given = {name: Path(path) for name, path in outputs.items() if path is not None and not is_special(Path(path))}
    sources = {name: Path(path) for name, path in inputs.items() if path is not None and not isinstance(path, pa.Table)}
    for name, path in given.items():
        target = path.resolve()
        for other, source in sources.items():
            if target == source.resolve() or (target.exists() and source.exists() and os.path.samefile(target, source)):
                raise DmoError(
                    f"{name} {path} is the same file as {other}; writing it would replace that file "
                    "(choose another output path)"
                )
            if source.is_dir() and (directories or target.suffix == ".parquet") and source.resolve() in target.parents:
                raise DmoError(
                    f"{name} {path} is inside the {other} directory {source}, so later runs would read it "
                    "as data (choose a path outside it)"
                )
    resolved = [(name, path.resolve()) for name, path in given.items()]
    for i, (name, target) in enumerate(resolved):
        for other, target2 in resolved[i + 1 :]:
            if target == target2:
                raise DmoError(f"{name} and {other} are the same file ({target}); give them different paths")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def reader_gone_is_an_error(path: str | os.PathLike) -> Iterator[None]:
    """A named pipe or device output whose reader closed it: one line naming it (a file cannot do this)."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE or "Broken pipe" in str(exc):
            raise DmoError(f"the reader of -o {path} closed it before the output was complete") from exc
        raise


def is_csv_path(path: str | os.PathLike) -> bool:
    """An output named like a CSV file (.csv, .csv.gz, .tsv), which a parquet writer must not fill."""
    return not is_stdin(path) and is_csv_file(Path(path))


def refuse_csv_output(path: str | os.PathLike | None, what: str) -> None:
    """One line for `-o sub.csv` where the command writes parquet, instead of parquet bytes under a .csv name."""
    if path is not None and is_csv_path(path):
        raise DmoError(f"{what} is written as parquet, but -o {path} names a CSV file; name it .parquet")


def refuse_foreign_suffix(path: str | os.PathLike | None, what: str, csv: bool) -> None:
    """One line for `-o scores.json` (or .txt, .parquet.gz, .safetensors): a table file under another format's
    name, which the next step of a pipeline would misread. A name without a suffix, or with one that is not a
    word (`run.2024`), is written as parquet."""
    if path is None or is_stdin(path) or is_special(Path(path)):
        return
    name = Path(path).name.lower()
    allowed = (*PARQUET_SUFFIXES, *CSV_SUFFIXES) if csv else PARQUET_SUFFIXES
    suffix = Path(name).suffix
    if re.fullmatch(r"\.[a-z]+", suffix) and not name.endswith(allowed):
        kinds = "parquet (.parquet) or CSV (.csv, .csv.gz, .tsv)" if csv else "parquet (.parquet)"
        raise DmoError(
            f"-o {path} names a {suffix} file, but {what} can only be written as {kinds}; "
            f"name it {'.parquet or .csv' if csv else '.parquet'}"
        )


def refuse_misnamed_model(path: str | os.PathLike | None) -> None:
    """`train -o scores.parquet`: a model file under a data file's name would be read as data by the next
    step of a pipeline (and fail there, far from the mistake)."""
    if path is not None and not is_special(Path(path)) and Path(path).name.lower().endswith(DATA_SUFFIXES):
        raise DmoError(
            f"-o {path} names a data or report file, but the model is a safetensors file; name it MODEL.safetensors"
        )
