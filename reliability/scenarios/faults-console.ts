// Console faults: `mmtc serve` SIGKILLed at a random moment during a config apply, again and
// again (the YAML file must be the old one or the new one, never a mix, and a reply of 200
// means the new one is on disk; the next start cleans up and goes on counting revisions),
// and the YAML file edited by hand while the console runs (drift reported, nothing
// overwritten, reload takes it).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseConfigYaml } from '../../core/config/yaml.ts';
import { consoleCall } from '../lib/http.ts';
import { sleep, startServe, startWorker, type Serve } from '../lib/procs.ts';
import { ourFiles } from '../lib/shm.ts';
import type { Suite, T } from '../lib/suite.ts';
import { tempDir } from '../lib/tmp.ts';

export async function consoleFaultsGroup(suite: Suite): Promise<void> {
  await suite.group('faults', ['serve-killed-during-apply', 'config-drift'], async () => {
    const worker = await startWorker('tokenspeed');
    await suite.run('faults/serve-killed-during-apply', (t) => killedDuringApply(t, worker.url), { seeded: true, maxSeconds: suite.short ? 120 : 400 });
    await suite.run('faults/config-drift', (t) => drift(t, worker.url), { maxSeconds: 90 });
  });
}

function setup(workerUrl: string): { dir: string; file: string; start: () => Promise<Serve> } {
  const dir = tempDir('console');
  const file = path.join(dir, 'router.yaml');
  writeFileSync(
    file,
    `# operator's notes: keep this comment\nmultimodal_tensor_transport: auto # inline comment\nmultimodal_shm_min_bytes: 65536\nhealth_check_interval_secs: 5\nworkers:\n  - url: ${workerUrl}\n    labels:\n      zone: a\n`,
  );
  return { dir, file, start: () => startServe(['--config', file], { env: { XDG_CONFIG_HOME: dir }, name: 'serve (console faults)' }) };
}

