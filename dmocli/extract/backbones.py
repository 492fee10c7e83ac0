"""Loading a backbone offline (Hugging Face transformers or timm) and pooling its outputs.

Models come from a local directory or the local Hugging Face cache only;
weights are read from safetensors files (loading never unpickles). A
sentence-transformers checkpoint is read as its plain transformer plus the
pooling and normalization that its modules.json declares, so `dmo extract`
gives the same vectors as `SentenceTransformer.encode`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from dmocli.errors import DmoError
from dmocli.extract.deps import require
from dmocli.extract.imagespec import RESAMPLE, ImageSpec

DEFAULT_MODELS = {"image": "facebook/dinov2-small", "text": "sentence-transformers/all-MiniLM-L6-v2"}


def _how_to_provide(name: str) -> str:
    return (
        f"download it where there is network (e.g. `hf download {name}` into the Hugging Face cache, "
        "then copy the cache or set HF_HOME) or pass --model /path/to/folder holding config.json and "
        "model.safetensors (written by save_pretrained)"
    )


def resolve_model_dir(model: str) -> Path:
    """A local folder for MODEL: the path itself, or the snapshot of a hub name in the local cache."""
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir() or not any((path / f).is_file() for f in ("config.json", "modules.json")):
            raise DmoError(
                f"--model {model}: expected a folder holding config.json and model.safetensors "
                "(as written by save_pretrained)"
            )
        return path
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise DmoError(f"--model {model}: no such folder; " + _how_to_provide("ORG/NAME"))
    hub = require("huggingface_hub", "loading models")
    try:
        return Path(hub.snapshot_download(model.removeprefix("hf-hub:"), local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - every hub failure here means "not available offline"
        raise DmoError(
            f"model {model!r} is not in the local Hugging Face cache and dmo extract works offline: "
            + _how_to_provide(model.removeprefix("hf-hub:"))
        ) from exc


@dataclass
class SentenceConfig:
    """What a sentence-transformers checkpoint adds to its transformer: folder, pooling, normalization, length."""

    transformer_dir: Path
    pooling: str | None = None
    normalize: bool = False
    max_length: int | None = None


def sentence_config(model_dir: Path) -> SentenceConfig | None:
    """Read modules.json in both layouts (sentence_transformers.models.X up to v5, ...modules.x.X from v6)."""
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        return None
    by_class = {str(m.get("type", "")).rsplit(".", 1)[-1]: m for m in json.loads(modules_file.read_text())}
    base = model_dir / by_class.get("Transformer", {}).get("path", "")
    cfg = SentenceConfig(transformer_dir=base, normalize="Normalize" in by_class)
    if "Pooling" in by_class:
        pool_file = model_dir / by_class["Pooling"].get("path", "") / "config.json"
        pool = json.loads(pool_file.read_text()) if pool_file.is_file() else {}
        legacy = [
            k.removeprefix("pooling_mode_").removesuffix("_token").removesuffix("_tokens")
            for k, v in pool.items()
            if k.startswith("pooling_mode_") and v is True
        ]
        cfg.pooling = pool.get("pooling_mode") or "+".join(legacy) or None
    bert_cfg = base / "sentence_bert_config.json"
    if bert_cfg.is_file():
        cfg.max_length = json.loads(bert_cfg.read_text()).get("max_seq_length")
    return cfg


@dataclass
class Backbone:
    """A loaded model with its pooled forward pass; `embed` returns float32 [N, dim]."""

    library: str
    name: str
    kind: str
    pooling: str
    normalize: bool
    model: torch.nn.Module
    forward: Callable[..., torch.Tensor]
    dim: int = 0
    image_spec: ImageSpec | None = None
    tokenizer: Any = None
    max_length: int = 512

    def embed(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = self.forward(*inputs).float()
        return torch.nn.functional.normalize(out, dim=-1) if self.normalize else out


def _masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _image_spec_from_processor(proc: Any) -> ImageSpec:
    """The resize/crop/normalize steps of a transformers image processor, as plain numbers."""
    size, crop = _get(proc, "size"), _get(proc, "crop_size")
    shortest = _get(size, "shortest_edge") if size is not None else None
    resize_hw = None
    if shortest is None and size is not None and _get(size, "height"):
        resize_hw = (int(_get(size, "height")), int(_get(size, "width")))
    crop_hw = (
        (int(_get(crop, "height")), int(_get(crop, "width")))
        if crop is not None and _get(proc, "do_center_crop")
        else None
    )
    if resize_hw is None and (shortest is None or crop_hw is None):
        raise DmoError(
            "the model's image processor gives no fixed input size (it needs size.height/width, or "
            "size.shortest_edge with a centre crop); dmo extract batches images of one size"
        )
    resample = _get(proc, "resample")
    normalize = _get(proc, "do_normalize") is not False
    mean = tuple(_get(proc, "image_mean")) if normalize else (0.0, 0.0, 0.0)
    std = tuple(_get(proc, "image_std")) if normalize else (1.0, 1.0, 1.0)
    scale = float(_get(proc, "rescale_factor") or 1 / 255) if _get(proc, "do_rescale") is not False else 1.0
    return ImageSpec(
        int(shortest) if shortest else None,
        resize_hw,
        crop_hw,
        int(getattr(resample, "value", resample) if resample is not None else 3),
        mean,
        std,
        scale,
    )


def _check_safetensors(model_dir: Path) -> None:
    if not any(model_dir.glob("*.safetensors")):
        raise DmoError(
            f"no .safetensors weights in {model_dir} (dmo never unpickles .bin/.pt files): "
            "convert them with save_pretrained(..., safe_serialization=True)"
        )


def _load_transformers(
    model_dir: Path,
    name: str,
    *,
    kind: str,
    pooling: str,
    normalize: bool | None,
    max_length: int | None,
    st: SentenceConfig | None,
) -> Backbone:
    transformers = require("transformers", "Hugging Face backbones")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    base = st.transformer_dir if st else model_dir
    _check_safetensors(base)
    try:
        model = transformers.AutoModel.from_pretrained(str(base), local_files_only=True, use_safetensors=True)
    except (OSError, ValueError, KeyError) as exc:
        raise DmoError(f"cannot load a transformers model from {base}: {str(exc).splitlines()[0]}") from exc
    model.eval()
    if pooling == "auto":
        pooling = (st.pooling if st and st.pooling else None) or ("mean" if kind == "text" else "cls")
        if pooling not in ("cls", "mean"):
            raise DmoError(
                f"{name} pools with '{pooling}' (sentence-transformers), which dmo extract does not "
                "implement; choose --pooling cls or mean"
            )
    if normalize is None:
        normalize = bool(st and st.normalize)
    cfg = model.config
    dim = int(getattr(cfg, "hidden_size", 0) or 0)
    if kind == "text":
        try:
            tok = transformers.AutoTokenizer.from_pretrained(str(base), local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise DmoError(
                f"cannot load a tokenizer from {base}: {str(exc).splitlines()[0]} "
                "(save one beside the model with tokenizer.save_pretrained)"
            ) from exc
        limits = [
            max_length or (st.max_length if st else None) or 512,
            getattr(cfg, "max_position_embeddings", None),
            getattr(tok, "model_max_length", None),
        ]
        limit = min(int(v) for v in limits if v and int(v) > 0)

        def forward_text(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            return hidden[:, 0] if pooling == "cls" else _masked_mean(hidden, mask)

        return Backbone(
            "transformers", name, kind, pooling, normalize, model, forward_text, dim, tokenizer=tok, max_length=limit
        )
    try:
        proc = transformers.AutoImageProcessor.from_pretrained(str(base), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise DmoError(
            f"cannot load an image processor from {base}: {str(exc).splitlines()[0]} "
            "(save preprocessor_config.json beside the model)"
        ) from exc
    spec = _image_spec_from_processor(proc)
    skip = 1 + int(getattr(cfg, "num_register_tokens", 0) or 0)

    def forward_image(pixels: torch.Tensor) -> torch.Tensor:
        out = model(pixel_values=pixels)
        hidden = out.last_hidden_state
        if hidden.dim() == 4:  # convolutional backbone: [N, C, H, W], no CLS token
            if pooling == "cls":
                raise DmoError(f"{name} is convolutional and has no CLS token; use --pooling mean")
            return hidden.mean(dim=(2, 3))
        return hidden[:, 0] if pooling == "cls" else hidden[:, skip:].mean(1)

    if dim == 0:
        dim = int(getattr(cfg, "hidden_sizes", [0])[-1])
    return Backbone("transformers", name, kind, pooling, normalize, model, forward_image, dim, image_spec=spec)


def _load_timm(model_dir: Path, name: str, pooling: str, normalize: bool | None) -> Backbone:
    timm = require("timm", "timm image backbones", hint='pip install "dmocli[extract,timm]"')
    _check_safetensors(model_dir)
    pooling = "cls" if pooling == "auto" else pooling
    try:
        model = timm.create_model(
            f"local-dir:{model_dir}", pretrained=True, num_classes=0, global_pool="token" if pooling == "cls" else "avg"
        )
    except Exception as exc:  # noqa: BLE001 - timm raises many types for a bad checkpoint
        raise DmoError(
            f"cannot load a timm model from {model_dir}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    model.eval()
    cfg = model.pretrained_cfg
    _, h, w = cfg.get("input_size", (3, 224, 224))
    crop_pct = float(cfg.get("crop_pct") or 1.0)
    spec = ImageSpec(
        int(h / crop_pct),
        None,
        (int(h), int(w)),
        RESAMPLE.get(cfg.get("interpolation", "bicubic"), 3),
        tuple(cfg.get("mean", (0.485, 0.456, 0.406))),
        tuple(cfg.get("std", (0.229, 0.224, 0.225))),
    )
    return Backbone(
        "timm", name, "image", pooling, bool(normalize), model, model, int(model.num_features), image_spec=spec
    )


def load_backbone(
    model: str | None, kind: str, *, pooling: str = "auto", normalize: bool | None = None, max_length: int | None = None
) -> Backbone:
    """Load MODEL (folder or cached hub name; default per kind) for image or text extraction."""
    if pooling not in {"auto", "cls", "mean"}:
        raise DmoError(f"--pooling {pooling!r} is not known (use auto, cls or mean)")
    name = model or DEFAULT_MODELS[kind]
    model_dir = resolve_model_dir(name)
    st = sentence_config(model_dir)
    config_file = (st.transformer_dir if st else model_dir) / "config.json"
    if not config_file.is_file():
        raise DmoError(f"no config.json in {config_file.parent} (save the model there with save_pretrained)")
    config = json.loads(config_file.read_text())
    if "architecture" in config and "model_type" not in config:
        if kind != "image":
            raise DmoError(f"{name} is a timm (image) model; it cannot embed text")
        return _load_timm(model_dir, name, pooling, normalize)
    return _load_transformers(
        model_dir, name, kind=kind, pooling=pooling, normalize=normalize, max_length=max_length, st=st
    )
