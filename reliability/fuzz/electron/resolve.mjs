// A module resolve hook: `electron` is this folder's fake.mjs, so electron/ipc.ts and
// electron/security.ts run in plain Node, as electron/*.test.ts run them with vi.mock.
export async function resolve(specifier, context, next) {
  if (specifier === 'electron') return { url: new URL('./fake.mjs', import.meta.url).href, shortCircuit: true };
  return next(specifier, context);
}
