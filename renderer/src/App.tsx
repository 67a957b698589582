// The shell: left navigation, the critical-states banner, the pending-draft bar, the current screen, the review dialog
// and toasts. Starts the live feeds once (traffic, config revisions, calibration progress)
// and keeps the route in the URL fragment (#/traffic), never the token.
import { useEffect } from 'react';
import { CriticalBanner } from './components/CriticalBanner.tsx';
import { PendingBar } from './components/PendingBar.tsx';
import { ReviewDialog } from './components/ReviewDialog.tsx';
import { Toasts } from './components/Toasts.tsx';
import { DoctorScreen } from './screens/Doctor.tsx';
import { HistoryScreen } from './screens/History.tsx';
import { OverviewScreen } from './screens/Overview.tsx';
import { PrecedenceScreen } from './screens/Precedence.tsx';
import { RequestsScreen } from './screens/Requests.tsx';
import { RouterScreen } from './screens/Router.tsx';
import { TrafficScreen } from './screens/Traffic.tsx';
import { WorkersScreen } from './screens/Workers.tsx';
import { YamlScreen } from './screens/Yaml.tsx';
import { client } from './stores/client.ts';
import { useConfig } from './stores/config.ts';
import { useDoctor } from './stores/doctor.ts';
import { useHistory } from './stores/history.ts';
import { useOverview } from './stores/overview.ts';
import { startRequestsFeed } from './stores/requests.ts';
import { startTrafficFeed } from './stores/traffic.ts';
import { parseRoute, routeHref, useUi, type Screen } from './stores/ui.ts';
import { useWorkers } from './stores/workers.ts';

const NAV: Array<{ screen: Screen; label: string; hint: string }> = [
  { screen: 'overview', label: 'Overview', hint: 'host, workers, rates, warnings' },
  { screen: 'router', label: 'Router settings', hint: 'mode and threshold' },
  { screen: 'workers', label: 'Workers', hint: 'table and overrides' },
  { screen: 'precedence', label: 'Precedence', hint: 'which layer decides' },
  { screen: 'traffic', label: 'Traffic', hint: 'live tensors' },
  { screen: 'requests', label: 'Requests', hint: 'outcomes, legs, waterfall' },
  { screen: 'doctor', label: 'Doctor', hint: 'auto checklist, calibrate' },
  { screen: 'yaml', label: 'YAML', hint: 'import, export, gateway' },
  { screen: 'history', label: 'History', hint: 'revisions, rollback' },
];

function useLiveFeeds() {
  useEffect(() => {
    void useConfig.getState().load();
    void useWorkers.getState().load();
    void useOverview.getState().load();
    const offTraffic = startTrafficFeed();
    const offRequests = startRequestsFeed();
    const offConfig = client().subscribe('config', () => {
      void useConfig.getState().load();
      void useWorkers.getState().load();
      void useOverview.getState().load();
      void useHistory.getState().load();
    });
    const offCalibration = client().subscribe('calibration', (p) => useDoctor.getState().onProgress(p));
    // The overview arrives about once a second, and within a few hundred ms of a worker's change.
    // A verdict that changed (a lane broken, a worker down) is refetched at once where workers are shown.
    let lastVerdicts = '';
    const offOverview = client().subscribe('overview', (data) => {
      useOverview.setState({ data, error: null, loadedAt: Date.now() });
      const verdicts = JSON.stringify(data.verdicts);
      if (lastVerdicts && verdicts !== lastVerdicts) void useWorkers.getState().load();
      lastVerdicts = verdicts;
    });
    const onHash = () => useUi.getState().setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', onHash);
    // Worker health and drift change without a revision: poll them gently where they are shown
    // (the overview has its own stream).
    const poll = setInterval(() => {
      if (document.visibilityState === 'hidden') return;
      const screen = useUi.getState().route.screen;
      // Drift happens on disk, without a revision: look again where it is shown.
      if (screen === 'overview' || screen === 'yaml') void useConfig.getState().load();
      if (screen === 'workers' || screen === 'precedence' || screen === 'doctor' || screen === 'overview') void useWorkers.getState().load();
    }, 3000);
    return () => {
      offTraffic();
      offRequests();
      offConfig();
      offCalibration();
      offOverview();
      window.removeEventListener('hashchange', onHash);
      clearInterval(poll);
    };
  }, []);
}

function ConnectionBadge() {
  const connection = useUi((s) => s.connection);
  const binding = useUi((s) => s.binding);
  const revision = useConfig((s) => s.view?.revision);
  const label = connection === 'open' ? 'live' : connection === 'reconnecting' ? 'reconnecting…' : connection === 'connecting' ? 'connecting…' : 'idle';
  return (
    <div className="conn" role="status" aria-live="polite">
      <span className={`dot dot-${connection === 'open' ? 'ok' : connection === 'reconnecting' ? 'bad' : 'warn'}`} aria-hidden="true" />
      <span>
        {binding === 'ipc' ? 'desktop' : 'browser'} · {label}
      </span>
      {revision !== undefined && <span className="conn-rev">revision {revision}</span>}
    </div>
  );
}

export function App() {
  useLiveFeeds();
  const route = useUi((s) => s.route);
  const screen = route.screen;
  return (
    <div className="shell">
      <a
        className="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <nav className="nav" aria-label="Screens">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true">
            ◧
          </span>
          <div>
            <div className="brand-name">mm-transport</div>
            <div className="brand-sub">console</div>
          </div>
        </div>
        <ul>
          {NAV.map((n) => (
            <li key={n.screen}>
              <a href={routeHref(n.screen)} aria-current={screen === n.screen ? 'page' : undefined} className={screen === n.screen ? 'active' : undefined}>
                <span className="nav-label">{n.label}</span>
                <span className="nav-hint">{n.hint}</span>
              </a>
            </li>
          ))}
        </ul>
        <ConnectionBadge />
      </nav>
      <div className="content">
        <CriticalBanner />
        <PendingBar />
        <main id="main" tabIndex={-1} className="main">
          {screen === 'overview' && <OverviewScreen />}
          {screen === 'router' && <RouterScreen />}
          {screen === 'workers' && <WorkersScreen />}
          {screen === 'precedence' && <PrecedenceScreen worker={route.params.worker} />}
          {screen === 'traffic' && <TrafficScreen />}
          {screen === 'requests' && <RequestsScreen />}
          {screen === 'doctor' && <DoctorScreen worker={route.params.worker} />}
          {screen === 'yaml' && <YamlScreen />}
          {screen === 'history' && <HistoryScreen />}
        </main>
      </div>
      <ReviewDialog />
      <Toasts />
    </div>
  );
}

export function NoToken({ reason }: { reason: string }) {
  return (
    <main className="notoken">
      <h1>mm-transport-console</h1>
      <p>{reason}</p>
      <p className="muted">
        Started it on a remote rig? Forward the port first, e.g. <code>ssh -L 30001:127.0.0.1:30001 rig</code>, then open the printed URL locally.
      </p>
    </main>
  );
}
