#!/usr/bin/env node
// Builds the optional native helpers with node-gyp against this Node's own headers:
//   native/memtrim  gives idle memory back to the system (core/multimodal/memory-release.ts);
//   native/jpeg     decodes JPEGs with libjpeg-turbo, as Pillow does, in 40-75 % of sharp's
//                   time (core/multimodal/native-jpeg.ts); needs libjpeg-turbo's headers
//                   (Debian: libjpeg62-turbo-dev).
// Runs from scripts/generate.mjs (npm install, npm test, first mmtc run); skips a helper whose
// build is current. A machine without a C toolchain or the library gets one line per helper
// saying so, and the router runs without it: memory bounded but not returned after bursts,
// JPEGs decoded by sharp. Nothing else depends on them.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const HELPERS = [
  { name: 'memtrim', source: 'memtrim.c', without: "the router's idle memory stays bounded but is not returned to the system" },
  { name: 'jpeg', source: 'jpeg.c', without: 'JPEGs are decoded by sharp, in 1.3-2.6x the time (docs/performance.md)' },
];

// node-gyp: the one npm brings along (npm tells lifecycle scripts where it is), else beside this node.
const candidates = [
  process.env.npm_config_node_gyp,
  path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
].filter(Boolean);
const gyp = candidates.find((c) => existsSync(c));
// This Node's headers, so nothing is downloaded.
const prefix = path.resolve(path.dirname(process.execPath), '..');
const nodedir = existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined;

for (const helper of HELPERS) {
  const dir = path.join(root, 'native', helper.name);
  const built = path.join(dir, 'build', 'Release', `${helper.name}.node`);
  const stampFile = path.join(dir, 'build', '.stamp');
  const stamp = createHash('sha256')
    .update(readFileSync(path.join(dir, helper.source)))
    .update(readFileSync(path.join(dir, 'binding.gyp')))
    .update(process.version)
    .digest('hex');
  if (existsSync(built) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) continue;
  const skipped = (why) => process.stderr.write(`note: native/${helper.name} not built (${why}); ${helper.without}\n`);
  if (!gyp || !nodedir) {
    skipped(!gyp ? 'node-gyp not found' : "this Node's headers are not installed");
    continue;
  }
  const r = spawnSync(process.execPath, [gyp, 'rebuild', `--nodedir=${nodedir}`, '--loglevel=error'], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (r.status !== 0 || !existsSync(built)) {
    skipped(((r.stderr || '').split('\n').find((l) => /error/i.test(l)) ?? `node-gyp exited ${r.status}`).trim());
    continue;
  }
  writeFileSync(stampFile, stamp);
  process.stdout.write(`built native/${helper.name}\n`);
}
