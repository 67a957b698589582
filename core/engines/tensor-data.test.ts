import { describe, expect, it } from 'vitest';
import * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import * as vllm from '../gen/vllm/grpc/engine.ts';
import { tensorDataFromPlaced, wireTensorFromTensorData } from './tensor-data.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex').match(/../g)!.join(' ');

describe('wire format', () => {
  it('TokenSpeed TensorData test vector (docs/transport.md, "Wire format") byte for byte', () => {
    const bytes = ts.TensorData.encode({ shape: [2, 3], dtype: 'uint32', payload: { $case: 'inline', value: Buffer.from([0xaa, 0xbb]) } }).finish();
    expect(hex(bytes)).toBe('0a 02 02 03 12 06 75 69 6e 74 33 32 1a 02 aa bb');
  });

  it('vLLM numbers TensorData differently: payload 1, shape 2, dtype 3', () => {
    const bytes = vllm.TensorData.encode({ shape: [2, 3], dtype: 'uint32', payload: { $case: 'inline', value: Buffer.from([0xaa, 0xbb]) } }).finish();
    expect(hex(bytes)).toBe('0a 02 aa bb 12 02 02 03 1a 06 75 69 6e 74 33 32');
  });

  it('an SHM handle is field 4 with name, offset, nbytes, owner_id', () => {
    const bytes = ts.TensorData.encode({
      shape: [],
      dtype: '',
      payload: { $case: 'shm', value: { name: 'n', offset: 0n, nbytes: 300n, ownerId: 'smg:7' } },
    }).finish();
    expect(hex(bytes)).toBe('22 0d 0a 01 6e 18 ac 02 22 05 73 6d 67 3a 37');
  });

  it('placed tensors convert to TensorData and back for both runtimes', () => {
    const placed = [
      { shape: [2, 2], dtype: 'float32', payload: { kind: 'inline' as const, bytes: new Uint8Array(16).fill(3) } },
      {
        shape: [4900, 1176],
        dtype: 'bfloat16',
        payload: { kind: 'shm' as const, handle: { name: 'smg-tokenspeed-1-2-3', offset: 0, nbytes: 11524800, owner_id: 'smg:1' } },
      },
    ];
    for (const p of placed) {
      for (const codec of [ts.TensorData, vllm.TensorData]) {
        const decoded = codec.decode(codec.encode(tensorDataFromPlaced(p)).finish());
        const back = wireTensorFromTensorData(decoded);
        expect(back.shape).toEqual(p.shape);
        expect(back.dtype).toBe(p.dtype);
        if (p.payload.kind === 'inline') expect(back.payload).toMatchObject({ kind: 'inline' });
        else expect(back.payload).toEqual({ kind: 'shm', handle: p.payload.handle });
      }
    }
  });

  it('one message of each kind round-trips (TokenSpeed)', () => {
    const request: ts.GenerateRequest = ts.GenerateRequest.fromPartial({
      requestId: 'r1',
      tokenized: { inputIds: [1, 151655, 2], originalText: 'hi' },
      samplingParams: { temperature: 0.5, maxNewTokens: 16, stop: ['\n'] },
      stream: true,
      mmInputs: {
        items: [
          {
            modality: 1,
            contentHash: Buffer.from('abcd'),
            encoderInput: { shape: [4, 1176], dtype: 'bfloat16', payload: { $case: 'shm', value: { name: 'x', offset: 0, nbytes: 9408, ownerId: 'smg:1' } } },
            modelSpecificTensors: { image_grid_thw: { shape: [1, 3], dtype: 'int64', payload: { $case: 'inline', value: Buffer.alloc(24) } } },
            placeholders: [{ offset: 1, length: 1 }],
            placeholderTokenId: 151655,
          },
        ],
      },
    });
    expect(ts.GenerateRequest.decode(ts.GenerateRequest.encode(request).finish())).toEqual(request);
    const messages: Array<[{ encode(m: never): { finish(): Uint8Array }; decode(b: Uint8Array): unknown; fromPartial(o: never): unknown }, object]> = [
      [
        ts.GenerateResponse,
        { requestId: 'r1', response: { $case: 'complete', value: { outputIds: [5, 6], finishReason: 'stop', promptTokens: 3, completionTokens: 2 } } },
      ],
      [ts.GenerateResponse, { requestId: 'r1', response: { $case: 'chunk', value: { tokenIds: [5], index: 0 } } }],
      [ts.HealthCheckResponse, { healthy: true, message: 'ok' }],
      [ts.AbortRequest, { requestId: 'r1', reason: 'client gone' }],
      [ts.GetModelInfoResponse, { modelPath: '/m', supportsVision: true, supportedModalities: [1], multimodalEncoderDtype: 'bfloat16' }],
      [ts.GetServerInfoResponse, { schedulerInfo: { shm_namespace_id: 'boot:26' }, activeRequests: 2 }],
      [
        vllm.GenerateRequest,
        {
          requestId: 'v1',
          input: { $case: 'tokenized', value: { originalText: 't', inputIds: [1, 2] } },
          mmInputs: {
            pixelValues: { shape: [1], dtype: 'float32', payload: { $case: 'inline', value: Buffer.alloc(4) } },
            imTokenId: 151655,
            mmPlaceholders: [{ offset: 0, length: 1 }],
            flatKeys: { image_grid_thw: 'image_grid_thw' },
            modality: 1,
          },
        },
      ],
      [vllm.GenerateResponse, { response: { $case: 'complete', value: { outputIds: [1], finishReason: 'length' } } }],
      [vllm.AbortRequest, { requestIds: ['a', 'b'] }],
      [vllm.GetServerInfoResponse, { shmNamespaceId: 'boot:26', activeRequests: 1 }],
    ];
    for (const [codec, partial] of messages) {
      const full = codec.fromPartial(partial as never);
      expect(codec.decode(codec.encode(full as never).finish())).toEqual(full);
    }
  });

  it('vLLM GetServerInfoResponse carries shm_namespace_id as field 10', () => {
    const bytes = vllm.GetServerInfoResponse.encode(vllm.GetServerInfoResponse.fromPartial({ shmNamespaceId: 'b:1' })).finish();
    expect(hex(bytes)).toBe('52 03 62 3a 31');
  });
});
