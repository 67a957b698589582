// The house rules in eslint.config.js, as the project's own ESLint applies them: what a
// developer is told for a dropped error, and what passes.
import { ESLint } from 'eslint';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: path.resolve(import.meta.dirname, '..') });

/** The rules under test; the probes' unused parameters and undefined names are not. */
const RULES = ['mmtc/catch-says-why', 'no-empty'];

async function complaints(code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: 'scripts/probe.mjs' });
  return result!.messages.filter((m) => RULES.includes(m.ruleId ?? '')).map((m) => `${m.line}: ${m.ruleId}: ${m.message}`);
}

describe('mmtc/catch-says-why', () => {
  it.each([
    'p.catch(() => {});',
    'p.catch(() => undefined);',
    'p.catch(function () {});',
    "socket.on('error', () => {});",
    "socket.once('error', () => void 0);",
  ])('%s without a comment is refused', async (line) => {
    expect(await complaints(`export function f(p, socket) {\n  ${line}\n}\n`)).toEqual([
      '2: mmtc/catch-says-why: a handler that drops an error says why (a comment in it, on its line, or on the line above)',
    ]);
  });

  it.each([
    'p.catch(() => {}); // the caller reports it',
    'p.catch(() => {\n    // the caller reports it\n  });',
    '// the caller reports it\n  p.catch(() => undefined);',
    'p.catch((err) => log(err));',
    "socket.on('data', () => {});",
  ])('%s passes', async (code) => {
    expect(await complaints(`export function f(p, socket, log) {\n  ${code}\n}\n`)).toEqual([]);
  });
});

describe('no-empty', () => {
  it('a catch block with nothing in it is refused; with a comment saying why, it passes', async () => {
    expect(await complaints('try {\n  f();\n} catch {\n}\n')).toEqual(['3: no-empty: Empty block statement.']);
    expect(await complaints('try {\n  f();\n} catch {\n  // f failing changes nothing here\n}\n')).toEqual([]);
  });
});
