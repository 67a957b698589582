// The tensors the last request to one worker sent that worker (Precedence's sample of real
// sizes): only that worker's own events (under disaggregation a request's other legs went to
// other workers: an encode worker gets the images' encoder inputs, the prefill and decode
// workers their metadata), and of a leg sent again inline after a failed /dev/shm read only the
// attempt the worker read, so no tensor shows twice. Oldest first, as they were sent.
import type { TensorEvent } from '../../../core/console/contract.ts';

type Row = Pick<TensorEvent, 'requestId' | 'worker' | 'tensor' | 'nbytes' | 'attempt' | 'room' | 'leg'>;

/** `rows`: newest first, as the traffic store keeps them. */
export function lastRequestTensors<E extends Row>(rows: readonly E[], url: string): E[] {
  const latest = rows.find((e) => e.worker === url);
  if (!latest) return [];
  const mine = rows.filter((e) => e.requestId === latest.requestId && e.worker === url).reverse();
  // Each leg (an image's encode call has a room of its own) is retried on its own: keep its last attempt.
  const legOf = (e: E) => `${e.leg ?? ''}|${e.room ?? ''}`;
  const lastAttempt = new Map<string, number>();
  for (const e of mine) lastAttempt.set(legOf(e), Math.max(lastAttempt.get(legOf(e)) ?? 1, e.attempt ?? 1));
  return mine.filter((e) => (e.attempt ?? 1) === lastAttempt.get(legOf(e)));
}
