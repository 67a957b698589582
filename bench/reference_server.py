#!/usr/bin/env python3
"""The Python pipelines bench:preprocess compares against, in one long-lived process so the
benchmark can interleave them with its own runs (one image per command, same files).

  pillow  the Pillow + numpy reference of the tests (scripts/reference/qwen_vl_reference.py;
          clip_reference.py for the llava family)
  torch   the pipeline of transformers' fast image processor for Qwen2-VL / Qwen3-VL
          (Qwen2VLImageProcessorFast, the default since transformers 4.5x), written out in
          torch + torchvision so it runs without transformers: decode with
          torchvision.io.decode_jpeg, F.resize(BICUBIC, antialias=True) on the uint8 tensor,
          rescale fused into normalize (mean and std divided by the rescale factor, one
          float32 pass), the still image tiled T times, patchify by view/permute/reshape.
          bfloat16 is the float32 result cast with .to(torch.bfloat16), as a bfloat16
          model's input is. For llava, CLIPImageProcessorFast's: the shortest edge to 336
          (the long side truncated), F.resize(BICUBIC, antialias=True), F.center_crop,
          rescale fused into normalize. For kimi_k25 and kimi_k3 (K3: its 65536-patch budget; the
          JPEGs have no alpha, so its board never shows) (whose checkpoint's processor is Pillow +
          numpy, the pillow column), the same steps in torch: navit_resize_image's size,
          F.resize(BICUBIC, antialias=True), F.pad with zeros to whole merge blocks, normalize
          in one float32 pass ((x / 255 - 0.5) * 2), patchify by view/permute. For phi3_v
          (whose checkpoint's processor is Pillow + torch, phi3v_reference.py, the pillow
          column), the same steps in torch: the HD size, a portrait transposed, F.resize(BILINEAR,
          antialias=True) on the uint8 tensor, F.pad with 255 to whole 336-pixel tiles,
          rescale fused into normalize, F.interpolate(bicubic) for the global image, tiles by
          reshape/permute, zeros to 17 crops. For llava_next, LlavaNextImageProcessorFast's: the
          best pinpoint, F.resize(BICUBIC, antialias=True) into it, F.pad with zeros centred,
          tiles by reshape/permute after the whole image resized to 336 x 336, rescale fused
          into normalize (llava_next_reference.py the pillow column). For llama4,
          Llama4ImageProcessor's (a torchvision processor): the best-fit canvas,
          F.resize(BILINEAR, antialias=True) on the uint8 tensor, F.pad with zeros at the bottom
          and right, rescale and normalize in bfloat16 (its own override), tiles by
          reshape/permute, the whole image resized to 336 x 336 as the global tile after them
          (llama4_reference.py the pillow column); float32 rows cast its bfloat16 result.

Reads one JSON command per line on stdin, answers one JSON line on stdout:
  {"op": "run", "pipeline": "torch"|"pillow", "family": F, "file": PATH, "dtype": "float32"|"bfloat16"}
      -> {"ms": wall milliseconds of the whole pipeline, "shape": [rows, cols]}
  {"op": "digest", "family": F, "file": PATH, "dtype": D}
      -> {"sha256": of the Pillow reference's little-endian bytes in that dtype (bfloat16:
          round to nearest even from float32, as docs/transport.md states)}
  {"op": "versions"} -> {"python", "torch", "torchvision", "pillow", "numpy", "threads"}
Usage: reference_server.py --threads N
"""
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts", "reference"))

import clip_reference as clip_ref  # noqa: E402
import inkling_reference as inkling_ref  # noqa: E402
import llama4_reference as llama4_ref  # noqa: E402
import llava_next_reference as llava_next_ref  # noqa: E402
import moonvit_reference as moonvit_ref  # noqa: E402
import numpy as np  # noqa: E402
import phi3v_reference as phi3v_ref  # noqa: E402
import qwen_vl_reference as ref  # noqa: E402

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2

