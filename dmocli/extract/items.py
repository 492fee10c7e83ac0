"""Finding what to extract: image folders, text tables and text folders, as sorted items.

Every item has a key (relative POSIX path, or row number of a table), and the
items are sorted by key so that the output order does not depend on the file
system, the number of workers or how often a job was resumed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data import reading
from dmocli.data.sources import CSV_SUFFIXES, JSON_LINES_SUFFIXES, PARQUET_SUFFIXES
from dmocli.errors import DmoError

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"})
TEXT_SUFFIXES = frozenset({".txt"})
TABLE_SUFFIXES = (*CSV_SUFFIXES, *PARQUET_SUFFIXES, *JSON_LINES_SUFFIXES)
UNLABELED_DIR = "unlabeled"
EMPTY_TEXT = "empty text (blank or whitespace only)"


@dataclass
class Items:
    """What to extract, in output order.

    `keys` is a string array (relative paths) or an int64 array (table rows);
    `labels` keeps the label's type, null for unlabeled; images carry `files`,
    texts carry `texts`. `skipped` lists items refused before extraction, `walk_skipped` the
    paths a folder walk left out (see Walk).
    """

    kind: str
    key_name: str
    keys: pa.Array
    labels: pa.Array
    files: list[Path] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    walk_skipped: list[dict[str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.keys)

    def take(self, rows: np.ndarray) -> "Items":
        rows = np.asarray(rows, dtype=np.int64)
        idx = pa.array(rows, type=pa.int64())
        return Items(
            self.kind,
            self.key_name,
            self.keys.take(idx),
            self.labels.take(idx),
            [self.files[i] for i in rows] if self.files else [],
            [self.texts[i] for i in rows] if self.texts else [],
            list(self.skipped),
            list(self.walk_skipped),
        )


NOT_UTF8 = "name is not valid UTF-8"
WALKED = "folder already walked (a symlink loop, or a second way to the same folder)"
UNLISTABLE = "folder cannot be listed"
WALK_EXAMPLES = 3


def _utf8(name: str) -> bool:
    """False for a name whose bytes are not UTF-8 (os gives them as lone surrogates): arrow and JSON refuse them."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: str) -> str:
    """PATH as printable text: bytes that are not UTF-8 written as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


@dataclass
class Walk:
    """The wanted files under a folder (relative POSIX paths, sorted), and what the walk left out and why.

    Each real folder is walked once, so a symlink loop cannot repeat images or give them another folder's label.
    The real folders under the root come first, so they keep their own paths and labels; symlinked folders are
    followed afterwards, in the order found, when they lead to a folder not walked yet (e.g. a class folder kept
    on another disk).
    """

    root: Path
    suffixes: frozenset[str]
    files: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    _seen: dict[tuple[int, int], str] = field(default_factory=dict, init=False)  # real folder -> where first walked
    _links: list[str] = field(default_factory=list, init=False)  # symlinked folders still to follow

    def run(self) -> "Walk":
        """Walk ROOT's real folders, then the symlinked ones queued meanwhile; files and skips end up sorted."""
        self._enter(str(self.root))
        self._tree(str(self.root))
        while self._links:
            link = self._links.pop(0)
            if self._enter(link):
                self._tree(link)
        self.files.sort()
        self.skipped.sort(key=lambda s: s["path"])
        return self

    def _rel(self, path: str) -> str:
        return Path(path).relative_to(self.root).as_posix()

    def _skip(self, path: str, reason: str, **detail: str) -> None:
        self.skipped.append({"path": _shown(self._rel(path)), "reason": reason, **detail})

    def _enter(self, path: str) -> bool:
        """True the first time a real folder is reached (by its device and inode); else record PATH as skipped."""
        try:
            st = os.stat(path)
        except OSError as exc:
            self._unlistable(exc)
            return False
        key = (st.st_dev, st.st_ino)
        if key in self._seen:
            self._skip(path, WALKED, same_as=self._seen[key])
            return False
        self._seen[key] = _shown(self._rel(path))
        return True

    def _unlistable(self, exc: OSError) -> None:
        """A folder that cannot be read (os.walk's onerror): recorded, where os.walk would drop it silently."""
        self._skip(exc.filename, UNLISTABLE, error=f"{type(exc).__name__}: {exc.strerror or exc}")

    def _subfolders(self, dirpath: str, names: list[str]) -> list[str]:
        """The real subfolders to walk now; symlinked ones are queued for later, hidden ones left out."""
        keep = []
        for name in sorted(n for n in names if not n.startswith(".")):
            path = os.path.join(dirpath, name)
            if not _utf8(name):
                self._skip(path, NOT_UTF8)
            elif os.path.islink(path):
                self._links.append(path)
            elif self._enter(path):
                keep.append(name)
        return keep

    def _tree(self, top: str) -> None:
        """Every real folder under TOP (its symlinks to folders are not followed here: run() does that)."""
        for dirpath, dirnames, filenames in os.walk(top, onerror=self._unlistable):
            dirnames[:] = self._subfolders(dirpath, dirnames)
            for name in filenames:
                if name.startswith(".") or Path(name).suffix.lower() not in self.suffixes:
                    continue
                if _utf8(name):
                    self.files.append(self._rel(os.path.join(dirpath, name)))
                else:
                    self._skip(os.path.join(dirpath, name), NOT_UTF8)


