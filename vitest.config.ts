import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['core/**/*.test.ts', 'electron/**/*.test.ts', 'renderer/**/*.test.{ts,tsx}', 'scripts/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two files at a time even on a 2-core machine (vitest's default there is one): most tests
    // wait on the routers and workers they start as processes, and CI's run must stay under 30
    // minutes (measured: docs/performance.md, "The test run's time").
    maxWorkers: 2,
  },
});
