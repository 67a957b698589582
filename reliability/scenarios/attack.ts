// The console's guards attacked the way a hostile page and a hostile renderer would: Chromium
// loads a page from another loopback origin that tries every way a browser has to reach
// `mmtc serve` (fetch with and without CORS, a simple text/plain POST, a form post, a
// WebSocket with guessed tokens, image and script tags, and a DNS-rebinding name,
// rebind.localhost, that resolves to the console), and forged IPC senders go at the Electron
// handlers (fuzz/targets/ipc.ts). Nothing may change the router: the revision and the history
// stay as they were, no attempt reads a response, and the genuine client still works.
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { fuzzInChild, reportFuzz } from '../fuzz/harness.ts';
import { consoleCall } from '../lib/http.ts';
import { onStop, startServe, startWorker } from '../lib/procs.ts';
import type { Suite, T } from '../lib/suite.ts';
import { configFile } from './faults-worker.ts';

export async function attackGroup(suite: Suite): Promise<void> {
  await suite.group('attack', ['browser', 'ipc'], async () => {
    await suite.run('attack/browser', (t) => browser(t), { maxSeconds: 120 });
    await suite.run(
      'attack/ipc',
      async (t) =>
        reportFuzz(
          t,
          await fuzzInChild({ target: 'ipc', seed: t.seed, count: suite.short ? 2000 : 20_000, seconds: suite.short ? 20 : 120 }),
          'IPC messages (a quarter from the genuine console window)',
        ),
      { seeded: true, maxSeconds: 180 },
    );
  });
}

/** What the attacker's page runs: every attempt, and what the page could observe of it. */
const ATTACK_PAGE = (consoleOrigin: string, rebindOrigin: string) => `<!doctype html><meta charset="utf-8"><title>not the console</title>
<body><iframe name="sink" style="display:none"></iframe>
<script>
const C = ${JSON.stringify(consoleOrigin)};
const results = {};
async function attempt(name, fn) {
  try { results[name] = await fn(); } catch (e) { results[name] = 'blocked: ' + (e && e.name); }
}
window.run = async () => {
  const draft = JSON.stringify({ draft: { multimodal_tensor_transport: 'shm' }, expectedRevision: 1 });
  await attempt('cors POST json', async () => { const r = await fetch(C + '/api/config.apply', { method: 'POST', headers: { 'content-type': 'application/json' }, body: draft }); return 'read ' + r.status + ' ' + (await r.text()).slice(0, 80); });
  await attempt('cors POST with a guessed bearer', async () => { const r = await fetch(C + '/api/overview', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer guess' }, body: '{}' }); return 'read ' + r.status; });
  await attempt('no-cors POST text/plain', async () => { const r = await fetch(C + '/api/config.apply', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: draft }); return 'opaque ' + r.type + ' ' + r.status; });
  await attempt('no-cors POST form-urlencoded', async () => { const r = await fetch(C + '/api/workers.remove', { method: 'POST', mode: 'no-cors', body: new URLSearchParams({ url: 'x' }) }); return 'opaque ' + r.type; });
  await attempt('cors GET the page', async () => { const r = await fetch(C + '/'); return 'read ' + r.status + ' ' + (await r.text()).slice(0, 40); });
  await attempt('no-cors GET /api/overview', async () => { const r = await fetch(C + '/api/overview', { mode: 'no-cors' }); return 'opaque ' + r.type; });
  await attempt('form POST', async () => {
    const f = document.createElement('form'); f.method = 'POST'; f.action = C + '/api/config.apply'; f.target = 'sink'; f.enctype = 'text/plain';
    const i = document.createElement('input'); i.name = '{"draft":{"x":'; i.value = '1}}'; f.appendChild(i); document.body.appendChild(f); f.submit();
    await new Promise((r) => setTimeout(r, 500));
    try { return 'iframe readable: ' + document.querySelector('iframe').contentDocument.body.innerText.slice(0, 40); } catch (e) { return 'submitted, iframe unreadable'; }
  });
  for (const protocols of [['mmtc.v1'], ['mmtc.v1', 'mmtc.token.guess'], ['mmtc.v1', 'mmtc.token.']]) {
    await attempt('websocket ' + protocols.join(','), () => new Promise((resolve) => {
      const ws = new WebSocket(C.replace('http', 'ws') + '/api/events', protocols);
      ws.onopen = () => { ws.send(JSON.stringify({ op: 'subscribe', stream: 'traffic' })); resolve('OPEN'); };
      ws.onerror = () => resolve('refused');
      setTimeout(() => resolve('timeout'), 3000);
    }));
  }
  await attempt('img tag', () => new Promise((resolve) => { const i = new Image(); i.onload = () => resolve('loaded'); i.onerror = () => resolve('error'); i.src = C + '/api/overview'; }));
  await attempt('script tag', () => new Promise((resolve) => { const s = document.createElement('script'); s.onload = () => resolve('loaded'); s.onerror = () => resolve('error'); s.src = C + '/api/config.get'; document.body.appendChild(s); }));
  await attempt('cors POST to the rebinding name', async () => { const r = await fetch(${JSON.stringify(rebindOrigin)} + '/api/overview', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }); return 'read ' + r.status; });
  return results;
};
</script>`;