async function killedDuringApply(t: T, workerUrl: string): Promise<void> {
  const { dir, file, start } = setup(workerUrl);
  const iterations = t.short ? 12 : 40;
  const outcomes = { old: 0, new: 0, mixed: 0, replied200: 0, tempFilesLeft: 0, tempFilesCleaned: 0 };
  const delays: number[] = [];
  let serve = await start();
  let lastRevision = 0;
  try {
    // How long an apply takes here, so the kills land before, during and after the write.
    const probe = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json;
    const applyMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const r = await consoleCall(serve.consoleUrl, serve.token, 'config.apply', {
        draft: { ...probe.config, health_check_interval_secs: 5 + i + 1 },
        expectedRevision: probe.revision + i,
      });
      applyMs.push(performance.now() - t0);
      t.check(r.status === 200, `a plain apply failed: ${r.status} ${r.body.slice(0, 200)}`);
    }
    const window = Math.max(2, Math.ceil(Math.max(...applyMs) * 1.5));
    t.note(
      'apply_ms',
      applyMs.map((x) => Math.round(x * 10) / 10),
    );
    for (let i = 0; i < iterations; i++) {
      const view = (await consoleCall(serve.consoleUrl, serve.token, 'config.get', {})).json;
      t.check(view.revision > lastRevision, `iteration ${i}: revision ${view.revision} after a restart must be above ${lastRevision}`);
      lastRevision = view.revision;
      const oldText = readFileSync(file, 'utf8');
      const draft = {
        ...view.config,
        health_check_interval_secs: t.rng.int(1, 600) / 10,
        multimodal_shm_min_bytes: t.rng.int(0, 1 << 22),
        workers: view.config.workers.map((w: Record<string, unknown>) => ({ ...w, labels: { zone: `z${t.rng.int(0, 99)}` } })),
      };
      const delay = t.rng.int(0, window);
      delays.push(delay);
      const reply = consoleCall(serve.consoleUrl, serve.token, 'config.apply', { draft, expectedRevision: view.revision });
      if (delay > 0) await sleep(delay);
      await serve.proc.stop('SIGKILL');
      const r = await reply;
      const text = readFileSync(file, 'utf8');
      let parsed;
      try {
        parsed = parseConfigYaml(text, file).config;
      } catch (err) {
        t.check(false, `iteration ${i} (kill after ${delay} ms): the file does not parse: ${(err as Error).message}`);
        outcomes.mixed += 1;
      }
      if (parsed) {
        const isOld = text === oldText;
        const isNew =
          parsed.health_check_interval_secs === draft.health_check_interval_secs &&
          parsed.multimodal_shm_min_bytes === draft.multimodal_shm_min_bytes &&
          parsed.workers[0]!.labels.zone === draft.workers[0].labels.zone;
        if (isOld) outcomes.old += 1;
        else if (isNew) outcomes.new += 1;
        else {
          outcomes.mixed += 1;
          t.check(false, `iteration ${i} (kill after ${delay} ms): the file is neither the old nor the new config: ${text.slice(0, 300)}`);
        }
        if (isNew)
          t.check(
            text.includes("# operator's notes: keep this comment") && text.includes('# inline comment'),
            `iteration ${i}: the new file lost the operator's comments`,
          );
        if (r.status === 200) {
          outcomes.replied200 += 1;
          t.check(isNew, `iteration ${i}: the apply answered 200 but the file on disk is not the new config`);
        }
      }
      const temps = () => readdirSync(dir).filter((n) => n.endsWith('.tmp'));
      if (temps().length > 0) outcomes.tempFilesLeft += 1;
      serve = await start();
      if (outcomes.tempFilesLeft > outcomes.tempFilesCleaned && temps().length === 0) outcomes.tempFilesCleaned += 1;
      t.check(temps().length === 0, `iteration ${i}: temp files after the restart: ${temps()}`);
    }
    const history = (await consoleCall(serve.consoleUrl, serve.token, 'config.history', {})).json;
    t.check(Array.isArray(history.entries) && history.entries.length > 0, 'the history does not load after the kills');
    t.check(ourFiles('/dev/shm').length === 0, 'files left in /dev/shm');
    t.note('iterations', iterations);
    t.note('outcomes', outcomes);
    t.note('kill_delays_ms', delays);
    t.note('history_entries', history.entries.length);
    t.summary(
      `${iterations} kills 0–${window} ms into an apply (an apply takes ${applyMs.map((x) => x.toFixed(0)).join('/')} ms): file old ${outcomes.old}, new ${outcomes.new}, mixed ${outcomes.mixed}; ${outcomes.replied200} applies answered 200 before the kill and were on disk; temp files left by a kill ${outcomes.tempFilesLeft}, removed at the next start ${outcomes.tempFilesCleaned}; revisions kept counting up (${lastRevision}); history readable (${history.entries.length} entries)`,
    );
  } finally {
    await serve.proc.stop();
  }
}

