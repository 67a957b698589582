// How often a router sweeps /dev/shm for orphaned tensor files (docs/transport.md, "Orphan
// sweep"): every minute unless MMTC_ORPHAN_SWEEP_SECS in the router's environment says otherwise.
import { z } from 'zod';
import { wholeNumberFromEnv } from './errors.ts';

export const ORPHAN_SWEEP_ENV = 'MMTC_ORPHAN_SWEEP_SECS';
export const DEFAULT_ORPHAN_SWEEP_SECS = 60;
const EXPECTED = 'expected a whole number of seconds from 1 to 3600';
const OrphanSweepSecsSchema = z.int({ error: EXPECTED }).min(1, { error: EXPECTED }).max(3600, { error: EXPECTED });

/** The periodic sweep's interval in ms; a malformed MMTC_ORPHAN_SWEEP_SECS is a ConfigError naming it and its value. */
export function orphanSweepIntervalMs(env: Readonly<Record<string, string | undefined>>): number {
  return (wholeNumberFromEnv(env, ORPHAN_SWEEP_ENV, OrphanSweepSecsSchema, EXPECTED) ?? DEFAULT_ORPHAN_SWEEP_SECS) * 1000;
}
