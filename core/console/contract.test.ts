// Errors across the console's boundary: what the backend sends for each code (toWire) is the
// bytes it sent before details were typed, the client rebuilds exactly that (errorFromWire),
// and an answer whose details do not fit its code is refused as what it is, never shown half.
import { describe, expect, it } from 'vitest';
import { ContractError, ERROR_CODES, ERROR_DETAILS, errorFromWire, type ErrorCode } from './contract.ts';

const step = {
  id: 'probe_file_read',
  label: 'the worker reads a file we write',
  ok: false,
  detail: 'ENOENT: /dev/shm/mmtc-probe',
  remedy: 'run the worker with the same /dev/shm',
} as const;

/** One error of each code as the backend throws it (apply.ts, workers.ts, http.ts, …). */
const thrown: { [C in ErrorCode]: ContractError<C> } = {
  invalid_input: new ContractError('invalid_input', 'invalid input for workers.add at worker.url: expected a worker URL', 'worker.url'),
  invalid_config: new ContractError(
    'invalid_config',
    'the draft is not a valid configuration: expected inline, shm, auto or rdma',
    'multimodal_tensor_transport',
    [{ path: 'multimodal_tensor_transport', message: 'expected inline, shm, auto or rdma' }],
  ),
  conflict: new ContractError('conflict', 'revision 3 is not the current revision 4', undefined, [], {
    currentRevision: 4,
    expectedRevision: 3,
    changedMeanwhile: [{ path: 'policy', kind: 'changed', before: 'round_robin', after: 'least_load' }],
  }),
  restart_required: new ContractError('restart_required', 'port only changes at a restart', 'port', [{ path: 'port', message: 'only a restart changes it' }]),
  file_drift: new ContractError('file_drift', '/etc/mmtc/router.yaml was changed on disk', undefined, [], {
    diff: [{ path: 'policy', kind: 'changed', before: 'round_robin', after: 'least_load' }],
    file: '/etc/mmtc/router.yaml',
  }),
  checks_failed: new ContractError('checks_failed', 'not reset: the worker reads a file we write (ENOENT)', 'url', [], { failing: [step] }),
  not_found: new ContractError('not_found', 'no worker grpc://x:1 in the registry', 'url'),
  unauthorized: new ContractError('unauthorized', 'missing or wrong console token'),
  forbidden: new ContractError('forbidden', "requests from origin 'http://evil' are not accepted"),
  busy: new ContractError('busy', 'a calibration is already running; wait for it to finish'),
  internal: new ContractError('internal', 'ENOSPC: no space left on device'),
};

describe('contract errors on the wire', () => {
  it('every code goes out as {error: {code, message, path?, issues?, details?}}, details only where its code has them', () => {
    expect(Object.keys(thrown).sort()).toEqual([...ERROR_CODES].sort());
    expect(JSON.stringify(thrown.conflict.toWire())).toBe(
      '{"error":{"code":"conflict","message":"revision 3 is not the current revision 4","details":{"currentRevision":4,"expectedRevision":3,"changedMeanwhile":[{"path":"policy","kind":"changed","before":"round_robin","after":"least_load"}]}}}',
    );
    expect(JSON.stringify(thrown.checks_failed.toWire())).toBe(
      `{"error":{"code":"checks_failed","message":"not reset: the worker reads a file we write (ENOENT)","path":"url","details":{"failing":[${JSON.stringify(step)}]}}}`,
    );
    expect(JSON.stringify(thrown.not_found.toWire())).toBe('{"error":{"code":"not_found","message":"no worker grpc://x:1 in the registry","path":"url"}}');
    for (const code of ERROR_CODES) expect('details' in thrown[code].toWire().error, code).toBe(Object.hasOwn(ERROR_DETAILS, code));
  });

  it('the client rebuilds each one as it was thrown: code, message, path, issues, details, and the same wire again', () => {
    for (const code of ERROR_CODES) {
      const wire = JSON.parse(JSON.stringify(thrown[code].toWire())) as unknown;
      const rebuilt = errorFromWire(wire);
      expect(rebuilt, code).toBeInstanceOf(ContractError);
      expect(rebuilt.name).toBe('ContractError');
      expect({ code: rebuilt.code, message: rebuilt.message, path: rebuilt.path, issues: rebuilt.issues, details: rebuilt.details }, code).toEqual({
        code,
        message: thrown[code].message,
        path: thrown[code].path,
        issues: thrown[code].issues,
        details: thrown[code].details,
      });
      expect(JSON.stringify(rebuilt.toWire()), code).toBe(JSON.stringify(thrown[code].toWire()));
    }
  });

  it("an error's details narrow by its code: a conflict's revisions and a refused reset's failing steps read typed", () => {
    const err: unknown = errorFromWire(JSON.parse(JSON.stringify(thrown.checks_failed.toWire())));
    if (!(err instanceof ContractError) || err.code !== 'checks_failed') throw new Error('expected checks_failed');
    expect(err.details.failing.map((s) => s.id)).toEqual(['probe_file_read']);
    const conflict: unknown = errorFromWire(JSON.parse(JSON.stringify(thrown.conflict.toWire())));
    if (!(conflict instanceof ContractError) || conflict.code !== 'conflict') throw new Error('expected conflict');
    expect([conflict.details.currentRevision, conflict.details.expectedRevision]).toEqual([4, 3]);
  });

  it('details that do not fit their code are not a contract error: an internal error quoting what came back', () => {
    const wrong = [
      // a conflict without the revision the client edited
      { error: { code: 'conflict', message: 'stale', details: { currentRevision: 9 } } },
      // a refused reset whose failing steps are not steps
      { error: { code: 'checks_failed', message: 'not reset', details: { failing: ['probe_file_read'] } } },
      // a refused reset with no details at all
      { error: { code: 'checks_failed', message: 'not reset' } },
      // details on a code that has none
      { error: { code: 'not_found', message: 'gone', details: { url: 'grpc://x:1' } } },
      // a key a conflict's details do not have
      { error: { code: 'conflict', message: 'stale', details: { currentRevision: 9, expectedRevision: 8, by: 'someone' } } },
    ];
    for (const body of wrong) {
      const err = errorFromWire(body);
      expect(err.code, JSON.stringify(body)).toBe('internal');
      expect(err.message).toBe(`the console backend answered with something that is not a contract error: ${JSON.stringify(body).slice(0, 200)}`);
    }
  });
});
