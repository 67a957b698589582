// The reference worker's parts in disaggregated serving, over TokenSpeed (docs/router.md,
// "Disaggregated serving"): an encode worker reads one image's tensors per Encode call and
// keeps what it read under the image's room; a prefill worker takes the embeddings from the
// encode workers' bootstrap servers (EPD) or reads the pixels itself (PD), and keeps its
// record under the request's KV room; a decode worker takes that record and answers with the
// sentence that says where every tensor went, e.g. `2 images via epd, prefill grpc://P, kv
// room K. item 0 from encode worker grpc://E1, room R0: encoder_input [...] bfloat16 via
// shm, …`. The records travel through bootstrap.ts, the stand-in for the KV/embedding channel.
import type * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { EventEmitter } from 'node:events';
import type { EncodeRequest, EncodeResponse } from '../gen/tokenspeed/grpc/encoder.ts';
import type { GenerateRequest } from '../gen/tokenspeed/grpc/scheduler.ts';
import { CallRefused, fetchBootstrapRecord } from './bootstrap.ts';
import {
  afterDelay,
  answer,
  failCall,
  imagesPhrase,
  receiveItem,
  receiveTensors,
  RequestInvalid,
  statusOf,
  type AnswerFor,
  type GenerateServing,
  type ResponseBuilder,
  type RoleServing,
  tokensOfModel,
} from './receive.ts';
import { judgeTokenSpeedSampling } from './sampling-rules.ts';
import { checkTokenized, tensorsOf } from './tokenspeed-items.ts';

/** What an encode worker keeps under an image's room. */
interface EmbeddingRecord {
  room: string;
  encodeWorker: string;
  description: string;
}

/** What a prefill worker keeps under the request's KV room. */
interface KvRecord {
  mode: 'epd' | 'pd';
  prefillWorker: string;
  kvRoom: string;
  images: number;
  /** EPD: each image's embedding, by item. */
  items?: Array<EmbeddingRecord & { item: number }>;
  /** PD: what the prefill read. */
  description?: string;
}

function rolePart(s: GenerateServing): RoleServing {
  return s.role!;
}

/** TokenSpeed's Encode: one image, one room. */
export function serveEncode(s: GenerateServing, call: grpc.ServerUnaryCall<EncodeRequest, EncodeResponse>, cb: grpc.sendUnaryData<EncodeResponse>): void {
  const role = rolePart(s);
  // Its room's embedding is coming (whatever the queue ahead of it): the prefill's fetch for it must not give way to idle ones.
  const rooms = call.request.items;
  if (role.role === 'encode' && role.encodeAccept && rooms.length === 1) role.bootstrap?.expect('embedding', String(rooms[0]!.bootstrapRoom));
  afterDelay(s, call, () => {
    try {
      const req = call.request;
      if (role.role !== 'encode') throw new CallRefused(status.FAILED_PRECONDITION, `this is a ${role.role} worker: Encode goes to the encode workers`);
      if (!req.mmInputs) throw new RequestInvalid('EncodeRequest.mm_inputs is required');
      if (req.mmInputs.items.length !== 1 || req.items.length !== 1)
        throw new RequestInvalid(
          `EncodeRequest must contain exactly one mm item and one room assignment (got ${req.mmInputs.items.length} and ${req.items.length})`,
        );
      if (!role.encodeAccept) return cb(null, { accepted: false });
      const room = String(req.items[0]!.bootstrapRoom);
      const job = { requestId: req.requestId, stream: false, inputIds: [], maxTokens: undefined, ...tensorsOf(req, { encode: true }) };
      const description = receiveItem(s.runtime, job, s.reader, s.fingerprint, tokensOfModel(s.model), s.metrics);
      if (!role.encodeDrop) role.bootstrap!.put('embedding', room, { room, encodeWorker: role.url, description } satisfies EmbeddingRecord);
      cb(null, { accepted: true });
    } catch (err) {
      const { code, details } = statusOf(err);
      cb({ code, details, message: details }, null);
    }
  });
}

