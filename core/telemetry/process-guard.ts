// The last line of defence of a long-running mmtc process (`mmtc router`, `mmtc serve`, `mmtc worker`): an
// exception nothing caught, or a promise rejection nothing handled, is logged as one JSON
// line and counted, and the process goes on serving the requests it can. It is not a place
// to put errors: every one counted here is a bug (the servers answer every error a client
// can cause themselves), so /metrics shows the count (mmtc_uncaught_errors_total, by kind)
// and the tests and the reliability suite assert that it stays 0 through every attack (a
// reference worker has no /metrics: its JSON lines on stderr are what they look for).
export const UNCAUGHT_KINDS = ['uncaught_exception', 'unhandled_rejection'] as const;
export type UncaughtKind = (typeof UNCAUGHT_KINDS)[number];

const counts: Record<UncaughtKind, number> = { uncaught_exception: 0, unhandled_rejection: 0 };
let installed = false;

/** What the guard has caught in this process so far, by kind. */
export function uncaughtErrorCounts(): Readonly<Record<UncaughtKind, number>> {
  return counts;
}

/** Install the guard once per process; `log` gets one JSON line per error. */
export function installProcessGuard(log: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): void {
  if (installed) return;
  installed = true;
  const caught = (kind: UncaughtKind, err: unknown) => {
    counts[kind] += 1;
    try {
      log(JSON.stringify({ time: new Date().toISOString(), event: kind, error: String((err as Error)?.stack ?? err).slice(0, 4000) }));
    } catch {
      /* a log that fails cannot be logged */
    }
  };
  process.on('uncaughtException', (err) => caught('uncaught_exception', err));
  process.on('unhandledRejection', (reason) => caught('unhandled_rejection', reason));
}
