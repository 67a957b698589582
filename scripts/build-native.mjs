#!/usr/bin/env node
// Builds the optional native helper native/memtrim (gives idle memory back to the system:
// core/multimodal/memory-release.ts) with node-gyp against this Node's own headers. Runs from
// scripts/generate.mjs (npm install, npm test, first mmtc run); skips when the build is
// current. A machine without a C toolchain gets one line saying so and a router whose memory
// is bounded but not returned after bursts; nothing else depends on it.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dir = path.join(root, 'native', 'memtrim');
const built = path.join(dir, 'build', 'Release', 'memtrim.node');
const stampFile = path.join(dir, 'build', '.stamp');
const stamp = createHash('sha256')
  .update(readFileSync(path.join(dir, 'memtrim.c')))
  .update(readFileSync(path.join(dir, 'binding.gyp')))
  .update(process.version)
  .digest('hex');
if (existsSync(built) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) process.exit(0);

// node-gyp: the one npm brings along (npm tells lifecycle scripts where it is), else beside this node.
const candidates = [
  process.env.npm_config_node_gyp,
  path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
].filter(Boolean);
const gyp = candidates.find((c) => existsSync(c));
// This Node's headers, so nothing is downloaded.
const prefix = path.resolve(path.dirname(process.execPath), '..');
const nodedir = existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined;
if (!gyp || !nodedir) {
  process.stderr.write(
    `note: native/memtrim not built (${!gyp ? 'node-gyp not found' : "this Node's headers are not installed"}); the router's idle memory stays bounded but is not returned to the system\n`,
  );
  process.exit(0);
}
const r = spawnSync(process.execPath, [gyp, 'rebuild', `--nodedir=${nodedir}`, '--loglevel=error'], {
  cwd: dir,
  stdio: ['ignore', 'ignore', 'pipe'],
  encoding: 'utf8',
  timeout: 120_000,
});
if (r.status !== 0 || !existsSync(built)) {
  const why = (r.stderr || '').split('\n').find((l) => /error/i.test(l)) ?? `node-gyp exited ${r.status}`;
  process.stderr.write(`note: native/memtrim not built (${why.trim()}); the router's idle memory stays bounded but is not returned to the system\n`);
  process.exit(0);
}
writeFileSync(stampFile, stamp);
process.stdout.write('built native/memtrim\n');
