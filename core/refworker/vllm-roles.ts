// The reference worker's parts in vLLM's disaggregated prefill/decode (docs/router.md,
// "Disaggregated serving"): one leg after the other, the KV handed over by the worker's KV
// connector (`--kv-connector`, GetServerInfo.kv_connector), each emulated at its bootstrap
// server (the stand-in for the connector's side channel):
//   NixlConnector      a prefill asked with kv_transfer_params_json {do_remote_decode: true}
//                      keeps its record under the request id and answers with what the decode
//                      needs (do_remote_prefill, remote_engine_id, remote_host, remote_port,
//                      remote_request_id); a decode given those takes the record.
//   MooncakeConnector  a prefill given {do_remote_decode, transfer_id} keeps it under the
//                      transfer id (the router mints it; nothing is returned); a decode given
//                      {do_remote_prefill, transfer_id, remote_engine_id,
//                      remote_bootstrap_addr} takes it from that address, refusing an engine
//                      id that is not the prefill's. The legacy typed kv_transfer_params (host
//                      and port only) key both by the request id.
//   none               parameters are ignored, nothing is kept or returned.
// A decode that gets no handoff computes the prompt itself, as vLLM would: it reads the pixels
// (and refuses a prompt with image placeholder tokens but no pixels, which vLLM would read as
// text). Its answer says where the KV came from: `2 images via pd, prefill grpc://P, transfer
// T: <what the prefill read>`, or `2 images via pd, recomputed (no KV handoff): <what it read>`.
import type * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import type { GenerateRequest } from '../gen/vllm/grpc/engine.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import { CallRefused, fetchBootstrapRecord } from './bootstrap.ts';
import {
  afterDelay,
  answer,
  imagesPhrase,
  receiveTensors,
  RequestInvalid,
  statusOf,
  type GenerateJob,
  type GenerateServing,
  type ResponseBuilder,
  type RoleServing,
  tokensOfModel,
} from './receive.ts';
import { withPixelsForImageTokens } from './vllm.ts';

/** The KV connectors the reference worker emulates (`--kv-connector`), by the names vLLM reports. */
export const KV_CONNECTORS = { nixl: 'NixlConnector', mooncake: 'MooncakeConnector', none: '' } as const;
export type KvConnectorChoice = keyof typeof KV_CONNECTORS;

interface TransferRecord {
  prefillWorker: string;
  engineId: string;
  transfer: string;
  images: number;
  description: string;
}

/** The servicer's params_from_request: the JSON field when set (an object, or INVALID_ARGUMENT), else the legacy typed field (a host and a port in range), else none. */
function paramsOf(req: GenerateRequest): Record<string, unknown> | undefined {
  if (req.kvTransferParamsJson !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(req.kvTransferParamsJson);
    } catch (err) {
      throw new RequestInvalid(`Invalid kv_transfer_params_json: ${(err as Error).message}`);
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new RequestInvalid('kv_transfer_params_json must be a JSON object');
    return parsed as Record<string, unknown>;
  }
  const legacy = req.kvTransferParams;
  if (legacy) {
    if (!legacy.remoteHost || !(legacy.remotePort >= 1 && legacy.remotePort <= 65535))
      throw new RequestInvalid('Invalid kv_transfer_params: remote_host must be set and remote_port must be in [1, 65535].');
    return { remote_host: legacy.remoteHost, remote_port: legacy.remotePort, legacy: true };
  }
  return undefined;
}

export function serveVllmRoleGenerate<Res>(
  s: GenerateServing,
  call: grpc.ServerWritableStream<GenerateRequest, Res>,
  job: () => GenerateJob,
  build: (kvTransferParamsJson?: string) => ResponseBuilder<Res>,
): void {
  const role = s.role!;
  afterDelay(s, call, () => {
    if (call.cancelled) return;
    const req = call.request;
    s.active.add(req.requestId);
    const work =
      role.role === 'prefill'
        ? prefill(s, role, req, job)
        : role.role === 'decode'
          ? decode(s, role, call, job)
          : Promise.reject(new CallRefused(status.FAILED_PRECONDITION, `this is a ${role.role} worker`));
    work
      .then(({ text, params, j }) => {
        if (!call.cancelled) answer(s, call, j, text, build(params));
      })
      .catch((err: unknown) => {
        const { code, details } = statusOf(err);
        if (!call.cancelled) call.emit('error', { code, details, message: details });
      })
      .finally(() => s.active.delete(req.requestId));
  });
}

