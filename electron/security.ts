// Every guard the desktop shell puts between the console UI and the machine, in one module
// (Electron security checklist items 3-20). The rule throughout: the console window may show
// the app's own origin and nothing else, may not open windows, webviews or permissions, and
// only its top frame at that origin may reach the backend (senderFrameProblem, used by
// ipc.ts). Origins are compared parsed, never by string prefix: `mmtc-app://console.evil/`
// and `https://console@evil/` both begin with what a prefix check would accept.
//
// Node's URL gives every non-special scheme the opaque origin "null" (so would `data:`), so
// `new URL(u).origin` cannot tell our scheme's origin from any other opaque one; originOf
// below serialises host-based URLs of any scheme as Chromium does for standard schemes.
import type { App, IpcMainInvokeEvent, WebContents, WebFrameMain, WebPreferences } from 'electron';
import { shell } from 'electron';
import { fileURLToPath } from 'node:url';
import { CONTENT_SECURITY_POLICY } from '../core/console/csp.ts';

/** The bundled preload (scripts/build-electron.mjs); the only script with the bridge. */
export const PRELOAD_PATH = fileURLToPath(new URL('../dist/electron/preload.cjs', import.meta.url));

/**
 * The webPreferences of every console window. The renderer is a web page that talks to the
 * backend only through window.mmtc: no Node, no Electron internals, Chromium's sandbox on.
 */
export const SECURE_WEB_PREFERENCES = Object.freeze({
  // The preload's world and the page's world stay apart: the page sees only what contextBridge copies.
  contextIsolation: true,
  // The renderer process runs in Chromium's OS sandbox; the preload gets only contextBridge and ipcRenderer.
  sandbox: true,
  nodeIntegration: false,
  nodeIntegrationInWorker: false,
  nodeIntegrationInSubFrames: false,
  // Same-origin policy on: the page cannot read other origins' responses.
  webSecurity: true,
  allowRunningInsecureContent: false,
  webviewTag: false,
  experimentalFeatures: false,
  // A file dropped on the window must not replace the console with that file.
  navigateOnDragDrop: false,
  // The spellchecker would download dictionaries and send typed words to a service.
  spellcheck: false,
  preload: PRELOAD_PATH,
} satisfies WebPreferences);

export { CONTENT_SECURITY_POLICY };

/**
 * Headers on every response of the app's scheme (protocol.ts sets them: session.webRequest
 * does not see the headers of custom-scheme responses, so a header hook there would not apply).
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
});

/** Permissions granted to the app's own origin; every other request and check is denied. */
export const GRANTED_PERMISSIONS: ReadonlySet<string> = new Set([
  // "Copy" buttons (the gateway command, a worker's curl line): write-only, sanitised text.
  'clipboard-sanitized-write',
]);

/**
 * The origin of a URL as a string to compare, or null when it has none to trust (unparsable,
 * data:, file:, javascript:, about:, blob:). Special schemes use WHATWG's origin; any other
 * scheme with a host is serialised as Chromium does for a standard scheme: scheme://host[:port],
 * the host lower-cased.
 */
export function originOf(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null; // not a URL (new URL's TypeError): no origin
  }
  if (parsed.origin !== 'null') return parsed.origin;
  if (parsed.protocol === 'file:' || parsed.protocol === 'blob:' || parsed.host === '') return null;
  return `${parsed.protocol}//${parsed.host.toLowerCase()}`;
}

/** An https page outside the app that a link may open in the operator's browser. */
export interface ExternalLinkRule {
  /** `https://github.com` */
  origin: string;
  /** `/owner/repo`: the path itself and everything below it (by whole segments). */
  pathPrefix: string;
}

/**
 * The URL to hand to the operator's browser, normalised, when it is https and inside one of
 * the rules; else null. Anything else (http, file, javascript, custom schemes, another host,
 * credentials in the URL) stays closed.
 */
export function allowedExternalUrl(url: string, rules: readonly ExternalLinkRule[]): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null; // not a URL (new URL's TypeError): not a link to open
  }
  if (parsed.protocol !== 'https:' || parsed.username !== '' || parsed.password !== '') return null;
  for (const rule of rules) {
    if (parsed.origin !== rule.origin) continue;
    const prefix = rule.pathPrefix.replace(/\/+$/, '');
    if (prefix === '' || parsed.pathname === prefix || parsed.pathname.startsWith(`${prefix}/`)) return parsed.href;
  }
  return null;
}

/**
 * The external-link rule for the project's own pages, from package.json's `repository` and
 * `homepage` (https only). With neither set, no link leaves the app.
 */
