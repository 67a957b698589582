#!/usr/bin/env python3
"""Independent reference for Qwen-VL image preprocessing (Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
Qwen3.5/3.6, Qwen3-Omni's vision): Pillow + numpy, written from
SPEC section 9 (and the way a Python gateway does it), never from our TypeScript.

Used by the tests (bit-exact comparison of the encoder input) and by the preprocessing
benchmark (the Pillow + numpy pipeline our per-image time is compared against).

  qwen_vl_reference.py FAMILY IMAGE [--no-normalize] [--out RAW] [--bench N]

Prints one JSON line: width, height, resized [h, w], shape, grid_thw, tokens, fingerprint
and, with --bench, the median milliseconds per image over N runs.
"""
import json
import math
import sys
import time

import numpy as np
from PIL import Image

FAMILIES = {
    "qwen2_vl": dict(patch=14, merge=2, temporal=2, min_pixels=200704, max_pixels=1003520,
                     mean=(0.48145466, 0.4578275, 0.40821073), std=(0.26862954, 0.26130258, 0.27577711)),
    "qwen3_vl": dict(patch=16, merge=2, temporal=2, min_pixels=65536, max_pixels=16777216,
                     mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)),
}
# Qwen3.5 / Qwen3.6: Hugging Face's Qwen3.5 processor is the Qwen3-VL one, with the Qwen3-VL
# checkpoints' preprocessor_config.json values (size shortest_edge 65536, longest_edge 16777216).
FAMILIES["qwen3_5"] = dict(FAMILIES["qwen3_vl"])
# Qwen3-Omni's vision: Qwen2VLImageProcessor under the checkpoints' preprocessor_config.json
# (patch_size 16, merge_size 2, min_pixels 3136, max_pixels 12845056), mean and std 0.5.
FAMILIES["qwen3_omni"] = dict(FAMILIES["qwen3_vl"], min_pixels=3136, max_pixels=12845056)


def smart_resize(height, width, factor, min_pixels, max_pixels):
    if height == 0 or width == 0:
        raise ValueError("zero side")
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def preprocess(path, family, normalize=True):
    f = FAMILIES[family]
    P, m, T = f["patch"], f["merge"], f["temporal"]
    image = Image.open(path).convert("RGB")
    width, height = image.size
    rh, rw = smart_resize(height, width, P * m, f["min_pixels"], f["max_pixels"])
    image = image.resize((rw, rh), Image.BICUBIC)
    x = (np.asarray(image).astype(np.float64) * (1 / 255)).astype(np.float32)
    if normalize:
        x = (x - np.array(f["mean"], dtype=np.float32)) / np.array(f["std"], dtype=np.float32)
    x = x.transpose(2, 0, 1)[None]  # 1, C, H, W
    x = np.tile(x, (T, 1, 1, 1))  # a still image repeated T times
    gt, gh, gw = 1, rh // P, rw // P
    x = x.reshape(gt, T, 3, gh // m, m, P, gw // m, m, P)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    x = np.ascontiguousarray(x.reshape(gt * gh * gw, 3 * T * P * P))
    info = dict(width=width, height=height, resized=[rh, rw], shape=list(x.shape),
                grid_thw=[gt, gh, gw], tokens=gt * gh * gw // (m * m))
    return x, info


def fingerprint(x):
    b = np.clip(np.round(x * np.float32(255)), 0, 255).astype(np.uint8).tobytes()
    h = 0xCBF29CE484222325
    for byte in b:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main(argv):
    family, path = argv[0], argv[1]
    normalize = "--no-normalize" not in argv
    x, info = preprocess(path, family, normalize)
    if "--out" in argv:
        with open(argv[argv.index("--out") + 1], "wb") as fh:
            fh.write(x.tobytes())
    if "--bench" in argv:
        runs = int(argv[argv.index("--bench") + 1])
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            preprocess(path, family, normalize)
            times.append((time.perf_counter() - t) * 1000)
        info["median_ms"] = sorted(times)[len(times) // 2]
    elif "--no-fingerprint" not in argv:
        info["fingerprint"] = fingerprint(x)
    print(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1:])
