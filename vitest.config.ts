import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['core/**/*.test.ts', 'electron/**/*.test.ts', 'renderer/**/*.test.{ts,tsx}', 'scripts/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two files at a time (most of them wait on reference workers and routers they start, not
    // on the CPU): 292 s for the suite here against 526 s one at a time. Tests that check a
    // bound in time are written with room for a loaded machine.
    maxWorkers: 2,
  },
});
