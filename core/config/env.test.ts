import { describe, expect, it } from 'vitest';
import { readTransportEnvironment } from './env.ts';

describe('environment layer', () => {
  it('reads the canonical variables, trimmed and case-insensitive', () => {
    const env = readTransportEnvironment({ SMG_MM_TENSOR_TRANSPORT: '  SHM ', SMG_MM_SHM_MIN_BYTES: ' 4096 ' });
    expect(env.multimodal_tensor_transport.value).toBe('shm');
    expect(env.multimodal_tensor_transport.source).toBe('env');
    expect(env.multimodal_shm_min_bytes.value).toBe(4096);
    expect(env.warnings).toEqual([]);
  });

  it('falls back to the deprecated alias with one warning naming both variables', () => {
    const env = readTransportEnvironment({ SMG_TOKENSPEED_MM_TENSOR_TRANSPORT: 'auto', SMG_TOKENSPEED_MM_SHM_MIN_BYTES: '0' });
    expect(env.multimodal_tensor_transport).toMatchObject({ value: 'auto', source: 'env_legacy' });
    expect(env.multimodal_shm_min_bytes).toMatchObject({ value: 0, source: 'env_legacy' });
    expect(env.warnings).toEqual([
      'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT is deprecated; set SMG_MM_TENSOR_TRANSPORT instead',
      'SMG_TOKENSPEED_MM_SHM_MIN_BYTES is deprecated; set SMG_MM_SHM_MIN_BYTES instead',
    ]);
  });

  it('treats a blank canonical variable as unset and reads the alias', () => {
    const env = readTransportEnvironment({ SMG_MM_TENSOR_TRANSPORT: '   ', SMG_TOKENSPEED_MM_TENSOR_TRANSPORT: 'shm' });
    expect(env.multimodal_tensor_transport).toMatchObject({ value: 'shm', source: 'env_legacy' });
    expect(env.multimodal_tensor_transport.canonical.state).toBe('blank');
  });

  it('does not consult the alias when the canonical variable is set but invalid', () => {
    const env = readTransportEnvironment({ SMG_MM_TENSOR_TRANSPORT: 'fast', SMG_TOKENSPEED_MM_TENSOR_TRANSPORT: 'shm' });
    expect(env.multimodal_tensor_transport.value).toBeUndefined();
    expect(env.multimodal_tensor_transport.canonical.state).toBe('invalid');
    expect(env.multimodal_tensor_transport.legacy.state).toBe('not_consulted');
    expect(env.warnings).toEqual([
      "ignoring SMG_MM_TENSOR_TRANSPORT='fast': expected inline, shm, auto or rdma; SMG_TOKENSPEED_MM_TENSOR_TRANSPORT is not consulted while SMG_MM_TENSOR_TRANSPORT is set",
    ]);
  });

  it.each(['64k', '-1', '1.5', 'NaN', '1e6', '0x10', '9007199254740992'])('warns once and ignores the threshold %j', (raw) => {
    const env = readTransportEnvironment({ SMG_MM_SHM_MIN_BYTES: raw });
    expect(env.multimodal_shm_min_bytes.value).toBeUndefined();
    expect(env.warnings).toEqual([`ignoring SMG_MM_SHM_MIN_BYTES='${raw}': expected a non-negative integer number of bytes (e.g. 65536)`]);
  });

  it('an invalid alias warns twice: deprecated, and invalid', () => {
    const env = readTransportEnvironment({ SMG_TOKENSPEED_MM_SHM_MIN_BYTES: 'lots' });
    expect(env.multimodal_shm_min_bytes.value).toBeUndefined();
    expect(env.warnings).toEqual([
      'SMG_TOKENSPEED_MM_SHM_MIN_BYTES is deprecated; set SMG_MM_SHM_MIN_BYTES instead',
      "ignoring SMG_TOKENSPEED_MM_SHM_MIN_BYTES='lots': expected a non-negative integer number of bytes (e.g. 65536)",
    ]);
  });

  it('accepts the largest exact integer threshold', () => {
    expect(readTransportEnvironment({ SMG_MM_SHM_MIN_BYTES: String(Number.MAX_SAFE_INTEGER) }).multimodal_shm_min_bytes.value).toBe(Number.MAX_SAFE_INTEGER);
  });
});
