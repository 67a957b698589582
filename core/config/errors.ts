// Configuration errors as an operator reads them: which field, which value, what is
// accepted, and (for files) where. Every entry point (YAML, flags, programmatic API) turns
// zod issues into ConfigIssues here, so the wording is the same everywhere.
import type { z } from 'zod';

export interface ConfigIssue {
  /** Where the value lives: `workers[0].url`, `--port`, `SMG_MM_SHM_MIN_BYTES`. */
  path: string;
  /** The whole sentence shown to the operator. */
  message: string;
  line?: number;
  column?: number;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly issues: ConfigIssue[];
  constructor(issues: ConfigIssue[], heading?: string) {
    const lines = issues.map((i) => i.message);
    super(heading ? [heading, ...lines.map((l) => `  ${l}`)].join('\n') : lines.join('\n'));
    this.issues = issues;
  }
}

/** Characters of a value an error quotes: enough to recognise it, never the whole of a 2 MiB draft. */
const QUOTED_CHARS = 120;

function clip(text: string): string {
  return text.length <= QUOTED_CHARS ? text : `${text.slice(0, QUOTED_CHARS)}… (${text.length} characters)`;
}

/** 'fast' for strings, 12 for numbers, JSON for the rest: how a value is quoted in errors (long ones cut). */
export function formatValue(value: unknown): string {
  if (typeof value === 'string') return `'${clip(value)}'`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value) && value.length > 8) return `a list of ${value.length} entries`;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    // JSON cannot write it: nesting deeper than the stack (RangeError), or a cycle or a BigInt
    // inside (TypeError). The value is then described in words, below, instead of quoted.
  }
  return json === undefined ? `a ${Array.isArray(value) ? 'list' : 'value'} too deep to quote` : clip(json);
}

export type PathSegment = string | number;

export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out;
}

/**
 * The first problem zod found, as a path (formatPath's `workers[0].url`) and what is wrong (an
 * unknown key named): for a place that shows one problem, a field's hint or an invalid input.
 * Where the whole list is shown, issuesFromZod words each one with its value.
 */
export function firstZodIssue(error: z.core.$ZodError): { path: string; message: string } {
  const issue = error.issues[0];
  if (!issue) return { path: '', message: 'invalid value' };
  const path = formatPath(issue.path.filter((p): p is PathSegment => typeof p !== 'symbol'));
  const message = issue.code === 'unrecognized_keys' ? `unknown field${issue.keys.length === 1 ? '' : 's'} ${issue.keys.join(', ')}` : issue.message;
  return { path, message };
}

/**
 * What is wrong with one field's value, as the operator reads it under the field: the same
 * sentence a whole configuration's check gives (`invalid value 0 for max_request_image_pixels:
 * expected …`), the value quoted and the field named by `where`; null when `schema` takes it.
 */
export function fieldProblem(schema: z.ZodType, where: string, value: unknown): string | null {
  const result = schema.safeParse(value);
  if (result.success) return null;
  const [first] = issuesFromZod(result.error, {
    input: value,
    describePath: (p) => `${where}${p.length ? (typeof p[0] === 'number' ? '' : '.') + formatPath(p) : ''}`,
  });
  return first?.message ?? `invalid value ${formatValue(value)} for ${where}`;
}

export function invalidValueMessage(where: string, value: unknown, expected: string): string {
  return `invalid value ${formatValue(value)} for ${where}: ${expected}`;
}

function valueAt(root: unknown, path: readonly PathSegment[]): { present: boolean; value: unknown } {
  let cur: unknown = root;
  for (const seg of path) {
    if (cur === null || typeof cur !== 'object' || !(seg in (cur as Record<PathSegment, unknown>))) {
      return { present: false, value: undefined };
    }
    cur = (cur as Record<PathSegment, unknown>)[seg];
  }
  return { present: true, value: cur };
}

/** Edit distance, for "did you mean" on unknown keys. */
function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!;
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length]!;
}

export function suggestKey(unknown: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(unknown.toLowerCase().replaceAll('-', '_'), k);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(unknown.length / 4)) ? best : undefined;
}

export interface IssueContext {
  /** The data that was validated, to quote the offending value. */
  input: unknown;
  /** Keys that would have been accepted at a path, for "did you mean". */
  knownKeysAt?: (path: readonly PathSegment[]) => readonly string[];
  /** Rename a zod path for display (e.g. to a CLI flag). */
  describePath?: (path: readonly PathSegment[]) => string;
}

