// The Content-Security-Policy of the console page, whichever way it is served (mmtc serve's
// HTTP binding, the desktop app's custom scheme): scripts, styles, fonts and connections only
// from the console itself (no inline script or style element, no eval), images also from
// data:/blob: (charts, exported files); no framing, forms, base URL changes or plugins.
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
