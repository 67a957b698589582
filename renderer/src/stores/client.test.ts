// The one client every store talks through: what it says before the page connected, and the
// words an operator is shown for a failed call.
import { describe, expect, it, vi } from 'vitest';
import { ContractError } from '../../../core/console/contract.ts';

describe('the console client of the stores', () => {
  it('before the page connected, a call says so', async () => {
    vi.resetModules();
    const { client } = await import('./client.ts');
    expect(() => client()).toThrow('the console client is not connected yet');
  });

  it("a failed call is told in the backend's own words, whatever was thrown", async () => {
    const { describeError } = await import('./client.ts');
    expect(describeError(new ContractError('busy', 'a calibration is already running; wait for it to finish'))).toBe(
      'a calibration is already running; wait for it to finish',
    );
    expect(describeError(new TypeError('Failed to fetch'))).toBe('Failed to fetch');
    expect(describeError('socket closed')).toBe('socket closed');
  });
});
