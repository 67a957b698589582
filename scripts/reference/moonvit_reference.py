#!/usr/bin/env python3
"""Independent reference for MoonViT image preprocessing as Kimi-K2.5 runs it: Pillow + numpy,
written from the checkpoint's KimiK25VisionProcessor as vLLM ports it
(vllm/.../processors/kimi_k25_vision_fused.py: navit_resize_image,
image_to_resized_padded_np, normalize_image, patchify_image), never from our TypeScript.

  navit resize  s1 = sqrt(in_patch_limit / (max(1, w // p) * max(1, h // p)));
                s2 = side * p / w; s3 = side * p / h; scale = min(1, s1, s2, s3);
                new = min(max(1, int(x * scale)), side * p) per side
  resize        Pillow BICUBIC on the 8-bit RGB image
  pad           zeros right and bottom to a multiple of p * merge
  normalize     (x / 255.0).astype(float32); x -= mean; x *= 1.0 / std (float32)
  patchify      (T, H, W, C) -> (T * H/p * W/p, C, p, p)

Kimi-K3 (--k3): the same steps with K3's budget (--limit 65536) and its transparent background,
written from the checkpoint's KimiK3VisionProcessor (_fill_transparent_background,
_image_to_np) as the gateway's kimi_k3.rs describes it: an image with alpha (an alpha band, or
palette transparency) is resized with its alpha (Pillow premultiplies RGBA for the resize; a
palette image is made RGBA first, as the gateway's decoder and the MLX port do) and then
composited over the board: alpha = a / 255 (float32), alpha * rgb + (1 - alpha) * board,
truncated to uint8. --stage before_resize composites first, at the image's own size.

  moonvit_reference.py IMAGE [--limit 16384] [--side 512] [--patch 14] [--merge 2] [--out RAW]
                             [--k3 [--stage after_resize|before_resize] [--square 8] [--gray 180]]

Prints one JSON line: width, height, resized [h, w], padded [h, w], grid [t, h, w], tokens,
shape and, with --out, writes the float32 values (native byte order) to RAW.
"""
import json
import math
import sys

import numpy as np
from PIL import Image


def navit_resize(width, height, patch, merge, in_patch_limit, side):
    s1 = math.sqrt(in_patch_limit / (max(1.0, width // patch) * max(1.0, height // patch)))
    s2 = side * patch / width
    s3 = side * patch / height
    scale = min(1.0, s1, s2, s3)
    new_w, new_h = max(1, int(width * scale)), max(1, int(height * scale))
    new_w, new_h = min(new_w, side * patch), min(new_h, side * patch)
    factor = merge * patch
    pad_h = (factor - new_h % factor) % factor
    pad_w = (factor - new_w % factor) % factor
    tokens = ((new_h + pad_h) // factor) * ((new_w + pad_w) // factor)
    return new_w, new_h, pad_w, pad_h, tokens


def chessboard(height, width, square, on_top_left, white, gray):
    y = np.arange(height)[:, None] // square
    x = np.arange(width)[None, :] // square
    board = np.full((height, width, 3), white, dtype=np.uint8)
    board[(x + y) % 2 == (1 if on_top_left else 0)] = gray
    return board


def fill_transparent(image, bg):
    if image.mode == "RGB":
        return image
    if "A" not in image.getbands() and "transparency" not in image.info:
        return image.convert("RGB")
    rgba = np.asarray(image.convert("RGBA"))
    height, width = rgba.shape[:2]
    board = chessboard(height, width, bg["square"], True, 255, bg["gray"])
    alpha = rgba[:, :, 3:4].astype(np.float32) / 255.0
    result = alpha * rgba[:, :, :3] + (1.0 - alpha) * board
    return Image.fromarray(result.astype(np.uint8))


def preprocess(path, limit=16384, side=512, patch=14, merge=2, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), bg=None):
    image = Image.open(path)
    image.load()
    width, height = image.size
    new_w, new_h, pad_w, pad_h, tokens = navit_resize(width, height, patch, merge, limit, side)
    if bg is None:
        image = image.convert("RGB").resize((new_w, new_h), resample=Image.Resampling.BICUBIC)
    elif bg["stage"] == "before_resize":
        image = fill_transparent(image, bg).resize((new_w, new_h), resample=Image.Resampling.BICUBIC)
    else:
        if image.mode == "P":
            image = image.convert("RGBA")
        image = fill_transparent(image.resize((new_w, new_h), resample=Image.Resampling.BICUBIC), bg)
    arr = np.pad(np.asarray(image), ((0, pad_h), (0, pad_w), (0, 0)), mode="constant", constant_values=0)
    x = arr[np.newaxis, ...]
    x = (x / 255.0).astype(np.float32)
    x -= np.asarray(mean, dtype=np.float32)
    x *= 1.0 / np.asarray(std, dtype=np.float32)
    t, h, w, c = x.shape
    x = x.reshape(t, h // patch, patch, w // patch, patch, c).transpose(0, 1, 3, 5, 2, 4).reshape(-1, c, patch, patch)
    x = np.ascontiguousarray(x)
    info = dict(width=width, height=height, resized=[new_h, new_w], padded=[h, w], grid=[t, h // patch, w // patch], tokens=tokens, shape=list(x.shape))
    return x, info


def main(argv):
    def opt(name, default):
        return int(argv[argv.index(name) + 1]) if name in argv else default

    k3 = "--k3" in argv
    stage = argv[argv.index("--stage") + 1] if "--stage" in argv else "after_resize"
    bg = dict(stage=stage, square=opt("--square", 8), gray=opt("--gray", 180)) if k3 else None
    x, info = preprocess(argv[0], opt("--limit", 65536 if k3 else 16384), opt("--side", 512), opt("--patch", 14), opt("--merge", 2), bg=bg)
    if "--out" in argv:
        with open(argv[argv.index("--out") + 1], "wb") as fh:
            fh.write(x.tobytes())
    print(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1:])