torch = None
try:
    import torch  # noqa: E402
    import torchvision  # noqa: E402
    from torchvision.io import ImageReadMode, decode_jpeg, read_file  # noqa: E402
    from torchvision.transforms import InterpolationMode  # noqa: E402
    from torchvision.transforms import functional as TF  # noqa: E402

    torch.set_num_threads(THREADS)
except ImportError:
    torch = None


def torch_fast_clip(path, dtype, size=336, crop=336):
    data = read_file(path)
    image = decode_jpeg(data, mode=ImageReadMode.RGB)  # uint8 [3, H, W]
    height, width = image.shape[-2:]
    rh, rw = clip_ref.resize_output_size(height, width, size)
    stacked = TF.resize(image.unsqueeze(0), [rh, rw], interpolation=InterpolationMode.BICUBIC, antialias=True)
    stacked = TF.center_crop(stacked, [crop, crop])
    mean = torch.tensor(clip_ref.CLIP_MEAN) * 255.0
    std = torch.tensor(clip_ref.CLIP_STD) * 255.0
    pixel_values = TF.normalize(stacked.to(dtype=torch.float32), mean.tolist(), std.tolist())
    if dtype == "bfloat16":
        pixel_values = pixel_values.to(torch.bfloat16)
    return list(pixel_values.shape)


