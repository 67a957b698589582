// Prometheus metrics of the tensor transport, named as SMG names them (docs/transport.md, "Metrics") so existing
// dashboards keep working, plus our SHM write/read latency histograms. Each router owns its
// own Registry (tests and embedded routers never share counters).
import { Counter, Histogram, Registry } from 'prom-client';
import type { TensorPath, WireRuntime } from '../transport/vocabulary.ts';

/** 50 µs .. 250 ms: a 64 KiB write takes ~0.1 ms, a 128 MiB one ~30 ms. */
const LATENCY_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

export class TransportMetrics {
  readonly registry = new Registry();
  readonly tensors = new Counter({ name: 'smg_mm_tensors_total', help: 'Multimodal tensors sent to workers, by runtime and path', labelNames: ['runtime', 'path'] as const, registers: [this.registry] });
  readonly tensorBytes = new Counter({ name: 'smg_mm_tensor_bytes_total', help: 'Bytes of multimodal tensors sent to workers, by runtime and path', labelNames: ['runtime', 'path'] as const, registers: [this.registry] });
  readonly shmWriteFailures = new Counter({ name: 'smg_mm_shm_write_failures_total', help: 'SHM tensor writes that failed and fell back to inline', labelNames: ['runtime'] as const, registers: [this.registry] });
  readonly shmWriteSeconds = new Histogram({
    name: 'smg_mm_shm_write_seconds',
    help: 'Time to create, write and close one SHM tensor file',
    labelNames: ['runtime'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly shmReadSeconds = new Histogram({
    name: 'smg_mm_shm_read_seconds',
    help: 'Time for a worker to open, read and unlink one SHM tensor file',
    labelNames: ['runtime'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  countTensor(runtime: WireRuntime, path: TensorPath, nbytes: number): void {
    this.tensors.inc({ runtime, path });
    this.tensorBytes.inc({ runtime, path }, nbytes);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
