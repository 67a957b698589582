// Placed tensors <-> the protocols' TensorData. TokenSpeed and vLLM number the fields
// differently (payload 3/4/5 vs 1/4/5) but the generated TypeScript shapes are the same, so
// one conversion serves both; the field numbers live in proto/ only.
import type { TensorData as TokenSpeedTensorData } from '../gen/tokenspeed/grpc/scheduler.ts';
import type { TensorData as VllmTensorData } from '../gen/vllm/grpc/engine.ts';
import type { PlacedTensor } from '../transport/placement.ts';
import type { WireTensor } from '../transport/shm-reader.ts';

export type AnyTensorData = TokenSpeedTensorData | VllmTensorData;

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function tensorDataFromPlaced(placed: PlacedTensor): TokenSpeedTensorData & VllmTensorData {
  const p = placed.payload;
  return {
    shape: placed.shape,
    dtype: placed.dtype,
    payload:
      p.kind === 'inline'
        ? { $case: 'inline', value: asBuffer(p.bytes) }
        : { $case: 'shm', value: { name: p.handle.name, offset: BigInt(p.handle.offset), nbytes: BigInt(p.handle.nbytes), ownerId: p.handle.owner_id } },
  };
}

export function wireTensorFromTensorData(t: AnyTensorData | undefined): WireTensor {
  if (!t) return { shape: [], dtype: '', payload: { kind: 'none' } };
  const p = t.payload;
  const base = { shape: t.shape, dtype: t.dtype };
  if (!p) return { ...base, payload: { kind: 'none' } };
  switch (p.$case) {
    case 'inline':
      return { ...base, payload: { kind: 'inline', bytes: p.value } };
    case 'shm':
      return {
        ...base,
        payload: { kind: 'shm', handle: { name: p.value.name, offset: Number(p.value.offset), nbytes: Number(p.value.nbytes), owner_id: p.value.ownerId } },
      };
    case 'remote':
      return { ...base, payload: { kind: 'remote', transport: p.value.transport, nbytes: Number(p.value.nbytes) } };
  }
}
