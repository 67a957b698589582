// The env parser (core/config/env.ts readTransportEnvironment): any environment gives a
// reading, never an exception; a value it takes is valid by the schema; one it refuses is a
// warning naming the variable; a set canonical variable means the deprecated alias is not
// consulted (valid or not).
import { readTransportEnvironment } from '../../../core/config/env.ts';
import { ShmMinBytesSchema, TransportModeSchema } from '../../../core/config/schema.ts';
import { NASTY_STRINGS, type Rng } from '../../lib/rng.ts';
import type { CaseOutcome } from '../harness.ts';

const NAMES = ['SMG_MM_TENSOR_TRANSPORT', 'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT', 'SMG_MM_SHM_MIN_BYTES', 'SMG_TOKENSPEED_MM_SHM_MIN_BYTES'];
const VALUES = [
  'inline',
  'shm',
  'auto',
  'rdma',
  ' SHM ',
  'Auto\n',
  'fast',
  '65536',
  '0',
  ' 1024 ',
  '1e6',
  '64k',
  '-1',
  '1.5',
  '0x10',
  '00012',
  '9007199254740993',
  '99999999999999999999',
  '\u0661\u0662',
  '１２',
  ...NASTY_STRINGS,
];

export function envTarget() {
  return {
    run(rng: Rng): CaseOutcome {
      const env: Record<string, string> = {};
      for (const name of NAMES) if (rng.chance(0.6)) env[name] = rng.chance(0.8) ? rng.pick(VALUES) : rng.string(16);
      const input = JSON.stringify(env);
      const r = readTransportEnvironment(env);
      const m = r.multimodal_tensor_transport;
      const b = r.multimodal_shm_min_bytes;
      if (m.value !== undefined && !TransportModeSchema.safeParse(m.value).success)
        return { kind: 'accepted', problem: `mode ${JSON.stringify(m.value)} is not a mode`, input };
      if (b.value !== undefined && !ShmMinBytesSchema.safeParse(b.value).success)
        return { kind: 'accepted', problem: `threshold ${JSON.stringify(b.value)} is not a byte count`, input };
      for (const k of [m, b]) {
        for (const v of [k.canonical, k.legacy]) {
          if (v.state === 'invalid' && !k.warnings.some((w) => w.includes(v.name)))
            return { kind: 'rejected', problem: `${v.name} is invalid but no warning names it`, input };
        }
        const canonicalSet = k.canonical.raw !== undefined && k.canonical.raw.trim() !== '';
        if (canonicalSet && k.legacy.raw !== undefined && k.legacy.state !== 'not_consulted')
          return { kind: 'accepted', problem: `${k.legacy.name} was consulted although ${k.canonical.name} is set`, input };
        if (canonicalSet && k.source === 'env_legacy') return { kind: 'accepted', problem: 'the alias won over a set canonical variable', input };
      }
      const invalid = [m.canonical, m.legacy, b.canonical, b.legacy].some((v) => v.state === 'invalid');
      return {
        kind: invalid ? 'rejected' : 'accepted',
        label: invalid ? 'warned and ignored' : m.value !== undefined || b.value !== undefined ? 'taken' : 'nothing set',
      };
    },
  };
}