def torch_moonvit(path, dtype, limit=16384, side=512, patch=14, merge=2):
    data = read_file(path)
    image = decode_jpeg(data, mode=ImageReadMode.RGB)  # uint8 [3, H, W]
    height, width = image.shape[-2:]
    new_w, new_h, pad_w, pad_h, _ = moonvit_ref.navit_resize(width, height, patch, merge, limit, side)
    x = TF.resize(image.unsqueeze(0), [new_h, new_w], interpolation=InterpolationMode.BICUBIC, antialias=True)
    x = torch.nn.functional.pad(x, (0, pad_w, 0, pad_h))
    x = (x.to(torch.float32) / 255.0 - 0.5) * 2.0
    _, c, h, w = x.shape
    x = x.view(c, h // patch, patch, w // patch, patch).permute(1, 3, 0, 2, 4).reshape(-1, c, patch, patch)
    if dtype == "bfloat16":
        x = x.to(torch.bfloat16)
    return list(x.shape)


def torch_phi3v(path, dtype, crops=16, tile=336):
    data = read_file(path)
    image = decode_jpeg(data, mode=ImageReadMode.RGB)  # uint8 [3, H, W]
    transposed = image.shape[-1] < image.shape[-2]
    if transposed:
        image = image.transpose(1, 2)
    height, width = image.shape[-2:]
    new_w, new_h = phi3v_ref.hd_size(int(width), int(height), crops)
    x = TF.resize(image.unsqueeze(0), [new_h, new_w], interpolation=InterpolationMode.BILINEAR, antialias=True)
    target = int(np.ceil(new_h / tile) * tile)
    top = int((target - new_h) / 2)
    x = torch.nn.functional.pad(x, (0, 0, top, target - new_h - top), value=255)
    if transposed:
        x = x.transpose(2, 3)
    mean = torch.tensor(phi3v_ref.CLIP_MEAN) * 255.0
    std = torch.tensor(phi3v_ref.CLIP_STD) * 255.0
    x = TF.normalize(x.to(dtype=torch.float32), mean.tolist(), std.tolist())
    global_image = torch.nn.functional.interpolate(x, size=(tile, tile), mode="bicubic")
    h, w = x.shape[-2:]
    tiles = x.reshape(1, 3, h // tile, tile, w // tile, tile).permute(0, 2, 4, 1, 3, 5).reshape(-1, 3, tile, tile)
    out = torch.cat([global_image, tiles, torch.zeros(crops - tiles.shape[0], 3, tile, tile)], dim=0)
    if dtype == "bfloat16":
        out = out.to(torch.bfloat16)
    return list(out.shape)


def torch_llava_next(path, dtype, tile=336):
    data = read_file(path)
    image = decode_jpeg(data, mode=ImageReadMode.RGB).unsqueeze(0)  # uint8 [1, 3, H, W]
    height, width = image.shape[-2:]
    best = llava_next_ref.select_best_resolution((int(height), int(width)), llava_next_ref.PINPOINTS)
    new_h, new_w = llava_next_ref.get_patch_output_size(int(height), int(width), best)
    x = TF.resize(image, [new_h, new_w], interpolation=InterpolationMode.BICUBIC, antialias=True)
    top, r_y = divmod(best[0] - new_h, 2)
    left, r_x = divmod(best[1] - new_w, 2)
    x = torch.nn.functional.pad(x, (left, left + r_x, top, top + r_y))
    base = TF.resize(image, [tile, tile], interpolation=InterpolationMode.BICUBIC, antialias=True)
    h, w = x.shape[-2:]
    tiles = x.reshape(1, 3, h // tile, tile, w // tile, tile).permute(0, 2, 4, 1, 3, 5).reshape(-1, 3, tile, tile)
    mean = torch.tensor(llava_next_ref.CLIP_MEAN) * 255.0
    std = torch.tensor(llava_next_ref.CLIP_STD) * 255.0
    out = TF.normalize(torch.cat([base, tiles], dim=0).to(dtype=torch.float32), mean.tolist(), std.tolist())
    if dtype == "bfloat16":
        out = out.to(torch.bfloat16)
    return list(out.shape)


def torch_llama4(path, dtype, tile=336):
    data = read_file(path)
    image = decode_jpeg(data, mode=ImageReadMode.RGB).unsqueeze(0)  # uint8 [1, 3, H, W]
    height, width = image.shape[-2:]
    (canvas_h, canvas_w), (new_h, new_w) = llama4_ref.geometry(int(height), int(width), 16)
    x = TF.resize(image, [new_h, new_w], interpolation=InterpolationMode.BILINEAR, antialias=True)
    x = torch.nn.functional.pad(x, (0, canvas_w - new_w, 0, canvas_h - new_h))
    mean = torch.tensor(llama4_ref.MEAN, dtype=torch.bfloat16).view(-1, 1, 1)
    std = torch.tensor(llama4_ref.STD, dtype=torch.bfloat16).view(-1, 1, 1)

    def normalize(t):
        return (t.to(torch.bfloat16) * llama4_ref.RESCALE).sub(mean).div_(std)

    rows, cols = canvas_h // tile, canvas_w // tile
    tiles = normalize(x).reshape(1, 3, rows, tile, cols, tile).permute(0, 2, 4, 1, 3, 5).reshape(-1, 3, tile, tile)
    if rows * cols > 1:
        glob = normalize(TF.resize(image, [tile, tile], interpolation=InterpolationMode.BILINEAR, antialias=True))
        tiles = torch.cat([tiles, glob], dim=0)
    out = tiles.contiguous()
    if dtype == "float32":
        out = out.to(torch.float32)
    return list(out.shape)


def torch_inkling(path, dtype):
    image = decode_jpeg(read_file(path), mode=ImageReadMode.RGB)  # uint8 [3, H, W]
    x, _ = inkling_ref.from_tensor(image)
    x = torch.from_numpy(x)
    if dtype == "bfloat16":
        x = x.to(torch.bfloat16)
    return list(x.shape)


def torch_fast(path, family, dtype):
    if family == "inkling":
        return torch_inkling(path, dtype)
    if family == "llama4":
        return torch_llama4(path, dtype)
    if family == "llava_next":
        return torch_llava_next(path, dtype)
    if family == "llava":
        return torch_fast_clip(path, dtype)
    if family == "kimi_k25":
        return torch_moonvit(path, dtype)
    if family == "kimi_k3":
        return torch_moonvit(path, dtype, limit=65536)
    if family == "phi3_v":
        return torch_phi3v(path, dtype)
    f = ref.FAMILIES[family]
    P, m, T = f["patch"], f["merge"], f["temporal"]
    data = read_file(path)
    image = decode_jpeg(data, mode=ImageReadMode.RGB)  # uint8 [3, H, W]
    height, width = image.shape[-2:]
    rh, rw = ref.smart_resize(height, width, P * m, f["min_pixels"], f["max_pixels"])
    stacked = image.unsqueeze(0)  # the processor groups images by shape: [1, 3, H, W]
    stacked = TF.resize(stacked, [rh, rw], interpolation=InterpolationMode.BICUBIC, antialias=True)
    # _fuse_mean_std_and_rescale_factor: one float32 pass instead of rescale then normalize.
    mean = torch.tensor(f["mean"]) * (1.0 / (1 / 255))
    std = torch.tensor(f["std"]) * (1.0 / (1 / 255))
    patches = TF.normalize(stacked.to(dtype=torch.float32), mean.tolist(), std.tolist())
    patches = patches.unsqueeze(1)  # [B, t=1, C, H, W]
    if patches.shape[1] % T != 0:
        repeats = patches[:, -1:].repeat(1, T - 1, 1, 1, 1)
        patches = torch.cat([patches, repeats], dim=1)
    b, grid_t, c = patches.shape[:3]
    grid_t = grid_t // T
    gh, gw = rh // P, rw // P
    patches = patches.view(b, grid_t, T, c, gh // m, m, P, gw // m, m, P)
    patches = patches.permute(0, 1, 4, 7, 5, 8, 3, 2, 6, 9)
    flat = patches.reshape(b, grid_t * gh * gw, c * T * P * P)
    pixel_values = torch.cat([flat[0]], dim=0)
    if dtype == "bfloat16":
        pixel_values = pixel_values.to(torch.bfloat16)
    return list(pixel_values.shape)


def reference(path, family):
    if family == "inkling":
        return inkling_ref.preprocess(path)
    if family == "llama4":
        return llama4_ref.preprocess(path, 16)
    if family == "llava_next":
        return llava_next_ref.preprocess(path, llava_next_ref.PINPOINTS)
    if family == "llava":
        return clip_ref.preprocess(path)
    if family == "kimi_k25":
        return moonvit_ref.preprocess(path)
    if family == "kimi_k3":
        return moonvit_ref.preprocess(path, limit=65536, bg=dict(stage="after_resize", square=8, gray=180))
    if family == "phi3_v":
        return phi3v_ref.preprocess(path)
    return ref.preprocess(path, family, True)


def pillow(path, family, dtype):
    x, _ = reference(path, family)
    if dtype == "bfloat16":
        x = bf16_bits(x)
    return list(x.shape)


def bf16_bits(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def digest(path, family, dtype):
    x, _ = reference(path, family)
    if dtype == "bfloat16":
        x = bf16_bits(x)
    return hashlib.sha256(np.ascontiguousarray(x).astype(x.dtype.newbyteorder("<")).tobytes()).hexdigest()


def main():
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            op = cmd["op"]
            if op == "versions":
                out = {
                    "python": sys.version.split()[0],
                    "pillow": __import__("PIL").__version__,
                    "numpy": np.__version__,
                    "torch": torch.__version__ if torch else None,
                    "torchvision": torchvision.__version__ if torch else None,
                    "threads": torch.get_num_threads() if torch else None,
                }
            elif op == "run":
                fn = torch_fast if cmd["pipeline"] == "torch" else pillow
                if fn is torch_fast and torch is None:
                    raise RuntimeError("torch/torchvision are not installed (apt-get install python3-torch python3-torchvision)")
                t = time.perf_counter()
                shape = fn(cmd["file"], cmd["family"], cmd.get("dtype", "float32"))
                out = {"ms": (time.perf_counter() - t) * 1000, "shape": shape}
            elif op == "digest":
                out = {"sha256": digest(cmd["file"], cmd["family"], cmd.get("dtype", "float32"))}
            else:
                raise ValueError(f"unknown op {op}")
        except Exception as e:  # reported to the benchmark, which fails loudly
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
