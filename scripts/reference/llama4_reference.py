#!/usr/bin/env python3
"""Independent reference for Llama 4's image preprocessing: Pillow + numpy + torch, written
from Hugging Face's Llama4ImageProcessor (src/transformers/models/llama4/
image_processing_llama4.py: find_supported_resolutions, get_best_fit,
get_max_res_without_distortion, pad_to_best_fit, split_to_tiles, rescale_and_normalize) and
its processor's prompt (processing_llama4.py, _prompt_split_image), never from our TypeScript.

  canvases     find_supported_resolutions(max_patches): for 1 to max_patches tiles, every
               rows x cols factorisation, times the tile side, in HF's order
  best fit     get_best_fit: scale = min(canvas_h / h, canvas_w / w) in float32 (torch's
               true division of integer tensors); the smallest scale >= 1, else the largest
               below 1; of those canvases the smallest area (the first)
  resize       to get_max_res_without_distortion of the canvas (capped at the image's own
               side, but no smaller than a tile: no upscaling past the tile), as HF computes it
               with the canvas's tensor values in float32 and the image's in Python floats;
               Pillow BILINEAR on the 8-bit image (HF runs torchvision's uint8 antialiased
               bilinear, whose kernel (torch >= 2.1) is Pillow-SIMD's: within one level of
               Pillow's, docs/preprocessing.md)
  pad          with 0 (black) at the bottom and right to the canvas
  normalize    as HF does it, in bfloat16 (its rescale_and_normalize override): x.to(bfloat16)
               * rescale_factor with the factor kept in float32 (torch's opmath for a scalar:
               float32 product, rounded once to bfloat16), then (x - mean) / std with mean and
               std as bfloat16, each step rounded to bfloat16. Written out in numpy: Debian's
               torch 1.13 rounds the scalar to bfloat16 first, which later torch does not
  tiles        the canvas cut into tile x tile tiles, row by row; when more than one, the whole
               image resized to tile x tile (Pillow BILINEAR, aspect not kept) after them
  output       [tiles (+1), 3, tile, tile], bfloat16 values written as float32
  aspect_ratio [rows, cols] of the canvas
  tokens       vLLM's and HF's prompt: <|image_start|>, per row the tiles' <|patch|> runs with
               <|tile_x_separator|> between and <|tile_y_separator|> after (only with more than one
               tile), <|image|>, one more run, <|image_end|>; a run is
               (tile / patch)^2 / round(1 / pixel_shuffle_ratio^2) patches (144)

  llama4_reference.py IMAGE [--max-patches 16] [--out RAW]
  llama4_reference.py --each IMAGE=RAW [IMAGE=RAW ...] [--max-patches 16]
  llama4_reference.py --sizes HxW,HxW,... [--max-patches 16]   (geometry only)

Prints one JSON line per image: width, height, canvas [h, w], resized [h, w], aspect [rows,
cols], crops, tokens (the embedded <|patch|> count), sequence (the replacement's length),
shape; with --out (or IMAGE=RAW) writes the float32 values (native byte order) to RAW.
"""
import json
import sys
from collections import defaultdict

import numpy as np
import torch
from PIL import Image

MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)
TILE = 336
PATCH = 14
PIXEL_SHUFFLE_RATIO = 0.5
RESCALE = 0.00392156862745098


