// Applied revisions (config.history), newest first.
import { create } from 'zustand';
import type { CommandOutput } from '../../../core/console/contract.ts';
import { client, describeError } from './client.ts';

export type HistoryEntry = CommandOutput<'config.history'>['entries'][number];

interface HistoryState {
  entries: HistoryEntry[];
  loaded: boolean;
  error: string | null;
  load(): Promise<void>;
}

export const useHistory = create<HistoryState>((set) => ({
  entries: [],
  loaded: false,
  error: null,
  async load() {
    try {
      const r = await client().call('config.history', {});
      set({ entries: r.entries, loaded: true, error: null });
    } catch (err) {
      set({ error: describeError(err), loaded: true });
    }
  },
}));
