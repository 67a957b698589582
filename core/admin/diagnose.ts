// The `auto` checklist for one worker, step by step as the decision depends on it: can the
// router reach the worker, does the worker advertise a /dev/shm namespace token, is it the
// same boot (host) and the same /dev/shm (st_dev), can the router write to /dev/shm, and —
// the proof — can the worker read a file the router writes: one small request through the
// real pipeline with SHM forced, whose encoder tensor must arrive through /dev/shm. Each step
// passes or fails with what was found and what to do; a step that cannot be judged because
// an earlier one failed is not checked (ok: null).
import { parseNamespaceToken } from '../transport/namespace.ts';
import { transportForWorker } from '../transport/resolve.ts';
import { ShmWriter } from '../transport/shm-writer.ts';
import { DECISION_ADVICE } from '../transport/vocabulary.ts';
import { decisionView } from './decision-view.ts';
import { probeWorker } from '../workers/discovery.ts';
import { runChatInMemory } from '../router/pipeline.ts';
import type { ConsoleState } from './console.ts';
import type { CommandOutput } from './contract.ts';
import { syntheticChat } from './test-image.ts';

type Diagnosis = CommandOutput<'workers.diagnose'>;
type Step = Diagnosis['steps'][number];

export async function diagnoseWorker(state: ConsoleState, url: string): Promise<Diagnosis> {
  const ctx = state.running.context;
  const snapshot = state.store.current();
  const spec = snapshot.config.workers.find((w) => w.url === url)!;
  const steps: Step[] = [];
  const skip = (id: Step['id'], label: string, why: string): Step => ({ id, label, ok: null, detail: `not checked: ${why}` });

  const probe = await probeWorker(url, spec.runtime === 'tokenspeed' || spec.runtime === 'vllm' ? { runtime: spec.runtime } : {});
  const reachable = probe.reachable && probe.runtime !== undefined && !probe.error;
  steps.push({
    id: 'reachable',
    label: 'the router reaches the worker',
    ok: reachable,
    detail: reachable ? `answers as ${probe.runtime}${probe.healthy === false ? ` but reports unhealthy: ${probe.healthMessage}` : ''}` : (probe.error ?? 'no answer'),
    ...(reachable ? {} : { remedy: DECISION_ADVICE.auto_worker_unreachable! }),
  });

  // An operator label overrides what the worker advertises, as in discovery.
  const theirs = spec.labels.shm_namespace_id ?? probe.labels.shm_namespace_id;
  const mine = ctx.host.routerToken;
  if (!reachable) steps.push(skip('token_advertised', 'the worker advertises a /dev/shm namespace token', 'the worker was not reached'));
  else {
    steps.push({
      id: 'token_advertised',
      label: 'the worker advertises a /dev/shm namespace token',
      ok: theirs !== undefined && theirs !== '',
      detail: theirs ? `${theirs}${spec.labels.shm_namespace_id ? ' (set by the worker label shm_namespace_id)' : ''}` : 'no shm_namespace_id in its server info',
      ...(theirs ? {} : { remedy: DECISION_ADVICE.auto_worker_no_token! }),
    });
  }
  const a = mine ? parseNamespaceToken(mine) : undefined;
  const b = theirs ? parseNamespaceToken(theirs) : undefined;
  if (!a || !b) {
    const why = !mine ? `the router has no token (${state.running.namespace.problem ?? 'unknown'})` : 'there is no worker token to compare';
    steps.push(skip('same_boot_id', 'same host (boot_id)', why), skip('same_st_dev', 'same /dev/shm (st_dev)', why));
  } else {
    const sameBoot = a.bootId === b.bootId;
    steps.push({ id: 'same_boot_id', label: 'same host (boot_id)', ok: sameBoot, detail: sameBoot ? a.bootId : `router ${a.bootId}, worker ${b.bootId}`, ...(sameBoot ? {} : { remedy: DECISION_ADVICE.auto_different_host! }) });
    if (!sameBoot) steps.push(skip('same_st_dev', 'same /dev/shm (st_dev)', 'the worker is on another host'));
    else {
      const sameDev = a.stDev === b.stDev;
      steps.push({ id: 'same_st_dev', label: 'same /dev/shm (st_dev)', ok: sameDev, detail: sameDev ? `st_dev ${a.stDev}` : `router st_dev ${a.stDev}, worker st_dev ${b.stDev}`, ...(sameDev ? {} : { remedy: DECISION_ADVICE.auto_different_shm! }) });
    }
  }

  const writable = new ShmWriter({ dir: ctx.writer.dir }).probe();
  steps.push({ id: 'shm_writable', label: `the router can create files in ${ctx.writer.dir}`, ok: writable.writable, detail: writable.writable ? 'a probe file was created and removed' : writable.error!, ...(writable.writable ? {} : { remedy: DECISION_ADVICE.shm_not_writable! }) });

  const worker = ctx.registry.get(url);
  if (!reachable || !writable.writable || !worker?.healthy) {
    steps.push(skip('probe_file_read', 'the worker reads a file the router writes', !reachable ? 'the worker was not reached' : !writable.writable ? '/dev/shm is not writable' : 'the router has not discovered the worker as healthy yet'));
  } else {
    const chat = await runChatInMemory(ctx, await syntheticChat(64, 64, 'png'), { source: 'console', worker: url, transport: { mode: 'shm', minBytes: 1024 }, probe: true });
    const events = chat.requestId ? ctx.events.recent().filter((e) => e.requestId === chat.requestId) : [];
    const encoder = events.find((e) => e.nbytes >= 1024);
    const viaShm = chat.status === 200 && encoder?.path === 'shm';
    const error = chat.status === 200 ? (encoder?.detail ?? `the tensor went ${encoder?.path ?? 'nowhere'}`) : (JSON.parse(chat.body || '{}') as { error?: { message?: string } }).error?.message ?? `HTTP ${chat.status}`;
    steps.push({
      id: 'probe_file_read',
      label: 'the worker reads a file the router writes',
      ok: viaShm,
      detail: viaShm ? `a ${encoder!.nbytes}-byte tensor went through ${ctx.writer.dir} and the worker answered` : error,
      ...(viaShm ? {} : { remedy: 'the worker must see the same /dev/shm (run it with --ipc=host or mount the host\'s /dev/shm) and be allowed to open the router\'s files; see the error' }),
    });
  }

  if (worker?.shmLane) {
    steps.push({ id: 'shm_lane', label: "the router's requests to it use /dev/shm", ok: false, detail: `a request failed to read its files at ${new Date(worker.shmLane.since).toISOString()}: ${worker.shmLane.error}`, remedy: DECISION_ADVICE.auto_worker_read_failed! });
  }
  const { decision } = transportForWorker({ spec, config: snapshot.config, env: snapshot.env, labels: worker?.labels ?? {}, reachable: worker?.healthy ?? false, host: ctx.host, shmLaneBroken: worker?.shmLane?.error });
  return { url, steps, verdict: decisionView(decision) };
}
