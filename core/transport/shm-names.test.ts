import { describe, expect, it } from 'vitest';
import { formatShmName, isOurTensorName, ourPidNamespace, parseShmName, shmStampNanos, stampMs, type ShmName } from './shm-names.ts';
import { ShmWriter } from './shm-writer.ts';

const NANOS = 1_767_225_600_123_456_789n; // 2026-01-01T00:00:00.123Z, and some nanoseconds

describe('/dev/shm names', () => {
  it.each([
    [{ kind: 'tensor', pid: 4242, stampNanos: NANOS, seq: 7 }, 'smg-tokenspeed-4242-1767225600123456789-7'],
    [{ kind: 'probe', pid: 1, stampNanos: NANOS }, 'smg-tokenspeed-probe-1-1767225600123456789'],
    [{ kind: 'cache-entry', pidNamespace: '4026531836', pid: 4242, stampNanos: NANOS, seq: 3 }, 'smg-tokenspeed-cache-4026531836-4242-1767225600123456789-3'],
    [{ kind: 'cache-heartbeat', pidNamespace: '4026531836', pid: 4242, stampNanos: NANOS }, 'smg-tokenspeed-cache-4026531836-4242-1767225600123456789-0'],
  ] satisfies Array<[ShmName, string]>)('%o is %s, and parses back to the same fields', (fields, name) => {
    expect(formatShmName(fields)).toBe(name);
    expect(parseShmName(name)).toEqual({ ...fields, pidText: String(fields.pid) });
  });

  it('stamps names with the nanoseconds of now, which the sweep reads back in milliseconds', () => {
    const before = Date.now();
    const parsed = parseShmName(formatShmName({ kind: 'tensor', pid: 1, stampNanos: shmStampNanos(), seq: 1 }))!;
    expect(stampMs(parsed)).toBeGreaterThanOrEqual(before);
    expect(stampMs(parsed)).toBeLessThanOrEqual(Date.now());
  });

  it("names the writer's and the cache's files in these shapes", () => {
    const writer = new ShmWriter({ dir: '/nonexistent', pid: 42 });
    expect(parseShmName(writer.nextName())).toMatchObject({ kind: 'tensor', pid: 42, seq: 1 });
    expect(parseShmName(writer.nextName())).toMatchObject({ kind: 'tensor', pid: 42, seq: 2 });
    expect(parseShmName(writer.probeName())).toMatchObject({ kind: 'probe', pid: 42 });
    expect(ourPidNamespace()).toMatch(/^\d+$/);
  });

  it.each([
    ['a foreign prefix', 'other-1-2-3'],
    ['our prefix in capitals', 'SMG-TOKENSPEED-1-2-3'],
    ['anything before the prefix', 'xsmg-tokenspeed-1-2-3'],
    ['a directory above', '../smg-tokenspeed-1-2-3'],
    ['a path below', 'smg-tokenspeed-1-2-3/../../etc/passwd'],
    ['a trailing slash', 'smg-tokenspeed-1-2-3/'],
    ['a suffix', 'smg-tokenspeed-1000-1-1.tmp'],
    ['a trailing newline', 'smg-tokenspeed-1-2-3\n'],
    ['a letter for the pid', 'smg-tokenspeed-x-1-1'],
    ['an empty field', 'smg-tokenspeed--1-2'],
    ['a sign', 'smg-tokenspeed-+1-2-3'],
    ['an exponent', 'smg-tokenspeed-1e3-2-3'],
    ['a space', 'smg-tokenspeed- 1-2-3'],
    ['non-ASCII digits', 'smg-tokenspeed-\u0661-2-3'],
    ['too few fields', 'smg-tokenspeed-1-2'],
    ['too many fields for a tensor', 'smg-tokenspeed-1-2-3-4'],
    ['a cache name short of its seq', 'smg-tokenspeed-cache-1-2-3'],
    ['a cache name with a field too many', 'smg-tokenspeed-cache-1-2-3-4-5'],
    ['the probe of old, without its nanoseconds', 'smg-tokenspeed-probe-1000'],
    ['the bare prefix', 'smg-tokenspeed-'],
  ])('is not ours: %s (%j)', (_why, name) => {
    expect(parseShmName(name)).toBeNull();
    expect(isOurTensorName(name)).toBe(false);
  });

  it('takes any number of digits, as the sweep always did: the pid as its name spells it groups the files', () => {
    const long = '9'.repeat(40);
    expect(parseShmName(`smg-tokenspeed-${long}-${long}-1`)).toEqual({
      kind: 'tensor',
      pid: Number(long),
      pidText: long,
      stampNanos: BigInt(long),
      seq: 1,
    });
    expect(parseShmName('smg-tokenspeed-007-1-1')).toMatchObject({ pid: 7, pidText: '007' });
  });

  it('takes a stamp in the future (the sweep, not the name, decides what its age means)', () => {
    const future = BigInt(Date.now() + 365 * 24 * 3600_000) * 1_000_000n;
    expect(parseShmName(`smg-tokenspeed-1-${future}-1`)).toMatchObject({ kind: 'tensor', stampNanos: future });
  });

  it("a cache name is the heartbeat only with seq '0' exactly", () => {
    expect(parseShmName('smg-tokenspeed-cache-1-2-3-0')?.kind).toBe('cache-heartbeat');
    expect(parseShmName('smg-tokenspeed-cache-1-2-3-00')).toMatchObject({ kind: 'cache-entry', seq: 0 });
    expect(parseShmName('smg-tokenspeed-cache-1-2-3-10')).toMatchObject({ kind: 'cache-entry', seq: 10 });
  });

  it('only a tensor name is a tensor name (what a request scope may unlink)', () => {
    expect(isOurTensorName('smg-tokenspeed-1-2-3')).toBe(true);
    expect(isOurTensorName('smg-tokenspeed-probe-1-2')).toBe(false);
    expect(isOurTensorName('smg-tokenspeed-cache-1-2-3-4')).toBe(false);
    expect(isOurTensorName('smg-tokenspeed-cache-1-2-3-0')).toBe(false);
  });
});
