// The Doctor screen's states the end-to-end tests do not reach (e2e/shm-lane.spec.ts and
// calibrate.spec.ts run checks, resets and calibrations on a running router): no workers, a
// worker not checked yet, checks running, checks that could not run, a broken lane before any
// check (the note with its reset above the checklist), and a worker asked for by URL.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { render, withState } from '../test/render.tsx';
import { decision, diagnosisStep, workerView, WORKER_A, WORKER_B } from '../test/samples.ts';
import { useDoctor } from '../stores/doctor.ts';
import { useWorkers } from '../stores/workers.ts';
import { DoctorScreen } from './Doctor.tsx';

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(1_700_000_060_000);
});
afterEach(() => {
  vi.useRealTimers();
});

const workers = withState(useWorkers, { loaded: true, workers: [workerView(WORKER_A), workerView(WORKER_B)] });

describe('Doctor screen', () => {
  it('no workers: says to add one first', () => {
    expect(render(<DoctorScreen worker={undefined} />).text).toContain('No workers Add a worker first; Doctor checks one worker at a time.');
  });

  it('a worker not checked yet: what the checks are, and Run checks', () => {
    const { text } = render(<DoctorScreen worker={undefined} />, workers);
    expect(text).toContain('auto checklist Run checks Not checked yet Run the checks: reachability');
  });

  it('checks running: Checking…, with the one small request they send', () => {
    const { text } = render(
      <DoctorScreen worker={WORKER_B} />,
      workers,
      withState(useDoctor, { diagnoses: { [WORKER_B]: { running: true, result: null, error: null } } }),
    );
    expect(text).toContain('auto checklist Checking… Checking (one small request goes through /dev/shm)…');
    expect(text).not.toContain('Not checked yet');
  });

  it('checks that could not run: the reason, in the backend’s words, and no "Not checked yet"', () => {
    const { text } = render(
      <DoctorScreen worker={WORKER_A} />,
      workers,
      withState(useDoctor, { diagnoses: { [WORKER_A]: { running: false, result: null, error: `no worker ${WORKER_A}` } } }),
    );
    expect(text).toContain(`auto checklist Run checks ✕ no worker ${WORKER_A}`);
    expect(text).not.toContain('Not checked yet');
  });

  it('the worker asked for by URL is the one shown; an unknown one falls back to the first', () => {
    const diagnoses = { [WORKER_B]: { running: true, result: null, error: null } };
    expect(render(<DoctorScreen worker={WORKER_B} />, workers, withState(useDoctor, { diagnoses })).text).toContain('Checking…');
    expect(render(<DoctorScreen worker="grpc://gone:1" />, workers, withState(useDoctor, { diagnoses })).text).toContain('Not checked yet');
  });

  it('a worker the router cannot reach: the failed step and a verdict that is not green, in one panel, with what to do', () => {
    const down = workerView(WORKER_A, {
      health: 'unhealthy',
      lastError: 'HealthCheck failed: 14 UNAVAILABLE',
      decision: decision('worker_not_healthy', 'no_request'),
    });
    const result = {
      url: WORKER_A,
      steps: [diagnosisStep('reachable', false, '14 UNAVAILABLE: No connection established', 'check the worker URL and that the worker is running')],
      verdict: {
        ...decision('worker_not_healthy', 'no_request'),
        shmEnabled: false,
        advice: 'restart or bring back the worker (Doctor shows why it is out); its verdict comes back once it answers its health check',
      },
    };
    const { text, html } = render(
      <DoctorScreen worker={WORKER_A} />,
      withState(useWorkers, { loaded: true, workers: [down] }),
      withState(useDoctor, { diagnoses: { [WORKER_A]: { running: false, result, error: null } } }),
    );
    expect(text).toContain(
      'Next request ✕ no request reaches it worker_not_healthy the worker is not healthy (down, not yet discovered, or removed): no request will reach it until it answers its health check again, whatever the mode What to do: restart or bring back the worker',
    );
    expect(html).toContain('class="verdict verdict-bad"');
    expect(text).not.toContain('SHM for tensors');
  });

  it('a broken lane before any check: the note, its error and the reset, above the checklist', () => {
    const broken = workerView(WORKER_A, { shmLane: { since: 1_700_000_000_000, error: 'ENOENT: /dev/shm/smg-tokenspeed-4242-1-0' } });
    const { text } = render(<DoctorScreen worker={WORKER_A} />, withState(useWorkers, { loaded: true, workers: [broken] }));
    expect(text).toContain('SHM lane broken since');
    expect(text).toContain("the worker could not read the router's /dev/shm files, so its requests go inline. ENOENT: /dev/shm/smg-tokenspeed-4242-1-0");
    expect(text).toContain('Reset the SHM lane');
    expect(text.indexOf('SHM lane broken')).toBeLessThan(text.indexOf('auto checklist'));
  });
});
