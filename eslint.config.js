// ESLint for the whole tree (`npm run lint`, and a runner of `npm test`): the recommended
// JavaScript and typescript-eslint rules, with type information where it catches what tests
// rarely do (a promise nobody awaits or catches, an async function where a callback's result
// is used); React's rules of hooks in the renderer; the import boundaries (core/ never imports
// the desktop shell, the UI or their libraries; the UI imports the core only through the
// console contract); and a reason for every disabled rule, on the same line. Formatting is
// Prettier's (.prettierrc.json), never a lint rule.
import js from '@eslint/js';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** `eslint-disable…` comments must say why: `// eslint-disable-next-line rule -- the reason`. */
const disableNeedsReason = {
  meta: { type: 'problem', messages: { reason: 'say why the rule is disabled, after " -- " on the same line' }, schema: [] },
  create(context) {
    return {
      Program() {
        for (const comment of context.sourceCode.getAllComments()) {
          const text = comment.value.trim();
          if (/^eslint-disable(-next-line|-line)?\b/.test(text) && !/\s--\s+\S/.test(text)) context.report({ loc: comment.loc, messageId: 'reason' });
        }
      },
    };
  },
};

/**
 * A handler that drops an error says why, so the next reader can tell a decision from an
 * oversight: a `.catch()` or `'error'` listener that does nothing (`() => {}`, `() => undefined`)
 * carries a comment, inside it, on its line or on the line above. (A `catch {}` block with
 * nothing but a comment in it is `no-empty`'s, below.)
 */
const catchSaysWhy = {
  meta: {
    type: 'problem',
    messages: {
      handler: 'a handler that drops an error says why (a comment in it, on its line, or on the line above)',
    },
    schema: [],
  },
  create(context) {
    const commented = (fromLine, node) => context.sourceCode.getAllComments().some((c) => c.loc.end.line >= fromLine && c.loc.start.line <= node.loc.end.line);
    const doesNothing = (fn) =>
      (fn?.type === 'ArrowFunctionExpression' || fn?.type === 'FunctionExpression') &&
      (fn.body.type === 'BlockStatement'
        ? fn.body.body.length === 0
        : (fn.body.type === 'Identifier' && fn.body.name === 'undefined') ||
          (fn.body.type === 'UnaryExpression' && fn.body.operator === 'void' && fn.body.argument.type === 'Literal'));
    return {
      CallExpression(node) {
        const callee = node.callee;
        if (callee.type !== 'MemberExpression' || callee.property.type !== 'Identifier') return;
        const method = callee.property.name;
        const handler =
          method === 'catch'
            ? node.arguments[0]
            : (method === 'on' || method === 'once') && node.arguments[0]?.type === 'Literal' && node.arguments[0].value === 'error'
              ? node.arguments[1]
              : undefined;
        if (doesNothing(handler) && !commented(callee.property.loc.start.line - 1, node)) context.report({ node: handler, messageId: 'handler' });
      },
    };
  },
};

const TS_FILES = ['**/*.ts', '**/*.tsx'];
const JS_FILES = ['**/*.js', '**/*.mjs'];

export default tseslint.config(
  { ignores: ['node_modules/', 'core/gen/', 'dist/', 'docs/', 'models/', 'test-results/', '.test-results/', 'playwright-report/', 'native/build/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: TS_FILES,
    // Each file's own project: the core's, or the renderer's (which holds the e2e specs too).
    languageOptions: { parserOptions: { project: ['./tsconfig.json', './renderer/tsconfig.json'], tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
    },
  },
  {
    files: JS_FILES,
    ...tseslint.configs.disableTypeChecked,
  },
  {
    languageOptions: { globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { mmtc: { rules: { 'disable-needs-reason': disableNeedsReason, 'catch-says-why': catchSaysWhy } } },
    rules: {
      'mmtc/disable-needs-reason': 'error',
      // A dropped error (an empty .catch() or 'error' handler) says why, as an empty catch block must.
      'mmtc/catch-says-why': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', destructuredArrayIgnorePattern: '^_' },
      ],
      // A catch that does nothing says why (a comment in it), as an empty block anywhere must.
      'no-empty': ['error', { allowEmptyCatch: false }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  // The console's UI, in the browser: React's rules of hooks.
  {
    files: ['renderer/src/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
    plugins: { 'react-hooks': reactHooks },
    rules: { 'react-hooks/rules-of-hooks': 'error', 'react-hooks/exhaustive-deps': 'error' },
  },
  // The reliability suite reads what mmtc answers (JSON of any shape, a worker's sentence) field by
  // field, as each scenario checks it: its replies are `any` by design.
  {
    files: ['reliability/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  // The import boundaries.
  {
    files: ['core/**/*.{ts,mjs}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/electron/**', 'electron'], message: 'core/ never imports the desktop shell or Electron (it runs in plain Node)' },
            {
              group: ['**/renderer/**', 'react', 'react-dom', 'react/*', 'react-dom/*', 'zustand', 'uplot'],
              message: 'core/ never imports the UI or its libraries',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['renderer/src/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+core/(?!console/contract\\.ts$)',
              message: 'the UI reaches the core only through the console contract (core/console/contract.ts)',
            },
            { group: ['electron', '**/electron/**'], message: 'the UI talks to the desktop shell only through the preload bridge (window.mmtc)' },
          ],
        },
      ],
    },
  },
);
