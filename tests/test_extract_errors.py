"""`dmo extract` failures that must be clear exit-2 messages, with or without the optional extra installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_dmo

from dmocli.errors import DmoError


def _image_folder(root: Path) -> Path:
    folder = root / "imgs" / "a"
    folder.mkdir(parents=True)
    (folder / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # never decoded: the command fails before
    return root / "imgs"


def test_missing_model_folder(tmp_path: Path) -> None:
    proc = run_dmo("extract", _image_folder(tmp_path), "-o", tmp_path / "f.parquet", "--model", str(tmp_path / "nope"))
    assert proc.returncode == 2, proc.stderr
    assert "no such folder" in proc.stderr and "--model /path/to/folder" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "f.parquet").exists()


def test_a_text_table_is_never_replaced_by_its_own_features(tmp_path: Path) -> None:
    texts = tmp_path / "texts.csv"
    texts.write_text("text,label\nhello,a\nworld,b\n")
    before = texts.read_bytes()
    for args in (["-o", texts], ["-o", tmp_path / "f.parquet", "--report", tmp_path / "f.parquet"]):
        proc = run_dmo("extract", texts, *args, "--model", str(tmp_path / "nope"))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "same file" in proc.stderr and "choose another" in proc.stderr or "different paths" in proc.stderr
    assert texts.read_bytes() == before and not (tmp_path / "f.parquet").exists()


def test_hub_name_not_in_the_offline_cache() -> None:
    pytest.importorskip("huggingface_hub", reason='needs the extract extra: pip install "dmocli[extract]"')
    from dmocli.extract.backbones import resolve_model_dir

    with pytest.raises(DmoError, match="not in the local Hugging Face cache") as info:
        resolve_model_dir("dmocli-tests/no-such-model")
    assert "hf download dmocli-tests/no-such-model" in str(info.value) and "--model /path/to/folder" in str(info.value)


def _run_without(modules: list[str], code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter where importing `modules` fails, as if they were not installed."""
    block = "; ".join(f"sys.modules[{m!r}] = None" for m in modules)
    return subprocess.run(
        [sys.executable, "-c", f"import sys; {block}; {code}"], capture_output=True, text=True, timeout=120
    )


def test_core_imports_and_extract_fails_clearly_without_the_extra(tmp_path: Path) -> None:
    extras = ["transformers", "timm", "PIL", "huggingface_hub"]
    args = [str(_image_folder(tmp_path)), "-o", str(tmp_path / "f.parquet"), "--model", "org/model"]
    proc = _run_without(
        extras,
        "import dmocli.cli.process, dmocli.pipelines.train, dmocli.pipelines.apply, dmocli.extract; print('ok'); "
        f"dmocli.cli.process.main(['extract', *{args!r}])",
    )
    assert proc.stdout.strip() == "ok", proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert 'pip install "dmocli[extract]"' in proc.stderr and "Traceback" not in proc.stderr


def test_augmentations_are_seeded_per_item_and_view() -> None:
    Image = pytest.importorskip("PIL.Image", reason='needs the extract extra: pip install "dmocli[extract]"')
    from dmocli.extract.augment import augment
    from dmocli.extract.views import View, parse_views

    assert parse_views("weak:1,strong:2") == [View("weak", 0), View("strong", 0), View("strong", 1)]
    with pytest.raises(DmoError, match="unknown policy 'medium'"):
        parse_views("medium:2")
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    a = np.asarray(augment(img, View("strong", 0), 0, "x.jpg"))
    assert a.shape == (32, 32, 3)
    assert np.array_equal(a, np.asarray(augment(img, View("strong", 0), 0, "x.jpg")))
    others = [np.asarray(augment(img, View("strong", 0), 0, f"{k}.jpg")) for k in range(5)]
    assert not all(np.array_equal(a, o) for o in others)
