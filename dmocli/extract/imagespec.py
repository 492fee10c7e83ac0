"""What a backbone needs as image input (size, crop, filter, mean/std), as plain numbers; no Pillow needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RESAMPLE = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


@dataclass(frozen=True)
class ImageSpec:
    """How to turn a picture into the backbone's input (JSON-able, stored in the output's metadata)."""

    shortest_edge: int | None  # resize so the shorter side is this long (keeping aspect), or None
    resize_hw: tuple[int, int] | None  # resize to exactly (height, width), or None
    crop_hw: tuple[int, int] | None  # centre crop to (height, width) after resizing, or None
    resample: int  # Pillow resampling filter code
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    scale: float = 1 / 255

    def to_dict(self) -> dict[str, Any]:
        return {
            "shortest_edge": self.shortest_edge,
            "resize_hw": self.resize_hw,
            "crop_hw": self.crop_hw,
            "resample": self.resample,
            "mean": self.mean,
            "std": self.std,
            "scale": self.scale,
        }


def target_size(spec: ImageSpec, w: int, h: int) -> tuple[int, int]:
    """(width, height) after resizing, as transformers' get_resize_output_image_size computes it."""
    if spec.resize_hw:
        return spec.resize_hw[1], spec.resize_hw[0]
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = spec.shortest_edge, int(spec.shortest_edge * long / short)
    return (new_short, new_long) if w <= h else (new_long, new_short)
