// A screen rendered as the operator would first see it, with its stores in a state the test
// sets: react-dom/server's markup (no DOM, no effects run) and the text it shows. zustand's
// hooks render on the server from a store's initial state (useSyncExternalStore's server
// snapshot is getInitialState()), so for the render the state under test is made the
// store's initial state, and put back after.
import type { ReactElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import type { StoreApi } from 'zustand';

type Store<S> = Pick<StoreApi<S>, 'getInitialState'>;
export interface StoreState {
  apply(): () => void;
}

/** `state` over `store`'s initial state for one render. */
export function withState<S extends object>(store: Store<S>, state: Partial<S>): StoreState {
  return {
    apply() {
      const initial = store.getInitialState();
      const saved = { ...initial };
      Object.assign(initial, state);
      return () => {
        for (const key of Object.keys(initial)) if (!(key in saved)) delete (initial as Record<string, unknown>)[key];
        Object.assign(initial, saved);
      };
    },
  };
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#x27': "'", '#39': "'", nbsp: ' ' };

/** The markup of `element` rendered with `states`, and its text as read (tags gone, whitespace collapsed). */
export function render(element: ReactElement, ...states: StoreState[]): { html: string; text: string } {
  const restores = states.map((s) => s.apply());
  try {
    const html = renderToStaticMarkup(element);
    const text = html
      .replace(/<[^>]+>/g, ' ')
      .replace(/&(#x27|#39|amp|lt|gt|quot|nbsp);/g, (_, e: string) => ENTITIES[e] ?? '')
      .replace(/\s+/g, ' ')
      .trim();
    return { html, text };
  } finally {
    for (const restore of restores.reverse()) restore();
  }
}
