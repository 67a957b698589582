// The guards as installed on a web contents: Electron is faked at the edge (an app and web
// contents that record listeners and handlers, a shell that records openExternal); the
// guard logic is the real module.
import { EventEmitter } from 'node:events';
import { beforeEach, describe, expect, it, vi } from 'vitest';

const electron = vi.hoisted(() => ({ openExternal: vi.fn(async (_url: string) => {}) }));
vi.mock('electron', () => ({ shell: { openExternal: electron.openExternal } }));

import type { App, IpcMainInvokeEvent, WebContents } from 'electron';
import {
  CONTENT_SECURITY_POLICY,
  GRANTED_PERMISSIONS,
  PRELOAD_PATH,
  SECURE_WEB_PREFERENCES,
  allowedExternalUrl,
  installSecurityGuards,
  originOf,
  projectLinkRules,
  senderFrameProblem,
  type ExternalLinkRule,
} from './security.ts';

const APP_ORIGIN = 'mmtc-app://console';
const DOCS: ExternalLinkRule[] = [{ origin: 'https://github.com', pathPrefix: '/mmtc/mm-transport-console' }];

class FakeSession {
  requestHandler?: (contents: unknown, permission: string, callback: (granted: boolean) => void, details: { requestingUrl: string }) => void;
  checkHandler?: (contents: unknown, permission: string, requestingOrigin: string, details: unknown) => boolean;
  deviceHandler?: (details: unknown) => boolean;
  setPermissionRequestHandler = vi.fn((h: FakeSession['requestHandler']) => (this.requestHandler = h));
  setPermissionCheckHandler = vi.fn((h: FakeSession['checkHandler']) => (this.checkHandler = h));
  setDevicePermissionHandler = vi.fn((h: FakeSession['deviceHandler']) => (this.deviceHandler = h));
}

class FakeWebContents extends EventEmitter {
  openHandler?: (details: { url: string }) => { action: string };
  constructor(readonly session: FakeSession = new FakeSession()) {
    super();
  }
  setWindowOpenHandler(handler: (details: { url: string }) => { action: string }) {
    this.openHandler = handler;
  }
}

function navigationEvent(url: string) {
  return { url, preventDefault: vi.fn() };
}

function setup(externalLinks: ExternalLinkRule[] = DOCS) {
  const app = new EventEmitter();
  const log = vi.fn();
  installSecurityGuards(app as unknown as App, { appOrigin: APP_ORIGIN, externalLinks, log });
  const contents = new FakeWebContents();
  app.emit('web-contents-created', {}, contents);
  return { app, contents, log };
}

beforeEach(() => electron.openExternal.mockClear());

describe('SECURE_WEB_PREFERENCES', () => {
  it('sets every isolation option, and nothing weakens it', () => {
    expect(SECURE_WEB_PREFERENCES).toEqual({
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      experimentalFeatures: false,
      navigateOnDragDrop: false,
      spellcheck: false,
      preload: PRELOAD_PATH,
    });
    expect(Object.isFrozen(SECURE_WEB_PREFERENCES)).toBe(true);
  });

  it('points the preload at the bundled, absolute dist/electron/preload.cjs', () => {
    expect(PRELOAD_PATH).toMatch(/^\/.*\/dist\/electron\/preload\.cjs$/);
  });
});

describe('CONTENT_SECURITY_POLICY', () => {
  it('is the strict policy: self only, no inline or eval, no plugins, framing, forms or base changes', () => {
    expect(CONTENT_SECURITY_POLICY).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  });
});

describe('originOf', () => {
  it('serialises the app scheme as scheme://host, where Node says "null"', () => {
    expect(new URL('mmtc-app://console/index.html').origin).toBe('null');
    expect(originOf('mmtc-app://console/index.html')).toBe(APP_ORIGIN);
    expect(originOf('MMTC-APP://CONSOLE/x')).toBe(APP_ORIGIN);
  });

  it('tells look-alikes apart', () => {
    expect(originOf('mmtc-app://console.evil/')).toBe('mmtc-app://console.evil');
    expect(originOf('mmtc-app://console:8080/')).toBe('mmtc-app://console:8080');
    expect(originOf('https://console@evil/')).toBe('https://evil');
  });

  it('gives no origin to opaque URLs, which must never compare equal to one another', () => {
    for (const url of [
      'data:text/html,x',
      'file:///etc/passwd',
      'javascript:alert(1)',
      'about:blank',
      'blob:mmtc-app://console/1',
      'mmtc-app:console/x',
      'not a url',
      '',
    ]) {
      expect(originOf(url), url).toBeNull();
    }
  });
});