async function browser(t: T): Promise<void> {
  const { chromium } = await import('playwright-core');
  const worker = await startWorker('tokenspeed');
  const file = configFile(`multimodal_tensor_transport: inline\nworkers:\n  - url: ${worker.url}\n`);
  const serve = await startServe(['--config', file], { env: { XDG_CONFIG_HOME: path.dirname(file) }, name: 'serve (attacked)' });
  const consolePort = new URL(serve.consoleUrl).port;
  const consoleOrigin = `http://127.0.0.1:${consolePort}`;
  const rebindOrigin = `http://rebind.localhost:${consolePort}`;
  // What reached the console is judged by its state: the revision and the history.
  const attacker = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(ATTACK_PAGE(consoleOrigin, rebindOrigin));
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', () => resolve()));
  const attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`;
  const before = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json;
  const historyBefore = (await consoleCall(serve.consoleUrl, serve.token, 'config.history', {})).json.entries.length;
  // Nothing but loopback: every name resolves to nothing except localhost and *.localhost
  // (rebind.localhost, which Chromium resolves to loopback itself) and the loopback literal;
  // no background traffic of its own.
  const b = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE *.localhost, EXCLUDE 127.0.0.1',
    ],
    // The run's own handlers stop it (run.ts, procs.ts onStop): Playwright's would exit the process first.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
  const unhook = onStop(() => b.close());
  try {
    const page = await b.newPage();
    await page.goto(attackerUrl);
    const results = await page.evaluate<Record<string, string>>('window.run()');
    // DNS rebinding: the attacker's name resolves to 127.0.0.1, so the page is same-origin with
    // the console's port; the Host guard must refuse it anyway.
    const rebind = await page.goto(`${rebindOrigin}/`);
    const rebindStatus = rebind?.status();
    const rebindApi = await page.evaluate(
      `fetch('/api/overview', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer guess' }, body: '{}' }).then((r) => r.status, (e) => 'blocked ' + e.name)`,
    );
    // The genuine client, same browser: the console's own page with its token works.
    const own = await page.goto(`${serve.consoleUrl}/#token=${serve.token}`);
    const ownApi = await page.evaluate(
      `fetch('/api/overview', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ${serve.token}' }, body: '{}' }).then((r) => r.status)`,
    );
    const after = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json;
    const historyAfter = (await consoleCall(serve.consoleUrl, serve.token, 'config.history', {})).json.entries.length;
    // Every attempt of the attacker's page is cross-origin: reading any response at all (whatever its status) is a failure.
    for (const [name, outcome] of Object.entries(results)) {
      t.check(!/^read |OPEN|loaded|iframe readable/.test(outcome), `${name}: ${outcome}`);
    }
    t.check(
      after.revision === before.revision && historyAfter === historyBefore,
      `the configuration changed: revision ${before.revision} → ${after.revision}, history ${historyBefore} → ${historyAfter}`,
    );
    t.check(rebindStatus === 403, `the rebinding name must get 403: ${rebindStatus}`);
    t.check(rebindApi === 403, `the API under the rebinding name must be 403: ${rebindApi}`);
    t.check(own?.status() === 200 && ownApi === 200, `the console's own page must work: ${own?.status()} ${ownApi}`);
    t.check(!serve.proc.output().includes(serve.token) || serve.proc.output().split(serve.token).length === 2, 'the token was logged');
    t.note('attempts', results);
    t.note('rebinding', { page: rebindStatus, api: rebindApi });
    t.note('own_page', { page: own?.status(), api: ownApi });
    t.note('revision', { before: before.revision, after: after.revision });
    t.summary(
      `${Object.keys(results).length + 2} attempts from http://127.0.0.1:<other port> and rebind.localhost: ${Object.entries(results)
        .map(
          ([k, v]) =>
            `${k} → ${v
              .replace(/^(blocked): .*/, '$1')
              .replace(/^(submitted), .*/, '$1, unreadable')
              .slice(0, 24)}`,
        )
        .join(
          '; ',
        )}; rebinding page ${rebindStatus}, API ${rebindApi}; revision ${before.revision} → ${after.revision}, history ${historyBefore} → ${historyAfter} entries; the console's own page ${own?.status()}/${ownApi}`,
    );
  } finally {
    unhook();
    await b.close();
    await new Promise<void>((resolve) => attacker.close(() => resolve()));
    await serve.proc.stop();
  }
}
