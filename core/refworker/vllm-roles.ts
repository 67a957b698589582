// The reference worker's parts in vLLM's disaggregated prefill/decode (docs/router.md,
// "Disaggregated serving"): one leg after the other. The prefill worker is asked for one token
// with `kv_transfer_params_json` saying `do_remote_decode`; it reads the pixels, keeps its
// record under the request's transfer id at its bootstrap server (the stand-in for the KV
// connector) and answers with the parameters the decode worker needs (`do_remote_prefill`,
// `remote_host`, `remote_port`, `remote_request_id`), as vLLM's KV connector does. The router
// relays them to the decode worker, which takes the record and answers: `2 images via pd,
// prefill grpc://P, transfer T: <what the prefill read>`.
import type * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import type { GenerateRequest } from '../gen/vllm/grpc/engine.ts';
import { fnv1a64Hex } from '../transport/fnv.ts';
import { CallRefused, fetchBootstrapRecord } from './bootstrap.ts';
import { afterDelay, answer, imagesPhrase, receiveTensors, RequestInvalid, statusOf, type GenerateJob, type GenerateServing, type ResponseBuilder, type RoleServing } from './receive.ts';

interface TransferRecord {
  prefillWorker: string;
  transfer: string;
  images: number;
  description: string;
}

function paramsOf(req: GenerateRequest): Record<string, unknown> {
  const text = req.kvTransferParamsJson;
  if (!text) throw new RequestInvalid('kv_transfer_params_json is required on a disaggregated worker');
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    /* said below */
  }
  throw new RequestInvalid(`kv_transfer_params_json is not a JSON object: ${text.slice(0, 200)}`);
}

export function serveVllmRoleGenerate<Res>(s: GenerateServing, call: grpc.ServerWritableStream<GenerateRequest, Res>, job: (pixels?: boolean) => GenerateJob, build: (kvTransferParamsJson?: string) => ResponseBuilder<Res>): void {
  const role = s.role!;
  afterDelay(s, call, () => {
    if (call.cancelled) return;
    const req = call.request;
    s.active.add(req.requestId);
    const work = role.role === 'prefill' ? prefill(s, role, req, job) : role.role === 'decode' ? decode(role, call, job) : Promise.reject(new CallRefused(status.FAILED_PRECONDITION, `this is a ${role.role} worker`));
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

async function prefill(s: GenerateServing, role: RoleServing, req: GenerateRequest, job: (pixels?: boolean) => GenerateJob): Promise<{ text: string; params: string; j: GenerateJob }> {
  const params = paramsOf(req);
  if (params.do_remote_decode !== true) throw new RequestInvalid('a prefill worker needs kv_transfer_params_json with do_remote_decode: true');
  if (req.samplingParams?.maxTokens !== 1) throw new RequestInvalid(`a prefill worker generates one token: sampling_params.max_tokens must be 1, got ${req.samplingParams?.maxTokens ?? 'none'}`);
  const j = job(true);
  const description = receiveTensors(s.runtime, j, s.reader, s.fingerprint, s.model.imageConfig.merge_size, s.metrics);
  const transfer = req.requestId;
  role.bootstrap!.put('kv', transferRoom(transfer), { prefillWorker: role.url, transfer, images: j.images, description } satisfies TransferRecord);
  const out = { do_remote_prefill: true, do_remote_decode: false, remote_engine_id: role.url, remote_host: role.bootstrap!.host, remote_port: role.bootstrap!.port, remote_request_id: transfer };
  return { text: 'prefilled', params: JSON.stringify(out), j: { ...j, stream: false, maxTokens: 1 } };
}

/** The bootstrap server keys records by a decimal number: a transfer id's is its FNV-1a hash (63 bits). */
function transferRoom(transfer: string): string {
  return String(BigInt(`0x${fnv1a64Hex(Buffer.from(transfer))}`) >> 1n);
}

async function decode<Res>(role: RoleServing, call: grpc.ServerWritableStream<GenerateRequest, Res>, job: (pixels?: boolean) => GenerateJob): Promise<{ text: string; params: undefined; j: GenerateJob }> {
  const req = call.request;
  const params = paramsOf(req);
  const host = params.remote_host;
  const port = params.remote_port;
  const transfer = params.remote_request_id;
  if (params.do_remote_prefill !== true || typeof host !== 'string' || typeof port !== 'number' || typeof transfer !== 'string') {
    throw new RequestInvalid('a decode worker needs kv_transfer_params_json with do_remote_prefill: true, remote_host, remote_port and remote_request_id (what the prefill worker returned)');
  }
  const j = job(false);
  const r = await fetchBootstrapRecord<TransferRecord>('the KV', host, port, 'kv', transferRoom(transfer), role.kvTimeoutMs, call);
  const head = `${imagesPhrase(r.images)} via pd, prefill ${r.prefillWorker}, transfer ${r.transfer}`;
  return { text: r.description ? `${head}: ${r.description}` : head, params: undefined, j };
}