/** TokenSpeed's Generate on an encode, prefill or decode worker. */
export function serveRoleGenerate<Res>(s: GenerateServing, call: grpc.ServerWritableStream<GenerateRequest, Res>, build: ResponseBuilder<Res>): void {
  const role = rolePart(s);
  const req = call.request;
  // Its KV room's record is coming: the decode's fetch for it must not give way to idle ones.
  if (role.role === 'prefill' && req.kvBootstrapInfo) role.bootstrap?.expect('kv', String(req.kvBootstrapInfo.bootstrapRoom));
  afterDelay(s, call, () => {
    if (call.cancelled) return;
    let j: AnswerFor;
    try {
      const rules = judgeTokenSpeedSampling(req.samplingParams);
      j = { requestId: req.requestId, stream: req.stream, inputIds: checkTokenized(req), maxTokens: rules.maxTokens, stops: rules.stops };
    } catch (err) {
      return failCall(call, err);
    }
    s.active.add(j.requestId);
    const work =
      role.role === 'prefill'
        ? prefill(s, role, call)
        : role.role === 'decode'
          ? decode(role, call)
          : Promise.reject(new CallRefused(status.FAILED_PRECONDITION, 'this is an encode worker: Generate goes to the prefill and decode workers'));
    work
      .then((text) => {
        // A prefill's own answer is one token (the decode worker has the completion).
        if (!call.cancelled) answer(s, call, role.role === 'prefill' ? { ...j, maxTokens: 1 } : j, text, build);
      })
      .catch((err: unknown) => {
        const { code, details } = statusOf(err);
        if (!call.cancelled) call.emit('error', { code, details, message: details });
      })
      .finally(() => s.active.delete(j.requestId));
  });
}

function kvRoomOf(req: GenerateRequest, role: string): { host: string; port: number; room: string } {
  const kv = req.kvBootstrapInfo;
  if (!kv) throw new RequestInvalid(`a ${role} worker needs kv_bootstrap_info (disaggregated serving)`);
  return { host: kv.bootstrapHost, port: kv.bootstrapPort, room: String(kv.bootstrapRoom) };
}

async function prefill<Res>(s: GenerateServing, role: RoleServing, call: grpc.ServerWritableStream<GenerateRequest, Res>): Promise<string> {
  const req = call.request;
  const kv = kvRoomOf(req, 'prefill');
  const inputIds = req.tokenized?.inputIds ?? [];
  const entries = req.encodeBootstrapInfo?.items ?? [];
  const epd = entries.length > 0;
  const parts = tensorsOf(req, { pixels: !epd, modelDtype: s.modelDtype });
  const job = { requestId: req.requestId, stream: false, inputIds, maxTokens: undefined, ...parts };
  const description = receiveTensors(s.runtime, job, s.reader, s.fingerprint, tokensOfModel(s.model), s.metrics, !epd);
  const record: KvRecord = { mode: epd ? 'epd' : 'pd', prefillWorker: role.url, kvRoom: kv.room, images: parts.images };
  if (epd) {
    for (const e of entries)
      if (e.itemIndex < 0 || e.itemIndex >= parts.images)
        throw new RequestInvalid(`encode_bootstrap_info names item ${e.itemIndex}, but the request has ${parts.images} item${parts.images === 1 ? '' : 's'}`);
    const missing = Array.from({ length: parts.images }, (_, i) => i).filter((i) => !entries.some((e) => e.itemIndex === i));
    if (missing.length) throw new RequestInvalid(`encode_bootstrap_info has no entry for item ${missing.join(', ')}`);
    // One item's failure ends the others' waits too, as the call's cancellation does.
    const stop = new EventEmitter();
    call.on('cancelled', () => stop.emit('cancelled'));
    record.items = await Promise.all(
      entries.map(async (e) => ({
        item: e.itemIndex,
        ...(await fetchBootstrapRecord<EmbeddingRecord>(
          `item ${e.itemIndex}`,
          e.bootstrapHost,
          e.bootstrapPort,
          'embedding',
          String(e.bootstrapRoom),
          role.embeddingTimeoutMs,
          stop,
        )),
      })),
    ).finally(() => stop.emit('cancelled'));
    record.items.sort((a, b) => a.item - b.item);
  } else record.description = description;
  role.bootstrap!.put('kv', kv.room, record);
  return 'prefilled';
}

async function decode<Res>(role: RoleServing, call: grpc.ServerWritableStream<GenerateRequest, Res>): Promise<string> {
  const req = call.request;
  const kv = kvRoomOf(req, 'decode');
  if (req.encodeBootstrapInfo?.items.length)
    throw new RequestInvalid('decode received encode_bootstrap_info: under EPD only the prefill worker takes the embeddings');
  const carrying = (req.mmInputs?.items ?? []).findIndex((item) => item.encoderInput);
  if (carrying >= 0) throw new RequestInvalid(`decode received pixel tensors (item ${carrying} has an encoder_input)`);
  const r = await fetchBootstrapRecord<KvRecord>('the KV', kv.host, kv.port, 'kv', kv.room, role.kvTimeoutMs, call);
  const head = `${imagesPhrase(r.images)} via ${r.mode}, prefill ${r.prefillWorker}, kv room ${r.kvRoom}`;
  if (r.mode === 'epd')
    return `${head}.${(r.items ?? []).map((it) => ` item ${it.item} from encode worker ${it.encodeWorker}, room ${it.room}: ${it.description}.`).join('')}`;
  return r.description ? `${head}: ${r.description}` : head;
}
