// Navigation, toasts and the one review dialog. Every change to the router goes through
// requestReview: the dialog shows what the change will do (the diff from config.diff, or
// the diff the caller already has), applies only on confirmation, and then a toast names
// the new revision with an Undo that is itself a reviewed rollback (docs/console.md, "Every
// change is reviewed, Undo too").
import { create } from 'zustand';
import type { ApplyResult, ConfigDraft, DiffEntry, RouterConfig, WorkerWarning } from '../../../core/console/contract.ts';

export const SCREENS = ['overview', 'router', 'workers', 'precedence', 'traffic', 'doctor', 'yaml', 'history', 'requests'] as const;
export type Screen = (typeof SCREENS)[number];

export interface Route {
  screen: Screen;
  params: Record<string, string>;
}

export function parseRoute(hash: string): Route {
  const [path = '', query = ''] = hash.replace(/^#\/?/, '').split('?');
  const screen = (SCREENS as readonly string[]).includes(path) ? (path as Screen) : 'overview';
  return { screen, params: Object.fromEntries(new URLSearchParams(query)) };
}

export function routeHref(screen: Screen, params: Record<string, string> = {}): string {
  const q = new URLSearchParams(params).toString();
  return `#/${screen}${q ? `?${q}` : ''}`;
}

export interface Toast {
  id: number;
  kind: 'success' | 'error' | 'info';
  title: string;
  body?: string;
  action?: { label: string; run: () => void };
}

export interface ReviewRequest {
  title: string;
  /** One line on what is about to happen. */
  intro: string;
  /** The config the change leads to: the dialog asks config.diff for the preview. */
  proposed?: ConfigDraft | { yaml: string };
  /** A diff the caller already has (drift reload, rollback). */
  diff?: DiffEntry[];
  /** What the caller already knows the change causes beyond the diff (a reload's warnings); with `proposed`, config.diff says. */
  consequences?: { untilRestart: DiffEntry[]; warnings: WorkerWarning[] };
  confirmLabel: string;
  run: () => Promise<ApplyResult>;
  /** Called after a successful apply, before the toast. */
  onApplied?: (result: ApplyResult) => void;
  /** Offered after a conflict: carry the change onto the current revision. */
  onRebase?: () => void;
  /** What Undo in the toast rolls back to (the revision this change was based on). */
  undo?: { toRevision: number; config?: RouterConfig };
  /** The control that opened the review: focus returns to it after an apply (set by requestReview). */
  opener?: HTMLElement | null;
}

interface UiState {
  route: Route;
  toasts: Toast[];
  review: ReviewRequest | null;
  connection: 'idle' | 'connecting' | 'open' | 'reconnecting';
  binding: 'ipc' | 'http' | null;
  navigate(screen: Screen, params?: Record<string, string>): void;
  setRoute(route: Route): void;
  toast(t: Omit<Toast, 'id'>, ms?: number): number;
  dismiss(id: number): void;
  requestReview(r: ReviewRequest): void;
  closeReview(): void;
}

let nextToast = 1;

export const useUi = create<UiState>((set, get) => ({
  route: parseRoute(typeof location === 'undefined' ? '' : location.hash),
  toasts: [],
  review: null,
  connection: 'idle',
  binding: null,
  navigate(screen, params = {}) {
    const href = routeHref(screen, params);
    if (typeof location !== 'undefined' && location.hash !== href) location.hash = href;
    set({ route: { screen, params } });
  },
  setRoute: (route) => set({ route }),
  toast(t, ms = 8000) {
    const id = nextToast++;
    set({ toasts: [...get().toasts, { ...t, id }].slice(-5) });
    if (ms > 0) setTimeout(() => get().dismiss(id), ms);
    return id;
  },
  dismiss: (id) => set({ toasts: get().toasts.filter((t) => t.id !== id) }),
  requestReview: (review) =>
    set({
      review: {
        ...review,
        opener:
          review.opener ??
          (typeof document !== 'undefined' && document.activeElement instanceof HTMLElement && document.activeElement !== document.body
            ? document.activeElement
            : null),
      },
    }),
  closeReview: () => set({ review: null }),
}));
