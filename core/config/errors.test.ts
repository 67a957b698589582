import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseCommandInput } from '../console/contract.ts';
import { firstZodIssue, formatPath } from './errors.ts';

// One wording for where a value lives: the console's invalid_input, the flags' hints and the
// settings' field hints all name `workers[0].url`, never `workers.0.url`.
describe('one path format for zod issues', () => {
  it('an index reads in brackets and a key after a dot', () => {
    expect(formatPath(['workers', 0, 'labels', 'zone'])).toBe('workers[0].labels.zone');
    expect(formatPath([])).toBe('');
  });

  it('the first issue names the path and, for unknown keys, the keys', () => {
    const schema = z.strictObject({ workers: z.array(z.strictObject({ url: z.string() })) });
    const bad = schema.safeParse({ workers: [{ url: 'grpc://a:1' }, { url: 7 }] });
    if (bad.success) throw new Error('a number for a url must fail');
    expect(firstZodIssue(bad.error)).toEqual({ path: 'workers[1].url', message: expect.stringContaining('string') });
    const unknown = schema.safeParse({ workers: [], wrokers: 1, other: 2 });
    if (unknown.success) throw new Error('unknown keys must fail');
    expect(firstZodIssue(unknown.error)).toEqual({ path: '', message: 'unknown fields wrokers, other' });
  });

  it("the console's invalid_input names the field as the rest of the product does", () => {
    expect(() => parseCommandInput('workers.remove', { url: 'grpc://127.0.0.1:1', expectedRevision: 1, extra: true })).toThrow(
      'invalid input for workers.remove: unknown field extra',
    );
    expect(() => parseCommandInput('traffic.request', { requestId: '' })).toThrow(/^invalid input for traffic\.request at requestId: /);
  });
});