async function prefill(
  s: GenerateServing,
  role: RoleServing,
  req: GenerateRequest,
  job: () => GenerateJob,
): Promise<{ text: string; params: string | undefined; j: GenerateJob }> {
  const params = paramsOf(req);
  if (req.samplingParams?.maxTokens !== 1)
    throw new RequestInvalid(`a prefill worker generates one token: sampling_params.max_tokens must be 1, got ${req.samplingParams?.maxTokens ?? 'none'}`);
  const j = withPixelsForImageTokens(job(), s.model.imageTokenId);
  const description = receiveTensors(s.runtime, j, s.reader, s.fingerprint, tokensOfModel(s.model), s.metrics);
  const keep = (transfer: string) =>
    role.bootstrap!.put('kv', transferRoom(transfer), {
      prefillWorker: role.url,
      engineId: role.url,
      transfer,
      images: j.images,
      description,
    } satisfies TransferRecord);
  let returned: string | undefined;
  if (role.kvConnector === KV_CONNECTORS.nixl && params?.do_remote_decode === true) {
    keep(req.requestId);
    returned = JSON.stringify({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: role.url,
      remote_host: role.bootstrap!.host,
      remote_port: role.bootstrap!.port,
      remote_request_id: req.requestId,
    });
  } else if (role.kvConnector === KV_CONNECTORS.mooncake) {
    if (params?.do_remote_decode === true && typeof params.transfer_id === 'string') keep(params.transfer_id);
    else if (params === undefined) keep(req.requestId); // the legacy protocol meets on the request id
  }
  return { text: 'prefilled', params: returned, j: { ...j, stream: false, maxTokens: 1 } };
}

/** The bootstrap server keys records by a decimal number: a transfer id's is its FNV-1a hash (63 bits). */
function transferRoom(transfer: string): string {
  return String(BigInt(`0x${fnv1a64Hex(Buffer.from(transfer))}`) >> 1n);
}

/** Where a decode takes the KV from, by its connector and the parameters it was given; undefined: it computes the prompt itself. */
function kvSource(
  role: RoleServing,
  req: GenerateRequest,
  params: Record<string, unknown> | undefined,
): { host: string; port: number; transfer: string; engineId?: string } | undefined {
  if (!params || role.kvConnector === KV_CONNECTORS.none) return undefined;
  if (params.legacy === true) return { host: params.remote_host as string, port: params.remote_port as number, transfer: req.requestId };
  if (params.do_remote_prefill !== true) return undefined;
  if (role.kvConnector === KV_CONNECTORS.nixl) {
    const { remote_host: host, remote_port: port, remote_request_id: transfer } = params;
    if (typeof host !== 'string' || typeof port !== 'number' || typeof transfer !== 'string')
      throw new RequestInvalid(
        'a NIXL decode needs kv_transfer_params_json with remote_host, remote_port and remote_request_id (what the prefill worker returned)',
      );
    return { host, port, transfer };
  }
  const { transfer_id: transfer, remote_engine_id: engineId, remote_bootstrap_addr: addr } = params;
  if (typeof transfer !== 'string' || typeof engineId !== 'string' || typeof addr !== 'string')
    throw new RequestInvalid('a Mooncake decode needs kv_transfer_params_json with transfer_id, remote_engine_id and remote_bootstrap_addr');
  const m = /^http:\/\/(\[[^\]]+\]|[^:/]+):(\d+)$/.exec(addr);
  if (!m) throw new RequestInvalid(`remote_bootstrap_addr must be http://host:port, got ${JSON.stringify(addr)}`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]), transfer, engineId };
}

async function decode<Res>(
  s: GenerateServing,
  role: RoleServing,
  call: grpc.ServerWritableStream<GenerateRequest, Res>,
  job: () => GenerateJob,
): Promise<{ text: string; params: undefined; j: GenerateJob }> {
  const req = call.request;
  const source = kvSource(role, req, paramsOf(req));
  if (!source) {
    // No handoff: the prompt is computed here, from its own pixels.
    const j = withPixelsForImageTokens(job(), s.model.imageTokenId);
    const description = receiveTensors(s.runtime, j, s.reader, s.fingerprint, tokensOfModel(s.model), s.metrics);
    const head = `${imagesPhrase(j.images)} via pd, recomputed (no KV handoff)`;
    return { text: description ? `${head}: ${description}` : head, params: undefined, j };
  }
  const j = job();
  if (j.images > 0) throw new RequestInvalid('a decode worker that takes the KV from its prefill is sent no pixel_values');
  const r = await fetchBootstrapRecord<TransferRecord>('the KV', source.host, source.port, 'kv', transferRoom(source.transfer), role.kvTimeoutMs, call);
  if (source.engineId !== undefined && source.engineId !== r.engineId)
    throw new CallRefused(
      status.FAILED_PRECONDITION,
      `the KV of transfer ${source.transfer} is engine ${r.engineId}'s, not remote_engine_id ${source.engineId}`,
    );
  const head = `${imagesPhrase(r.images)} via pd, prefill ${r.prefillWorker}, transfer ${r.transfer}`;
  return { text: r.description ? `${head}: ${r.description}` : head, params: undefined, j };
}
