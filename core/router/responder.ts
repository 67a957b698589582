// How one chat completion is written back, JSON or Server-Sent Events, in one place.
//
// Streaming: the first delta (or the end) sends the headers and the assistant role chunk,
// each later delta is one `data:` event, the end sends the finish chunk, the usage chunk
// when asked for, and `data: [DONE]`. Failing: before anything was sent the client gets the
// error's status with an OpenAI error body; once a stream has started the error is one more
// `data:` event carrying the same body, then `[DONE]`, so OpenAI clients surface it.
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http';
import { ApiError, chunkBody, completionBody, type CompletionUsage } from './openai.ts';

/**
 * Where a response goes: an HTTP ServerResponse, or a CapturedResponse when the console runs
 * a request through the pipeline itself (test requests, calibration).
 */
export interface ResponseTarget {
  writeHead(status: number, headers: OutgoingHttpHeaders): unknown;
  write(chunk: string): unknown;
  end(chunk?: string): unknown;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  readonly statusCode: number;
  on(event: 'close', listener: () => void): unknown;
  off(event: 'close', listener: () => void): unknown;
}

/** A response kept in memory: status, headers and body text. */
export class CapturedResponse extends EventEmitter implements ResponseTarget {
  statusCode = 200;
  headers: OutgoingHttpHeaders = {};
  body = '';
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  readonly destroyed = false;
  private readonly done: Promise<void>;
  private finish!: () => void;

  constructor() {
    super();
    this.done = new Promise((resolve) => (this.finish = resolve));
  }

  writeHead(status: number, headers: OutgoingHttpHeaders): this {
    this.statusCode = status;
    this.headers = headers;
    this.headersSent = true;
    return this;
  }

  write(chunk: string): boolean {
    this.headersSent = true;
    this.body += chunk;
    return true;
  }

  end(chunk?: string): this {
    if (chunk) this.body += chunk;
    this.headersSent = true;
    this.writableEnded = true;
    this.writableFinished = true;
    this.finish();
    return this;
  }

  /** Settles when the response has ended. */
  ended(): Promise<void> {
    return this.done;
  }
}

export interface ResponderOptions {
  stream: boolean;
  includeUsage: boolean;
  requestId: string;
  created: number;
  model: string;
  /** Headers every response of this request carries (e.g. the config revision). */
  headers: OutgoingHttpHeaders;
}

export class ChatResponder {
  private started = false;
  /** Server-Sent Events (true) or one JSON body at the end. */
  readonly stream: boolean;

  constructor(
    private readonly res: ResponseTarget,
    private readonly o: ResponderOptions,
  ) {
    this.stream = o.stream;
  }

  /** True once a stream's headers went out: errors can then only be reported in-stream. */
  get streaming(): boolean {
    return this.started;
  }

  private event(payload: unknown): void {
    this.res.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  private startStream(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeHead(200, { ...this.o.headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    this.event(chunkBody(this.o.requestId, this.o.created, this.o.model, { role: 'assistant', content: '' }, null));
  }

  /** A piece of streamed text (ignored for JSON responses, which send the whole text at the end). */
  delta(text: string): void {
    if (!this.o.stream) return;
    this.startStream();
    if (text) this.event(chunkBody(this.o.requestId, this.o.created, this.o.model, { content: text }, null));
  }

  /** The completion is over: `text` is the whole text (JSON) or what is left to stream. */
  finish(text: string, finishReason: string, usage: CompletionUsage, extraHeaders: OutgoingHttpHeaders = {}): void {
    if (!this.o.stream) {
      this.res.writeHead(200, { ...this.o.headers, ...extraHeaders, 'content-type': 'application/json' });
      this.res.end(JSON.stringify(completionBody(this.o.requestId, this.o.created, this.o.model, text, finishReason, usage)));
      return;
    }
    this.startStream();
    if (text) this.event(chunkBody(this.o.requestId, this.o.created, this.o.model, { content: text }, null));
    this.event(chunkBody(this.o.requestId, this.o.created, this.o.model, {}, finishReason));
    if (this.o.includeUsage) this.event(chunkBody(this.o.requestId, this.o.created, this.o.model, {}, null, usage));
    this.res.end('data: [DONE]\n\n');
  }

  /** The request failed; returns false when nothing could be written (the client is gone). */
  fail(error: ApiError): boolean {
    if (this.res.writableEnded || this.res.destroyed) return false;
    if (this.started) {
      this.event(error.body());
      this.res.end('data: [DONE]\n\n');
      return true;
    }
    sendError(this.res, error, this.o.headers);
    return true;
  }
}

/** An OpenAI error body with its status (or, once a response has started, just the end of it). */
export function sendError(res: ResponseTarget, error: ApiError, headers: OutgoingHttpHeaders = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(error.status, { ...headers, 'content-type': 'application/json' });
  res.end(JSON.stringify(error.body()));
}
