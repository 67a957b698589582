// The reference worker a router starts for itself when no worker is configured, so a fresh
// install answers multimodal requests at once. Under Node it is a child process
// (`mmtc worker`), as a real worker would be: its reads of /dev/shm files are another
// process's, and it never competes with the router's event loop. Inside Electron,
// process.execPath is the app itself (and a packaged app cannot run as Node), so there it
// runs in a worker thread of the main process instead.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { WorkerSpecSchema, type WireRuntime, type WorkerSpec } from '../config/schema.ts';

/** The protocol the embedded reference worker speaks. */
export const EMBEDDED_RUNTIME: WireRuntime = 'tokenspeed';

/** The configuration entry the router adds for its embedded reference worker. */
export function embeddedWorkerSpec(url: string): WorkerSpec {
  return WorkerSpecSchema.parse({ url, runtime: EMBEDDED_RUNTIME });
}

export interface EmbeddedWorker {
  url: string;
  /** The child's pid (undefined when it runs as a thread of this process). */
  pid: number | undefined;
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;

function startAsChild(modelPath: string, processEnv: Readonly<Record<string, string | undefined>>): Promise<EmbeddedWorker> {
  const bin = path.resolve(import.meta.dirname, '../../bin/mmtc.js');
  const child = spawn(process.execPath, [bin, 'worker', '--runtime', EMBEDDED_RUNTIME, '--port', '0', '--model-path', modelPath], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...processEnv,
      // Our own GLIBC_TUNABLES was cut down by glibc at start; give the worker the whole setting.
      ...(processEnv.MMTC_GLIBC_TUNABLES ? { GLIBC_TUNABLES: processEnv.MMTC_GLIBC_TUNABLES } : {}),
      MMTC_EXIT_WITH_PARENT: String(process.pid),
    },
  });
  return new Promise<EmbeddedWorker>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`the embedded reference worker did not start within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`the embedded reference worker exited with status ${code}: ${out}`));
    };
    child.on('exit', onExit);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      child.off('exit', onExit);
      child.stdout.resume();
      resolve({
        url: m[1]!,
        pid: child.pid,
        stop: async () => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise<void>((done) => child.once('exit', () => done()));
          child.kill('SIGTERM');
          await exited;
        },
      });
    });
  });
}

/** The worker as a thread of this process (what Electron gets). */
export function startEmbeddedWorkerThread(modelPath: string): Promise<EmbeddedWorker> {
  const thread = new Worker(new URL('./thread.mjs', import.meta.url), { workerData: { runtime: EMBEDDED_RUNTIME, modelPath } });
  return new Promise<EmbeddedWorker>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the embedded reference worker did not start within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
    thread.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`the embedded reference worker failed: ${err.message}`));
    });
    thread.once('message', (msg: { url?: string; error?: string }) => {
      clearTimeout(timer);
      if (!msg.url) return reject(new Error(`the embedded reference worker failed: ${msg.error}`));
      thread.unref();
      resolve({
        url: msg.url,
        pid: undefined,
        stop: async () => {
          thread.postMessage('stop');
          await new Promise<void>((done) => {
            const t = setTimeout(() => void thread.terminate().then(() => done()), 3000);
            thread.once('exit', () => {
              clearTimeout(t);
              done();
            });
          });
        },
      });
    });
  });
}

export function startEmbeddedWorker(modelPath: string, processEnv: Readonly<Record<string, string | undefined>>): Promise<EmbeddedWorker> {
  return process.versions.electron ? startEmbeddedWorkerThread(modelPath) : startAsChild(modelPath, processEnv);
}