export function projectLinkRules(pkg: { repository?: string | { url?: string }; homepage?: string }): ExternalLinkRule[] {
  const candidates = [typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url, pkg.homepage];
  const rules: ExternalLinkRule[] = [];
  for (const raw of candidates) {
    if (!raw) continue;
    try {
      const url = new URL(raw.replace(/^git\+/, ''));
      if (url.protocol !== 'https:') continue;
      rules.push({ origin: url.origin, pathPrefix: url.pathname.replace(/\.git$/, '').replace(/\/+$/, '') });
    } catch {
      // Not a URL (e.g. "github:owner/repo"): no rule from it.
    }
  }
  return rules;
}

export interface SenderTrust {
  /** `mmtc-app://console` */
  appOrigin: string;
  /** The web contents is a console window main.ts created. */
  isAppWindow(contents: WebContents): boolean;
}

function sameFrame(a: WebFrameMain, b: WebFrameMain): boolean {
  return a === b || (a.processId === b.processId && a.routingId === b.routingId);
}

/**
 * Why an IPC message must be refused, or null when it came from the top frame of a console
 * window showing the app's origin. A message from a subframe, another window or a page that
 * navigated elsewhere never reaches the backend.
 */
export function senderFrameProblem(event: Pick<IpcMainInvokeEvent, 'sender' | 'senderFrame'>, trust: SenderTrust): string | null {
  const frame = event.senderFrame;
  if (!frame) return 'the sending frame is gone (it navigated away or was destroyed)';
  if (!trust.isAppWindow(event.sender)) return 'the sender is not a console window';
  if (frame.parent !== null || !sameFrame(frame, event.sender.mainFrame)) return 'the sender is a subframe; only the top frame of the console window may call';
  const origin = originOf(frame.url);
  if (origin !== trust.appOrigin) return `the sender's origin is ${origin ?? `opaque (${JSON.stringify(frame.url)})`}; only ${trust.appOrigin} may call`;
  return null;
}

export interface SecurityGuardOptions {
  /** The only origin windows may show: `mmtc-app://console`. */
  appOrigin: string;
  /** https pages a link may open in the operator's browser (none by default). */
  externalLinks?: readonly ExternalLinkRule[];
  log?: (line: string) => void;
}

/**
 * Install every guard on each web contents the app creates (windows, and anything a page
 * might spawn), before it loads anything: navigation, redirects and frames only to the app's
 * origin, no new windows (allowlisted https links go to the operator's browser), no
 * webviews, and a session that denies permissions by default.
 */
export function installSecurityGuards(app: App, options: SecurityGuardOptions): void {
  const log = options.log ?? (() => {});
  const rules = options.externalLinks ?? [];
  const guardedSessions = new WeakSet<object>();
  const isAppUrl = (url: string) => originOf(url) === options.appOrigin;

  app.on('web-contents-created', (_event, contents) => {
    const refuseForeign = (kind: string) => (event: { url: string; preventDefault(): void }) => {
      if (isAppUrl(event.url)) return;
      event.preventDefault();
      log(`refused ${kind} to ${event.url}: the console only shows ${options.appOrigin}`);
    };
    // will-frame-navigate covers the main frame and subframes; will-navigate is kept for the
    // main frame in case a Chromium change stops the former firing there.
    contents.on('will-navigate', refuseForeign('navigation'));
    contents.on('will-frame-navigate', refuseForeign('frame navigation'));
    contents.on('will-redirect', refuseForeign('redirect'));

    contents.setWindowOpenHandler(({ url }) => {
      const external = allowedExternalUrl(url, rules);
      if (external) {
        shell.openExternal(external).catch((err: unknown) => log(`could not open ${external} in the browser: ${(err as Error).message}`));
      } else {
        log(
          `refused to open a window for ${url}: only https links to ${rules.map((r) => r.origin + r.pathPrefix).join(', ') || '(no allowed sites)'} open, in the browser`,
        );
      }
      return { action: 'deny' };
    });

    contents.on('will-attach-webview', (event) => {
      event.preventDefault();
      log('refused to attach a <webview>: the console embeds no other pages');
    });

    const session = contents.session;
    if (guardedSessions.has(session)) return;
    guardedSessions.add(session);
    session.setPermissionRequestHandler((_contents, permission, callback, details) => {
      const granted = GRANTED_PERMISSIONS.has(permission) && isAppUrl(details.requestingUrl);
      if (!granted) log(`denied the permission ${permission} requested by ${details.requestingUrl}`);
      callback(granted);
    });
    session.setPermissionCheckHandler(
      (_contents, permission, requestingOrigin) => GRANTED_PERMISSIONS.has(permission) && originOf(requestingOrigin) === options.appOrigin,
    );
    session.setDevicePermissionHandler(() => false);
  });
}
