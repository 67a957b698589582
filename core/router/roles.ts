// Which workers serve a request under disaggregated serving (docs/router.md, "Disaggregated
// serving"): a prefill and a decode worker by their own policies (prefill_policy,
// decode_policy; unset, `policy`), and under EPD an encode worker per image by encode_policy.
// consistent_hashing keeps an image on one encode worker, as the gateway's ring places it
// (model_gateway/src/worker/hash_ring.rs): each configured encode worker has 150 points on a
// ring (BLAKE3 of `url#i`, its first 8 bytes little-endian), an image goes to the first
// healthy worker at or after the point of its routing key (the hex of its TokenSpeed content
// hash, the gateway's x-smg-routing-key): the same worker the gateway would pick for it over
// the same URLs. The workers' runtimes must serve the mode: both legs one
// runtime that does PD, and under EPD encode and prefill workers of a runtime that encodes
// (their engines' capabilities say which).
import { randomInt } from 'node:crypto';
import { blake3, tokenSpeedContentHash } from '../multimodal/media-hash.ts';
import type { RouterConfig, WorkerSpec, WorkerType } from '../config/schema.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { capabilitiesOf, runtimesWhere } from '../engines/table.ts';
import { inRotation, outOfRotationReason, type WorkerState } from '../workers/registry.ts';
import type { RouterContext } from './context.ts';
import { ApiError } from './openai.ts';

export interface RoleTarget {
  state: WorkerState;
  spec: WorkerSpec;
}

export interface DisaggregatedRoute {
  mode: 'pd' | 'epd';
  prefill: RoleTarget;
  decode: RoleTarget;
}

const RING_POINTS = 150;

function pointOf(text: string): bigint {
  return blake3(text).readBigUInt64LE(0);
}

/** Each revision's ring over its encode workers, built once. */
const rings = new WeakMap<RouterConfig, Array<{ point: bigint; url: string }>>();
function ringOf(config: RouterConfig): Array<{ point: bigint; url: string }> {
  let ring = rings.get(config);
  if (!ring) {
    ring = [];
    for (const w of config.workers)
      if (w.worker_type === 'encode') for (let i = 0; i < RING_POINTS; i++) ring.push({ point: pointOf(`${w.url}#${i}`), url: w.url });
    ring.sort((a, b) => (a.point < b.point ? -1 : a.point > b.point ? 1 : 0));
    rings.set(config, ring);
  }
  return ring;
}

function healthy(ctx: RouterContext, spec: WorkerSpec): RoleTarget | undefined {
  const state = ctx.registry.get(spec.url);
  return inRotation(state) ? { state, spec } : undefined;
}

function noneHealthy(ctx: RouterContext, role: WorkerType, specs: readonly WorkerSpec[]): ApiError {
  const reasons = specs.map((spec) => `${spec.url}: ${outOfRotationReason(ctx.registry.get(spec.url)) ?? 'not yet discovered'}`);
  return new ApiError(503, `no healthy ${role} worker (${reasons.join('; ')})`, 'service_unavailable');
}

function pick(ctx: RouterContext, snapshot: ConfigSnapshot, role: 'prefill' | 'decode', pinned: string | undefined): RoleTarget {
  const config = snapshot.config;
  const eligible = config.workers.filter((w) => w.worker_type === role && (pinned === undefined || w.url === pinned));
  const policy = (role === 'prefill' ? config.prefill_policy : config.decode_policy) ?? config.policy;
  const picked = ctx.registry.select(policy, eligible, role);
  if (!picked) throw noneHealthy(ctx, role, eligible);
  return picked;
}

