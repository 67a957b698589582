// The Traffic screen's size histogram and its what-if: which recent tensors would take the
// other path if multimodal_shm_min_bytes were `threshold` instead. Only tensors whose
// request could use /dev/shm can move: those that went through SHM (they would go inline
// if now below the threshold) and those inline only because they were below it (reason
// below_threshold: they would go through SHM if now at or above it). A tensor inline for
// any other reason (mode inline, a token mismatch, …) stays inline whatever the threshold
// (docs/transport.md, "Modes and the per-tensor rule").
import type { TensorEvent } from '../../../core/console/contract.ts';

type SizedEvent = Pick<TensorEvent, 'nbytes' | 'path' | 'reason'>;

export interface Move {
  tensors: number;
  bytes: number;
}

export interface WhatIf {
  toShm: Move;
  toInline: Move;
  /** Tensors the threshold cannot move (their request goes inline anyway). */
  unaffected: number;
}

export function whatIf(events: readonly SizedEvent[], threshold: number): WhatIf {
  const r: WhatIf = { toShm: { tensors: 0, bytes: 0 }, toInline: { tensors: 0, bytes: 0 }, unaffected: 0 };
  for (const e of events) {
    if (e.path === 'shm') {
      if (e.nbytes < threshold) {
        r.toInline.tensors += 1;
        r.toInline.bytes += e.nbytes;
      }
    } else if (e.reason === 'below_threshold') {
      if (e.nbytes >= threshold) {
        r.toShm.tensors += 1;
        r.toShm.bytes += e.nbytes;
      }
    } else r.unaffected += 1;
  }
  return r;
}

/** Power-of-two size buckets: bucket i holds [2^i, 2^(i+1)); bucket 0 also holds 0 and 1. */
export const HISTOGRAM_BUCKETS = 27; // up to 64 MiB and above in the last one

export interface Histogram {
  /** Lower edge of each bucket in bytes. */
  edges: number[];
  inline: number[];
  shm: number[];
  remote: number[];
}

export function bucketOf(nbytes: number): number {
  if (nbytes < 2) return 0;
  return Math.min(HISTOGRAM_BUCKETS - 1, Math.floor(Math.log2(nbytes)));
}

export function histogram(events: readonly Pick<TensorEvent, 'nbytes' | 'path'>[]): Histogram {
  const edges = Array.from({ length: HISTOGRAM_BUCKETS }, (_, i) => 2 ** i);
  const h: Histogram = { edges, inline: edges.map(() => 0), shm: edges.map(() => 0), remote: edges.map(() => 0) };
  for (const e of events) h[e.path][bucketOf(e.nbytes)]! += 1;
  return h;
}

/** Slider position (0..1000) ↔ threshold bytes, log scale from 0 (every tensor) to 64 MiB. */
export const SLIDER_MAX = 1000;
const LOG_MAX = Math.log2(64 * 1024 * 1024);

export function sliderToBytes(pos: number): number {
  if (pos <= 0) return 0;
  const bytes = 2 ** ((pos / SLIDER_MAX) * LOG_MAX);
  // Round to a KiB once above it, so the threshold reads as an operator would type it.
  return bytes >= 1024 ? Math.round(bytes / 1024) * 1024 : Math.round(bytes);
}

export function bytesToSlider(bytes: number): number {
  if (bytes <= 1) return 0;
  return Math.min(SLIDER_MAX, Math.round((Math.log2(bytes) / LOG_MAX) * SLIDER_MAX));
}
