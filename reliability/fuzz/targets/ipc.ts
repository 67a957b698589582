// The Electron IPC binding (electron/ipc.ts) with the sender check wired as electron/main.ts
// wires it (security.ts senderFrameProblem, the app origin, the set of console windows), and
// a backend that records what reaches it. Each case sends one message on a console channel
// from a sender that is genuine (the top frame of a console window at mmtc-app://console) or
// forged: another window, a subframe, a frame that navigated elsewhere, look-alike origins
// (mmtc-app://console.evil, mmtc-app://console@evil, a port, file:, data:, blob:, about:,
// https), a frame that is gone, a frame of another process pretending to be the main one.
// Forged messages must be refused `forbidden` without touching the backend; genuine ones reach it.
import { EventEmitter } from 'node:events';
import { register } from 'node:module';
import type { Rng } from '../../lib/rng.ts';
import { nastyValue } from '../../lib/rng.ts';
import type { CaseOutcome } from '../harness.ts';

const APP_ORIGIN = 'mmtc-app://console';

interface Frame {
  url: string;
  parent: Frame | null;
  processId: number;
  routingId: number;
}

class FakeContents extends EventEmitter {
  static next = 100;
  readonly mainFrame: Frame = { url: `${APP_ORIGIN}/index.html`, parent: null, processId: FakeContents.next++, routingId: 1 };
  destroyed = false;
  sent = 0;
  isDestroyed() {
    return this.destroyed;
  }
  send() {
    this.sent += 1;
  }
}

const LOOKALIKES = [
  'mmtc-app://console.evil/index.html',
  'mmtc-app://console@evil/index.html',
  'mmtc-app://console:8080/index.html',
  'mmtc-app://consolex/',
  'mmtc-app:console/index.html',
  'mmtc-app:///console/index.html',
  'https://console/index.html',
  'http://127.0.0.1:30001/',
  'file:///index.html',
  'data:text/html,<script>1</script>',
  'blob:mmtc-app://console/0b1c',
  'about:blank',
  'javascript:alert(1)',
  'chrome-extension://abc/',
  '',
  'not a url',
  'mmtc-app://console\u0000.evil/',
  'mmtc-app://xn--console-/',
];

export async function ipcTarget() {
  register(new URL('../electron/resolve.mjs', import.meta.url));
  const { bindConsoleIpc, callChannel, STREAM_SUBSCRIBE_CHANNEL, STREAM_UNSUBSCRIBE_CHANNEL } = await import('../../../electron/ipc.ts');
  const { senderFrameProblem } = await import('../../../electron/security.ts');
  const { COMMAND_NAMES } = await import('../../../core/console/contract.ts');
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- a string specifier: TypeScript does not look for types of this plain .mjs module
  const fake = (await import('../electron/fake.mjs' as string)) as {
    handlers: Map<string, (event: unknown, ...args: unknown[]) => Promise<unknown> | unknown>;
  };
  const reached: string[] = [];
  const backend = {
    invoke: async (command: string) => {
      reached.push(command);
      return { answered: command };
    },
    subscribe: (stream: string) => {
      reached.push(`subscribe ${stream}`);
      return () => {};
    },
    close: async () => {},
  };
  const ours = new FakeContents();
  const windows = new WeakSet<object>([ours]);
  bindConsoleIpc({
    backend: backend as never,
    refuseSender: (event) => senderFrameProblem(event, { appOrigin: APP_ORIGIN, isAppWindow: (c) => windows.has(c) }),
  });
  const channels = [...COMMAND_NAMES.map(callChannel), STREAM_SUBSCRIBE_CHANNEL, STREAM_UNSUBSCRIBE_CHANNEL];
  const other = new FakeContents();
  return {
    async run(rng: Rng): Promise<CaseOutcome> {
      const channel = rng.pick(channels);
      const genuine = rng.chance(0.25);
      let sender: FakeContents = ours;
      let frame: Frame | null = ours.mainFrame;
      let how = 'genuine';
      if (!genuine) {
        switch (rng.int(0, 6)) {
          case 0:
            sender = other;
            frame = other.mainFrame;
            how = 'another window at the app origin';
            break;
          case 1:
            frame = { url: `${APP_ORIGIN}/index.html`, parent: ours.mainFrame, processId: ours.mainFrame.processId, routingId: 7 };
            how = 'a subframe at the app origin';
            break;
          case 2:
            frame = { url: rng.pick(LOOKALIKES), parent: null, processId: ours.mainFrame.processId, routingId: ours.mainFrame.routingId };
            how = `the top frame navigated to ${frame.url.slice(0, 40)}`;
            break;
          case 3:
            frame = null;
            how = 'a frame that is gone';
            break;
          case 4:
            frame = { url: `${APP_ORIGIN}/index.html`, parent: null, processId: 99_999, routingId: 1 };
            how = 'a frame of another process claiming the app origin';
            break;
          case 5:
            sender = other;
            frame = ours.mainFrame;
            how = "another window presenting our window's frame";
            break;
          default:
            sender = new FakeContents();
            frame = { url: rng.pick(LOOKALIKES), parent: rng.chance(0.5) ? ours.mainFrame : null, processId: 1, routingId: 1 };
            how = 'a stranger at a look-alike origin';
        }
      }
      const event = { sender, senderFrame: frame };
      const input = channel.startsWith('mmtc:call:')
        ? rng.chance(0.5)
          ? {}
          : nastyValue(rng)
        : rng.pick(['traffic', 'config', 'calibration', 'nope', nastyValue(rng)]);
      const before = reached.length;
      const result = (await fake.handlers.get(channel)!(event, input)) as { ok: boolean; error?: { code: string; message: string } };
      const touched = reached.length > before;
      const text = JSON.stringify({ channel, how, input }).slice(0, 300);
      if (!genuine) {
        if (result.ok || result.error?.code !== 'forbidden')
          return { kind: 'accepted', problem: `a forged sender was not refused: ${JSON.stringify(result).slice(0, 200)}`, input: text };
        if (touched) return { kind: 'rejected', problem: 'a forged message reached the backend', input: text };
        if (!/refused mmtc:/.test(result.error.message)) return { kind: 'rejected', problem: `an unclear refusal: ${result.error.message}`, input: text };
        return { kind: 'rejected', label: `forbidden: ${how.replace(/ to .*/, ' elsewhere')}` };
      }
      if (!result.ok && result.error?.code === 'forbidden')
        return { kind: 'rejected', problem: `the genuine console window was refused: ${result.error.message}`, input: text };
      if (!result.ok && result.error?.code !== 'invalid_input')
        return { kind: 'rejected', problem: `the genuine window got ${JSON.stringify(result.error).slice(0, 200)}`, input: text };
      if (result.ok && !touched && channel !== STREAM_UNSUBSCRIBE_CHANNEL && channel !== STREAM_SUBSCRIBE_CHANNEL)
        return { kind: 'accepted', problem: 'a genuine call answered ok without reaching the backend', input: text };
      return result.ok
        ? { kind: 'accepted', label: 'genuine, reached the backend' }
        : { kind: 'rejected', label: 'genuine, invalid input refused before the backend' };
    },
  };
}
