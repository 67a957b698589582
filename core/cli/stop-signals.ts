// How a long-running mmtc command (`mmtc router`, `mmtc serve`, `mmtc worker`) stops on a
// signal. The first SIGINT, SIGTERM or SIGHUP starts its normal stop, which removes what it
// keeps in /dev/shm (pixel-cache entries, the cache's heartbeat). It keeps listening until
// the process exits: without a listener a further signal would kill it on the spot, before
// that cleanup, and further signals are usual. A terminal's Ctrl-C reaches every process of
// the foreground group, and the wrappers in front of us (npx, npm, scripts/start.mjs,
// bin/mmtc.js's re-exec) pass on the one they got, so one Ctrl-C arrives two or three times
// within milliseconds. A signal within SAME_STOP_MS of the first is that same Ctrl-C and
// changes nothing; a later one, while the stop still runs, is someone pressing Ctrl-C again
// because it takes too long: the process exits at once, with 128 + the signal's number, and
// its 'exit' handlers still remove its /dev/shm files (docs/console.md, "Stopping").
import { constants } from 'node:os';

export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Signals this soon after the first are copies of it (a wrapper passing it on), not a second Ctrl-C. */
export const SAME_STOP_MS = 1000;

/**
 * Resolve at the first stop signal; from then on a signal more than SAME_STOP_MS later exits
 * the process at once. `log` says what happens (one line each), for the operator.
 */
export function untilStopSignal(log: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let firstAt: number | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      const now = performance.now();
      if (firstAt === undefined) {
        firstAt = now;
        log(`mmtc: ${signal}: stopping (Ctrl-C again after ${SAME_STOP_MS / 1000} s stops at once)`);
        resolve(signal);
        return;
      }
      if (now - firstAt < SAME_STOP_MS) return; // the same Ctrl-C, passed on by a wrapper: the stop is under way
      log(`mmtc: ${signal} again: stopping at once`);
      process.exit(128 + constants.signals[signal]);
    };
    for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  });
}
