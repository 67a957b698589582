// The console token of the browser binding. `mmtc serve` prints a URL ending in
// `#token=…`: a fragment, which browsers never send to a server. On load we take it from
// the fragment, remove it from the address bar at once (history.replaceState, so it is in
// no later URL, bookmark or screenshot), and keep it in sessionStorage so a reload of the
// same tab still works; a new tab needs the printed URL again.
const STORAGE_KEY = 'mmtc.console.token';

export interface TokenLocation {
  hash: string;
  pathname: string;
  search: string;
}

/** The token in a fragment like `#token=abc` or `#token=abc&screen=traffic`. */
export function tokenFromHash(hash: string): string | undefined {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const token = params.get('token');
  return token && token.trim() !== '' ? token.trim() : undefined;
}

/** Keep a token for this tab (survives a reload of the tab, never sent to the server but in the Authorization header). */
export function rememberToken(token: string, win: Pick<Window, 'sessionStorage'> = window): void {
  try {
    win.sessionStorage.setItem(STORAGE_KEY, token);
  } catch {
    // Storage disabled: the token lives in memory only, a reload needs the URL again.
  }
}

/**
 * A token that arrived in the address bar after the page loaded (the operator pasted a newly
 * printed URL into this tab: only the fragment changed, so the browser did not reload): kept
 * for the tab and scrubbed from the address bar, the screen in the fragment (if any) kept.
 */
export function takeNewToken(win: Pick<Window, 'location' | 'history' | 'sessionStorage'> = window): string | undefined {
  const token = tokenFromHash(win.location.hash);
  if (!token) return undefined;
  rememberToken(token, win);
  const screen = new URLSearchParams(win.location.hash.replace(/^#/, '')).get('screen');
  win.history.replaceState(null, '', `${win.location.pathname}${win.location.search}#/${screen && /^[a-z]+$/.test(screen) ? screen : 'overview'}`);
  return token;
}

/** Read the token (fragment first, then this tab's storage) and scrub it from the address bar. */
export function takeToken(win: Pick<Window, 'location' | 'history' | 'sessionStorage'> = window): string | undefined {
  const fromHash = takeNewToken(win);
  if (fromHash) return fromHash;
  try {
    return win.sessionStorage.getItem(STORAGE_KEY) ?? undefined;
  } catch {
    return undefined; // storage disabled: no remembered token, the URL's fragment is needed
  }
}