describe('navigation guard', () => {
  it.each(['will-navigate', 'will-frame-navigate', 'will-redirect'])('%s: allows the app origin', (eventName) => {
    const { contents } = setup();
    for (const url of ['mmtc-app://console/index.html', 'mmtc-app://console/workers?url=grpc%3A%2F%2Fa%3A1#x']) {
      const event = navigationEvent(url);
      contents.emit(eventName, event);
      expect(event.preventDefault, url).not.toHaveBeenCalled();
    }
  });

  it.each(['will-navigate', 'will-frame-navigate', 'will-redirect'])('%s: prevents every other origin, look-alikes included', (eventName) => {
    const { contents, log } = setup();
    const foreign = [
      'https://evil.example/',
      'mmtc-app://console.evil/',
      'https://console@evil/',
      'mmtc-app://console:8080/',
      'mmtc-app://evil/index.html',
      'http://console/',
      'file:///etc/passwd',
      'data:text/html,<script>1</script>',
      'javascript:alert(1)',
      'about:blank',
    ];
    for (const url of foreign) {
      const event = navigationEvent(url);
      contents.emit(eventName, event);
      expect(event.preventDefault, url).toHaveBeenCalledOnce();
    }
    expect(log).toHaveBeenCalledTimes(foreign.length);
  });
});

describe('window.open guard', () => {
  it('denies every new window, the app origin included', () => {
    const { contents } = setup();
    for (const url of ['mmtc-app://console/index.html', 'https://evil.example/', 'about:blank']) {
      expect(contents.openHandler!({ url })).toEqual({ action: 'deny' });
    }
    expect(electron.openExternal).not.toHaveBeenCalled();
  });

  it('opens an allowlisted https link in the browser, and still denies the window', () => {
    const { contents } = setup();
    const url = 'https://github.com/mmtc/mm-transport-console/blob/main/docs/transport.md';
    expect(contents.openHandler!({ url })).toEqual({ action: 'deny' });
    expect(electron.openExternal).toHaveBeenCalledExactlyOnceWith(url);
  });

  it('never hands http, file, javascript, custom schemes or other sites to the browser', () => {
    const { contents } = setup();
    for (const url of [
      'http://github.com/mmtc/mm-transport-console',
      'file:///etc/passwd',
      'javascript:alert(1)',
      'mmtc-app://console/index.html',
      'https://github.com/evil/repo',
      'https://github.com/mmtc/mm-transport-console-evil/x',
      'https://github.com.evil.example/mmtc/mm-transport-console',
      'https://evil@github.com/mmtc/mm-transport-console',
      'https://github.com/mmtc/mm-transport-console/../../evil/repo',
      'smb://host/share',
    ]) {
      expect(contents.openHandler!({ url })).toEqual({ action: 'deny' });
    }
    expect(electron.openExternal).not.toHaveBeenCalled();
  });

  it('opens nothing at all without rules', () => {
    const { contents } = setup([]);
    contents.openHandler!({ url: 'https://github.com/mmtc/mm-transport-console' });
    expect(electron.openExternal).not.toHaveBeenCalled();
  });
});

describe('allowedExternalUrl and projectLinkRules', () => {
  it('matches by whole path segments and returns the normalised URL', () => {
    expect(allowedExternalUrl('https://GITHUB.com/mmtc/mm-transport-console', DOCS)).toBe('https://github.com/mmtc/mm-transport-console');
    expect(allowedExternalUrl('https://github.com/mmtc/mm-transport-consolex', DOCS)).toBeNull();
  });

  it('takes the https repository and homepage of package.json, nothing else', () => {
    expect(projectLinkRules({ repository: { url: 'git+https://github.com/mmtc/mm-transport-console.git' } })).toEqual(DOCS);
    expect(projectLinkRules({ repository: 'github:mmtc/mm-transport-console', homepage: 'http://example.com/' })).toEqual([]);
    expect(projectLinkRules({})).toEqual([]);
  });
});

