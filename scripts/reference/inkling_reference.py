#!/usr/bin/env python3
"""Independent reference for Inkling's image patches: Hugging Face's InklingImageProcessor
(src/transformers/models/inkling/image_processing_inkling.py, a torchvision processor) run
step by step in torch + torchvision from Debian, never from our TypeScript:

  image        Pillow, convert("RGB"), pil_to_tensor: uint8 [3, H, W]; no resize
               (rescale_image_frac None, the processor's default)
  patches      divide_to_patches: ceil(H / p) rows, W // p + 1 columns of image[..., y:y+p, x:x+p]
  pad          each patch .float(), padded right and bottom to p x p with -1.0 (F.pad, constant)
  normalize    rescale fused into normalize (_fuse_mean_std_and_rescale_factor): mean and std
               float32 tensors times 1 / rescale_factor, then F.normalize: (x - mean) / std
  layout       [..., None].repeat(1, 1, 1, 1, T), cat, permute(0, 4, 2, 3, 1): [N, T, p, p, 3]

  inkling_reference.py IMAGE [--patch 40] [--temporal 2] [--out RAW]
  inkling_reference.py --each IMAGE=RAW ...    (one torch start for many images, default sizes)

Prints one JSON line: width, height, rows, cols, patches, shape and, with --out, writes the
float32 values (native byte order) to RAW.
"""
import json
import sys

import torch
import torchvision.transforms.functional as F
from PIL import Image

OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def divide_to_patches(image, patch):
    height, width = image.shape[-2], image.shape[-1]
    rows = (height + patch - 1) // patch
    cols = width // patch + 1
    return [image[..., i * patch : i * patch + patch, j * patch : j * patch + patch] for i in range(rows) for j in range(cols)], rows, cols


def preprocess(path, patch=40, temporal=2, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD):
    return from_tensor(F.pil_to_tensor(Image.open(path).convert("RGB")), patch, temporal, mean, std)


def from_tensor(image, patch=40, temporal=2, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD):
    """The processor's steps on a uint8 [3, H, W] tensor."""
    _, height, width = image.shape
    patches, rows, cols = divide_to_patches(image, patch)
    padded = []
    for p in patches:
        p = p.float()
        h, w = p.shape[-2:]
        if (h, w) != (patch, patch):
            p = F.pad(p, [0, 0, patch - w, patch - h], fill=-1.0, padding_mode="constant")
        padded.append(p)
    x = torch.stack(padded, dim=0)
    rescale_factor = 1 / 255
    fused_mean = torch.tensor(mean) * (1.0 / rescale_factor)
    fused_std = torch.tensor(std) * (1.0 / rescale_factor)
    x = F.normalize(x.to(dtype=torch.float32), fused_mean, fused_std)
    x = x[..., None].repeat(1, 1, 1, 1, temporal)
    x = x.permute(0, 4, 2, 3, 1).contiguous()
    info = dict(width=width, height=height, rows=rows, cols=cols, patches=rows * cols, shape=list(x.shape))
    return x.numpy(), info


def main(argv):
    def opt(name, default):
        return int(argv[argv.index(name) + 1]) if name in argv else default

    if argv[0] == "--each":
        for pair in argv[1:]:
            source, out = pair.split("=", 1)
            x, info = preprocess(source)
            with open(out, "wb") as fh:
                fh.write(x.tobytes())
            print(json.dumps(info))
        return
    x, info = preprocess(argv[0], opt("--patch", 40), opt("--temporal", 2))
    if "--out" in argv:
        with open(argv[argv.index("--out") + 1], "wb") as fh:
            fh.write(x.tobytes())
    print(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1:])
