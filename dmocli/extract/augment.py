"""Augmented views for semi-supervised training: a weak (flip/shift) and a strong (RandAugment-style) policy.

Written on Pillow instead of torchvision transforms because torchvision's
binary must match the installed torch build exactly, which the `extract`
extra cannot promise. The policies follow FixMatch (Sohn et al., 2020):
weak = random horizontal flip + random translation by up to 12.5% with
reflect padding; strong = weak + two RandAugment ops with random magnitude
(each applied with probability 1/2) + Cutout of half the image side.
Randomness comes from a per item and view seed, so a view does not depend on
batch order, worker count or resuming.
"""

from __future__ import annotations

import random
from typing import Callable

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

from dmocli.extract.views import View

MAX_MAGNITUDE = 10


def _flip_shift(img: Image.Image, rng: random.Random) -> Image.Image:
    if rng.random() < 0.5:
        img = ImageOps.mirror(img)
    w, h = img.size
    pad_w, pad_h = int(round(0.125 * w)), int(round(0.125 * h))
    if pad_w or pad_h:
        padded = _reflect_pad(img, pad_w, pad_h)
        x, y = rng.randint(0, 2 * pad_w), rng.randint(0, 2 * pad_h)
        img = padded.crop((x, y, x + w, y + h))
    return img


def _reflect_pad(img: Image.Image, pw: int, ph: int) -> Image.Image:
    arr = np.asarray(img)
    return Image.fromarray(np.pad(arr, ((ph, ph), (pw, pw), (0, 0)), mode="reflect"))


def _level(v: int, top: float) -> float:
    return v / MAX_MAGNITUDE * top


def _signed(v: float, rng: random.Random) -> float:
    return -v if rng.random() < 0.5 else v


def _affine(img: Image.Image, coeffs: tuple[float, ...]) -> Image.Image:
    return img.transform(img.size, Image.Transform.AFFINE, coeffs, fillcolor=(128, 128, 128))


Op = Callable[[Image.Image, int, random.Random], Image.Image]

OPS: list[Op] = [
    lambda img, v, r: ImageOps.autocontrast(img),
    lambda img, v, r: ImageEnhance.Brightness(img).enhance(_level(v, 0.9) + 0.05 + 0.5),
    lambda img, v, r: ImageEnhance.Color(img).enhance(_level(v, 0.9) + 0.05 + 0.5),
    lambda img, v, r: ImageEnhance.Contrast(img).enhance(_level(v, 0.9) + 0.05 + 0.5),
    lambda img, v, r: ImageOps.equalize(img),
    lambda img, v, r: img,
    lambda img, v, r: ImageOps.posterize(img, 8 - int(_level(v, 4))),
    lambda img, v, r: img.rotate(_signed(_level(v, 30), r), fillcolor=(128, 128, 128)),
    lambda img, v, r: ImageEnhance.Sharpness(img).enhance(_level(v, 0.9) + 0.05 + 0.5),
    lambda img, v, r: _affine(img, (1, _signed(_level(v, 0.3), r), 0, 0, 1, 0)),
    lambda img, v, r: _affine(img, (1, 0, 0, _signed(_level(v, 0.3), r), 1, 0)),
    lambda img, v, r: ImageOps.solarize(img, 256 - int(_level(v, 256))),
    lambda img, v, r: _affine(img, (1, 0, _signed(_level(v, 0.3), r) * img.size[0], 0, 1, 0)),
    lambda img, v, r: _affine(img, (1, 0, 0, 0, 1, _signed(_level(v, 0.3), r) * img.size[1])),
]


def _cutout(img: Image.Image, rng: random.Random, frac: float = 0.5) -> Image.Image:
    w, h = img.size
    cw, ch = int(frac * w), int(frac * h)
    x0, y0 = int(rng.random() * w - cw / 2), int(rng.random() * h - ch / 2)
    box = (max(x0, 0), max(y0, 0), min(x0 + cw, w), min(y0 + ch, h))
    img = img.copy()
    if box[2] > box[0] and box[3] > box[1]:
        img.paste((127, 127, 127), box)
    return img


def augment(img: Image.Image, view: View, seed: int, key: str) -> Image.Image:
    """The view's random copy of `img` (an RGB image already at model resolution)."""
    rng = random.Random(f"{seed}:{key}:{view.policy}:{view.index}")
    img = _flip_shift(img, rng)
    if view.policy == "strong":
        for op in rng.sample(OPS, 2):
            magnitude = rng.randint(1, MAX_MAGNITUDE)
            if rng.random() < 0.5:
                img = op(img, magnitude, rng)
        img = _cutout(img, rng)
    return img