/**
 * Issues one error lists in full. Past it the rest are counted in one closing issue: a YAML
 * of thousands of unknown keys made as many "did you mean" searches and line lookups and held
 * the event loop (and /health) for seconds; an operator reads the first few and fixes the
 * pattern (measured: docs/performance.md, "A YAML of 20,000 keys").
 */
export const MAX_LISTED_ISSUES = 50;

/** One ConfigIssue per problem (an unrecognized_keys issue with three keys gives three), at most MAX_LISTED_ISSUES and a count of the rest. */
export function issuesFromZod(
  error: z.core.$ZodError,
  ctx: IssueContext,
): Array<ConfigIssue & { keyPath: PathSegment[]; unknownKey?: boolean; rest?: boolean; params?: Record<string, unknown> }> {
  const describe = ctx.describePath ?? formatPath;
  const out: Array<ConfigIssue & { keyPath: PathSegment[]; unknownKey?: boolean; rest?: boolean; params?: Record<string, unknown> }> = [];
  const total = error.issues.reduce((n, issue) => n + (issue.code === 'unrecognized_keys' ? issue.keys.length : 1), 0);
  const listed = () => {
    if (out.length < MAX_LISTED_ISSUES) return false;
    out.push({
      path: '',
      keyPath: [],
      rest: true,
      message: `… and ${total - out.length} more problems of the same kinds, not listed (the first ${MAX_LISTED_ISSUES} are above)`,
    });
    return true;
  };
  for (const issue of error.issues) {
    const path = issue.path.filter((p): p is PathSegment => typeof p !== 'symbol');
    if (issue.code === 'unrecognized_keys') {
      const known = ctx.knownKeysAt?.(path) ?? [];
      for (const key of issue.keys) {
        if (listed()) return out;
        const keyPath = [...path, key];
        const hint = suggestKey(key, known);
        const where = path.length ? ` in ${describe(path)}` : '';
        out.push({
          path: describe(keyPath),
          keyPath,
          unknownKey: true,
          message: `unknown key ${formatValue(key)}${where}${hint ? ` (did you mean '${hint}'?)` : known.length ? ` (known keys: ${known.join(', ')})` : ''}`,
        });
      }
      continue;
    }
    if (listed()) return out;
    if (issue.code === 'invalid_key' && path.length > 0) {
      // A map's key is what is wrong (a label name of 70 characters): quote the key, not the
      // value under it, and say what the key must be (the key schema's words, not the map's).
      const key = path.at(-1)!;
      const mapPath = path.slice(0, -1);
      const expected = issue.issues[0]?.message ?? issue.message;
      const length = typeof key === 'string' ? ` (${key.length} characters)` : '';
      out.push({
        path: describe(mapPath),
        keyPath: path,
        message: `invalid key ${formatValue(key)}${length} in ${describe(mapPath) || 'the configuration'}: ${expected}`,
      });
      continue;
    }
    const { present, value } = valueAt(ctx.input, path);
    const where = describe(path);
    out.push({
      path: where,
      keyPath: path,
      // A rule across keys (code custom) may be about a key left to its default: not "missing".
      message: present
        ? invalidValueMessage(where || 'the configuration', value, issue.message)
        : issue.code === 'custom'
          ? `${where} (not set: its default): ${issue.message}`
          : `missing required key ${where}: ${issue.message}`,
      // A rule across keys may say which rule it is (schema.ts's topology problems).
      ...(issue.code === 'custom' && issue.params ? { params: issue.params } : {}),
    });
  }
  return out;
}

/**
 * A whole number from the environment variable `name` by `schema`; undefined when it is unset or
 * blank. Any other spelling is a ConfigError naming the variable, its value and `expected`.
 */
export function wholeNumberFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  schema: { safeParse(v: unknown): { success: true; data: number } | { success: false } },
  expected: string,
): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const parsed = schema.safeParse(/^\s*\d+\s*$/.test(raw) ? Number(raw) : raw);
  if (!parsed.success) throw new ConfigError([{ path: name, message: `invalid value ${formatValue(raw)} for ${name}: ${expected}` }]);
  return parsed.data;
}
