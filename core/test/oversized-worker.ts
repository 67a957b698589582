// A TokenSpeed worker that answers Generate and Encode with replies far larger than any real
// worker's (a completion or an `accepted` padded with `padBytes` of an unknown field, which a
// decoder skips): what a broken or hostile worker can send the router. Discovery is answered as
// a healthy worker with no labels. For the tests and the reliability suite; loopback only.
import * as grpc from '@grpc/grpc-js';
import { EncodeResponse, TokenSpeedEncoderService } from '../gen/tokenspeed/grpc/encoder.ts';
import {
  AbortResponse,
  GenerateResponse,
  GetModelInfoResponse,
  GetServerInfoResponse,
  HealthCheckResponse,
  TokenSpeedSchedulerService,
} from '../gen/tokenspeed/grpc/scheduler.ts';

/** Protobuf field 15, length-delimited, holding `n` zero bytes: unknown to every message here. */
function unknownField(n: number): Buffer {
  const varint: number[] = [];
  for (let v = n; ; v = Math.floor(v / 128)) {
    if (v < 128) {
      varint.push(v);
      break;
    }
    varint.push((v % 128) | 0x80);
  }
  const out = Buffer.alloc(1 + varint.length + n);
  out[0] = (15 << 3) | 2;
  Buffer.from(varint).copy(out, 1);
  return out;
}

export interface OversizedWorker {
  url: string;
  /** Generate and Encode calls answered so far. */
  answered(): number;
  close(): Promise<void>;
}

export async function startOversizedWorker(padBytes: number): Promise<OversizedWorker> {
  const padding = unknownField(padBytes);
  // Each reply is the same message: padded once (a copy of hundreds of MB per reply would hold this process's event loop).
  const padded = <T>(serialize: (v: T) => Buffer) => {
    let last: { v: T; bytes: Buffer } | undefined;
    return (v: T) => {
      if (last?.v !== v) last = { v, bytes: Buffer.concat([serialize(v), padding]) };
      return last.bytes;
    };
  };
  const complete = GenerateResponse.fromPartial({
    requestId: 'oversized',
    response: { $case: 'complete', value: { outputIds: [], finishReason: 'stop', promptTokens: 1 } },
  });
  const accepted = EncodeResponse.fromPartial({ accepted: true });
  const server = new grpc.Server({ 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 });
  let answered = 0;
  server.addService(
    {
      ...TokenSpeedSchedulerService,
      generate: { ...TokenSpeedSchedulerService.generate, responseSerialize: padded(TokenSpeedSchedulerService.generate.responseSerialize) },
    },
    {
      generate: (call: grpc.ServerWritableStream<unknown, unknown>) => {
        answered += 1;
        call.write(complete);
        call.end();
      },
      healthCheck: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, HealthCheckResponse.fromPartial({ healthy: true })),
      abort: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, AbortResponse.fromPartial({ success: true })),
      getModelInfo: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, GetModelInfoResponse.fromPartial({})),
      getServerInfo: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, GetServerInfoResponse.fromPartial({})),
    },
  );
  server.addService(
    { encode: { ...TokenSpeedEncoderService.encode, responseSerialize: padded(TokenSpeedEncoderService.encode.responseSerialize) } },
    {
      encode: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => {
        answered += 1;
        cb(null, accepted);
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    url: `grpc://127.0.0.1:${port}`,
    answered: () => answered,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => server.forceShutdown(), 2000).unref();
      }),
  };
}
