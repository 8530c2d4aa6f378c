"""W4's transform in NumPy and Pillow (the Grain peer's, which has no image
ops of its own): decode, random crop 224, random flip, normalise, CHW."""

import io

import numpy as np
from PIL import Image

import common

SCALE = (1 / (255 * common.STD)).astype(np.float32)
SHIFT = (common.MEAN / common.STD).astype(np.float32)


def decode(jpeg):
    return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))


def normalise_chw(image):
    return (image.astype(np.float32) * SCALE - SHIFT).transpose(2, 0, 1)


def random_crop_flip(image, rng):
    h, w, _ = image.shape
    y = int(rng.integers(0, h - common.CROP + 1))
    x = int(rng.integers(0, w - common.CROP + 1))
    crop = image[y:y + common.CROP, x:x + common.CROP]
    return crop[:, ::-1] if rng.random() < 0.5 else crop


def random_resized_crop(jpeg, rng):
    """torchvision's RandomResizedCrop sampling (scale [0.08, 1], ratio [3/4, 4/3],
    10 attempts, then the centre crop), Pillow's draft() to decode at the
    largest DCT scale keeping the crop at >= 224 px, bilinear resize."""
    im = Image.open(io.BytesIO(jpeg))
    width, height = im.size
    area = width * height
    box = None
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w = int(round(np.sqrt(target * ratio)))
        h = int(round(np.sqrt(target / ratio)))
        if 0 < w <= width and 0 < h <= height:
            y = int(rng.integers(0, height - h + 1))
            x = int(rng.integers(0, width - w + 1))
            box = (x, y, x + w, y + h)
            break
    if box is None:
        s = min(width, height)
        box = ((width - s) // 2, (height - s) // 2, (width - s) // 2 + s, (height - s) // 2 + s)
    scale = min((box[2] - box[0]) / common.CROP, (box[3] - box[1]) / common.CROP)
    im.draft("RGB", (int(width / max(scale, 1)), int(height / max(scale, 1))))
    fx, fy = im.size[0] / width, im.size[1] / height  # the draft's scale (DCT: 1/2 .. 1/8)
    box = (box[0] * fx, box[1] * fy, min(box[2] * fx, im.size[0]), min(box[3] * fy, im.size[1]))
    out = im.convert("RGB").resize((common.CROP, common.CROP), Image.BILINEAR, box=box)
    image = np.asarray(out)
    return image[:, ::-1] if rng.random() < 0.5 else image