def _walk(root: Path, suffixes: frozenset[str]) -> Walk:
    """Files with a wanted suffix under ROOT, hidden files and folders left out, each real folder once."""
    return Walk(root, suffixes).run()


def walk_warnings(skipped: list[dict[str, str]]) -> list[str]:
    """One warning line per reason the folder walk left paths out: how many, and a few of them."""
    lines = []
    for reason in (WALKED, NOT_UTF8, UNLISTABLE):
        paths = [s["path"] for s in skipped if s["reason"] == reason]
        if paths:
            more = ", ..." if len(paths) > WALK_EXAMPLES else ""
            lines.append(
                f"left out {len(paths)} path(s), {reason}: {', '.join(paths[:WALK_EXAMPLES])}{more} "
                "(listed under walk_skipped in the report)"
            )
    return lines


def _left_out(walk: Walk) -> str:
    """For a walk that found nothing: what it left out, which may be why (e.g. every name not UTF-8)."""
    if not walk.skipped:
        return ""
    first = walk.skipped[0]
    return f"; {len(walk.skipped)} path(s) left out, e.g. {first['path']}: {first['reason']}"


def _folder_label(rel: str) -> str | None:
    """The first path component names the class; loose files and `unlabeled/` have no label."""
    parts = rel.split("/")
    if len(parts) == 1 or parts[0] == UNLABELED_DIR:
        return None
    return parts[0]


def detect_kind(source: Path) -> str:
    """image or text, from what SOURCE holds (a table is text; a folder is whichever files dominate)."""
    if not source.exists():
        raise DmoError(f"source not found: {source} (give an image folder, a text table or a folder of .txt files)")
    if source.is_file():
        return "text"
    n_images = len(_walk(source, IMAGE_SUFFIXES).files)
    n_texts = len(_walk(source, TEXT_SUFFIXES).files)
    if n_images == 0 and n_texts == 0:
        raise DmoError(f"no image ({', '.join(sorted(IMAGE_SUFFIXES))}) or .txt files under {source}")
    return "image" if n_images >= n_texts else "text"


def image_folder(source: Path) -> Items:
    if not source.is_dir():
        raise DmoError(f"--kind image needs a folder of images (one subfolder per class), got {source}")
    walk = _walk(source, IMAGE_SUFFIXES)
    rel = walk.files
    if not rel:
        raise DmoError(
            f"no image files under {source} (looked for {', '.join(sorted(IMAGE_SUFFIXES))})" + _left_out(walk)
        )
    return Items(
        "image",
        "path",
        pa.array(rel, pa.string()),
        pa.array([_folder_label(r) for r in rel], pa.string()),
        files=[source / r for r in rel],
        walk_skipped=walk.skipped,
    )


