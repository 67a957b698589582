import { describe, expect, it } from 'vitest';
import type { TensorReason } from '../transport/vocabulary.ts';
import type { TensorEvent } from '../transport/event-schema.ts';
import { TensorEventBus } from './events.ts';

const event = (time: number, path: TensorEvent['path'], nbytes: number, reason: TensorReason = 'shm_writable'): TensorEvent => ({
  time,
  revision: 1,
  source: 'api',
  requestId: 'r',
  worker: 'grpc://w:1',
  runtime: 'vllm',
  tensor: 'pixel_values',
  shape: [nbytes],
  dtype: 'uint8',
  nbytes,
  path,
  reason,
  writeMicros: 0,
});

describe('TensorEventBus', () => {
  it('keeps a bounded ring of the most recent events', () => {
    const bus = new TensorEventBus(3);
    for (let i = 0; i < 5; i++) bus.publish(event(1000 + i, 'inline', i));
    expect(bus.recent().map((e) => e.nbytes)).toEqual([2, 3, 4]);
    expect(bus.recent(1).map((e) => e.nbytes)).toEqual([4]);
    // Round and round: always the newest, oldest first, however often the ring wrapped.
    for (let i = 5; i < 3 * 7 + 2; i++) bus.publish(event(1000 + i, 'inline', i));
    expect(bus.recent().map((e) => e.nbytes)).toEqual([20, 21, 22]);
    expect(bus.recent(2).map((e) => e.nbytes)).toEqual([21, 22]);
    expect(bus.recent(10).map((e) => e.nbytes)).toEqual([20, 21, 22]);
    expect(new TensorEventBus(3).recent()).toEqual([]);
  });

  it('aggregates tensors, bytes and write failures per second and path', () => {
    const bus = new TensorEventBus(100, 2);
    bus.publish(event(1_000, 'shm', 10));
    bus.publish(event(1_500, 'inline', 5, 'shm_write_failed'));
    bus.publish(event(2_100, 'shm', 7));
    bus.publish(event(3_000, 'inline', 1));
    expect(bus.perSecond()).toEqual([
      { second: 2, tensors: { inline: 0, shm: 1, remote: 0 }, bytes: { inline: 0, shm: 7, remote: 0 }, shmWriteFailures: 0 },
      { second: 3, tensors: { inline: 1, shm: 0, remote: 0 }, bytes: { inline: 1, shm: 0, remote: 0 }, shmWriteFailures: 0 },
    ]);
  });

  it('delivers events to listeners in batches, and one failing listener does not stop the others', async () => {
    const bus = new TensorEventBus(100, 10, 20);
    const batches: number[][] = [];
    bus.subscribe(() => {
      throw new Error('broken listener');
    });
    const unsubscribe = bus.subscribe((batch) => batches.push(batch.map((e) => e.nbytes)));
    for (let i = 0; i < 50; i++) bus.publish(event(1000, 'inline', i));
    expect(batches).toEqual([]); // nothing per event
    await new Promise((r) => setTimeout(r, 40));
    expect(batches).toEqual([Array.from({ length: 50 }, (_, i) => i)]);
    unsubscribe();
    bus.publish(event(1000, 'inline', 99));
    bus.flush();
    expect(batches).toHaveLength(1);
  });
});
