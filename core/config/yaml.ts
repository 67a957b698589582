// RouterConfig <-> YAML.
//
// Load: syntax errors, unknown keys and type errors are all reported at once, each with its
// key path and line:column, and nothing is returned unless the whole file is valid.
// Export: a normalized document (schema key order, sorted labels), so the same config
// always gives the same bytes and parsing it back gives the same config.
// Save over an existing file: only what changed is edited in place in the parsed document,
// so the operator's comments, ordering and untouched defaults survive. Files are written
// atomically (temp file + rename) and the previous version is kept as `<file>.bak`.
import * as fsSync from 'node:fs';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Document, isMap, isScalar, isSeq, LineCounter, parseDocument, type Node, type ParsedNode } from 'yaml';
import { ConfigError, type ConfigIssue, type PathSegment } from './errors.ts';
import { knownRuntime, MAX_WORKERS, RouterConfigSchema, WorkerSpecSchema, type RouterConfig, type WireRuntime } from './schema.ts';
import { checkRouterConfig } from './validate.ts';

export interface ParsedConfigFile {
  config: RouterConfig;
  /** Key paths present in the file, e.g. `multimodal_tensor_transport`, `workers[1].url`, with their line:column. */
  positions: Map<string, { line: number; column: number }>;
}

function nodeAt(root: ParsedNode | null, keyPath: readonly PathSegment[], wantKey: boolean): Node | null {
  let cur: unknown = root;
  for (let i = 0; i < keyPath.length; i++) {
    const seg = keyPath[i]!;
    const last = i === keyPath.length - 1;
    if (isMap(cur)) {
      const pair = cur.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === seg);
      if (!pair) return null;
      if (last && wantKey) return pair.key as Node;
      cur = pair.value ?? pair.key;
    } else if (isSeq(cur) && typeof seg === 'number') {
      cur = cur.items[seg];
      if (cur === undefined) return null;
    } else {
      return null;
    }
  }
  return (cur as Node) ?? null;
}

/** Position of the deepest existing node on a key path (the parent map for a missing key). */
function positionOf(root: ParsedNode | null, keyPath: readonly PathSegment[], wantKey: boolean, lines: LineCounter) {
  for (let depth = keyPath.length; depth >= 0; depth--) {
    const node = nodeAt(root, keyPath.slice(0, depth), wantKey && depth === keyPath.length);
    if (node?.range) return lines.linePos(node.range[0]);
  }
  return { line: 1, col: 1 };
}

/**
 * The largest configuration text loaded: a file of MAX_WORKERS workers, each with a runtime,
 * two labels and an override, is about 17 KiB. The YAML parser holds the event loop one to
 * two milliseconds per KiB on a busy 2-core box, and every load (a file, a console draft, a
 * reload) runs on the loop that answers /health: past this the text is refused before it is
 * parsed (docs/configuration.md).
 */
export const MAX_CONFIG_YAML_BYTES = 32 * 1024;

/**
 * The first key that repeats one before it in the same mapping, or undefined. The YAML
 * library's own check (uniqueKeys) compares every key with every earlier one, seconds for a
 * YAML of many keys (measured: docs/performance.md, "A YAML of 20,000 keys"). This is one Set per mapping, over an explicit stack (no recursion to overflow).
 */
function duplicateKey(root: unknown): Node | undefined {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? pair.key.value : pair.key;
        if (isScalar(pair.key) || pair.key === null) {
          if (seen.has(key)) return pair.key as Node;
          seen.add(key);
        } else stack.push(pair.key);
        stack.push(pair.value);
      }
    } else if (isSeq(node)) for (const item of node.items) stack.push(item);
  }
  return undefined;
}

function syntaxError(source: string, pos: { line: number; col: number }, message: string): ConfigError {
  return new ConfigError(
    [{ path: '', message: `${source}:${pos.line}:${pos.col}: YAML syntax error: ${message}`, line: pos.line, column: pos.col }],
    `cannot read ${source}:`,
  );
}

/**
 * The last few texts loaded or refused. One console apply reads the same texts several
 * times (the draft, to report its issues, the file on disk for drift, again before editing
 * it), each parse holding the event loop; a text's outcome never changes. Callers get a
 * copy of a loaded configuration, so none can change another's.
 */
const recent: Array<{ text: string; source: string; outcome: { parsed: ParsedConfigFile } | { error: ConfigError } }> = [];
const RECENT = 4;

