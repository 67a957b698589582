// The suite's bookkeeping: scenarios grouped by area, each timed and bounded, with soft
// checks (every failed check is recorded, the scenario goes on so the report says all that
// went wrong), its figures in `details`, and its seed when it draws random inputs.
import { clientRetries } from './http.ts';
import { Rng } from './rng.ts';
import { scenarioContext, startMark, stopAll, stopSince } from './procs.ts';
import { formatBytes } from '../../core/util/bytes.ts';

export type Status = 'passed' | 'failed' | 'skipped';

export interface ScenarioResult {
  name: string;
  status: Status;
  seconds: number;
  seed?: number;
  details: Record<string, unknown>;
}

export interface T {
  name: string;
  seed: number;
  rng: Rng;
  short: boolean;
  details: Record<string, unknown>;
  /** Record a failure unless `ok`; returns ok. */
  check(ok: boolean, message: string): boolean;
  /** A figure for the report (and the one-line summary when `summary` is set). */
  note(key: string, value: unknown): void;
  summary(text: string): void;
  log(line: string): void;
  /** Seconds left of this scenario's time bound. */
  remaining(): number;
  /** Aborted once the scenario is past its time bound (its result is recorded, its processes stopped). */
  signal: AbortSignal;
}

export interface SuiteOptions {
  short: boolean;
  seed: number;
  only: string[];
  log: (line: string) => void;
  /** The run has a /dev/shm of its own (a private tmpfs in its mount namespace). */
  privateShm: boolean;
  /** Whether a scenario starts a router or `serve` (whose start-up sweep runs on /dev/shm). */
  startsRouter: (name: string) => boolean;
}

/** Why a scenario that starts a router cannot run on the host's /dev/shm. */
export const NEEDS_PRIVATE_SHM = 'needs root: the routers it starts sweep /dev/shm, which must be a private tmpfs';

export class Suite {
  readonly results: ScenarioResult[] = [];
  readonly started = performance.now();
  constructor(readonly o: SuiteOptions) {}

  get short(): boolean {
    return this.o.short;
  }

  wants(name: string): boolean {
    if (this.o.only.length === 0) return true;
    return this.o.only.some((o) => name === o || name.startsWith(`${o.replace(/\/$/, '')}/`));
  }

  elapsed(): string {
    return `${((performance.now() - this.started) / 1000).toFixed(1).padStart(6)} s`;
  }

  private skip(name: string, reason: string): ScenarioResult {
    const r: ScenarioResult = { name, status: 'skipped', seconds: 0, details: { reason } };
    this.results.push(r);
    this.o.log(`[${this.elapsed()}] - ${name}: skipped (${reason})`);
    return r;
  }

  /** Skipped on the host's /dev/shm: it starts a router. */
  private shmSkip(name: string): string | undefined {
    return !this.o.privateShm && this.o.startsRouter(name) ? NEEDS_PRIVATE_SHM : undefined;
  }

