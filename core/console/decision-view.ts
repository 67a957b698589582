// A transport decision as the console shows it: whether SHM is on, the reason, the sentence
// an operator reads, what to do about it, and the outcome the next request will have
// (SHM, inline, or SHM attempted and then inline: core/transport/decision.ts). Every screen
// that shows a verdict gets it from here, so none can promise SHM the request will not get.
import { decisionOutcome, type TransportDecision } from '../transport/decision.ts';
import { DECISION_ADVICE, DECISION_REASONS } from '../transport/vocabulary.ts';

export function decisionView(decision: Pick<TransportDecision, 'shmEnabled' | 'reason'>) {
  const advice = DECISION_ADVICE[decision.reason];
  return {
    shmEnabled: decision.shmEnabled,
    reason: decision.reason,
    outcome: decisionOutcome(decision),
    explanation: DECISION_REASONS[decision.reason],
    ...(advice ? { advice } : {}),
  };
}