export function parseConfigYaml(text: string, source = 'config.yaml'): ParsedConfigFile {
  let hit = recent.find((r) => r.text === text && r.source === source);
  if (!hit) {
    try {
      hit = { text, source, outcome: { parsed: parseConfigYamlOnce(text, source) } };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      hit = { text, source, outcome: { error: err } };
    }
    recent.unshift(hit);
    recent.splice(RECENT);
  }
  if ('error' in hit.outcome) throw hit.outcome.error;
  return { config: structuredClone(hit.outcome.parsed.config), positions: new Map(hit.outcome.parsed.positions) };
}

function parseConfigYamlOnce(text: string, source: string): ParsedConfigFile {
  const size = Buffer.byteLength(text, 'utf8');
  if (size > MAX_CONFIG_YAML_BYTES) {
    const kib = (n: number) => `${Math.ceil(n / 1024)} KiB`;
    throw new ConfigError(
      [
        {
          path: '',
          message: `${source}:1:1: the configuration is ${kib(size)}, above the ${kib(MAX_CONFIG_YAML_BYTES)} a configuration may have (MAX_CONFIG_YAML_BYTES; ${MAX_WORKERS} workers fit in about half of it)`,
          line: 1,
          column: 1,
        },
      ],
      `cannot read ${source}:`,
    );
  }
  const lines = new LineCounter();
  let doc: Document.Parsed;
  try {
    doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: false });
  } catch (err) {
    // The parser recurses per level of nesting: `[[[[…` 30,000 deep overflows its stack.
    throw syntaxError(source, { line: 1, col: 1 }, `cannot be parsed (${String((err as Error)?.message ?? err).split('\n')[0]}): nested too deeply?`);
  }
  if (doc.errors.length === 0) {
    const repeated = duplicateKey(doc.contents);
    if (repeated?.range) throw syntaxError(source, lines.linePos(repeated.range[0]), 'Map keys must be unique');
  }
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => {
        const pos = lines.linePos(e.pos[0]);
        const firstLine = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+.*$/, '');
        return { path: '', message: `${source}:${pos.line}:${pos.col}: YAML syntax error: ${firstLine}`, line: pos.line, column: pos.col };
      }),
      `cannot read ${source}:`,
    );
  }
  let data: unknown;
  try {
    data = doc.toJS() ?? {};
  } catch (err) {
    // Building the data is where the YAML library refuses an alias with no anchor before it and
    // a document whose aliases expand past its limit (a "billion laughs"): a syntax error too,
    // at the alias it names (else at the first alias).
    const message = String((err as Error)?.message ?? err).split('\n')[0]!;
    const named = /: (\S+)$/.exec(message)?.[1];
    const at = (named ? text.indexOf(`*${named}`) : -1) >= 0 ? text.indexOf(`*${named}`) : Math.max(0, text.search(/\*[^\s,[\]{}]/));
    const pos = lines.linePos(at);
    throw new ConfigError(
      [{ path: '', message: `${source}:${pos.line}:${pos.col}: YAML syntax error: ${message}`, line: pos.line, column: pos.col }],
      `cannot read ${source}:`,
    );
  }
  if (typeof data !== 'object' || Array.isArray(data)) {
    throw new ConfigError(
      [
        {
          path: '',
          message: `${source}:1:1: expected a mapping of router settings at the top level, got ${Array.isArray(data) ? 'a list' : typeof data}`,
          line: 1,
          column: 1,
        },
      ],
      `invalid configuration in ${source}:`,
    );
  }
  const result = checkRouterConfig(data);
  if (!result.ok) {
    const rest = result.issues.filter((issue) => issue.rest);
    const issues: ConfigIssue[] = result.issues
      .filter((issue) => !issue.rest)
      .map((issue) => {
        const pos = positionOf(doc.contents, issue.keyPath, issue.unknownKey === true, lines);
        return { path: issue.path, message: `${source}:${pos.line}:${pos.col}: ${issue.message}`, line: pos.line, column: pos.col };
      });
    issues.sort((a, b) => a.line! - b.line! || a.column! - b.column!);
    // The count of what is not listed goes last, at the last listed problem's position.
    const last = issues.at(-1);
    const at = { line: last?.line ?? 1, column: last?.column ?? 1 };
    throw new ConfigError(
      [...issues, ...rest.map(({ path, message }) => ({ path, message: `${source}:${at.line}:${at.column}: ${message}`, ...at }))],
      `invalid configuration in ${source}:`,
    );
  }
  const positions = new Map<string, { line: number; column: number }>();
  collectPositions(doc.contents, [], lines, positions);
  return { config: result.config, positions };
}

