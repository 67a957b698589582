// Words the screens use for the transport's vocabulary. The closed sets come from the
// contract (TRANSPORT_MODES, TRANSPORT_KNOBS, describeReason); this only adds the one-line
// explanation of each mode shown next to the choice (docs/configuration.md, "Transport modes").
import { TRANSPORT_KNOBS, TRANSPORT_MODES } from '../../../core/admin/contract.ts';

export type Mode = (typeof TRANSPORT_MODES)[number];

export const MODE_HELP: Record<Mode, string> = {
  inline: 'Tensor bytes ride inside the gRPC message. Always works, copies every byte through the socket.',
  shm: 'Tensors at or above the threshold go through /dev/shm whenever the router can write there: you assert the worker shares it.',
  auto: 'Like shm, but only for workers that prove they share this /dev/shm (same namespace token); others stay inline.',
  rdma: 'Accepted for compatibility with the gateway; there is no RDMA lane yet, so tensors travel inline.',
};

export const KNOB_LABEL: Record<keyof typeof TRANSPORT_KNOBS, string> = {
  multimodal_tensor_transport: 'Transport mode',
  multimodal_shm_min_bytes: 'SHM threshold',
};

export const LAYER_LABEL: Record<string, string> = {
  worker: 'worker override',
  router: 'router config',
  env: 'environment',
  env_legacy: 'environment (deprecated alias)',
  default: 'built-in default',
};

export { TRANSPORT_KNOBS, TRANSPORT_MODES };
