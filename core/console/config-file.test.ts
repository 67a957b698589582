import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RouterConfigSchema } from '../config/schema.ts';
import { ConfigFile, ConfigHistory, defaultConfigPath } from './config-file.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'mmtc-config-file-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const config = (mode: 'inline' | 'shm') => RouterConfigSchema.parse({ multimodal_tensor_transport: mode, workers: [{ url: 'grpc://127.0.0.1:50051' }] });

describe('the configuration file', () => {
  it('defaults to $XDG_CONFIG_HOME/mmtc/router.yaml, else ~/.config/mmtc/router.yaml', () => {
    expect(defaultConfigPath({ XDG_CONFIG_HOME: '/x', HOME: '/home/op' })).toBe('/x/mmtc/router.yaml');
    expect(defaultConfigPath({ HOME: '/home/op' })).toBe('/home/op/.config/mmtc/router.yaml');
    expect(defaultConfigPath({ XDG_CONFIG_HOME: 'relative', HOME: '/home/op' })).toBe('/home/op/.config/mmtc/router.yaml');
  });

  it('is created on the first save, then edited in place keeping comments, with the previous version as .bak', async () => {
    const file = path.join(dir, 'nested', 'router.yaml');
    const { file: f, parsed } = await ConfigFile.open(file);
    expect(parsed).toBeUndefined();
    await f.save(config('inline'));
    expect(readFileSync(file, 'utf8')).toContain('multimodal_tensor_transport: inline');
    writeFileSync(file, `# keep me\n${readFileSync(file, 'utf8')}`);
    const reopened = (await ConfigFile.open(file)).file;
    await reopened.save(config('shm'));
    expect(readFileSync(file, 'utf8')).toMatch(/^# keep me\n[\s\S]*multimodal_tensor_transport: shm/);
    expect(readFileSync(`${file}.bak`, 'utf8')).toContain('multimodal_tensor_transport: inline');
  });

  it('a crash between the temp write and the rename leaves the old file intact; the next start removes the temp file', async () => {
    const file = path.join(dir, 'router.yaml');
    const { file: f } = await ConfigFile.open(file);
    await f.save(config('inline'));
    const before = readFileSync(file, 'utf8');
    // What a crash leaves: the temp file written and synced, no rename.
    await expect(f.save(config('shm'), { beforeRename: () => Promise.reject(new Error('killed')) })).rejects.toThrow('killed');
    expect(readFileSync(file, 'utf8')).toBe(before);
    writeFileSync(path.join(dir, `.router.yaml.${4_000_000}.${Date.now()}.tmp`), 'half of a new file');
    await ConfigFile.open(file);
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    expect(readFileSync(file, 'utf8')).toBe(before);
  });

  it('reports drift when the file changes on disk, and an invalid file as what it is', async () => {
    const file = path.join(dir, 'router.yaml');
    const { file: f } = await ConfigFile.open(file);
    await f.save(config('inline'));
    expect((await f.drift()).drifted).toBe(false);
    writeFileSync(file, 'multimodal_tensor_transport: fast\n');
    const drift = await f.drift();
    expect(drift.drifted).toBe(true);
    expect(() => f.parse(drift.text)).toThrow(/router.yaml:1:30: invalid value 'fast'/);
    rmSync(file);
    expect(await f.drift()).toEqual({ drifted: true, text: undefined });
  });
});

describe('the config history', () => {
  it('survives a restart and ignores a line a crash cut short', async () => {
    const file = path.join(dir, 'router.yaml');
    const h = await ConfigHistory.open(file);
    await h.append({ revision: 1, appliedAt: 1, client: 'start', diff: [], config: { multimodal_tensor_transport: 'inline' } });
    await h.append({
      revision: 2,
      appliedAt: 2,
      client: 'http',
      diff: [{ path: 'multimodal_tensor_transport', kind: 'changed', before: 'inline', after: 'shm' }],
      config: { multimodal_tensor_transport: 'shm' },
    });
    writeFileSync(`${file}.history.jsonl`, `${readFileSync(`${file}.history.jsonl`, 'utf8')}{"revision":3,"appl`);
    const again = await ConfigHistory.open(file);
    expect(again.entries().map((r) => [r.revision, r.client])).toEqual([
      [1, 'start'],
      [2, 'http'],
    ]);
    expect(again.get(2)!.config).toEqual({ multimodal_tensor_transport: 'shm' });
    await again.append({ revision: 3, appliedAt: 3, client: 'ipc', diff: [], config: {} });
    expect((await ConfigHistory.open(file)).entries().map((r) => r.revision)).toEqual([1, 2, 3]);
    expect(existsSync(`${file}.history.jsonl`)).toBe(true);
  });

  it('keeps the last 500 revisions; the file is trimmed in batches, never losing one of them', async () => {
    const file = path.join(dir, 'router.yaml');
    const h = await ConfigHistory.open(file);
    const lines = () => readFileSync(`${file}.history.jsonl`, 'utf8').trim().split('\n').length;
    let most = 0;
    for (let revision = 1; revision <= 1300; revision++) {
      await h.append({ revision, appliedAt: revision, client: 'http', diff: [], config: {} });
      most = Math.max(most, lines());
      expect(h.entries()).toHaveLength(Math.min(revision, 500));
    }
    expect(most).toBe(600); // rewritten at 601 lines, back to 500
    expect(h.entries()[0]!.revision).toBe(801);
    const again = await ConfigHistory.open(file);
    expect(again.entries().map((r) => r.revision)).toEqual(Array.from({ length: 500 }, (_, i) => 801 + i));
    await again.append({ revision: 1301, appliedAt: 1301, client: 'ipc', diff: [], config: {} });
    expect((await ConfigHistory.open(file)).entries().at(-1)!.revision).toBe(1301);
  });
});

// A user who can write beside the file plants links where the console writes next; nothing
// may be written through them, and every file the console writes is the operator's alone.
describe('symlinks and permissions', () => {
  /** A file outside the config directory, as a link's target: what must stay untouched. */
  function victim(): { path: string; text: string } {
    const outside = mkdtempSync(path.join(tmpdir(), 'mmtc-victim-'));
    const p = path.join(outside, 'victim.txt');
    writeFileSync(p, 'precious\n', { mode: 0o644 });
    return { path: p, text: 'precious\n' };
  }
  afterEach(() => {
    for (const d of readdirSync(tmpdir()).filter((n) => n.startsWith('mmtc-victim-'))) rmSync(path.join(tmpdir(), d), { recursive: true, force: true });
  });
  const mode = (p: string) => statSync(p).mode & 0o777;

  it('a symlink planted at FILE.bak is replaced, its target untouched; the backup is 0600', async () => {
    const file = path.join(dir, 'router.yaml');
    const target = victim();
    const { file: f } = await ConfigFile.open(file);
    await f.save(config('inline'));
    symlinkSync(target.path, `${file}.bak`);
    await f.save(config('shm'));
    expect(readFileSync(target.path, 'utf8')).toBe(target.text);
    expect(mode(target.path)).toBe(0o644);
    expect(lstatSync(`${file}.bak`).isSymbolicLink()).toBe(false);
    expect(readFileSync(`${file}.bak`, 'utf8')).toContain('multimodal_tensor_transport: inline');
    expect(mode(`${file}.bak`)).toBe(0o600);
    expect(mode(file)).toBe(0o600);
  });

  it('a symlink planted at FILE.history.jsonl is refused, and nothing is appended to its target', async () => {
    const file = path.join(dir, 'router.yaml');
    const target = victim();
    symlinkSync(target.path, `${file}.history.jsonl`);
    await expect(ConfigHistory.open(file)).rejects.toThrow(
      `${file}.history.jsonl is a symlink; the console does not read or write its history through links (remove it)`,
    );
    expect(readFileSync(target.path, 'utf8')).toBe(target.text);
  });

  it('a link planted after the start is not appended through either', async () => {
    const file = path.join(dir, 'router.yaml');
    const target = victim();
    const history = await ConfigHistory.open(file);
    symlinkSync(target.path, `${file}.history.jsonl`);
    await expect(history.append({ revision: 1, appliedAt: 0, client: 'http', diff: [], config: {} })).rejects.toThrow(
      /is a symlink; the console does not write through links/,
    );
    expect(readFileSync(target.path, 'utf8')).toBe(target.text);
  });

  it('the history is 0600, an existing 0644 one is tightened', async () => {
    const file = path.join(dir, 'router.yaml');
    writeFileSync(`${file}.history.jsonl`, '', { mode: 0o644 });
    chmodSync(`${file}.history.jsonl`, 0o644);
    const history = await ConfigHistory.open(file);
    await history.append({ revision: 1, appliedAt: 0, client: 'http', diff: [], config: {} });
    expect(mode(`${file}.history.jsonl`)).toBe(0o600);
  });

  it.each([
    ['0777', 0o777, 'every user'],
    ['1777', 0o1777, 'every user'],
    ['0775', 0o775, 'its group'],
  ])('a configuration directory of mode %s is refused, naming why', async (shown, dirMode, who) => {
    const shared = path.join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, dirMode);
    await expect(ConfigFile.open(path.join(shared, 'router.yaml'))).rejects.toThrow(
      `refusing the configuration directory ${shared}: it is writable by ${who} (mode ${shown})`,
    );
  });

  it('a directory it creates is 0700', async () => {
    const file = path.join(dir, 'fresh', 'router.yaml');
    const { file: f } = await ConfigFile.open(file);
    await f.save(config('inline'));
    expect(mode(path.dirname(file))).toBe(0o700);
  });
});
