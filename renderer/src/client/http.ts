// The browser binding of the console contract (core/console/http.ts is the server side):
// every command is `POST /api/<command>` with `Authorization: Bearer <token>` and a JSON
// body; every stream rides one WebSocket at /api/events, authenticated by the subprotocol
// `mmtc.token.<token>` (browsers cannot set headers on a WebSocket). Errors come back as
// `{error: {code, message, …}}` and are rebuilt into real ContractErrors.
//
// The socket is opened on the first subscription and reconnects with exponential backoff
// (250 ms doubling to 10 s, with jitter) after any close; on reconnect it subscribes again
// to every stream that still has listeners, and tells the page through onConnection so
// views can catch up on what they missed (traffic.snapshot).
import {
  ContractError,
  errorFromWire,
  type CommandInput,
  type CommandName,
  type CommandOutput,
  type ConsoleClient,
  type StreamName,
  type StreamPayload,
} from '../../../core/console/contract.ts';

export type ConnectionState = 'idle' | 'connecting' | 'open' | 'reconnecting';

export interface HttpClientOptions {
  /** The console's origin, e.g. http://127.0.0.1:30001 (default: the page's own). */
  origin: string;
  token: string;
  fetch?: typeof fetch;
  WebSocket?: typeof WebSocket;
  onConnection?: (state: ConnectionState, attempt: number) => void;
  /** For tests: the random part of the backoff (0-1). */
  random?: () => number;
}

export const EVENTS_PATH = '/api/events';
export const EVENTS_SUBPROTOCOL = 'mmtc.v1';
export const TOKEN_SUBPROTOCOL_PREFIX = 'mmtc.token.';

/** Delay before reconnect attempt `attempt` (1-based): 250 ms doubling to 10 s, ±20 % jitter. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(10_000, 250 * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

export interface HttpConsoleClient extends ConsoleClient {
  readonly binding: 'http';
  connection(): ConnectionState;
  /** Use another token from now on (a newly printed console URL): commands use it, and the event socket reconnects with it at once. */
  setToken(token: string): void;
  close(): void;
}

export function createHttpClient(options: HttpClientOptions): HttpConsoleClient {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const WS = options.WebSocket ?? globalThis.WebSocket;
  const random = options.random ?? Math.random;
  let token = options.token;
  const listeners = new Map<StreamName, Set<(payload: unknown) => void>>();
  let ws: WebSocket | undefined;
  let state: ConnectionState = 'idle';
  let attempt = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;

  const setState = (next: ConnectionState) => {
    state = next;
    options.onConnection?.(next, attempt);
  };

  const wsUrl = () => `${options.origin.replace(/^http/, 'ws')}${EVENTS_PATH}`;

  const send = (msg: { op: 'subscribe' | 'unsubscribe'; stream: StreamName }) => {
    if (ws && ws.readyState === WS.OPEN) ws.send(JSON.stringify(msg));
  };

  const connect = () => {
    if (closed || ws) return;
    setState(attempt === 0 ? 'connecting' : 'reconnecting');
    const socket = new WS(wsUrl(), [EVENTS_SUBPROTOCOL, `${TOKEN_SUBPROTOCOL_PREFIX}${token}`]);
    ws = socket;
    socket.onopen = () => {
      attempt = 0;
      setState('open');
      for (const stream of listeners.keys()) send({ op: 'subscribe', stream });
    };
    socket.onmessage = (ev: MessageEvent) => {
      let msg: { stream?: StreamName; payload?: unknown };
      try {
        msg = JSON.parse(String(ev.data)) as typeof msg;
      } catch {
        return; // not JSON: the backend sends none such; nothing a listener could take from it
      }
      const set = msg.stream ? listeners.get(msg.stream) : undefined;
      if (!set) return;
      for (const l of [...set]) {
        try {
          l(msg.payload);
        } catch (err) {
          console.error(`mmtc: a ${msg.stream} listener threw`, err);
        }
      }
    };
    socket.onclose = () => {
      if (ws === socket) ws = undefined;
      if (closed || listeners.size === 0) {
        setState('idle');
        return;
      }
      attempt += 1;
      setState('reconnecting');
      timer = setTimeout(connect, backoffMs(attempt, random));
    };
    socket.onerror = () => {
      // onclose follows and schedules the retry.
    };
  };

  return {
    binding: 'http',
    connection: () => state,

    async call<C extends CommandName>(command: C, input: CommandInput<C>): Promise<CommandOutput<C>> {
      let res: Response;
      try {
        res = await doFetch(`${options.origin}/api/${command}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(input ?? {}),
          cache: 'no-store',
          credentials: 'omit',
        });
      } catch (err) {
        throw new ContractError(
          'internal',
          `the console backend at ${options.origin} cannot be reached (${(err as Error).message}); is mmtc serve still running?`,
        );
      }
      let body: unknown;
      try {
        body = await res.json();
      } catch {
        throw new ContractError('internal', `the console backend answered ${command} with HTTP ${res.status} and a body that is not JSON`);
      }
      if (!res.ok) throw errorFromWire(body);
      return body as CommandOutput<C>;
    },

    subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void): () => void {
      let set = listeners.get(stream);
      const first = !set;
      if (!set) {
        set = new Set();
        listeners.set(stream, set);
      }
      const entry = (p: unknown) => listener(p as StreamPayload<S>);
      set.add(entry);
      if (!ws) connect();
      else if (first) send({ op: 'subscribe', stream });
      let active = true;
      return () => {
        if (!active) return;
        active = false;
        const current = listeners.get(stream);
        current?.delete(entry);
        if (current && current.size === 0) {
          listeners.delete(stream);
          send({ op: 'unsubscribe', stream });
        }
      };
    },

    setToken(next: string) {
      if (next === token) return;
      token = next;
      // Reconnect now with the new token (a socket on the old one may be retrying with backoff).
      if (timer) clearTimeout(timer);
      timer = undefined;
      const old = ws;
      ws = undefined;
      attempt = 0;
      if (old) {
        // Nothing the old socket does from here may reach the page: it was for the old token.
        old.onopen = null;
        old.onclose = null;
        old.onerror = null;
        old.onmessage = null;
        old.close();
      }
      if (listeners.size > 0 && !closed) connect();
    },

    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      ws?.close();
      ws = undefined;
    },
  };
}
