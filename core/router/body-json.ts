// The JSON of a request body, parsed where it does not hold up other requests: small bodies
// (most chat requests) on the event loop, where a thread hop would cost more than the parse;
// bodies above OFF_THREAD_BYTES in a worker thread (parsing a large body, and turning its bytes
// into a string, holds /health and every other client for tens of milliseconds; measured:
// docs/performance.md, "A large request body parsed on the event loop").
// The thread also refuses a text that cannot fit the model's context, without sending it back.
import { Worker } from 'node:worker_threads';

export const OFF_THREAD_BYTES = 4 * 1024 * 1024;

export type ParsedBody = { ok: true; value: unknown } | { ok: false; error: string } | { ok: false; textChars: number };

let thread: Worker | undefined;
let nextId = 1;
const waiting = new Map<number, (r: ParsedBody) => void>();

function bodyThread(): Worker {
  if (thread) return thread;
  const t = new Worker(new URL('./body-thread.mjs', import.meta.url));
  t.on('message', (msg: { id: number; value?: unknown; error?: string; textChars?: number }) => {
    const done = waiting.get(msg.id);
    waiting.delete(msg.id);
    if (waiting.size === 0) t.unref();
    if (msg.error !== undefined) done?.({ ok: false, error: msg.error });
    else if (msg.textChars !== undefined) done?.({ ok: false, textChars: msg.textChars });
    else done?.({ ok: true, value: msg.value });
  });
  t.on('error', (err) => {
    for (const done of waiting.values()) done({ ok: false, error: `the body parser failed: ${err.message}` });
    waiting.clear();
    thread = undefined;
  });
  t.unref();
  thread = t;
  return t;
}

/**
 * Parse `bytes` as JSON. `maxTextChars`: a chat body with more text than this comes back as
 * `{ok: false, textChars}` instead of its value (it could never fit the context).
 */
export function parseBody(bytes: Buffer, maxTextChars: number): Promise<ParsedBody> {
  if (bytes.byteLength <= OFF_THREAD_BYTES) {
    try {
      return Promise.resolve({ ok: true, value: bytes.byteLength === 0 ? {} : JSON.parse(bytes.toString('utf8')) });
    } catch (err) {
      return Promise.resolve({ ok: false, error: (err as Error).message });
    }
  }
  const t = bodyThread();
  const id = nextId++;
  t.ref();
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    // The body's memory moves to the thread (no copy) when it owns its whole buffer.
    const transfer = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? [bytes.buffer as ArrayBuffer] : [];
    t.postMessage({ id, bytes, maxTextChars }, transfer);
  });
}