function collectPositions(node: unknown, at: PathSegment[], lines: LineCounter, out: Map<string, { line: number; column: number }>) {
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? pair.key.value : pair.key;
      if (typeof key !== 'string') continue;
      const keyPath = [...at, key];
      const range = (pair.key as Node | null)?.range;
      if (range) {
        const p = lines.linePos(range[0]);
        out.set(formatKeyPath(keyPath), { line: p.line, column: p.col });
      }
      collectPositions(pair.value, keyPath, lines, out);
    }
  } else if (isSeq(node)) {
    node.items.forEach((item, i) => collectPositions(item, [...at, i], lines, out));
  }
}

function formatKeyPath(keyPath: readonly PathSegment[]): string {
  return keyPath.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

/** Plain data in schema key order with undefined optionals dropped and labels sorted. */
export function normalizeConfig(config: RouterConfig): Record<string, unknown> {
  const ordered = (schemaKeys: string[], obj: Record<string, unknown>) => {
    const out: Record<string, unknown> = {};
    for (const k of schemaKeys) if (obj[k] !== undefined) out[k] = obj[k];
    return out;
  };
  const workerKeys = Object.keys(WorkerSpecSchema.shape);
  const routerKeys = Object.keys(RouterConfigSchema.shape);
  const workers = config.workers.map((w) => {
    const labels = Object.fromEntries(Object.entries(w.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    return ordered(workerKeys, { ...w, labels });
  });
  return ordered(routerKeys, { ...config, workers });
}

const EXPORT_HEADER = 'mmtc router configuration (docs/configuration.md lists every key)';

/** What a router knows of its workers beyond the configuration: the runtime it detected on each (by url). */
export interface ExportFacts {
  detectedRuntimes?: ReadonlyMap<string, WireRuntime>;
}

/** The configuration as a YAML file; a worker whose entry leaves its runtime unspecified is written with the runtime detected on it, said in a comment. */
export function exportConfigYaml(config: RouterConfig, facts: ExportFacts = {}): string {
  const detected = facts.detectedRuntimes ?? new Map<string, WireRuntime>();
  const workers = config.workers.map((w) => ({ ...w, runtime: knownRuntime(w.runtime, detected.get(w.url)) }));
  const doc = new Document(normalizeConfig({ ...config, workers }));
  doc.commentBefore = ` ${EXPORT_HEADER}`;
  config.workers.forEach((w, i) => {
    if (w.runtime !== 'unspecified' || !detected.has(w.url)) return;
    const node = doc.getIn(['workers', i, 'runtime'], true);
    if (isScalar(node)) node.comment = ' detected by the router (the applied configuration leaves it unspecified)';
  });
  return doc.toString({ lineWidth: 0 });
}

const ROUTER_DEFAULTS = RouterConfigSchema.parse({}) as Record<string, unknown>;
const WORKER_DEFAULTS = WorkerSpecSchema.parse({ url: 'grpc://defaults:1' }) as Record<string, unknown>;

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Edit `node` in place so it holds `value`, touching only what differs. */
function applyValue(doc: Document, node: unknown, value: unknown, defaults?: Record<string, unknown>): Node {
  if (isMap(node) && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const target = value as Record<string, unknown>;
    for (const pair of [...node.items]) {
      const key = isScalar(pair.key) ? pair.key.value : pair.key;
      if (typeof key === 'string' && target[key] === undefined) node.delete(key);
    }
    for (const [key, v] of Object.entries(target)) {
      const existing = node.get(key, true);
      if (existing !== undefined) {
        const childDefaults = key === 'workers' ? WORKER_DEFAULTS : undefined;
        const replaced = applyValue(doc, existing, v, childDefaults);
        if (replaced !== existing) node.set(key, replaced);
      } else if (!defaults || !sameValue(defaults[key], v)) {
        node.set(key, doc.createNode(v));
      }
    }
    return node;
  }
  if (isSeq(node) && Array.isArray(value)) {
    value.forEach((v, i) => {
      const existing = node.items[i];
      if (existing === undefined) node.items.push(doc.createNode(sparse(v, defaults)));
      else {
        const replaced = applyValue(doc, existing, v, defaults);
        if (replaced !== existing) node.items[i] = replaced;
      }
    });
    node.items.splice(value.length);
    return node as Node;
  }
  if (isScalar(node) && (value === null || typeof value !== 'object')) {
    if (node.value !== value) node.value = value;
    return node as Node;
  }
  return doc.createNode(value);
}

/** A new list entry is written without the keys that only restate defaults. */
function sparse(value: unknown, defaults?: Record<string, unknown>): unknown {
  if (!defaults || value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).filter(([k, v]) => !sameValue(defaults[k], v)));
}

/**
 * The text of `existingText` edited to hold `config`: comments, key order and keys that
 * restate defaults are kept; keys the config no longer has are removed; new keys that only
 * restate a default are not added.
 */
export function updateConfigYaml(existingText: string, config: RouterConfig, source = 'config.yaml'): string {
  parseConfigYaml(existingText, source); // never edit over a file we could not have loaded
  const doc: Document = parseDocument(existingText, { uniqueKeys: false }); // checked just above, in linear time
  const target = normalizeConfig(config);
  if (!isMap(doc.contents)) {
    doc.contents = doc.createNode(sparse(target, ROUTER_DEFAULTS));
  } else {
    applyValue(doc, doc.contents, target, ROUTER_DEFAULTS);
  }
  return doc.toString({ lineWidth: 0 });
}

export async function loadConfigFile(file: string): Promise<ParsedConfigFile> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : String((err as Error).message);
    throw new ConfigError([{ path: '', message: `cannot read config file ${file}: ${why}` }]);
  }
  return parseConfigYaml(text, file);
}

