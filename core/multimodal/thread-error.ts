// Errors from a preprocessing thread, on their way to the pool's caller. postMessage's
// structured clone keeps an Error's message but not its class, so a thread posts what it
// caught as plain data, one tagged kind per error class the router answers by name
// (router/errors.ts: a decode or size error is a 400 naming the image), and the pool rebuilds
// the same class from it. Anything else arrives as an InternalThreadError that keeps the
// thrown error's name, message and stack (the router answers it 500 `internal error: …`).
// ImageInputError (fetch.ts) and ImageMemoryError (pool.ts) are thrown on the router's own
// thread only, so they have no kind here.
import { ImageDecodeError } from './decode.ts';
import { ImageSizeError } from './qwen-vl.ts';

export type ThreadError =
  /** The image's bytes do not decode (ImageDecodeError). */
  | { kind: 'decode'; message: string }
  /** The decoded image's size is one smart_resize refuses (ImageSizeError). */
  | { kind: 'size'; message: string }
  /** Anything else: a fault of the thread's own, by the name it was thrown with. */
  | { kind: 'internal'; name: string; message: string; stack?: string };

/** A thread's error that no kind names: the original name, message and (thread's) stack. */
export class InternalThreadError extends Error {
  override readonly name: string;

  constructor(name: string, message: string, stack?: string) {
    super(message);
    this.name = name;
    if (stack !== undefined) this.stack = stack;
  }
}

/** What a thread posts for `err` (plain data: it survives postMessage unchanged). */
export function threadErrorOf(err: unknown): ThreadError {
  if (err instanceof ImageDecodeError) return { kind: 'decode', message: err.message };
  if (err instanceof ImageSizeError) return { kind: 'size', message: err.message };
  const thrown = (typeof err === 'object' && err !== null ? err : {}) as { name?: unknown; message?: unknown; stack?: unknown };
  return {
    kind: 'internal',
    name: typeof thrown.name === 'string' ? thrown.name : 'Error',
    message: String(thrown.message ?? err),
    ...(typeof thrown.stack === 'string' ? { stack: thrown.stack } : {}),
  };
}

/** The error a posted ThreadError stands for, of the class the thread threw (or InternalThreadError). */
export function errorFromThread(posted: ThreadError): Error {
  switch (posted.kind) {
    case 'decode':
      return new ImageDecodeError(posted.message);
    case 'size':
      return new ImageSizeError(posted.message);
    case 'internal':
      return new InternalThreadError(posted.name, posted.message, posted.stack);
  }
}
