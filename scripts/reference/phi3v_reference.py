#!/usr/bin/env python3
"""Independent reference for Phi-3-vision's image preprocessing: Pillow + torch + torchvision,
written from the checkpoint's Phi3VImageProcessor (microsoft/Phi-3-vision-128k-instruct,
image_processing_phi3_v.py: HD_transform, padding_336, preprocess), never from our TypeScript.

  HD transform  a portrait image is transposed (Image.TRANSPOSE); ratio = w / h;
                scale = the largest s with s * ceil(s / ratio) <= num_crops;
                new_w = int(s * 336), new_h = int(new_w / ratio);
                torchvision resize of the PIL image to [new_h, new_w] (Pillow BILINEAR);
                the height padded with white to a multiple of 336, top int((tar - h) / 2);
                transposed back
  normalize     ToTensor (x / 255 in float32) then Normalize ((x - mean) / std, float32)
  global image  torch.nn.functional.interpolate(mode='bicubic') of the whole to 336 x 336
  tiles         [3, h, w] -> (h/336 * w/336) tiles of [3, 336, 336], row by row
  output        [num_crops + 1, 3, 336, 336]: the global image, the tiles, zeros
  tokens        ((h // 336) * (w // 336) + 1) * 144 + 1 + (h // 336 + 1) * 12

  phi3v_reference.py IMAGE [--crops 16] [--out RAW]
  phi3v_reference.py --each IMAGE=RAW [IMAGE=RAW ...] [--crops 16]

Prints one JSON line per image: width, height, resized [h, w], hd [h, w] (image_sizes),
tokens, shape and, with --out (or each IMAGE=RAW), writes the float32 values (native byte
order) to RAW. --each runs many images in one process (torch's import is most of the time).
"""
import json
import sys

import numpy as np
import torch
import torchvision
from PIL import Image

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def padding_336(b):
    width, height = b.size
    tar = int(np.ceil(height / 336) * 336)
    top_padding = int((tar - height) / 2)
    bottom_padding = tar - height - top_padding
    return torchvision.transforms.functional.pad(b, [0, top_padding, 0, bottom_padding], fill=[255, 255, 255])


def hd_size(width, height, hd_num):
    """HD_transform's resize target (new_w, new_h) of a landscape image (a portrait is transposed first)."""
    ratio = width / height
    scale = 1
    while scale * np.ceil(scale / ratio) <= hd_num:
        scale += 1
    scale -= 1
    new_w = int(scale * 336)
    return new_w, int(new_w / ratio)


def hd_transform(img, hd_num):
    width, height = img.size
    trans = False
    if width < height:
        img = img.transpose(Image.TRANSPOSE)
        trans = True
        width, height = img.size
    new_w, new_h = hd_size(width, height, hd_num)
    img = torchvision.transforms.functional.resize(img, [new_h, new_w])
    resized = [new_w, new_h] if trans else [new_h, new_w]
    img = padding_336(img)
    if trans:
        img = img.transpose(Image.TRANSPOSE)
    return img, resized


def preprocess(path, crops=16):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    hd, resized = hd_transform(image, crops)
    process = torchvision.transforms.Compose([torchvision.transforms.ToTensor(), torchvision.transforms.Normalize(CLIP_MEAN, CLIP_STD)])
    x = process(hd)
    global_image = torch.nn.functional.interpolate(x.unsqueeze(0).float(), size=(336, 336), mode="bicubic").to(x.dtype)
    h, w = x.size(1), x.size(2)
    tiles = x.reshape(1, 3, h // 336, 336, w // 336, 336).permute(0, 2, 4, 1, 3, 5).reshape(-1, 3, 336, 336).contiguous()
    out = torch.cat([global_image, tiles], dim=0)
    if out.shape[0] < crops + 1:
        out = torch.cat([out, torch.zeros(crops + 1 - out.shape[0], 3, 336, 336, dtype=out.dtype)], dim=0)
    tokens = int(((h // 336) * (w // 336) + 1) * 144 + 1 + (h // 336 + 1) * 12)
    info = dict(width=width, height=height, resized=resized, hd=[h, w], tokens=tokens, shape=list(out.shape))
    return out.numpy(), info


def run(image, out, crops):
    x, info = preprocess(image, crops)
    if out:
        with open(out, "wb") as fh:
            fh.write(np.ascontiguousarray(x, dtype=np.float32).tobytes())
    print(json.dumps(info), flush=True)


def main(argv):
    crops = int(argv[argv.index("--crops") + 1]) if "--crops" in argv else 16
    if "--each" in argv:
        for pair in argv[argv.index("--each") + 1 :]:
            if pair.startswith("--"):
                break
            image, out = pair.split("=", 1)
            run(image, out, crops)
        return
    run(argv[0], argv[argv.index("--out") + 1] if "--out" in argv else None, crops)


if __name__ == "__main__":
    main(sys.argv[1:])
