#!/usr/bin/env node
// Generates core/gen/: typed messages, grpc-js clients and services from proto/ (buf and
// ts-proto), and the WebAssembly SIMD resize kernel from core/multimodal/resize.wat (wabt),
// all from npm, and (scripts/build-native.mjs) the optional native helpers under native/ (memtrim, jpeg).
// Runs on `npm install` (prepare), before tests, and from bin/mmtc.js when the output is
// missing; skips when the inputs are unchanged. Nothing here is committed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const protoDir = path.join(root, 'proto');
const outDir = path.join(root, 'core', 'gen');
const stampFile = path.join(outDir, '.stamp');

function inputs(dir) {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const p = path.join(dir, name);
      return statSync(p).isDirectory() ? inputs(p) : [p];
    });
}

const watFile = path.join(root, 'core', 'multimodal', 'resize.wat');
const hash = createHash('sha256');
for (const file of [...inputs(protoDir), watFile]) hash.update(path.relative(root, file)).update(readFileSync(file));
hash.update(readFileSync(path.join(root, 'node_modules', 'ts-proto', 'package.json')));
const stamp = hash.digest('hex');

// The optional native helpers have their own stamps and never fail the generation.
spawnSync(process.execPath, [path.join(root, 'scripts', 'build-native.mjs')], { stdio: 'inherit' });

if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) process.exit(0);

rmSync(outDir, { recursive: true, force: true });
const buf = path.join(root, 'node_modules', '.bin', 'buf');
const r = spawnSync(buf, ['generate'], { cwd: protoDir, stdio: 'inherit' });
if (r.status !== 0) {
  process.stderr.write('proto generation failed (buf generate in proto/)\n');
  process.exit(r.status ?? 1);
}
const wabt = await (await import('wabt')).default();
const watFeatures = { simd: true, threads: true };
const wat = wabt.parseWat(path.basename(watFile), readFileSync(watFile, 'utf8'), watFeatures);
wat.validate(watFeatures);
writeFileSync(path.join(outDir, 'resize.wasm'), wat.toBinary({}).buffer);
wat.destroy();
writeFileSync(stampFile, stamp);
process.stdout.write(`generated ${path.relative(root, outDir)} from ${path.relative(root, protoDir)} and ${path.relative(root, watFile)}\n`);
