// The workers store as plain functions: the list as workers.list gives it, a failed load said
// in the backend's words, and the lane reset (refused with the failing checks, or forced),
// after which the list is fetched again whatever the answer.
import { beforeEach, describe, expect, it } from 'vitest';
import { ContractError } from '../../../core/console/contract.ts';
import { fakeConsole, type FakeConsole } from '../test/fake-console.ts';
import { diagnosisStep, workersList, workerView, WORKER_A, WORKER_B } from '../test/samples.ts';
import { setClient } from './client.ts';
import { isEmbedded, resetShmLane, useWorkers } from './workers.ts';

let fake: FakeConsole;
beforeEach(() => {
  useWorkers.setState(useWorkers.getInitialState(), true);
  fake = fakeConsole({
    'workers.list': () => workersList([workerView(WORKER_A), workerView(WORKER_B, { health: 'unhealthy', lastError: 'connection refused' })], 3),
  });
  setClient(fake.client);
});

describe('workers store', () => {
  it('load takes the list and its revision', async () => {
    await useWorkers.getState().load();
    const s = useWorkers.getState();
    expect([s.loaded, s.revision, s.error]).toEqual([true, 3, null]);
    expect(s.workers.map((w) => [w.url, w.health, w.lastError])).toEqual([
      [WORKER_A, 'healthy', null],
      [WORKER_B, 'unhealthy', 'connection refused'],
    ]);
  });

  it('a failed load says why and keeps the list it had', async () => {
    await useWorkers.getState().load();
    fake.answer('workers.list', () => {
      throw new ContractError('internal', 'the console backend did not start: EADDRINUSE');
    });
    await useWorkers.getState().load();
    expect(useWorkers.getState().error).toBe('the console backend did not start: EADDRINUSE');
    expect(useWorkers.getState().workers).toHaveLength(2);
  });

  it('the embedded reference worker is told apart', () => {
    expect(isEmbedded(workerView(WORKER_A, { embedded: true }))).toBe(true);
    expect(isEmbedded(workerView(WORKER_A))).toBe(false);
  });
});

describe('resetting a broken SHM lane', () => {
  const failing = [diagnosisStep('probe_file_read', false, 'ENOENT: /dev/shm/mmtc-probe-1', 'run the worker with the router’s /dev/shm')];

  it('refused while a check fails: the refusal names the failing checks, and the list is fetched again', async () => {
    fake.answer('workers.resetShmLane', () => {
      throw new ContractError('checks_failed', 'not reset: probe file read (ENOENT). The next request would break the lane again', 'url', [], { failing });
    });
    const refused: unknown = await resetShmLane(WORKER_A).catch((e: unknown) => e);
    if (!(refused instanceof ContractError) || refused.code !== 'checks_failed') throw new Error(`expected checks_failed, got ${String(refused)}`);
    expect(refused.details.failing).toEqual(failing);
    expect(fake.inputsOf('workers.resetShmLane')).toEqual([{ url: WORKER_A }]);
    expect(fake.inputsOf('workers.list')).toHaveLength(1);
  });

  it('Reset anyway sends force, and the list is fetched again', async () => {
    fake.answer('workers.resetShmLane', (input) => ({ url: input.url, wasBroken: true, steps: failing }));
    expect(await resetShmLane(WORKER_A, true)).toMatchObject({ wasBroken: true });
    expect(fake.inputsOf('workers.resetShmLane')).toEqual([{ url: WORKER_A, force: true }]);
    expect(useWorkers.getState().loaded).toBe(true);
  });
});
