// The Pillow + numpy reference used by the preprocessing tests. Debian's python3-pil and
// python3-numpy provide it (.ci/run installs them); a missing one fails loudly, never skips.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CANDIDATES = ['/usr/bin/python3', 'python3'];

let found: string | undefined;
export function pythonWithPillow(): string {
  if (found) return found;
  for (const py of CANDIDATES) {
    if (py.startsWith('/') && !existsSync(py)) continue;
    try {
      execFileSync(py, ['-c', 'import PIL, numpy'], { stdio: 'ignore' });
      found = py;
      return py;
    } catch {
      /* try the next */
    }
  }
  throw new Error('the preprocessing tests need Python 3 with Pillow and numpy: apt-get install -y python3-pil python3-numpy');
}

export function runPython(code: string, args: string[] = [], input?: Buffer): Buffer {
  return execFileSync(pythonWithPillow(), ['-c', code, ...args], { input, maxBuffer: 1 << 30 });
}

export function runPythonScript(script: string, args: string[]): string {
  return execFileSync(pythonWithPillow(), [script, ...args], { maxBuffer: 1 << 30 }).toString();
}