describe('webview guard', () => {
  it('prevents attaching a <webview>', () => {
    const { contents } = setup();
    const event = { preventDefault: vi.fn() };
    contents.emit('will-attach-webview', event, {}, { src: 'https://evil.example/' });
    expect(event.preventDefault).toHaveBeenCalledOnce();
  });
});

describe('permissions', () => {
  it('denies every permission request by default', () => {
    const { contents } = setup();
    for (const permission of ['media', 'geolocation', 'notifications', 'clipboard-read', 'openExternal', 'display-capture', 'fileSystem', 'unknown']) {
      const callback = vi.fn();
      contents.session.requestHandler!(contents, permission, callback, { requestingUrl: 'mmtc-app://console/index.html' });
      expect(callback, permission).toHaveBeenCalledExactlyOnceWith(false);
    }
  });

  it('grants only sanitised clipboard writes, and only to the app origin', () => {
    expect([...GRANTED_PERMISSIONS]).toEqual(['clipboard-sanitized-write']);
    const { contents } = setup();
    const fromApp = vi.fn();
    contents.session.requestHandler!(contents, 'clipboard-sanitized-write', fromApp, { requestingUrl: 'mmtc-app://console/index.html' });
    expect(fromApp).toHaveBeenCalledWith(true);
    const fromLookAlike = vi.fn();
    contents.session.requestHandler!(contents, 'clipboard-sanitized-write', fromLookAlike, { requestingUrl: 'mmtc-app://console.evil/' });
    expect(fromLookAlike).toHaveBeenCalledWith(false);
  });

  it('answers permission checks and device checks with no, the clipboard write for the app aside', () => {
    const { contents } = setup();
    const check = contents.session.checkHandler!;
    expect(check(contents, 'geolocation', APP_ORIGIN, {})).toBe(false);
    expect(check(contents, 'clipboard-read', APP_ORIGIN, {})).toBe(false);
    expect(check(contents, 'clipboard-sanitized-write', 'https://evil.example', {})).toBe(false);
    expect(check(contents, 'clipboard-sanitized-write', APP_ORIGIN, {})).toBe(true);
    expect(contents.session.deviceHandler!({ deviceType: 'usb', origin: APP_ORIGIN })).toBe(false);
  });

  it('installs the session handlers once per session', () => {
    const { app, contents } = setup();
    const second = new FakeWebContents(contents.session);
    app.emit('web-contents-created', {}, second);
    expect(contents.session.setPermissionRequestHandler).toHaveBeenCalledOnce();
    expect(contents.session.setPermissionCheckHandler).toHaveBeenCalledOnce();
    expect(second.openHandler).toBeTypeOf('function');
  });
});

describe('senderFrameProblem', () => {
  const mainFrame = { url: 'mmtc-app://console/index.html', parent: null, processId: 4, routingId: 1 };
  const ours = { mainFrame } as unknown as WebContents;
  const trust = { appOrigin: APP_ORIGIN, isAppWindow: (c: WebContents) => c === ours };
  const event = (sender: WebContents, senderFrame: unknown) => ({ sender, senderFrame }) as unknown as IpcMainInvokeEvent;

  it('accepts the top frame of our window at the app origin', () => {
    expect(senderFrameProblem(event(ours, mainFrame), trust)).toBeNull();
  });

  it('refuses a missing frame, another window, a subframe and another origin', () => {
    expect(senderFrameProblem(event(ours, null), trust)).toMatch(/frame is gone/);
    const stranger = { mainFrame } as unknown as WebContents;
    expect(senderFrameProblem(event(stranger, mainFrame), trust)).toMatch(/not a console window/);
    const sub = { url: 'mmtc-app://console/frame.html', parent: mainFrame, processId: 4, routingId: 2 };
    expect(senderFrameProblem(event(ours, sub), trust)).toMatch(/subframe/);
    expect(senderFrameProblem(event(ours, { ...mainFrame, url: 'https://evil.example/' }), trust)).toMatch(/origin is https:\/\/evil.example/);
    expect(senderFrameProblem(event(ours, { ...mainFrame, url: 'mmtc-app://console.evil/' }), trust)).toMatch(/origin is mmtc-app:\/\/console.evil/);
    expect(senderFrameProblem(event(ours, { ...mainFrame, url: 'data:text/html,x' }), trust)).toMatch(/opaque/);
  });
});