async function drift(t: T, workerUrl: string): Promise<void> {
  const { file, start } = setup(workerUrl);
  const serve = await start();
  const call = (command: string, input: unknown) => consoleCall(serve.consoleUrl, serve.token, command, input);
  try {
    const view = (await call('config.get', {})).json;
    const handEdited =
      readFileSync(file, 'utf8').replace('multimodal_shm_min_bytes: 65536', 'multimodal_shm_min_bytes: 131072 # raised by hand') +
      '# edited by hand while the console runs\n';
    writeFileSync(file, handEdited);
    const ov = (await call('overview', {})).json;
    const got = (await call('config.get', {})).json;
    const refused = await call('config.apply', { draft: { ...view.config, health_check_interval_secs: 7 }, expectedRevision: view.revision });
    const afterRefusal = readFileSync(file, 'utf8');
    t.check(
      ov.warnings.some((w: { kind: string }) => w.kind === 'config_drift') && ov.config.drifted === true,
      `the overview must report the drift: ${JSON.stringify(ov.warnings.map((w: { kind: string }) => w.kind))}`,
    );
    t.check(
      got.file.drifted === true &&
        JSON.stringify(got.file.driftDiff) === JSON.stringify([{ path: 'multimodal_shm_min_bytes', kind: 'changed', before: 65536, after: 131072 }]),
      `config.get must show what changed on disk: ${JSON.stringify(got.file)}`,
    );
    t.check(
      refused.status === 409 && refused.json?.error?.code === 'file_drift',
      `an apply over a drifted file must be refused with file_drift: ${refused.status} ${refused.body.slice(0, 200)}`,
    );
    t.check(afterRefusal === handEdited, 'the hand-edited file was overwritten');
    // An invalid hand edit: reported with its issues, still never overwritten.
    const broken = `${handEdited}multimodal_tensor_transport: [oops\n`;
    writeFileSync(file, broken);
    const gotBroken = (await call('config.get', {})).json;
    const refused2 = await call('config.apply', { draft: { ...view.config, health_check_interval_secs: 8 }, expectedRevision: view.revision });
    t.check(
      gotBroken.file.drifted === true &&
        gotBroken.file.driftIssues.length > 0 &&
        gotBroken.file.driftIssues.every((i: { line?: number }) => typeof i.line === 'number'),
      `a broken hand edit must be reported with positioned issues: ${JSON.stringify(gotBroken.file.driftIssues)}`,
    );
    const brokenAfter = readFileSync(file, 'utf8');
    t.check(refused2.status === 409 && brokenAfter === broken, 'the broken file was overwritten or the apply not refused');
    // Fixed by hand again, then reloaded: the file's value is taken, and the file left as the operator wrote it.
    writeFileSync(file, handEdited);
    const reload = await call('config.reloadFile', { expectedRevision: view.revision });
    const after = (await call('config.get', {})).json;
    t.check(
      reload.status === 200 && after.config.multimodal_shm_min_bytes === 131072 && after.file.drifted === false,
      `reload must take the hand edit: ${reload.status} ${reload.body.slice(0, 200)}`,
    );
    // The reload saves the file it took; the operator's text must come back as written (the YAML
    // library may add a blank line before a trailing comment, nothing else).
    const reloaded = readFileSync(file, 'utf8');
    t.check(reloaded.replace(/\n\n/g, '\n') === handEdited.replace(/\n\n/g, '\n'), `the reload changed the operator's text:\n${reloaded}`);
    t.note('reload_rewrote_file', reloaded !== handEdited);
    const apply = await call('config.apply', { draft: { ...after.config, health_check_interval_secs: 9 }, expectedRevision: after.revision });
    const final = readFileSync(file, 'utf8');
    t.check(
      apply.status === 200 &&
        final.includes('# raised by hand') &&
        final.includes('# edited by hand while the console runs') &&
        final.includes('health_check_interval_secs: 9'),
      `an apply after the reload must keep the hand edits: ${apply.status} ${final}`,
    );
    t.note('drift_diff', got.file.driftDiff);
    t.note('refused', refused.json?.error?.code);
    t.note('broken_issues', gotBroken.file.driftIssues);
    const warned = ov.warnings.some((w: { kind: string }) => w.kind === 'config_drift');
    const keptComments = final.includes('# raised by hand') && final.includes('# edited by hand while the console runs');
    t.summary(
      `hand edit seen: overview ${warned ? 'warns config_drift' : 'does NOT warn'}, config.get shows ${JSON.stringify(got.file.driftDiff)}; apply refused ${refused.status} ${refused.json?.error?.code}, file ${afterRefusal === handEdited ? 'untouched' : 'OVERWRITTEN'}; a broken edit reported at line ${gotBroken.file.driftIssues[0]?.line}, apply ${refused2.status}, file ${brokenAfter === broken ? 'untouched' : 'OVERWRITTEN'}; reload ${reload.status} took ${after.config.multimodal_shm_min_bytes}, then an apply (${apply.status}) ${keptComments ? 'kept both hand comments' : 'LOST the hand comments'}`,
    );
  } finally {
    await serve.proc.stop();
  }
}
