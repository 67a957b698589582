import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseCommandInput } from '../console/contract.ts';
import { fieldProblem, firstZodIssue, formatPath } from './errors.ts';
import { LabelsSchema, LimitMmPerPromptSchema, RouterConfigSchema } from './schema.ts';

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

// A form names a field's problem in the same sentence as a whole configuration's check: the
// field, the value as typed and what is expected, in the setting's unit.
describe('fieldProblem', () => {
  it('names the field and the value, in the schema words', () => {
    expect(fieldProblem(RouterConfigSchema.shape.body_timeout_secs, 'body_timeout_secs', '')).toBe(
      "invalid value '' for body_timeout_secs: expected a number of seconds from 1 to 3600",
    );
    expect(fieldProblem(RouterConfigSchema.shape.max_request_image_pixels, 'max_request_image_pixels', 0)).toBe(
      'invalid value 0 for max_request_image_pixels: expected a positive integer number of pixels (width × height, e.g. 64000000)',
    );
    expect(fieldProblem(RouterConfigSchema.shape.body_timeout_secs, 'body_timeout_secs', 30)).toBeNull();
  });

  it('inside a map or a list: the part at fault, by its path under the field', () => {
    expect(fieldProblem(LimitMmPerPromptSchema, 'limit_mm_per_prompt', { image: -1 })).toBe(
      'invalid value -1 for limit_mm_per_prompt.image: expected a whole number of images, 0 or more',
    );
    expect(fieldProblem(RouterConfigSchema.shape.allowed_media_domains, 'allowed_media_domains', ['ok.example.com', 'https://x'])).toBe(
      "invalid value 'https://x' for allowed_media_domains[1]: expected a host name such as images.example.com (no scheme, port, path or wildcard)",
    );
    expect(fieldProblem(LabelsSchema, 'labels', { ['n'.repeat(70)]: '1' })).toBe(
      `invalid key '${'n'.repeat(70)}' (70 characters) in labels: expected a string label name of 1 to 63 characters`,
    );
  });
});
