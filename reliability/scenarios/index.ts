// Every scenario group in the order the suite runs them, and every scenario name (for --list and --only).
import type { Suite } from '../lib/suite.ts';
import { workerFaultsGroup } from './faults-worker.ts';
import { consoleFaultsGroup } from './faults-console.ts';
import { shmFaultsGroup } from './faults-shm.ts';
import { attackGroup } from './attack.ts';
import { httpFuzzGroup } from './fuzz-http.ts';
import { hardeningGroup } from './hardening.ts';
import { localFuzzGroup } from './fuzz-local.ts';
import { wireFuzzGroup } from './fuzz-wire.ts';
import { loadGroup } from './load.ts';
import { familiesGroup } from './families.ts';
import { epdGroup } from './epd.ts';
import { cacheGroup } from './cache.ts';
import { hostGroup } from './host.ts';

export const GROUPS: Array<(suite: Suite) => Promise<void>> = [
  loadGroup,
  familiesGroup,
  epdGroup,
  cacheGroup,
  workerFaultsGroup,
  shmFaultsGroup,
  consoleFaultsGroup,
  localFuzzGroup,
  httpFuzzGroup,
  wireFuzzGroup,
  attackGroup,
  hardeningGroup,
  hostGroup,
];

export const SCENARIOS: readonly string[] = [
  'load/clients-8',
  'load/clients-32',
  'load/clients-128',
  'load/memory-after-idle',
  'load/live-config',
  'families/largest-32',
  'epd/clients-32',
  'epd/faults',
  'epd/pd-both-runtimes',
  'cache/load-32',
  'cache/tamper',
  'cache/crash-restart',
  ...['worker-killed-mid-stream', 'worker-hung', 'worker-slow', 'worker-restart-same-port', 'worker-restart-new-token'].map((n) => `faults/${n}`),
  ...['shm-full', 'shm-read-only', 'worker-keeps-files', 'orphans', 'planted-entries', 'router-killed'].map((n) => `faults/${n}`),
  'faults/serve-killed-during-apply',
  'faults/config-drift',
  'fuzz/yaml',
  'fuzz/env',
  'fuzz/cli-flags',
  'fuzz/reader',
  'fuzz/openai',
  'fuzz/images',
  'fuzz/contract',
  'fuzz/generate',
  'fuzz/raw-http',
  'fuzz/ws-frames',
  'fuzz/worker-lists',
  'fuzz/durations',
  'attack/browser',
  'attack/ipc',
  ...['text-50mb', 'bombs-20', 'bodies', 'loopback-urls', 'urls-50x19mib', 'worker-as-nobody', 'two-routers-pid-ns', 'clients-128-1080p'].map(
    (n) => `hardening/${n}`,
  ),
  ...['raw-http-every-port', 'oversized-replies', 'shm-foreign-files', 'foreign-heartbeat', 'bootstrap-waiters'].map((n) => `host/${n}`),
];

/** The scenarios that start no router or `serve` (in-process fuzzers, the IPC handlers): the only ones that run without a private /dev/shm. */
export const WITHOUT_ROUTER: readonly string[] = ['fuzz/yaml', 'fuzz/env', 'fuzz/cli-flags', 'fuzz/reader', 'attack/ipc'];
