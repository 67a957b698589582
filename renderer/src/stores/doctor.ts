// Doctor and calibration, per worker: the auto checklist (workers.diagnose), test requests
// (traffic.sendTestRequest: where each tensor went and why) and threshold calibration
// (transport.calibrate, with progress from the calibration stream).
import { create } from 'zustand';
import type { CalibrationResult, CommandOutput, StreamPayload } from '../../../core/console/contract.ts';
import { client, describeError } from './client.ts';

export type Diagnosis = CommandOutput<'workers.diagnose'>;
export type TestResult = CommandOutput<'traffic.sendTestRequest'>;

interface Running<T> {
  running: boolean;
  result: T | null;
  error: string | null;
}

interface Calibration extends Running<CalibrationResult> {
  progress: StreamPayload<'calibration'> | null;
}

export type CalibrationPlan = CommandOutput<'transport.calibrationPlan'>;

interface DoctorState {
  diagnoses: Record<string, Running<Diagnosis>>;
  /** The sizes a calibration of each worker measures, or why it cannot be calibrated now. */
  plans: Record<string, CalibrationPlan | { refused: string }>;
  loadPlan(url: string): Promise<void>;
  tests: Record<string, Running<TestResult>>;
  calibrations: Record<string, Calibration>;
  diagnose(url: string): Promise<void>;
  sendTest(url: string, image: { width: number; height: number; format: 'png' | 'jpeg' | 'webp' }): Promise<TestResult | null>;
  calibrate(url: string, samples: number): Promise<void>;
  onProgress(p: StreamPayload<'calibration'>): void;
}

const idle = { running: false, result: null, error: null };

export const useDoctor = create<DoctorState>((set, get) => ({
  diagnoses: {},
  plans: {},
  tests: {},

  async loadPlan(url) {
    try {
      const plan = await client().call('transport.calibrationPlan', { url });
      set({ plans: { ...get().plans, [url]: plan } });
    } catch (err) {
      set({ plans: { ...get().plans, [url]: { refused: describeError(err) } } });
    }
  },
  calibrations: {},

  async diagnose(url) {
    set({ diagnoses: { ...get().diagnoses, [url]: { ...(get().diagnoses[url] ?? idle), running: true, error: null } } });
    try {
      const result = await client().call('workers.diagnose', { url });
      set({ diagnoses: { ...get().diagnoses, [url]: { running: false, result, error: null } } });
    } catch (err) {
      set({ diagnoses: { ...get().diagnoses, [url]: { running: false, result: null, error: describeError(err) } } });
    }
  },

  async sendTest(url, image) {
    set({ tests: { ...get().tests, [url]: { ...(get().tests[url] ?? idle), running: true, error: null } } });
    try {
      const result = await client().call('traffic.sendTestRequest', { url, ...image });
      set({ tests: { ...get().tests, [url]: { running: false, result, error: null } } });
      return result;
    } catch (err) {
      set({ tests: { ...get().tests, [url]: { running: false, result: null, error: describeError(err) } } });
      return null;
    }
  },

  async calibrate(url, samples) {
    set({ calibrations: { ...get().calibrations, [url]: { running: true, result: null, error: null, progress: null } } });
    try {
      const result = await client().call('transport.calibrate', { url, samples });
      set({ calibrations: { ...get().calibrations, [url]: { ...get().calibrations[url]!, running: false, result, error: null } } });
    } catch (err) {
      set({ calibrations: { ...get().calibrations, [url]: { ...get().calibrations[url]!, running: false, result: null, error: describeError(err) } } });
    }
  },

  onProgress(p) {
    const c = get().calibrations[p.url] ?? { ...idle, running: true, progress: null };
    set({ calibrations: { ...get().calibrations, [p.url]: { ...c, progress: p } } });
  },
}));
