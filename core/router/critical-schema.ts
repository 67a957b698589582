// The shape of the router's critical states (core/router/critical.ts): zod only, so the
// console contract and the renderer share it, and of the /health answer that reports them.
import { z } from 'zod';
import { WorkerTypeSchema } from '../config/schema.ts';

/** Requests that end in failure, in a row, that make "every recent request fails" (all of them within FAILING_WINDOW_MS). */
export const FAILING_REQUESTS = 5;
export const FAILING_WINDOW_MS = 60_000;

export const CriticalStateSchema = z.object({
  /** no_healthy_worker: a role the serving mode needs has no worker a request can be sent to; requests_failing: the last FAILING_REQUESTS requests all failed. */
  kind: z.enum(['no_healthy_worker', 'requests_failing']),
  /** The role with no healthy worker (regular when not disaggregated); null for requests_failing. */
  role: WorkerTypeSchema.nullable(),
  /** Which requests fail: every one, or (no healthy encode worker under EPD) every one with an image. */
  fails: z.enum(['every_request', 'image_requests']),
  /** The workers it is about, each with what is wrong with it (the role's workers; the failing requests' workers). */
  workers: z.array(z.object({ url: z.string(), error: z.string() })),
  /** The state in words: what is wrong, and what fails because of it. */
  message: z.string(),
  /** What the operator can do about it. */
  remedy: z.string(),
});
export type CriticalState = z.infer<typeof CriticalStateSchema>;

/** /health's status: ok; degraded (some or all requests fail, yet the router can serve some: 200); unavailable (no request can succeed: 503). */
export const HEALTH_STATUSES = ['ok', 'degraded', 'unavailable'] as const;
export type HealthStatus = (typeof HEALTH_STATUSES)[number];