def get_factors(dividend):
    factors = set()
    for i in range(1, int(dividend**0.5) + 1):
        if dividend % i == 0:
            factors.add(i)
            factors.add(dividend // i)
    return factors


def find_supported_resolutions(max_num_chunks, patch_size):
    asp_dict = defaultdict(list)
    for chunk_size in range(max_num_chunks, 0, -1):
        for height, width in [(f, chunk_size // f) for f in sorted(get_factors(chunk_size))]:
            asp_dict[height / width].append((height, width))
    return [(h * patch_size, w * patch_size) for value in asp_dict.values() for h, w in value]


def get_best_fit(image_size, possible_resolutions, resize_to_max_canvas=False):
    original_height, original_width = image_size
    target_heights, target_widths = possible_resolutions[:, 0], possible_resolutions[:, 1]
    scale_w = target_widths / original_width
    scale_h = target_heights / original_height
    scales = torch.where(scale_h > scale_w, scale_w, scale_h)
    upscaling_options = scales[scales >= 1]
    if len(upscaling_options) > 0:
        selected_scale = torch.max(upscaling_options) if resize_to_max_canvas else torch.min(upscaling_options)
    else:
        selected_scale = torch.max(scales[scales < 1])
    chosen_canvas = possible_resolutions[scales == selected_scale]
    if len(chosen_canvas) > 1:
        areas = chosen_canvas[:, 0] * chosen_canvas[:, 1]
        return chosen_canvas[torch.argmin(areas)]
    return chosen_canvas[0]


def get_max_res_without_distortion(image_size, target_size):
    original_height, original_width = image_size
    target_height, target_width = target_size
    scale_w = target_width / original_width
    scale_h = target_height / original_height
    if scale_w < scale_h:
        new_width = target_width
        new_height = min(int(np.floor(float(original_height * scale_w))), target_height)
    else:
        new_height = target_height
        new_width = min(int(np.floor(float(original_width * scale_h))), target_width)
    return int(new_height), int(new_width)


def geometry(height, width, max_patches):
    possible = torch.tensor(find_supported_resolutions(max_patches, TILE))
    target = get_best_fit((height, width), possible)
    # HF's cap on upscaling: Python's min keeps the canvas's tensor where it is the smaller.
    capped = (min(max(height, TILE), target[0]), min(max(width, TILE), target[1]))
    new_h, new_w = get_max_res_without_distortion((height, width), capped)
    canvas = (int(target[0]), int(target[1]))
    return canvas, (max(new_h, 1), max(new_w, 1))


def bf16(x):
    """float32 values rounded to bfloat16 (to nearest, ties to even), kept as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16)
    return bits.astype(np.uint32).view(np.float32)


def normalize(x):
    """HF's bfloat16 rescale and normalize of 8-bit [H, W, 3] pixels, as [3, H, W]."""
    x = bf16(x.astype(np.float32) * np.float32(RESCALE))
    mean = bf16(np.array(MEAN, dtype=np.float32))
    std = bf16(np.array(STD, dtype=np.float32))
    x = bf16(x - mean)
    x = bf16(x / std)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def tokens_per_tile():
    return (TILE // PATCH) ** 2 // int(round(1.0 / (PIXEL_SHUFFLE_RATIO**2)))


def sequence_length(rows, cols):
    per = tokens_per_tile()
    grid = rows * (cols * per + (cols - 1) + 1) if rows * cols > 1 else 0
    return 1 + grid + 1 + per + 1


def info_of(width, height, max_patches):
    canvas, resized = geometry(height, width, max_patches)
    rows, cols = canvas[0] // TILE, canvas[1] // TILE
    crops = rows * cols + (1 if rows * cols > 1 else 0)
    return dict(
        width=width,
        height=height,
        canvas=list(canvas),
        resized=list(resized),
        aspect=[rows, cols],
        crops=crops,
        tokens=crops * tokens_per_tile(),
        sequence=sequence_length(rows, cols),
        shape=[crops, 3, TILE, TILE],
    )


def preprocess(path, max_patches):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    info = info_of(width, height, max_patches)
    (canvas_h, canvas_w), (new_h, new_w) = info["canvas"], info["resized"]
    resized = np.asarray(image.resize((new_w, new_h), Image.BILINEAR))
    padded = np.zeros((canvas_h, canvas_w, 3), dtype=np.uint8)
    padded[:new_h, :new_w] = resized
    tiles = [padded[y : y + TILE, x : x + TILE] for y in range(0, canvas_h, TILE) for x in range(0, canvas_w, TILE)]
    if len(tiles) > 1:
        tiles.append(np.asarray(image.resize((TILE, TILE), Image.BILINEAR)))
    return np.stack([normalize(t) for t in tiles]), info


def run(path, out, max_patches):
    x, info = preprocess(path, max_patches)
    if out:
        with open(out, "wb") as fh:
            fh.write(x.astype(np.float32).tobytes())
    print(json.dumps(info), flush=True)


def main(argv):
    max_patches = int(argv[argv.index("--max-patches") + 1]) if "--max-patches" in argv else 16
    if "--sizes" in argv:
        for size in argv[argv.index("--sizes") + 1].split(","):
            h, w = (int(v) for v in size.split("x"))
            print(json.dumps(info_of(w, h, max_patches)), flush=True)
        return
    if "--each" in argv:
        for pair in argv[argv.index("--each") + 1 :]:
            if pair.startswith("--"):
                break
            path, out = pair.split("=", 1)
            run(path, out, max_patches)
        return
    run(argv[0], argv[argv.index("--out") + 1] if "--out" in argv else None, max_patches)


if __name__ == "__main__":
    main(sys.argv[1:])