  /**
   * Run one scenario if it was asked for. `seeded` scenarios draw from the run's seed and
   * print it. The time bound is the scenario's own: past it the scenario fails, its result is
   * recorded as it stood (later checks and notes are ignored), the processes it started are
   * stopped, and it may start no more (procs.ts scenarioContext).
   */
  async run(name: string, fn: (t: T) => Promise<void>, options: { seeded?: boolean; maxSeconds: number; skip?: string }): Promise<ScenarioResult | undefined> {
    if (!this.wants(name)) return undefined;
    const skip = this.shmSkip(name) ?? options.skip;
    if (skip) return this.skip(name, skip);
    const seed = this.o.seed;
    const failures: string[] = [];
    const details: Record<string, unknown> = {};
    const t0 = performance.now();
    const abort = new AbortController();
    const ctx = { name, aborted: false };
    const dead = () => ctx.aborted;
    let summary = '';
    const t: T = {
      name,
      seed,
      rng: new Rng(seed),
      short: this.o.short,
      details,
      check: (ok, message) => {
        if (!ok && !dead()) {
          if (failures.length < 50) failures.push(message);
          this.o.log(`            ✘ ${message.slice(0, 400)}`);
        }
        return ok;
      },
      note: (key, value) => {
        if (!dead()) details[key] = value;
      },
      summary: (text) => {
        if (!dead()) summary = text;
      },
      log: (line) => {
        if (!dead()) this.o.log(`            ${line}`);
      },
      remaining: () => options.maxSeconds - (performance.now() - t0) / 1000,
      signal: abort.signal,
    };
    this.o.log(`[${this.elapsed()}] ▶ ${name}${options.seeded ? ` (seed ${seed}; re-run: npm run test:reliability -- --seed ${seed} --only ${name})` : ''}`);
    const mark = startMark();
    const retriesBefore = clientRetries();
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    // Started inside its own async context, so what it does after its bound can be refused.
    const work = scenarioContext.run(ctx, () => Promise.resolve().then(() => fn(t)));
    // Its failure is reported through the race below; a failure after its bound (the race
    // already lost to the timer) is no longer the scenario's result, and must not end the run.
    work.catch(() => undefined);
    try {
      await Promise.race([
        work,
        new Promise((_, reject) => {
          timer = setTimeout(() => {
            timedOut = true;
            reject(new Error(`did not finish within its bound of ${options.maxSeconds} s (a hang)`));
          }, options.maxSeconds * 1000);
        }),
      ]);
    } catch (err) {
      failures.push(`error: ${(err as Error)?.stack ?? String(err)}`.slice(0, 4000));
      this.o.log(`            ✘ error: ${String((err as Error)?.message ?? err).slice(0, 600)}`);
    } finally {
      clearTimeout(timer);
    }
    // Frozen from here on: a scenario past its bound adds nothing to its result.
    ctx.aborted = true;
    abort.abort();
    // Requests the HTTP client sent again after a reset on a reused keep-alive socket (lib/http.ts).
    details.client_retries = clientRetries() - retriesBefore;
    if (timedOut) {
      const stopped = await stopSince(mark, 'SIGKILL');
      this.o.log(`            stopped ${stopped} processes it had started`);
    }
    const seconds = Math.round((performance.now() - t0) / 100) / 10;
    const status: Status = failures.length ? 'failed' : 'passed';
    const frozen: Record<string, unknown> = { ...details };
    if (failures.length) frozen.failures = [...failures];
    if (summary) frozen.summary = summary;
    const r: ScenarioResult = { name, status, seconds, ...(options.seeded ? { seed } : {}), details: frozen };
    this.results.push(r);
    this.o.log(`[${this.elapsed()}] ${status === 'passed' ? '✔' : '✘'} ${name} (${seconds} s)${summary ? `: ${summary}` : ''}`);
    return r;
  }

  /** Run a group's body only if one of its scenarios is wanted; stop what it left running after. */
  async group(prefix: string, names: readonly string[], body: () => Promise<void>): Promise<void> {
    const wanted = names.map((n) => `${prefix}/${n}`).filter((n) => this.wants(n));
    if (wanted.length === 0) return;
    // On the host's /dev/shm a group whose every wanted scenario starts a router does not start its processes at all.
    if (wanted.every((n) => this.shmSkip(n))) {
      for (const n of wanted) if (!this.results.some((r) => r.name === n)) this.skip(n, NEEDS_PRIVATE_SHM);
      return;
    }
    try {
      await body();
    } catch (err) {
      // A failure in the group's own set-up fails every scenario of it that did not run.
      for (const n of names) {
        const name = `${prefix}/${n}`;
        if (!this.wants(name) || this.results.some((r) => r.name === name)) continue;
        this.results.push({ name, status: 'failed', seconds: 0, details: { failures: [`set-up failed: ${(err as Error)?.stack ?? err}`.slice(0, 4000)] } });
        this.o.log(`[${this.elapsed()}] ✘ ${name}: set-up failed: ${String((err as Error)?.message ?? err).slice(0, 600)}`);
      }
    } finally {
      await stopAll();
    }
  }
}

export function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : String(n);
}

export const MiB = 1024 * 1024;
/** A size in words (core/util/bytes.ts), 'n/a' when it was not measured. */
export const bytesText = (n: number | undefined) => (n === undefined ? 'n/a' : formatBytes(n));
