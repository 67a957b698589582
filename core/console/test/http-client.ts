// A Node client of the console's HTTP binding for tests: commands as POST /api/<command> with
// the bearer token, streams over the one WebSocket with the token subprotocol, errors rebuilt
// with the contract's own errorFromWire, as the renderer's browser client does.
import WebSocket from 'ws';
import {
  errorFromWire,
  type CommandInput,
  type CommandName,
  type CommandOutput,
  type ConsoleClient,
  type StreamName,
  type StreamPayload,
} from '../contract.ts';
import { EVENTS_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from '../http.ts';

export interface HttpTestClient extends ConsoleClient {
  close(): void;
}

export function httpClient(base: string, token: string): HttpTestClient {
  const url = new URL(base);
  let ws: WebSocket | undefined;
  let open: Promise<WebSocket> | undefined;
  const listeners = new Map<StreamName, Set<(payload: unknown) => void>>();
  const socket = () => {
    open ??= new Promise((resolve, reject) => {
      ws = new WebSocket(`ws://${url.host}/api/events`, [EVENTS_SUBPROTOCOL, `${TOKEN_SUBPROTOCOL_PREFIX}${token}`]);
      ws.on('open', () => resolve(ws!));
      ws.on('error', reject);
      ws.on('message', (data) => {
        const msg = JSON.parse(String(data)) as { stream: StreamName; payload: unknown };
        for (const l of listeners.get(msg.stream) ?? []) l(msg.payload);
      });
    });
    return open;
  };
  return {
    async call<C extends CommandName>(command: C, input: CommandInput<C>): Promise<CommandOutput<C>> {
      const res = await fetch(`${url.origin}/api/${command}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(input),
      });
      const body: unknown = await res.json();
      if (!res.ok) throw errorFromWire(body);
      return body as CommandOutput<C>;
    },
    subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void) {
      const set = listeners.get(stream) ?? new Set();
      set.add(listener as (payload: unknown) => void);
      listeners.set(stream, set);
      void socket().then((s) => s.send(JSON.stringify({ op: 'subscribe', stream })));
      return () => {
        set.delete(listener as (payload: unknown) => void);
        if (set.size === 0) void socket().then((s) => s.send(JSON.stringify({ op: 'unsubscribe', stream })));
      };
    },
    close() {
      ws?.close();
    },
  };
}
