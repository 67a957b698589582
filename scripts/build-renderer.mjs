#!/usr/bin/env node
// Build the console's UI when it is missing or older than its sources (core/cli/renderer-build.ts);
// `--force` builds it whatever. Run by `npm install` (the prepare script); exits 0 with a
// one-line note when Vite is not installed (an install without dev dependencies).
import { register } from 'tsx/esm/api';

register();
const { ensureRendererBuilt } = await import('../core/cli/renderer-build.ts');
const problem = ensureRendererBuilt({ force: process.argv.includes('--force') });
if (problem) {
  process.stdout.write(`${problem}\n`);
  process.exitCode = /not installed/.test(problem) ? 0 : 1;
}
