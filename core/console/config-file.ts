// Where the console keeps the applied configuration, and its history.
//
// The file is `--config FILE`, else `$XDG_CONFIG_HOME/mmtc/router.yaml`, else
// `~/.config/mmtc/router.yaml`. It is written atomically (a temp file in the same directory,
// fsync, rename; the previous version kept as `FILE.bak`), as an edit of the text that is
// there, so the operator's comments and key order survive. A crash at any point leaves the
// old file or the new one, never a mix; a temp file a crash left behind is removed at the next
// start. The text last read or written is remembered: when the file on disk differs (edited
// by hand while the console runs), that is drift, reported and never overwritten.
//
// The history of applied revisions lives beside it, one JSON line per revision in
// `FILE.history.jsonl` (appended, never rewritten except to drop the oldest, in batches, past
// MAX_HISTORY), so it survives a restart and revision numbers keep counting up.
//
// Nothing the console writes follows a symlink or is readable by others: the config and its
// `.bak` are written through exclusively created temp files renamed into place
// (writeFileAtomic), the history is opened with O_NOFOLLOW, every file is mode 0600, and a
// directory that someone else could write to (where they could plant such links, or swap
// the file) is refused at start.
import {
  closeSync,
  constants as fsConstants,
  existsSync,
  fchmodSync,
  fstatSync,
  mkdirSync,
  openSync,
  promises as fs,
  readFileSync,
  statSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../config/errors.ts';
import type { RouterConfig } from '../config/schema.ts';
import { exportConfigYaml, MAX_CONFIG_YAML_BYTES, parseConfigYaml, updateConfigYaml, writeFileAtomic, type ParsedConfigFile } from '../config/yaml.ts';
import { parseRouterConfig } from '../config/validate.ts';
import type { ConfigClient } from '../config/store.ts';
import type { DiffEntry } from './contract.ts';

export function defaultConfigPath(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(env.HOME || os.homedir(), '.config');
  return path.join(base, 'mmtc', 'router.yaml');
}

/** Temp files of writeFileAtomic for `file` (and for its `.bak` and history): `.<name>.<pid>.<ms>.tmp`. */
function isTempOf(file: string, name: string): boolean {
  const base = path.basename(file).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^\\.${base}(?:\\.bak|\\.history\\.jsonl)?\\.\\d+\\.\\d+\\.tmp$`).test(name);
}

/**
 * Refuse a configuration directory that another user could write to: there they could plant
 * a symlink where the console writes next, or replace the file between two reads. Absent is
 * fine (the first save creates it, mode 0700).
 */
export function checkConfigDirectory(dir: string): void {
  let st;
  try {
    st = statSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new ConfigError([{ path: '', message: `cannot use the configuration directory ${dir}: ${(err as Error).message}` }]);
  }
  const uid = process.getuid?.();
  const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
  const why =
    st.mode & 0o022
      ? `it is writable by ${st.mode & 0o002 ? 'every user' : 'its group'} (mode ${mode})`
      : uid !== undefined && st.uid !== uid && st.uid !== 0
        ? `it belongs to another user (uid ${st.uid})`
        : undefined;
  if (why)
    throw new ConfigError([
      {
        path: '',
        message: `refusing the configuration directory ${dir}: ${why}, so someone else could plant a symlink where the console writes or swap the file. Use a directory only you can write to (chmod go-w ${dir}), or --config FILE elsewhere`,
      },
    ]);
}

/**
 * Append `text` to `file` without following a symlink there (O_NOFOLLOW: ELOOP instead),
 * creating it with mode 0600 and tightening an existing one to 0600.
 */
function appendPrivate(file: string, text: string): void {
  let fd: number;
  try {
    fd = openSync(file, fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP')
      throw new Error(`${file} is a symlink; the console does not write through links (remove it)`, { cause: err });
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error(`${file} is not a regular file`);
    if ((st.mode & 0o077) !== 0) fchmodSync(fd, 0o600);
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

export class ConfigFile {
  /** The text last read from or written to the file; undefined while the file does not exist. */
  private known: string | undefined;

  private constructor(readonly path: string) {}

  /**
   * Open the file (it need not exist yet: the first apply creates it). A file that exists
   * must be a valid configuration, or this throws the ConfigError with every problem.
   */
  static async open(file: string): Promise<{ file: ConfigFile; parsed: ParsedConfigFile | undefined }> {
    const f = new ConfigFile(path.resolve(file));
    checkConfigDirectory(path.dirname(f.path));
    await f.removeStaleTemps();
    const text = await f.readText();
    f.known = text;
    return { file: f, parsed: text === undefined ? undefined : parseConfigYaml(text, file) };
  }

  private async removeStaleTemps(): Promise<void> {
    let names: string[];
    try {
      names = await fs.readdir(path.dirname(this.path));
    } catch {
      return; // the directory cannot be listed (not there yet, or unreadable): no temp file of ours to remove; a write reports a real problem
    }
    for (const name of names) if (isTempOf(this.path, name)) await fs.rm(path.join(path.dirname(this.path), name), { force: true });
  }

  private async readText(): Promise<string | undefined> {
    try {
      // Synchronous, as every step of an apply (writeFileAtomic says why): a few KiB.
      return readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new ConfigError([{ path: '', message: `cannot read ${this.path}: ${(err as Error).message}` }]);
    }
  }

  /** The file as it is on disk now, and whether it differs from what we last read or wrote. */
  async drift(): Promise<{ drifted: boolean; text: string | undefined }> {
    const text = await this.readText();
    return { drifted: text !== this.known, text };
  }

  /** Parse the text on disk (after drift), or say why it cannot be loaded. */
  parse(text: string | undefined): ParsedConfigFile {
    return text === undefined ? { config: parseRouterConfig({}), positions: new Map() } : parseConfigYaml(text, this.path);
  }

  /**
   * Write `config` as an edit of the known text (or a fresh export), atomically; returns the
   * text written. `over` edits that text instead: a reload's, the drifted text on disk it
   * takes (its comments and layout stay); it becomes the known text only once written.
   */
  async save(config: RouterConfig, options?: { beforeRename?: () => Promise<void>; over?: string | undefined }): Promise<string> {
    mkdirSync(path.dirname(this.path), { recursive: true, mode: 0o700 });
    const base = options && 'over' in options ? options.over : this.known;
    const text = base === undefined ? exportConfigYaml(config) : updateConfigYaml(base, config, this.path);
    // Never write a file the next start would refuse to load.
    const size = Buffer.byteLength(text, 'utf8');
    if (size > MAX_CONFIG_YAML_BYTES) {
      throw new ConfigError([
        {
          path: '',
          message: `the configuration would take ${Math.ceil(size / 1024)} KiB of YAML, above the ${MAX_CONFIG_YAML_BYTES / 1024} KiB a configuration file may have (MAX_CONFIG_YAML_BYTES): fewer or smaller labels, or fewer workers`,
        },
      ]);
    }
    await writeFileAtomic(this.path, text, options);
    this.known = text;
    return text;
  }

  get exists(): boolean {
    return existsSync(this.path);
  }
}

export interface HistoryRecord {
  revision: number;
  appliedAt: number;
  client: ConfigClient;
  /** The earlier revision this one applied again (a rollback). */
  rollbackOf?: number;
  diff: DiffEntry[];
  /** The whole configuration of this revision (normalized), for rollback. */
  config: Record<string, unknown>;
}

export const MAX_HISTORY = 500;

export class ConfigHistory {
  private constructor(
    readonly path: string | undefined,
    private records: HistoryRecord[],
    /** The file ends in a line a crash cut short: the next record starts on a new line. */
    private partialLine = false,
    /** Records in the file (it may hold more than are kept in memory until it is trimmed). */
    private onDisk = records.length,
  ) {}

  /** The history beside `configFile` (in memory only when there is no file). Lines that do not parse are skipped. */
  static async open(configFile: string | undefined): Promise<ConfigHistory> {
    if (configFile === undefined) return new ConfigHistory(undefined, []);
    const file = `${path.resolve(configFile)}.history.jsonl`;
    let text = '';
    try {
      // O_NOFOLLOW: a symlink planted here is refused, not read (and later appended to).
      const fd = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
      try {
        text = await fd.readFile('utf8');
      } finally {
        await fd.close();
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP')
        throw new ConfigError([{ path: '', message: `${file} is a symlink; the console does not read or write its history through links (remove it)` }]);
      if (code !== 'ENOENT') throw err;
    }
    const records: HistoryRecord[] = [];
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      try {
        const r = JSON.parse(line) as HistoryRecord;
        if (Number.isInteger(r.revision) && r.config && typeof r.config === 'object') records.push(r);
      } catch {
        /* a line cut short by a crash: the revisions before it are intact */
      }
    }
    return new ConfigHistory(file, records.slice(-MAX_HISTORY), text !== '' && !text.endsWith('\n'), records.length);
  }

  entries(): readonly HistoryRecord[] {
    return this.records;
  }

  last(): HistoryRecord | undefined {
    return this.records.at(-1);
  }

  get(revision: number): HistoryRecord | undefined {
    return this.records.find((r) => r.revision === revision);
  }

  async append(record: HistoryRecord): Promise<void> {
    this.records.push(record);
    if (this.records.length > MAX_HISTORY) this.records = this.records.slice(-MAX_HISTORY);
    if (!this.path) return;
    mkdirSync(path.dirname(this.path), { recursive: true, mode: 0o700 });
    // The file is trimmed in batches (at a fifth over the limit): a trim rewrites it whole.
    if (this.onDisk + 1 > MAX_HISTORY * 1.2) {
      await writeFileAtomic(this.path, this.records.map((r) => JSON.stringify(r)).join('\n') + '\n');
      this.onDisk = this.records.length;
      this.partialLine = false;
      return;
    }
    appendPrivate(this.path, `${this.partialLine ? '\n' : ''}${JSON.stringify(record)}\n`);
    this.onDisk += 1;
    this.partialLine = false;
  }
}
