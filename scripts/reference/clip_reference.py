#!/usr/bin/env python3
"""Independent reference for CLIP image preprocessing as LLaVA-1.5 uses it: Pillow + numpy,
written from Hugging Face's CLIPImageProcessor (src/transformers/models/clip/
image_processing_clip.py and image_transforms.py), never from our TypeScript.

  resize       shortest edge to `size` keeping the aspect ratio; the long side is
               int(size * long / short) (image_transforms.get_resize_output_image_size with
               default_to_square=False: truncated, not rounded); Pillow BICUBIC on the 8-bit image
  center crop  top = (height - crop) // 2, left = (width - crop) // 2
  rescale      x 1/255 in float64, then float32
  normalize    (x - mean) / std in float32, CLIP's mean and std
  layout       channel first: [3, crop, crop]

  clip_reference.py IMAGE [--size 336] [--crop 336] [--out RAW]

Prints one JSON line: width, height, resized [h, w], shape and, with --out, writes the
float32 values (native byte order) to RAW.
"""
import json
import sys

import numpy as np
from PIL import Image

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def resize_output_size(height, width, size):
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def preprocess(path, size=336, crop=336):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    rh, rw = resize_output_size(height, width, size)
    image = image.resize((rw, rh), Image.BICUBIC)
    x = np.asarray(image)
    top, left = (rh - crop) // 2, (rw - crop) // 2
    x = x[top:top + crop, left:left + crop]
    x = (x.astype(np.float64) * (1 / 255)).astype(np.float32)
    x = (x - np.array(CLIP_MEAN, dtype=np.float32)) / np.array(CLIP_STD, dtype=np.float32)
    x = np.ascontiguousarray(x.transpose(2, 0, 1))
    return x, dict(width=width, height=height, resized=[rh, rw], shape=list(x.shape))


def main(argv):
    path = argv[0]
    size = int(argv[argv.index("--size") + 1]) if "--size" in argv else 336
    crop = int(argv[argv.index("--crop") + 1]) if "--crop" in argv else 336
    x, info = preprocess(path, size, crop)
    if "--out" in argv:
        with open(argv[argv.index("--out") + 1], "wb") as fh:
            fh.write(x.tobytes())
    print(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1:])
