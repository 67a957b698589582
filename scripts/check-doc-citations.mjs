#!/usr/bin/env node
// Every citation of a docs heading in the tracked sources resolves: a comment that says
// `docs/x.md, "Heading"` (or `docs/x.md "Heading"`) names a file that exists and a heading of
// it that starts with those words (a citation may shorten "Reading a tensor (worker side)" to
// "Reading a tensor"). A bare `docs/x.md` must name a file that exists. This repository's docs
// are one folder deep: `docs/reference/configuration.md` is another project's, not checked.
//
//   node scripts/check-doc-citations.mjs
//
// Prints each citation that does not resolve, as file:line, and exits 1 when there is one.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const headingsOf = new Map();
function headings(doc) {
  if (!headingsOf.has(doc))
    headingsOf.set(
      doc,
      existsSync(doc)
        ? readFileSync(doc, 'utf8')
            .split('\n')
            .filter((l) => /^#+\s/.test(l))
            .map((l) => l.replace(/^#+\s*/, '').trim())
        : undefined,
    );
  return headingsOf.get(doc);
}

const CITED_HEADING = /(?<![\w/])(docs\/[\w.-]+\.md),?\s*\\?["“]([^"”\\]+)\\?["”]/g;
const CITED_FILE = /(?<![\w/])docs\/[\w.-]+\.md/g;
const files = execFileSync('git', ['ls-files'], { encoding: 'utf8' })
  .split('\n')
  .filter((f) => /\.(ts|tsx|mjs|js|py)$/.test(f) && f !== 'scripts/check-doc-citations.mjs'); // its own examples name no real file
const problems = [];
for (const file of files) {
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const at = `${file}:${i + 1}`;
      for (const [doc] of line.matchAll(CITED_FILE)) if (!headings(doc)) problems.push(`${at}: no such file ${doc}`);
      for (const [, doc, heading] of line.matchAll(CITED_HEADING)) {
        const known = headings(doc);
        if (known && !known.some((h) => h.startsWith(heading))) problems.push(`${at}: ${doc} has no heading "${heading}"`);
      }
    });
}
for (const p of problems) process.stdout.write(`${p}\n`);
process.exitCode = problems.length > 0 ? 1 : 0;