def text_folder(source: Path) -> Items:
    walk = _walk(source, TEXT_SUFFIXES)
    rel = walk.files
    if not rel:
        raise DmoError(f"no .txt files under {source} (one subfolder of .txt files per class)" + _left_out(walk))
    keys, labels, texts, skipped = [], [], [], []
    for r in rel:
        try:
            text = (source / r).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            skipped.append({"path": r, "error": f"{type(exc).__name__}: {exc}"})
            continue
        if not text.strip():
            skipped.append({"path": r, "error": EMPTY_TEXT})
            continue
        texts.append(text)
        keys.append(r)
        labels.append(_folder_label(r))
    if not keys:
        raise DmoError(f"none of the .txt files under {source} could be read as UTF-8")
    return Items(
        "text",
        "path",
        pa.array(keys, pa.string()),
        pa.array(labels, pa.string()),
        texts=texts,
        skipped=skipped,
        walk_skipped=walk.skipped,
    )


def _read_text_table(source: Path) -> pa.Table:
    name = source.name.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        import pyarrow.json as pajson

        try:
            return pajson.read_json(str(source))
        except (pa.ArrowInvalid, OSError) as exc:
            raise DmoError(
                f"cannot read {source} as JSON lines: {str(exc).splitlines()[0]} "
                '(one JSON object per line, e.g. {"text": ..., "label": ...})'
            ) from exc
    if not name.endswith(TABLE_SUFFIXES):
        raise DmoError(f"cannot tell the format of {source}: use .csv, .tsv, .parquet or .jsonl")
    return reading.read_table(source)


def text_table(source: Path, text_col: str, label_col: str | None) -> Items:
    """Rows of a CSV/TSV/parquet/JSONL table; keys are 0-based row numbers."""
    table = _read_text_table(source)
    if text_col not in table.column_names:
        raise DmoError(
            f"no text column '{text_col}' in {source} (columns: {', '.join(table.column_names[:12])}); "
            "name it with --text-col"
        )
    col = table.column(text_col).combine_chunks()
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        col = col.cast(pa.string())
    if label_col is not None and label_col in table.column_names:
        labels = table.column(label_col).combine_chunks()
        if pa.types.is_dictionary(labels.type):
            labels = labels.cast(labels.type.value_type)
    else:
        labels = pa.nulls(table.num_rows, pa.string())
    null = col.is_null().to_numpy(zero_copy_only=False)
    # Blank text is skipped like null text: a CSV reader writes an empty cell as either, and embedding it would
    # give every such row the same vector of special tokens alone.
    blank = pc.fill_null(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0), False).to_numpy(
        zero_copy_only=False
    )
    valid = np.flatnonzero(~(null | blank))
    skipped = [{"row": str(r), "error": "null text" if null[r] else EMPTY_TEXT} for r in np.flatnonzero(null | blank)]
    idx = pa.array(valid, pa.int64())
    return Items("text", "row", idx, labels.take(idx), texts=col.take(idx).to_pylist(), skipped=skipped)


def discover(source: Path, kind: str, text_col: str, label_col: str | None) -> Items:
    """Items of SOURCE for --kind image|text|auto."""
    if kind == "auto":
        kind = detect_kind(source)
    if kind == "image":
        return image_folder(source)
    if kind != "text":
        raise DmoError(f"--kind {kind!r} is not known (use image, text or auto)")
    if not source.exists():
        raise DmoError(f"source not found: {source} (give a text table or a folder of .txt files)")
    return text_folder(source) if source.is_dir() else text_table(source, text_col, label_col)