/** The runtimes must serve the mode: one runtime on both legs that does PD; under EPD one whose prefill takes the embeddings from encode workers. */
function checkRuntimes(route: DisaggregatedRoute): void {
  const p = route.prefill.state.runtime!;
  const d = route.decode.state.runtime!;
  if (p !== d)
    throw new ApiError(
      503,
      `prefill worker ${route.prefill.spec.url} speaks ${p} but decode worker ${route.decode.spec.url} speaks ${d}: both legs of a request need one runtime`,
      'service_unavailable',
    );
  const c = capabilitiesOf(p);
  if (c.pd === undefined)
    throw new ApiError(
      503,
      `${c.label} workers do not serve disaggregated requests: disaggregation ${route.mode} needs ${runtimesWhere((x) => x.pd !== undefined)} prefill and decode workers`,
      'service_unavailable',
    );
  if (route.mode === 'epd' && !c.encodes)
    throw new ApiError(
      503,
      `${c.label} prefill workers cannot take embeddings from encode workers: disaggregation epd needs ${runtimesWhere((x) => x.encodes)} prefill and decode workers`,
      'service_unavailable',
    );
}

/**
 * The prefill and decode workers of a request. A worker the console pinned takes its own
 * role's leg (a pinned encode worker takes every image: encodeWorkerFor).
 */
export function selectDisaggregatedRoute(ctx: RouterContext, snapshot: ConfigSnapshot, pinned?: string): DisaggregatedRoute {
  const mode = snapshot.config.disaggregation as 'pd' | 'epd';
  const pinnedSpec = pinned === undefined ? undefined : snapshot.config.workers.find((w) => w.url === pinned);
  if (pinned !== undefined && !pinnedSpec) throw new ApiError(404, `no worker ${pinned} in configuration revision ${snapshot.revision}`);
  const route: DisaggregatedRoute = {
    mode,
    prefill: pick(ctx, snapshot, 'prefill', pinnedSpec?.worker_type === 'prefill' ? pinned : undefined),
    decode: pick(ctx, snapshot, 'decode', pinnedSpec?.worker_type === 'decode' ? pinned : undefined),
  };
  checkRuntimes(route);
  return route;
}

/** An image's encode worker under EPD, by encode_policy over the healthy encode workers (or the pinned one). */
/** round_robin's turn, across requests. */
let encodeTurn = 0;

/** An image's encode worker; `mediaHash`: BLAKE3 of its bytes (its routing key is derived from it). */
export function encodeWorkerFor(ctx: RouterContext, snapshot: ConfigSnapshot, mediaHash: Uint8Array, pinned?: string): RoleTarget {
  const config = snapshot.config;
  const specs = config.workers.filter((w) => w.worker_type === 'encode');
  const pinnedSpec = specs.find((w) => w.url === pinned);
  const candidates = (pinnedSpec ? [pinnedSpec] : specs).map((spec) => healthy(ctx, spec)).filter((t): t is RoleTarget => t !== undefined);
  if (candidates.length === 0) throw noneHealthy(ctx, 'encode', pinnedSpec ? [pinnedSpec] : specs);
  let chosen: RoleTarget;
  if (config.encode_policy === 'random') chosen = candidates[randomInt(candidates.length)]!;
  else if (config.encode_policy === 'round_robin') chosen = candidates[encodeTurn++ % candidates.length]!;
  else {
    const ring = ringOf(config);
    const at = pointOf(tokenSpeedContentHash(mediaHash).toString('hex'));
    let lo = 0;
    let hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ring[mid]!.point < at) lo = mid + 1;
      else hi = mid;
    }
    chosen = candidates[0]!;
    for (let k = 0; k < ring.length; k++) {
      const url = ring[(lo + k) % ring.length]!.url;
      const found = candidates.find((c) => c.spec.url === url);
      if (found) {
        chosen = found;
        break;
      }
    }
  }
  if (!capabilitiesOf(chosen.state.runtime!).encodes)
    throw new ApiError(
      503,
      `encode worker ${chosen.spec.url} speaks ${capabilitiesOf(chosen.state.runtime!).label}, which has no Encode service: EPD needs ${runtimesWhere((c) => c.encodes)} encode workers`,
      'service_unavailable',
    );
  return chosen;
}
