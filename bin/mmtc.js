#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step to forget): tsx compiles on load.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../core/cli.ts');
process.exitCode = await main(process.argv);
