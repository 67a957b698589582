// The `auto` checklist for one worker, step by step as the decision depends on it: can the
// router reach the worker, does its protocol have a /dev/shm lane at all (its engine says; a
// runtime without one travels inline whatever the rest says), does the worker advertise a
// /dev/shm namespace token, is it the same boot (host) and the same /dev/shm (st_dev), can the
// router write to /dev/shm, and — the proof — can the worker read a file the router writes:
// one small request through the real pipeline with SHM forced, whose encoder tensor must
// arrive through /dev/shm. Each step passes or fails with what was found and what to do; a step
// that cannot be judged because an earlier one failed is not checked (ok: null).
import { capabilitiesOf, declaredRuntime } from '../engines/table.ts';
import { runChatInMemory } from '../router/chat.ts';
import { compareNamespaceTokens } from '../transport/namespace.ts';
import { ShmWriter } from '../transport/shm-writer.ts';
import { DECISION_ADVICE } from '../transport/vocabulary.ts';
import { criticalStates } from '../router/critical.ts';
import type { CriticalState } from '../router/critical-schema.ts';
import type { TransportDecision } from '../transport/decision.ts';
import { probeWorker } from '../workers/discovery.ts';
import { inRotation, outOfRotationReason } from '../workers/registry.ts';
import type { CommandOutput } from './contract.ts';
import { decisionView } from './decision-view.ts';
import type { ConsoleState } from './state.ts';
import { syntheticChat } from './test-image.ts';
import { workerTransport } from './views.ts';

type Diagnosis = CommandOutput<'workers.diagnose'>;
type Step = Diagnosis['steps'][number];

const skip = (id: Step['id'], label: string, why: string): Step => ({ id, label, ok: null, detail: `not checked: ${why}` });

/** The token steps: advertised, same host, same /dev/shm. */
function tokenSteps(state: ConsoleState, reachable: boolean, theirs: string | undefined, byLabel: boolean): Step[] {
  const steps: Step[] = [
    reachable
      ? {
          id: 'token_advertised',
          label: 'the worker advertises a /dev/shm namespace token',
          ok: theirs !== undefined && theirs !== '',
          detail: theirs ? `${theirs}${byLabel ? ' (set by the worker label shm_namespace_id)' : ''}` : 'no shm_namespace_id in its server info',
          ...(theirs ? {} : { remedy: DECISION_ADVICE.auto_worker_no_token! }),
        }
      : skip('token_advertised', 'the worker advertises a /dev/shm namespace token', 'the worker was not reached'),
  ];
  // A token set by the operator's label is compared even while the worker is not reached.
  // The comparison auto's verdict makes (compareNamespaceTokens), shown step by step.
  const { match, router, worker } = compareNamespaceTokens(state.running.context.host.routerToken, theirs);
  if (match === 'router_has_none' || match === 'missing') {
    const why =
      match === 'router_has_none' ? `the router has no token (${state.running.namespace.problem ?? 'unknown'})` : 'there is no worker token to compare';
    return [...steps, skip('same_boot_id', 'same host (boot_id)', why), skip('same_st_dev', 'same /dev/shm (st_dev)', why)];
  }
  const sameBoot = match === 'equal' || match === 'different_shm';
  const bootDetail = sameBoot
    ? (router?.bootId ?? String(theirs))
    : router && worker
      ? `router ${router.bootId}, worker ${worker.bootId}`
      : `the worker's token ${theirs} is not <boot_id>:<st_dev>, so it names no host of ours`;
  steps.push({
    id: 'same_boot_id',
    label: 'same host (boot_id)',
    ok: sameBoot,
    detail: bootDetail,
    ...(sameBoot ? {} : { remedy: DECISION_ADVICE.auto_different_host! }),
  });
  if (!sameBoot) return [...steps, skip('same_st_dev', 'same /dev/shm (st_dev)', 'the worker is on another host')];
  const sameDev = match === 'equal';
  steps.push({
    id: 'same_st_dev',
    label: 'same /dev/shm (st_dev)',
    ok: sameDev,
    detail: sameDev ? `st_dev ${router?.stDev ?? '?'}` : `router st_dev ${router?.stDev ?? '?'}, worker st_dev ${worker?.stDev ?? '?'}`,
    ...(sameDev ? {} : { remedy: DECISION_ADVICE.auto_different_shm! }),
  });
  return steps;
}

/**
 * The proof: one small request with SHM forced; its encoder tensor must arrive through /dev/shm.
 * `down`: the roles with no healthy worker now (critical.ts): a probe refused for one of them
 * failed for that reason, not for /dev/shm, and its remedy is theirs.
 */
async function probeFileRead(state: ConsoleState, url: string, down: readonly CriticalState[]): Promise<{ step: Step; refusedByRole: boolean }> {
  const ctx = state.running.context;
  const chat = await runChatInMemory(ctx, await syntheticChat(64, 64, 'png'), {
    source: 'console',
    worker: url,
    transport: { mode: 'shm', minBytes: 1024 },
    probe: true,
  });
  const events = chat.requestId ? ctx.events.recent().filter((e) => e.requestId === chat.requestId) : [];
  const encoder = events.find((e) => e.nbytes >= 1024);
  const viaShm = chat.status === 200 && encoder?.path === 'shm';
  const error =
    chat.status === 200
      ? (encoder?.detail ?? `the tensor went ${encoder?.path ?? 'nowhere'}`)
      : ((JSON.parse(chat.body || '{}') as { error?: { message?: string } }).error?.message ?? `HTTP ${chat.status}`);
  const refusedByRole = !viaShm && chat.status === 503 && down.length > 0;
  const step: Step = {
    id: 'probe_file_read',
    label: 'the worker reads a file the router writes',
    ok: viaShm,
    detail: viaShm ? `a ${encoder.nbytes}-byte tensor went through ${ctx.writer.dir} and the worker answered` : error,
    ...(viaShm
      ? {}
      : {
          remedy: refusedByRole
            ? down.map((c) => c.remedy).join('; ')
            : "the worker must see the same /dev/shm (run it with --ipc=host or mount the host's /dev/shm) and be allowed to open the router's files; see the error",
        }),
  };
  return { step, refusedByRole };
}

