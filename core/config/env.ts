// The environment layer of the transport precedence (docs/configuration.md, "Precedence"),
// read once at start.
//
// For each knob: the canonical variable (SMG_MM_*) when set and non-blank after trimming;
// otherwise the deprecated alias (SMG_TOKENSPEED_MM_*), with one deprecation warning that
// names both. A canonical variable that is set but invalid warns and makes the whole env
// layer absent for that knob: the alias is NOT consulted, so a typo never silently revives
// an old setting. Invalid values never fail start-up; they only warn.
import { formatValue } from './errors.ts';
import { parseLooseKnob } from './loose.ts';
import type { EnvKnobReading, TransportEnvironment } from './env-schema.ts';
import { TRANSPORT_KNOBS, type TransportKnob } from './schema.ts';

function readKnob<K extends TransportKnob>(knob: K, env: Readonly<Record<string, string | undefined>>): EnvKnobReading<K> {
  const { env: canonicalName, legacyEnv: legacyName } = TRANSPORT_KNOBS[knob];
  const canonicalRaw = env[canonicalName];
  const legacyRaw = env[legacyName];
  const reading: EnvKnobReading<K> = {
    knob,
    canonical: { name: canonicalName, raw: canonicalRaw, state: canonicalRaw === undefined ? 'unset' : 'blank' },
    legacy: { name: legacyName, raw: legacyRaw, state: legacyRaw === undefined ? 'unset' : 'blank' },
    warnings: [],
  };

  if (canonicalRaw !== undefined && canonicalRaw.trim() !== '') {
    const parsed = parseLooseKnob(knob, canonicalRaw);
    if (legacyRaw !== undefined) reading.legacy.state = 'not_consulted';
    if (parsed.ok) {
      reading.canonical.state = 'valid';
      reading.value = parsed.value;
      reading.source = 'env';
    } else {
      reading.canonical.state = 'invalid';
      const skipped = legacyRaw !== undefined && legacyRaw.trim() !== '' ? `; ${legacyName} is not consulted while ${canonicalName} is set` : '';
      reading.warnings.push(`ignoring ${canonicalName}=${formatValue(canonicalRaw)}: ${parsed.expected}${skipped}`);
    }
    return reading;
  }

  if (legacyRaw !== undefined && legacyRaw.trim() !== '') {
    reading.warnings.push(`${legacyName} is deprecated; set ${canonicalName} instead`);
    const parsed = parseLooseKnob(knob, legacyRaw);
    if (parsed.ok) {
      reading.legacy.state = 'valid';
      reading.value = parsed.value;
      reading.source = 'env_legacy';
    } else {
      reading.legacy.state = 'invalid';
      reading.warnings.push(`ignoring ${legacyName}=${formatValue(legacyRaw)}: ${parsed.expected}`);
    }
  }
  return reading;
}

/** Pure: what this environment says about both knobs, with the warnings it deserves. */
export function readTransportEnvironment(env: Readonly<Record<string, string | undefined>>): TransportEnvironment {
  const mode = readKnob('multimodal_tensor_transport', env);
  const minBytes = readKnob('multimodal_shm_min_bytes', env);
  return { multimodal_tensor_transport: mode, multimodal_shm_min_bytes: minBytes, warnings: [...mode.warnings, ...minBytes.warnings] };
}

let environmentAtStart: TransportEnvironment | undefined;

/**
 * The process's environment layer, read on first use and then frozen: later changes to
 * process.env do not move resolved values, and each warning is logged exactly once.
 */
export function transportEnvironmentAtStart(warn: (message: string) => void = (m) => process.stderr.write(`warning: ${m}\n`)): TransportEnvironment {
  if (!environmentAtStart) {
    environmentAtStart = readTransportEnvironment(process.env);
    for (const w of environmentAtStart.warnings) warn(w);
  }
  return environmentAtStart;
}