/**
 * Atomic write (temp file in the same directory, fsync, rename, fsync of the directory); the
 * old file becomes `<file>.bak`. `beforeRename` is where a test stages a crash: whatever
 * happens before the rename, `file` still holds its old text.
 *
 * No step follows a symlink someone planted beside the file: both the temp file and the
 * backup's temp file are created exclusively (O_EXCL, which never follows a link) with mode
 * 0600 and renamed into place, and a rename replaces a link at `<file>.bak` itself, not what
 * it points to (a copy onto `<file>.bak` overwrote the link's target with the configuration
 * and gave the backup the target's mode).
 *
 * The file operations are synchronous on purpose: the file is a few KiB, and under load
 * libuv's threads are busy decoding images (sharp) and writing tensors, so each of the nine
 * asynchronous steps waited its turn behind them, and an apply under 32 clients took up to
 * seconds (measured: docs/reliability.md, "Findings not fixed here", "Applies are slower under
 * load"). Done here they cost the event loop the fsyncs of a file of a few KiB.
 */
export async function writeFileAtomic(file: string, text: string, hooks: { beforeRename?: () => Promise<void> } = {}): Promise<void> {
  const dir = path.dirname(file);
  const tmp = writeTempBeside(file, text);
  try {
    let previous: Buffer | undefined;
    try {
      previous = fsSync.readFileSync(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (previous !== undefined) {
      const bak = `${file}.bak`;
      const bakTmp = writeTempBeside(bak, previous);
      try {
        fsSync.renameSync(bakTmp, bak);
      } catch (err) {
        fsSync.rmSync(bakTmp, { force: true });
        throw err;
      }
    }
    await hooks.beforeRename?.();
    fsSync.renameSync(tmp, file);
  } catch (err) {
    fsSync.rmSync(tmp, { force: true });
    throw err;
  }
  // The rename is durable only once the directory entry is.
  let d: number | undefined;
  try {
    d = fsSync.openSync(dir, 'r');
    fsSync.fsyncSync(d);
  } catch {
    /* a directory that cannot be opened or synced: the rename stands */
  } finally {
    if (d !== undefined) fsSync.closeSync(d);
  }
}

/** `.<name>.<pid>.<ms>.tmp` beside `file`, created exclusively with mode 0600, written and fsynced; its path. */
function writeTempBeside(file: string, data: string | Buffer): string {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Date.now()}.tmp`);
  const fd = fsSync.openSync(tmp, 'wx', 0o600);
  try {
    fsSync.writeFileSync(fd, data);
    fsSync.fsyncSync(fd);
  } catch (err) {
    fsSync.closeSync(fd);
    fsSync.rmSync(tmp, { force: true });
    throw err;
  }
  fsSync.closeSync(fd);
  return tmp;
}

/** Save `config` to `file`: an edit of the existing text when there is one, else a fresh export. */
export async function saveConfigFile(file: string, config: RouterConfig): Promise<string> {
  let existing: string | undefined;
  try {
    existing = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const text = existing === undefined ? exportConfigYaml(config) : updateConfigYaml(existing, config, file);
  await writeFileAtomic(file, text);
  return text;
}