export async function diagnoseWorker(state: ConsoleState, url: string): Promise<Diagnosis> {
  const ctx = state.running.context;
  const snapshot = state.store.current();
  const spec = snapshot.config.workers.find((w) => w.url === url)!;
  const worker = ctx.registry.get(url);
  const steps: Step[] = [];
  const down = criticalStates(ctx).filter((c) => c.kind === 'no_healthy_worker');
  let refusedByRole = false;

  const declared = declaredRuntime(spec.runtime);
  const probe = await probeWorker(url, declared ? { runtime: declared } : {});
  const reachable = probe.reachable && probe.runtime !== undefined && !probe.error;
  steps.push({
    id: 'reachable',
    label: 'the router reaches the worker',
    ok: reachable,
    detail: reachable
      ? `answers as ${probe.runtime}${probe.healthy === false ? ` but reports unhealthy: ${probe.healthMessage}` : ''}`
      : (probe.error ?? 'no answer'),
    ...(reachable ? {} : { remedy: DECISION_ADVICE.auto_worker_unreachable! }),
  });
  const runtime = probe.runtime ?? worker?.runtime ?? declared;
  const capabilities = runtime ? capabilitiesOf(runtime) : undefined;
  if (capabilities && !capabilities.shmLane) {
    // Nothing below can change the outcome: the protocol has no field for a /dev/shm handle.
    const why = `${capabilities.label} has no /dev/shm lane`;
    steps.push({
      id: 'protocol_lane',
      label: "the worker's protocol has a /dev/shm lane",
      ok: false,
      detail: `${capabilities.label} carries tensors inline only (its TensorData has no /dev/shm handle)`,
      remedy: DECISION_ADVICE.runtime_inline_only!,
    });
    steps.push(
      skip('token_advertised', 'the worker advertises a /dev/shm namespace token', why),
      skip('same_boot_id', 'same host (boot_id)', why),
      skip('same_st_dev', 'same /dev/shm (st_dev)', why),
    );
    steps.push(
      skip('shm_writable', `the router can create files in ${ctx.writer.dir}`, why),
      skip('probe_file_read', 'the worker reads a file the router writes', why),
    );
  } else {
    if (capabilities)
      steps.push({
        id: 'protocol_lane',
        label: "the worker's protocol has a /dev/shm lane",
        ok: true,
        detail: `${capabilities.label}: ${capabilities.tokenAdvertisedIn ? `advertises its token in ${capabilities.tokenAdvertisedIn}` : 'a /dev/shm handle per tensor'}`,
      });
    // An operator label overrides what the worker advertises, as in discovery.
    const theirs = spec.labels.shm_namespace_id ?? probe.labels.shm_namespace_id;
    steps.push(...tokenSteps(state, reachable, theirs, spec.labels.shm_namespace_id !== undefined));
    const writable = new ShmWriter({ dir: ctx.writer.dir }).probe();
    steps.push({
      id: 'shm_writable',
      label: `the router can create files in ${ctx.writer.dir}`,
      ok: writable.writable,
      detail: writable.writable ? 'a probe file was created and removed' : writable.error!,
      ...(writable.writable ? {} : { remedy: DECISION_ADVICE.shm_not_writable! }),
    });
    if (!reachable || !writable.writable || !inRotation(worker)) {
      steps.push(
        skip(
          'probe_file_read',
          'the worker reads a file the router writes',
          !reachable
            ? 'the worker was not reached'
            : !writable.writable
              ? '/dev/shm is not writable'
              : `the router takes no request to it now (${outOfRotationReason(worker) ?? 'not yet discovered'})`,
        ),
      );
    } else {
      const proof = await probeFileRead(state, url, down);
      steps.push(proof.step);
      refusedByRole = proof.refusedByRole;
    }
  }

  if (worker?.shmLane) {
    steps.push({
      id: 'shm_lane',
      label: "the router's requests to it use /dev/shm",
      ok: false,
      detail: `a request failed to read its files at ${new Date(worker.shmLane.since).toISOString()}: ${worker.shmLane.error}`,
      remedy: DECISION_ADVICE.auto_worker_read_failed!,
    });
  }
  // The verdict follows the steps: a worker the router does not reach gets no request; one out
  // of rotation by its registry gets the verdict every screen gives it (not healthy, or drained:
  // views.ts workerTransport); one whose probe a role with no healthy worker refused gets none that way.
  const decision: Pick<TransportDecision, 'shmEnabled' | 'reason'> = !reachable
    ? { shmEnabled: false, reason: 'worker_not_healthy' }
    : !inRotation(worker)
      ? workerTransport(state, spec, snapshot.config, snapshot, snapshot.origins, worker).decision
      : refusedByRole
        ? { shmEnabled: false, reason: 'route_not_healthy' }
        : workerTransport(state, spec, snapshot.config, snapshot, snapshot.origins, worker).decision;
  return { url, steps, verdict: decisionView(decision) };
}
