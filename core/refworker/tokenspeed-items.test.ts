// TokenSpeed's servicer judges an item's tensors before reading any: what a client is told
// when an encoder input it would attach read-write names no file of /dev/shm.
import { describe, expect, it } from 'vitest';
import type { MultimodalItem, TensorData } from '../gen/tokenspeed/grpc/scheduler.ts';
import { RequestInvalid } from './receive.ts';
import { tensorsOf } from './tokenspeed-items.ts';

const ROWS = 4;
const WIDTH = 1176;

function item(shmName: string): MultimodalItem {
  const nbytes = BigInt(ROWS * WIDTH * 2);
  const encoderInput: TensorData = {
    shape: [ROWS, WIDTH],
    dtype: 'bfloat16',
    payload: { $case: 'shm', value: { name: shmName, offset: 0n, nbytes, ownerId: 'smg:1' } },
  };
  const grid = Buffer.alloc(24);
  [1n, 2n, 2n].forEach((v, i) => grid.writeBigInt64LE(v, i * 8));
  return {
    modality: 1,
    contentHash: Buffer.from('a content hash'),
    encoderInput,
    modelSpecificTensors: { image_grid_thw: { shape: [1, 3], dtype: 'int64', payload: { $case: 'inline', value: grid } } },
    placeholders: [{ offset: 0, length: 1 }],
  };
}

describe('an encoder input attached in the model dtype', () => {
  it.each(['smg-tokenspeed-1-2-3/../x', '', '..', 'a\0b'])("named %j is refused in the servicer's words, naming it", (name) => {
    const judge = () => tensorsOf({ mmInputs: { items: [item(name)] } }, { modelDtype: 'bfloat16' });
    expect(judge).toThrow(RequestInvalid);
    expect(judge).toThrow(`Invalid TensorData.shm name: '${name}'`);
  });

  it('with a valid name passes the check (the file is attached later, when it is read)', () => {
    const judged = tensorsOf({ mmInputs: { items: [item('smg-tokenspeed-1-2-3')] } }, { modelDtype: 'bfloat16' });
    expect(judged.images).toBe(1);
  });
});
