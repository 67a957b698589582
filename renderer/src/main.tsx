// Entry point: connect the client (IPC in Electron, HTTP + WebSocket in a browser), then
// render. csp.ts comes first: zod runs jitless under the page's no-eval CSP.
import './csp.ts';
import { createRoot } from 'react-dom/client';
import { App, NoToken } from './App.tsx';
import { connectClient } from './client/connect.ts';
import { setClient } from './stores/client.ts';
import { useConfig } from './stores/config.ts';
import { catchUp } from './stores/traffic.ts';
import { useWorkers } from './stores/workers.ts';
import { useUi } from './stores/ui.ts';
import './styles/theme.css';
import './styles/app.css';

const root = createRoot(document.getElementById('root')!);
// After a reconnect the page missed whatever happened while the socket was down: catch up.
let wasDown = false;
const connected = connectClient((state) => {
  useUi.setState({ connection: state });
  if (state === 'reconnecting') wasDown = true;
  if (state === 'open' && wasDown) {
    wasDown = false;
    void catchUp();
    void useConfig.getState().load();
    void useWorkers.getState().load();
  }
});
if (connected.ok) {
  setClient(connected.client);
  useUi.setState({ binding: connected.binding, connection: connected.binding === 'ipc' ? 'open' : 'connecting' });
  root.render(<App />);
} else {
  root.render(<NoToken reason={connected.reason} />);
}
