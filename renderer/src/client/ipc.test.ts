import { describe, expect, it } from 'vitest';
import { ContractError, type IpcBridge } from '../../../core/console/contract.ts';
import { createIpcClient } from './ipc.ts';

describe('IPC console client', () => {
  it('unwraps results and rebuilds errors the bridge resolves with', async () => {
    const bridge = {
      binding: 'ipc',
      invoke: async (command: string) =>
        command === 'overview'
          ? { ok: true, result: { fine: true } }
          : { ok: false, error: { code: 'not_found', message: 'no worker grpc://x:1', path: 'url' } },
      subscribe: (_s: string, l: (p: unknown) => void) => {
        l({ revision: 7 });
        return () => {};
      },
    } as unknown as IpcBridge;
    const client = createIpcClient(bridge);
    expect(await client.call('overview', {})).toEqual({ fine: true });
    const err = await client.call('workers.diagnose', { url: 'grpc://x:1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContractError);
    expect(err).toMatchObject({ code: 'not_found', path: 'url', message: 'no worker grpc://x:1' });
    const got: unknown[] = [];
    client.subscribe('config', (p) => got.push(p));
    expect(got).toEqual([{ revision: 7 }]);
  });
});
