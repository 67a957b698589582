// Worker faults, injected from outside the product: a worker SIGKILLed with requests in
// flight and one stream half-delivered, a worker SIGSTOPped (hung), a slow link (a loopback
// TCP proxy at a few MB/s in front of the worker), a worker restarted on the same port, and
// one restarted with another /dev/shm token (after a gap the health check sees, and swapped
// in place between two health checks: the router reaches it through a loopback proxy that is
// retargeted to the new process, its old connections cut). For each: what the client saw
// (statuses and how fast), what was left in /dev/shm, and what the router says of the worker.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { chatBody, requestLines, sendChat, verifyChat, type SentChat } from '../lib/chat.ts';
import { makeCorpus, type CorpusImage } from '../lib/images.ts';
import { get, metrics, metricSum, request, type Reply } from '../lib/http.ts';
import { sleep, startRouter, startWorker, until, type Router } from '../lib/procs.ts';
import { startProxy } from '../lib/proxy.ts';
import { ourFiles } from '../lib/shm.ts';
import { fmt, type Suite, type T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';

export function configFile(body: string): string {
  const dir = tempDir('config');
  const file = path.join(dir, 'router.yaml');
  writeFileSync(file, body);
  return file;
}

async function router(workers: string[], o: { timeout: number; health: number; extra?: string[]; name?: string }): Promise<Router> {
  const file = configFile(
    `multimodal_tensor_transport: auto\nrequest_timeout_secs: ${o.timeout}\nhealth_check_interval_secs: ${o.health}\nworkers:\n${workers.map((u) => `  - url: ${u}\n`).join('')}`,
  );
  return startRouter(['--config', file, ...(o.extra ?? [])], { name: o.name ?? 'router (faults)' });
}

interface HealthView {
  status: number;
  workers: Array<{ url: string; healthy: boolean; error?: string; in_flight: number }>;
}
async function health(r: Router): Promise<HealthView> {
  const h = await get(r.url, '/health', { timeoutMs: 5000 });
  return { status: h.status, workers: h.json?.workers ?? [] };
}
const healthyOf = async (r: Router, url: string) => (await health(r)).workers.find((w) => w.url === url)?.healthy === true;

function otherToken(token: string): string {
  const i = token.lastIndexOf(':');
  return `${token.slice(0, i)}:${token.slice(i + 1) === '424242' ? '424243' : '424242'}`;
}

const tally = (replies: Reply[]) =>
  replies.reduce<Record<string, number>>((m, r) => ((m[String(r.status || r.neterr)] = (m[String(r.status || r.neterr)] ?? 0) + 1), m), {});

export async function workerFaultsGroup(suite: Suite): Promise<void> {
  const names = ['worker-killed-mid-stream', 'worker-hung', 'worker-slow', 'worker-restart-same-port', 'worker-restart-new-token'];
  await suite.group('faults', names, async () => {
    const corpus = await makeCorpus(['thumb.png', 'fullhd.jpg', 'vga.jpg']);
    const thumb = corpus.find((c) => c.name === 'thumb.png')!;
    const big = corpus.find((c) => c.name === 'fullhd.jpg')!;
    const one = (img: CorpusImage, stream = false): SentChat => ({ images: [img], stream, body: chatBody([img], { stream }) });
    const run = (name: string, fn: (t: T) => Promise<void>, maxSeconds: number) => suite.run(`faults/${name}`, fn, { maxSeconds });

    await run(
      'worker-killed-mid-stream',
      async (t) => {
        // The victim sits behind a proxy that delivers its answers at 1.5 KB/s, so a stream can be cut half-way.
        const victim = await startWorker('tokenspeed', ['--delay-ms', '1200'], { name: 'victim' });
        const other = await startWorker('vllm', [], { name: 'survivor' });
        const proxy = await startProxy({ target: { host: '127.0.0.1', port: victim.port }, downBytesPerSec: 1500 });
        const r = await router([proxy.url, other.url], { timeout: 30, health: 0.5 });
        try {
          let streamedBeforeKill = 0;
          let killedAt = 0;
          let killed = false;
          const kill = async () => {
            if (killed) return;
            killed = true;
            killedAt = performance.now();
            await victim.proc.stop('SIGKILL');
          };
          const sent = Array.from({ length: 8 }, (_, i) => one(thumb, i % 2 === 0));
          const filesSeen: number[] = [];
          const sampler = setInterval(() => filesSeen.push(ourFiles('/dev/shm').length), 50);
          const replies = await Promise.all(
            sent.map(async (s, i) => {
              await sleep(i * 150);
              const reply = await request(r.url, s.body, {
                timeoutMs: 60_000,
                onData: (soFar) => {
                  // The first content delta of a stream from the victim: kill it now, mid-stream.
                  if (!killed && s.stream && /"content":"\d/.test(soFar)) {
                    streamedBeforeKill = soFar.length;
                    void kill();
                  }
                },
              });
              return { reply, at: performance.now() };
            }),
          );
          clearInterval(sampler);
          if (!killed) await kill();
          const verdicts = replies.map(({ reply }, i) => ({ reply, verdict: verifyChat(reply, sent[i]!), stream: sent[i]!.stream }));
          const toVictim = verdicts.filter(({ verdict, reply }) => verdict.runtime !== 'vllm' && !(reply.status === 200 && verdict.ok));
          const midStream = verdicts.filter(({ reply }) => reply.status === 200 && reply.streamError);
          // 502s that came within 3 s after the kill (not those before it).
          const failedFast = replies.filter(({ reply, at }) => reply.status === 502 && at - killedAt >= 0 && at - killedAt < 3000).length;
          const files = ourFiles('/dev/shm');
          const down = await until(async () => !(await healthyOf(r, proxy.url)), 3000);
          const after = await Promise.all(Array.from({ length: 4 }, () => sendChat(r.url, one(thumb))));
          t.check(midStream.length >= 1, `no stream was cut mid-way (statuses ${JSON.stringify(tally(replies.map((x) => x.reply)))})`);
          for (const m of midStream)
            t.check(
              /worker .* failed: UNAVAILABLE/.test(m.reply.streamError!) && m.reply.done,
              `a cut stream must end with the worker's error and [DONE]: ${m.reply.streamError}`,
            );
          t.check(
            toVictim.every(({ reply }) => reply.status === 502 || (reply.status === 200 && reply.streamError)),
            `requests to the killed worker must get 502 (or an error event in a started stream): ${JSON.stringify(toVictim.map(({ reply }) => reply.status))}`,
          );
          const survivorFailures = requestLines(r.proc.output()).filter((l) => l.worker === other.url && l.status !== 200);
          t.check(
            survivorFailures.length === 0,
            `requests to the surviving worker failed: ${survivorFailures.map((l) => `${l.status} ${l.error}`).join('; ')}`,
          );
          t.check(files.length === 0, `${files.length} tensor files of killed requests left in /dev/shm`);
          t.check(Math.max(...filesSeen) > 0, 'no file was ever in flight (the scenario did not exercise the SHM lane)');
          t.check(down, 'the killed worker is not marked unhealthy');
          t.check(
            after.every((a) => a.verdict.ok),
            `requests after the kill must all succeed on the survivor: ${after.map((a) => a.reply.status)}`,
          );
          t.note('statuses', tally(replies.map((x) => x.reply)));
          t.note('cut_streams', midStream.length);
          t.note('cut_stream_error', midStream[0]?.reply.streamError);
          t.note('bytes_streamed_before_kill', streamedBeforeKill);
          t.note('failed_within_3s_of_kill', failedFast);
          t.note('max_files_in_flight', Math.max(...filesSeen));
          t.note('files_left', files.length);
          t.note('after', tally(after.map((a) => a.reply)));
          t.summary(
            `statuses ${JSON.stringify(tally(replies.map((x) => x.reply)))}: ${midStream.length} stream(s) cut after ${streamedBeforeKill} bytes with "${midStream[0]?.reply.streamError?.slice(0, 70)}…", ${failedFast} 502s within 3 s of the kill; up to ${Math.max(...filesSeen)} files in flight, ${files.length} left; worker marked unhealthy: ${down}; 4 requests after: ${JSON.stringify(tally(after.map((a) => a.reply)))}`,
          );
        } finally {
          await r.proc.stop();
          await proxy.close();
        }
      },
      120,
    );

    await run(
      'worker-hung',
      async (t) => {
        const timeout = 4;
        const victim = await startWorker('tokenspeed', ['--delay-ms', '500'], { name: 'victim' });
        const other = await startWorker('vllm', [], { name: 'survivor' });
        const r = await router([victim.url, other.url], { timeout, health: 0.5 });
        try {
          const inFlight = Array.from({ length: 6 }, (_, i) => sleep(i * 50).then(() => sendChat(r.url, one(thumb, i % 2 === 1), 60_000)));
          const sawFiles = await until(() => ourFiles('/dev/shm').length > 0, 5000, 20);
          victim.proc.signal('SIGSTOP');
          const stoppedAt = performance.now();
          const replies = await Promise.all(inFlight);
          const filesAtEnd = ourFiles('/dev/shm');
          const hung = replies.filter((x) => x.reply.status === 504);
          const down = await until(async () => !(await healthyOf(r, victim.url)), 8000);
          const downAfter = (performance.now() - stoppedAt) / 1000;
          const during = await Promise.all(Array.from({ length: 4 }, () => sendChat(r.url, one(thumb), 60_000)));
          victim.proc.signal('SIGCONT');
          const contAt = performance.now();
          const back = await until(() => healthyOf(r, victim.url), 10_000);
          const backAfter = (performance.now() - contAt) / 1000;
          const later = await Promise.all(Array.from({ length: 4 }, () => sendChat(r.url, one(thumb), 60_000)));
          const laterRuntimes = later.map((x) => x.verdict.runtime);
          t.check(sawFiles, 'no file was in flight when the worker hung');
          t.check(hung.length >= 1, `no request timed out: ${JSON.stringify(tally(replies.map((x) => x.reply)))}`);
          for (const h of hung) t.check(h.reply.ms < (timeout + 3) * 1000, `a 504 took ${fmt(h.reply.ms, 0)} ms (timeout ${timeout} s)`);
          for (const h of hung)
            t.check(
              /did not finish within 4 s/.test(h.reply.json?.error?.message ?? h.reply.streamError ?? ''),
              `the 504 must name the timeout: ${h.reply.body.slice(0, 200)}`,
            );
          t.check(
            replies.every((x) => x.reply.status === 504 || x.verdict.ok),
            `every request either times out or is correct: ${JSON.stringify(tally(replies.map((x) => x.reply)))}`,
          );
          t.check(filesAtEnd.length === 0, `${filesAtEnd.length} files of timed-out requests left in /dev/shm`);
          t.check(down, 'the hung worker was not marked unhealthy');
          t.check(
            during.every((x) => x.verdict.ok),
            `requests while the worker hangs must go to the other one: ${during.map((x) => x.reply.status)}`,
          );
          t.check(back, 'the worker was not rediscovered after SIGCONT');
          t.check(
            later.every((x) => x.verdict.ok) && laterRuntimes.includes('tokenspeed'),
            `after SIGCONT requests must succeed on both workers: ${later.map((x) => `${x.reply.status} ${x.verdict.runtime}`)}`,
          );
          t.note('timeout_secs', timeout);
          t.note('statuses', tally(replies.map((x) => x.reply)));
          t.note(
            'ms_to_504',
            hung.map((h) => Math.round(h.reply.ms)),
          );
          t.note('marked_unhealthy_after_s', Math.round(downAfter * 10) / 10);
          t.note('rediscovered_after_s', Math.round(backAfter * 10) / 10);
          t.note('files_left', filesAtEnd.length);
          t.summary(
            `in flight ${JSON.stringify(tally(replies.map((x) => x.reply)))}, 504 after ${hung.map((h) => fmt(h.reply.ms / 1000)).join('/')} s (timeout ${timeout} s) naming the timeout; marked unhealthy ${fmt(downAfter)} s after SIGSTOP; meanwhile ${during.filter((x) => x.verdict.ok).length}/4 served by the other worker; healthy again ${fmt(backAfter)} s after SIGCONT; files left ${filesAtEnd.length}`,
          );
        } finally {
          victim.proc.signal('SIGCONT');
          await r.proc.stop();
        }
      },
      120,
    );

    await run(
      'worker-slow',
      async (t) => {
        // Two single-worker routers, each worker behind a 2 MB/s link with 20 ms latency: one
        // takes tensors inline (it advertises another token), one through /dev/shm.
        const timeout = 4;
        const shmWorker = await startWorker('tokenspeed', [], { name: 'shm, slow link' });
        const inlineWorker = await startWorker('tokenspeed', ['--shm-namespace-id', otherToken(shmWorker.token)], { name: 'inline, slow link' });
        const link = { upBytesPerSec: 2_000_000, downBytesPerSec: 2_000_000, latencyMs: 20 };
        const pShm = await startProxy({ target: { host: '127.0.0.1', port: shmWorker.port }, ...link });
        const pInline = await startProxy({ target: { host: '127.0.0.1', port: inlineWorker.port }, ...link });
        const rShm = await router([pShm.url], { timeout, health: 0.5, name: 'router (shm over slow link)' });
        const rInline = await router([pInline.url], { timeout, health: 0.5, name: 'router (inline over slow link)' });
        try {
          const cases = [
            { r: rInline, img: thumb, lane: 'inline' },
            { r: rInline, img: big, lane: 'inline' },
            { r: rShm, img: thumb, lane: 'shm' },
            { r: rShm, img: big, lane: 'shm' },
          ];
          const results = [];
          for (const c of cases) {
            const { reply, verdict } = await sendChat(c.r.url, one(c.img), 60_000);
            results.push({
              lane: c.lane,
              image: c.img.name,
              bytes: c.img.bf16Bytes,
              status: reply.status,
              ms: Math.round(reply.ms),
              ok: verdict.ok,
              problems: verdict.problems,
              path: verdict.tensors[0]?.path,
              error: reply.json?.error?.message as string | undefined,
            });
          }
          const healthyAfter = (await health(rInline)).workers.every((w) => w.healthy) && (await health(rShm)).workers.every((w) => w.healthy);
          const files = ourFiles('/dev/shm');
          for (const x of results) {
            const linkMs = (x.lane === 'inline' ? x.bytes : 200) / 2000;
            if (linkMs < timeout * 1000 * 0.6)
              t.check(
                x.status === 200 && x.ok && x.path === x.lane,
                `${x.image} over the ${x.lane} lane (${fmt(linkMs, 0)} ms on the link) must succeed correctly via ${x.lane}: ${x.status} ${x.problems.join('; ')} ${x.error ?? ''}`,
              );
            else
              t.check(
                x.status === 504 && x.ms < (timeout + 3) * 1000 && /did not finish within/.test(x.error ?? ''),
                `${x.image} inline (${fmt(linkMs, 0)} ms on the link) must time out with a 504 naming the timeout in about ${timeout} s: ${x.status} in ${x.ms} ms ${x.error ?? ''}`,
              );
          }
          t.check(healthyAfter, 'a slow worker must stay healthy (its HealthCheck is small)');
          t.check(files.length === 0, `${files.length} files left in /dev/shm`);
          t.note('link', link);
          t.note(
            'requests',
            results.map(({ problems: _p, ...x }) => x),
          );
          t.note('files_left', files.length);
          t.summary(
            results.map((x) => `${x.image} ${x.lane}: ${x.status} in ${x.ms} ms`).join('; ') + `; workers healthy ${healthyAfter}; files left ${files.length}`,
          );
        } finally {
          await Promise.all([rShm.proc.stop(), rInline.proc.stop()]);
          await Promise.all([pShm.close(), pInline.close()]);
        }
      },
      120,
    );

    await run(
      'worker-restart-same-port',
      async (t) => {
        let victim = await startWorker('tokenspeed', [], { name: 'victim' });
        const other = await startWorker('vllm', [], { name: 'survivor' });
        const r = await router([victim.url, other.url], { timeout: 30, health: 0.5 });
        try {
          const before = await Promise.all(Array.from({ length: 4 }, () => sendChat(r.url, one(thumb))));
          await victim.proc.stop('SIGKILL');
          const killedAt = performance.now();
          const down = await until(async () => !(await healthyOf(r, victim.url)), 5000);
          const downAfter = (performance.now() - killedAt) / 1000;
          const whileDown = await Promise.all(Array.from({ length: 4 }, () => sendChat(r.url, one(thumb))));
          victim = await startWorker('tokenspeed', [], { name: 'victim (restarted)', port: victim.port });
          const restartedAt = performance.now();
          const back = await until(() => healthyOf(r, victim.url), 10_000);
          const backAfter = (performance.now() - restartedAt) / 1000;
          const after = await Promise.all(Array.from({ length: 6 }, () => sendChat(r.url, one(thumb))));
          const files = ourFiles('/dev/shm');
          t.check(
            before.every((x) => x.verdict.ok),
            'requests before the restart failed',
          );
          t.check(down, 'the killed worker is not marked unhealthy');
          t.check(
            whileDown.every((x) => x.verdict.ok),
            `requests while it is down must go to the other worker: ${whileDown.map((x) => x.reply.status)}`,
          );
          t.check(back, 'the restarted worker was not rediscovered');
          t.check(
            after.every((x) => x.verdict.ok) && after.some((x) => x.verdict.runtime === 'tokenspeed' && x.verdict.paths.shm),
            `after the restart requests must reach it again through /dev/shm: ${after.map((x) => `${x.reply.status} ${x.verdict.runtime} ${JSON.stringify(x.verdict.paths)}`)}`,
          );
          t.check(files.length === 0, `${files.length} files left`);
          t.note('marked_unhealthy_after_s', Math.round(downAfter * 10) / 10);
          t.note('rediscovered_after_s', Math.round(backAfter * 10) / 10);
          t.note('while_down', tally(whileDown.map((x) => x.reply)));
          t.note('after', tally(after.map((x) => x.reply)));
          t.summary(
            `marked unhealthy ${fmt(downAfter)} s after SIGKILL, requests meanwhile ${JSON.stringify(tally(whileDown.map((x) => x.reply)))}; restarted on port ${victim.port}, healthy again ${fmt(backAfter)} s after it listened; then ${JSON.stringify(tally(after.map((x) => x.reply)))} with SHM to it; files left ${files.length}`,
          );
        } finally {
          await r.proc.stop();
        }
      },
      120,
    );

    await run(
      'worker-restart-new-token',
      async (t) => {
        // 1. Killed, down long enough for a health check to see it, back on the same port with another token.
        let victim = await startWorker('tokenspeed', [], { name: 'victim' });
        const token = victim.token;
        const r = await router([victim.url], { timeout: 30, health: 0.5 });
        const lane = async () => (await sendChat(r.url, one(thumb))).verdict;
        try {
          const first = await lane();
          await victim.proc.stop('SIGKILL');
          await until(async () => !(await healthyOf(r, victim.url)), 5000);
          victim = await startWorker('tokenspeed', ['--shm-namespace-id', otherToken(token)], { name: 'victim (new token)', port: victim.port });
          await until(() => healthyOf(r, victim.url), 10_000);
          const afterGap = await Promise.all(Array.from({ length: 3 }, () => lane()));
          t.check(first.ok && first.paths.shm === 1, `before: the encoder input must go through /dev/shm: ${JSON.stringify(first.paths)} ${first.problems}`);
          t.check(
            afterGap.every((v) => v.ok && !v.paths.shm),
            `after a restart with another token (seen down): every tensor must go inline: ${afterGap.map((v) => JSON.stringify(v.paths))}`,
          );
          t.note(
            'after_gap_paths',
            afterGap.map((v) => v.paths),
          );
        } finally {
          await r.proc.stop();
          await victim.proc.stop();
        }

        // 2. Restarted in place between two health checks: the router reaches the worker through a
        // proxy on a fixed address; the new process starts on another port, the proxy switches to
        // it and drops the old connections, then the old process dies. To the router this is a
        // worker that restarted on its address within one health-check interval: it never sees it down.
        victim = await startWorker('tokenspeed', [], { name: 'victim' });
        const front = await startProxy({ target: { host: '127.0.0.1', port: victim.port } });
        const r2 = await router([front.url], { timeout: 30, health: 1 });
        try {
          const first = (await sendChat(r2.url, one(thumb))).verdict;
          const replacement = await startWorker('tokenspeed', ['--shm-namespace-id', otherToken(token)], { name: 'victim (new token, in place)' });
          front.retarget({ host: '127.0.0.1', port: replacement.port });
          front.cut();
          await victim.proc.stop('SIGKILL');
          victim = replacement;
          // Two health-check rounds: whatever the router learns from a healthy worker, it has learnt.
          await sleep(2500);
          const after = await Promise.all(Array.from({ length: 3 }, () => sendChat(r2.url, one(thumb)).then((x) => x.verdict)));
          const statuses = after.map((v) => (v.ok ? 200 : v.problems[0]));
          t.check(first.ok && first.paths.shm === 1, `before the swap the encoder input must go through /dev/shm: ${JSON.stringify(first.paths)}`);
          t.check(
            after.every((v) => v.ok),
            `requests after the in-place restart must succeed: ${statuses}`,
          );
          t.check(
            after.every((v) => !v.paths.shm),
            `after an in-place restart with another token every tensor must go inline (the new token honoured): ${after.map((v) => JSON.stringify(v.paths))}`,
          );
          const m = await metrics(r2.url);
          t.note(
            'in_place_paths',
            after.map((v) => v.paths),
          );
          t.note('read_fallbacks', metricSum(m, 'smg_mm_shm_read_fallbacks_total'));
          t.note('files_left', ourFiles('/dev/shm').length);
          t.check(ourFiles('/dev/shm').length === 0, 'files left in /dev/shm');
          const gap = (t.details.after_gap_paths as Array<Record<string, number>>).map((x) => JSON.stringify(x)).join(' ');
          t.summary(
            `restart seen by the health check: then ${gap}; restart in place between health checks: then ${after.map((v) => JSON.stringify(v.paths)).join(' ')}`,
          );
        } finally {
          await r2.proc.stop();
          await front.close();
        }
      },
      120,
    );
  });
}
