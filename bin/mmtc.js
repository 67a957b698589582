#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step to forget): tsx compiles on load.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { register } from 'tsx/esm/api';

// The protobuf code under core/gen is generated, never committed; make it on first use.
if (!existsSync(new URL('../core/gen/.stamp', import.meta.url))) {
  const gen = spawnSync(process.execPath, [new URL('../scripts/gen-proto.mjs', import.meta.url).pathname], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (gen.status !== 0) process.exit(gen.status ?? 1);
}
register();
const { main } = await import('../core/cli.ts');
process.exitCode = await main(process.argv);
