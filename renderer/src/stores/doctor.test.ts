// The Doctor store as plain functions: a worker's checklist, test request and calibration,
// each running, then its result or the backend's words for why not; the calibration plan or
// why the worker cannot be calibrated; progress from the calibration stream.
import { beforeEach, describe, expect, it } from 'vitest';
import { commands, ContractError } from '../../../core/console/contract.ts';
import { fakeConsole, type FakeConsole } from '../test/fake-console.ts';
import { decision, diagnosisStep, tensorEvent, WORKER_A, WORKER_B } from '../test/samples.ts';
import { setClient } from './client.ts';
import { useDoctor } from './doctor.ts';

const steps = [diagnosisStep('reachable', true, 'answered in 2 ms'), diagnosisStep('same_st_dev', false, 'st_dev 44 here, 51 on the worker', 'share /dev/shm')];
const calibration = commands['transport.calibrate'].output.parse({
  worker: WORKER_A,
  runtime: 'tokenspeed',
  dtype: 'bfloat16',
  samplesPerPoint: 8,
  points: [],
  crossoverBytes: null,
  recommendedMinBytes: null,
  note: 'no clear crossover',
});

let fake: FakeConsole;
beforeEach(() => {
  useDoctor.setState(useDoctor.getInitialState(), true);
  fake = fakeConsole({
    'workers.diagnose': ({ url }) => ({ url, steps, verdict: decision('auto_different_shm') }),
    'transport.calibrationPlan': ({ url }) => ({
      worker: url,
      dtype: 'bfloat16',
      sizes: [{ width: 448, height: 448, nbytes: 1_204_224 }],
      defaultSamples: 8,
      minSamplesForWinner: 3,
    }),
    'traffic.sendTestRequest': ({ url }) => ({
      status: 200,
      requestId: 'chatcmpl-test',
      revision: 1,
      worker: url,
      content: 'received encoder_input [1,3,448,448] bfloat16 via inline',
      events: [tensorEvent({ source: 'console', requestId: 'chatcmpl-test' })],
      ms: 12.5,
    }),
    'transport.calibrate': () => calibration,
  });
  setClient(fake.client);
});

describe('doctor store', () => {
  it("a diagnosis is running, then the worker's checklist; another worker's is its own", async () => {
    const running = useDoctor.getState().diagnose(WORKER_A);
    expect(useDoctor.getState().diagnoses[WORKER_A]).toEqual({ running: true, result: null, error: null });
    await running;
    expect(useDoctor.getState().diagnoses[WORKER_A]?.result?.steps.map((s) => [s.id, s.ok])).toEqual([
      ['reachable', true],
      ['same_st_dev', false],
    ]);
    expect(useDoctor.getState().diagnoses[WORKER_B]).toBeUndefined();
  });

  it("a diagnosis that fails says why in the backend's words", async () => {
    fake.answer('workers.diagnose', ({ url }) => {
      throw new ContractError('not_found', `no worker ${url} in configuration revision 4`, 'url');
    });
    await useDoctor.getState().diagnose(WORKER_B);
    expect(useDoctor.getState().diagnoses[WORKER_B]).toEqual({ running: false, result: null, error: `no worker ${WORKER_B} in configuration revision 4` });
  });

  it('the calibration plan, or the refusal that says why this worker cannot be calibrated', async () => {
    await useDoctor.getState().loadPlan(WORKER_A);
    expect(useDoctor.getState().plans[WORKER_A]).toMatchObject({ sizes: [{ nbytes: 1_204_224 }], defaultSamples: 8 });
    const why = `worker ${WORKER_B} speaks SGLang, whose protocol carries tensors inline only: there is no SHM path to measure`;
    fake.answer('transport.calibrationPlan', () => {
      throw new ContractError('invalid_config', why, 'url');
    });
    await useDoctor.getState().loadPlan(WORKER_B);
    expect(useDoctor.getState().plans[WORKER_B]).toEqual({ refused: why });
  });

  it('a test request returns what the worker received; one that fails returns nothing and says why', async () => {
    const result = await useDoctor.getState().sendTest(WORKER_A, { width: 448, height: 448, format: 'png' });
    expect(result?.content).toBe('received encoder_input [1,3,448,448] bfloat16 via inline');
    expect(fake.inputsOf('traffic.sendTestRequest')).toEqual([{ url: WORKER_A, width: 448, height: 448, format: 'png' }]);
    fake.answer('traffic.sendTestRequest', () => {
      throw new Error('worker grpc://127.0.0.1:50051 failed: UNAVAILABLE: connection refused');
    });
    expect(await useDoctor.getState().sendTest(WORKER_A, { width: 448, height: 448, format: 'png' })).toBeNull();
    expect(useDoctor.getState().tests[WORKER_A]?.error).toBe('worker grpc://127.0.0.1:50051 failed: UNAVAILABLE: connection refused');
  });

  it('calibration: progress from the stream while it runs, then the result; a refusal keeps the last progress and says why', async () => {
    let finish!: () => void;
    fake.answer('transport.calibrate', async () => {
      await new Promise<void>((r) => (finish = r));
      return calibration;
    });
    const running = useDoctor.getState().calibrate(WORKER_A, 8);
    useDoctor.getState().onProgress({ url: WORKER_A, done: 4, total: 36, phase: 'measuring 448x448 (inline)' });
    expect(useDoctor.getState().calibrations[WORKER_A]).toMatchObject({ running: true, progress: { done: 4, total: 36 } });
    finish();
    await running;
    expect(useDoctor.getState().calibrations[WORKER_A]).toMatchObject({ running: false, error: null, result: { note: 'no clear crossover' } });

    fake.answer('transport.calibrate', () => {
      throw new ContractError('busy', 'a calibration is already running; wait for it to finish');
    });
    const refused = useDoctor.getState().calibrate(WORKER_A, 8);
    useDoctor.getState().onProgress({ url: WORKER_A, done: 1, total: 36, phase: 'preparing images' });
    await refused;
    expect(useDoctor.getState().calibrations[WORKER_A]).toMatchObject({
      running: false,
      result: null,
      error: 'a calibration is already running; wait for it to finish',
      progress: { done: 1 },
    });
  });

  it('progress of a calibration another window started shows as running', () => {
    useDoctor.getState().onProgress({ url: WORKER_B, done: 2, total: 36, phase: 'preparing images' });
    expect(useDoctor.getState().calibrations[WORKER_B]).toMatchObject({ running: true, result: null, progress: { done: 2 } });
  });
});
