// vitest's global setup: one folder for what the test processes make once and share among
// their files (the test images, core/test/images.ts), removed when the run ends, even though
// vitest stops its worker processes without their exit handlers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export default function setup(): () => void {
  const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-test-run-'));
  process.env.MMTC_TEST_RUN_DIR = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
