#!/usr/bin/env python3
"""Independent reference for LLaVA-NeXT's image preprocessing (anyres): Pillow + numpy,
written from Hugging Face's LlavaNextImageProcessor (src/transformers/models/llava_next/
image_processing_llava_next.py, image_processing_utils.select_best_resolution and
get_patch_output_size) and vLLM's token count (LlavaNextProcessingInfo), never from our
TypeScript.

  best size    select_best_resolution over image_grid_pinpoints ([h, w] pairs): the most
               effective pixels int(w * s) * int(h * s) (at most the image's own), then the
               fewest wasted; s = min(pw / w, ph / h), in float64
  resize       to (new_h, new_w) = get_patch_output_size: the side that limits is the
               pinpoint's, the other min(ceil(side * s), pinpoint's); Pillow BICUBIC on the
               8-bit image
  pad          with zeros (black) to the pinpoint, centred: before = (pad // 2), the odd pixel after
  tiles        the padded image cut into crop x crop tiles, row by row
  base image   the whole image resized to shortest_edge x shortest_edge (Pillow BICUBIC, its
               aspect ratio not kept), first
  each crop    the CLIP steps on a crop x crop image (resize and center crop keep it as it is):
               x 1/255 in float64, then float32; (x - mean) / std in float32
  output       [1 + tiles, 3, crop, crop] (HF pads a batch to its most crops with zeros after)
  image_sizes  [h, w] of the image
  tokens       vLLM's get_num_image_tokens: (crop / patch)^2 (one more with "full"), plus the
               unpadded grid (integer arithmetic, as vLLM's model unpads) and a newline per row

  llava_next_reference.py IMAGE [--pinpoints 336x672,672x336,...] [--out RAW]
  llava_next_reference.py --each IMAGE=RAW [IMAGE=RAW ...] [--pinpoints ...]

Pinpoints are written HxW. Prints one JSON line per image: width, height, best [h, w],
resized [h, w], tiles, tokens, shape and, with --out (or each IMAGE=RAW), writes the float32
values (native byte order) to RAW.
"""
import json
import math
import sys

import numpy as np
from PIL import Image

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]
CROP = 336
PATCH = 14


def select_best_resolution(original_size, possible_resolutions):
    original_height, original_width = original_size
    best_fit = None
    max_effective_resolution = 0
    min_wasted_resolution = float("inf")
    for height, width in possible_resolutions:
        scale = min(width / original_width, height / original_height)
        downscaled_width, downscaled_height = int(original_width * scale), int(original_height * scale)
        effective_resolution = min(downscaled_width * downscaled_height, original_width * original_height)
        wasted_resolution = (width * height) - effective_resolution
        if effective_resolution > max_effective_resolution or (
            effective_resolution == max_effective_resolution and wasted_resolution < min_wasted_resolution
        ):
            max_effective_resolution = effective_resolution
            min_wasted_resolution = wasted_resolution
            best_fit = (height, width)
    return best_fit


def get_patch_output_size(original_height, original_width, target_resolution):
    target_height, target_width = target_resolution
    scale_w = target_width / original_width
    scale_h = target_height / original_height
    if scale_w < scale_h:
        new_width = target_width
        new_height = min(math.ceil(original_height * scale_w), target_height)
    else:
        new_height = target_height
        new_width = min(math.ceil(original_width * scale_h), target_width)
    return new_height, new_width


def unpadded_features(original_height, original_width, npatches, rows, cols):
    current_height = npatches * rows
    current_width = npatches * cols
    if original_width / original_height > current_width / current_height:
        new_height = (original_height * current_width) // original_width
        current_height -= 2 * ((current_height - new_height) // 2)
    else:
        new_width = (original_width * current_height) // original_height
        current_width -= 2 * ((current_width - new_width) // 2)
    return current_height * current_width, current_height


def normalize(x):
    x = (x.astype(np.float64) * (1 / 255)).astype(np.float32)
    x = (x - np.array(CLIP_MEAN, dtype=np.float32)) / np.array(CLIP_STD, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def preprocess(path, pinpoints):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    best = select_best_resolution((height, width), pinpoints)
    new_h, new_w = get_patch_output_size(height, width, best)
    resized = np.asarray(image.resize((new_w, new_h), Image.BICUBIC))
    top, r_y = divmod(best[0] - new_h, 2)
    left, r_x = divmod(best[1] - new_w, 2)
    padded = np.pad(resized, ((top, top + r_y), (left, left + r_x), (0, 0)), mode="constant", constant_values=0)
    tiles = [padded[y : y + CROP, x : x + CROP] for y in range(0, best[0], CROP) for x in range(0, best[1], CROP)]
    base = np.asarray(image.resize((CROP, CROP), Image.BICUBIC))
    x = np.stack([normalize(c) for c in [base] + tiles])
    rows, cols = best[0] // CROP, best[1] // CROP
    unpadded, newlines = unpadded_features(height, width, CROP // PATCH, rows, cols)
    tokens = (CROP // PATCH) ** 2 + unpadded + newlines
    info = dict(width=width, height=height, best=list(best), resized=[new_h, new_w], tiles=len(tiles), tokens=tokens, shape=list(x.shape))
    return x, info


def run(path, out, pinpoints):
    x, info = preprocess(path, pinpoints)
    if out:
        with open(out, "wb") as fh:
            fh.write(x.tobytes())
    print(json.dumps(info), flush=True)


def main(argv):
    pinpoints = PINPOINTS
    if "--pinpoints" in argv:
        pinpoints = [[int(v) for v in p.split("x")] for p in argv[argv.index("--pinpoints") + 1].split(",")]
    if "--each" in argv:
        for pair in argv[argv.index("--each") + 1 :]:
            if pair.startswith("--"):
                break
            path, out = pair.split("=", 1)
            run(path, out, pinpoints)
        return
    run(argv[0], argv[argv.index("--out") + 1] if "--out" in argv else None, pinpoints)


if __name__ == "__main__":
    main(sys.argv[1:])
