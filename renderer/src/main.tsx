// Entry point: connect the client (IPC in Electron, HTTP + WebSocket in a browser), then
// render. csp.ts comes first: zod runs jitless under the page's no-eval CSP.
//
// A console URL pasted into an open tab changes only the fragment, so the browser does not
// reload: a `#token=` that arrives that way is taken at once (the commands and the event
// socket switch to it, and every view refetches), and a page that had no token starts.
import './csp.ts';
import { createRoot } from 'react-dom/client';
import { App, NoToken } from './App.tsx';
import { connectClient } from './client/connect.ts';
import type { HttpConsoleClient } from './client/http.ts';
import { takeNewToken } from './client/token.ts';
import { setClient } from './stores/client.ts';
import { useConfig } from './stores/config.ts';
import { useHistory } from './stores/history.ts';
import { useOverview } from './stores/overview.ts';
import { catchUp } from './stores/traffic.ts';
import { useWorkers } from './stores/workers.ts';
import { useUi } from './stores/ui.ts';
import './styles/theme.css';
import './styles/app.css';

const root = createRoot(document.getElementById('root')!);

/** Everything the page shows, fetched again (after a reconnect, or with a new token). */
function refetchAll(): void {
  void catchUp();
  void useConfig.getState().load();
  void useWorkers.getState().load();
  void useOverview.getState().load();
  void useHistory.getState().load();
}

// After a reconnect the page missed whatever happened while the socket was down: catch up.
let wasDown = false;
let http: HttpConsoleClient | undefined;
function start(): boolean {
  const connected = connectClient((state) => {
    useUi.setState({ connection: state });
    if (state === 'reconnecting') wasDown = true;
    if (state === 'open' && wasDown) {
      wasDown = false;
      refetchAll();
    }
  });
  if (!connected.ok) {
    root.render(<NoToken reason={connected.reason} />);
    return false;
  }
  setClient(connected.client);
  if (connected.binding === 'http') http = connected.client as HttpConsoleClient;
  useUi.setState({ binding: connected.binding, connection: connected.binding === 'ipc' ? 'open' : 'connecting' });
  root.render(<App />);
  return true;
}

let started = start();
window.addEventListener('hashchange', () => {
  if (window.mmtc?.binding === 'ipc') return;
  const token = takeNewToken();
  if (!token) return;
  if (!started) {
    started = start();
    return;
  }
  http?.setToken(token);
  refetchAll();
});
