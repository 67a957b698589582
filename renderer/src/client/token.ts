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

/** Read the token (fragment first, then this tab's storage) and scrub it from the address bar. */
export function takeToken(win: Pick<Window, 'location' | 'history' | 'sessionStorage'> = window): string | undefined {
  const fromHash = tokenFromHash(win.location.hash);
  if (fromHash) {
    try {
      win.sessionStorage.setItem(STORAGE_KEY, fromHash);
    } catch {
      // Storage disabled: the token lives in memory only, a reload needs the URL again.
    }
    win.history.replaceState(null, '', `${win.location.pathname}${win.location.search}#/overview`);
    return fromHash;
  }
  try {
    return win.sessionStorage.getItem(STORAGE_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}
