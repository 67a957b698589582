import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    globalSetup: ['core/test/global-setup.ts'],
    // Two files at a time (many of them wait on the reference workers and routers they start);
    // the times are in docs/performance.md, "The test run's time". Tests that check a bound
    // in time are written with room for a loaded machine.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'core',
          include: ['core/**/*.test.ts', 'scripts/**/*.test.ts'],
          // The core's files share a worker's module cache: loading the modules again for
          // each file took 137 s of the 1090 s the files took, as measured in
          // docs/performance.md, "The test run's time". Nothing in them mocks a module or
          // keeps state across files.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'shells',
          // The Electron mocks (vi.mock) and the renderer's stores are per file: isolated.
          include: ['electron/**/*.test.ts', 'renderer/**/*.test.{ts,tsx}'],
          isolate: true,
        },
      },
    ],
  },
});
