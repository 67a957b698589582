// Which http(s) image URLs the router may fetch on a client's behalf.
//
// Rule: a URL is fetched only if its host is public. The host name is resolved once and
// EVERY address it resolves to must be a public unicast address; one refused address
// refuses the whole host, because the connection could land on any of them and a DNS
// answer mixing a public and an internal address is exactly how rebinding attacks look.
// Refused: loopback (127/8, ::1, and the names localhost, localhost., *.localhost, which
// are refused without resolving them), private (10/8, 172.16/12, 192.168/16, fc00::/7,
// fec0::/10), link-local (169.254/16, fe80::/10), shared/CGNAT (100.64/10), benchmarking
// (198.18/15, 2001:2::/48), documentation (192.0.2/24, 198.51.100/24, 203.0.113/24,
// 2001:db8::/32, 3fff::/20), cloud metadata (169.254.169.254, fd00:ec2::254), unspecified
// (0/8, ::), multicast (224/4, ff00::/8), broadcast and reserved (255.255.255.255, 240/4,
// other IETF special-purpose blocks, IPv6 outside 2000::/3). IPv6 forms that carry an
// IPv4 address (IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64 64:ff9b::/96, 6to4
// 2002::/16) are judged as that IPv4 address, since that is where the packets end up.
//
// Why: without this, image_url turns the router into an open proxy into its own network:
// a client could make it fetch cloud credentials from the metadata service or probe which
// internal ports are open. The fetcher (fetch.ts) therefore connects only to the addresses
// checked here, re-checks every redirect hop, and never reports what a target answered
// below the HTTP status line.
//
// Opt-in: allowPrivateHosts (allow_private_media_hosts) lets loopback, private, link-local,
// shared, benchmarking and documentation addresses through, for operators whose images
// live on an internal server. It never unlocks the cloud metadata addresses (no image
// server lives there, and they hand out credentials) nor unspecified, multicast, broadcast
// and reserved addresses (they are not a host one can download from).
// allowedMediaDomains (allowed_media_domains, as vLLM's --allowed-media-domains) further
// restricts the host names that may be fetched at all; it does not exempt a listed host
// from the address rule.
//
// This module never connects anywhere; its only I/O is the injectable resolver.
import { promises as dns } from 'node:dns';

export type AddressRule =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cloud-metadata'
  | 'shared'
  | 'benchmarking'
  | 'documentation'
  | 'unspecified'
  | 'multicast'
  | 'broadcast'
  | 'reserved';

export interface AddressClass {
  rule: AddressRule;
  /** The IPv4 address judged in place of an IPv6 address that embeds it. */
  embeddedIPv4?: string;
  /** How the IPv4 address is embedded ('IPv4-mapped', 'NAT64', '6to4', …). */
  embedding?: string;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface MediaPolicyOptions {
  /** When non-empty, only these host names may be fetched (exact, case-insensitive, trailing dot ignored). */
  allowedMediaDomains?: readonly string[];
  /** Let non-public unicast addresses through (default false). */
  allowPrivateHosts?: boolean;
  /** Redirects followed per download, each hop re-checked (default 3). */
  maxRedirects?: number;
  /** Name resolution; defaults to the system resolver (dns.lookup, all addresses, OS order). */
  resolve?: Resolver;
}

export interface MediaPolicy {
  /** Normalized allowlist; null when any host name may be fetched. */
  readonly allowedMediaDomains: readonly string[] | null;
  readonly allowPrivateHosts: boolean;
  readonly maxRedirects: number;
  readonly resolve: Resolver;
}

export type UrlCheck =
  { verdict: 'allowed'; url: URL; hostname: string; addresses: readonly ResolvedAddress[] } | { verdict: 'refused'; reason: string } | { verdict: 'not-found' };

export const DEFAULT_MAX_REDIRECTS = 3;

const OPT_IN_RULES: ReadonlySet<AddressRule> = new Set(['loopback', 'private', 'link-local', 'shared', 'benchmarking', 'documentation']);

const RULE_LABEL: Record<Exclude<AddressRule, 'public'>, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  'link-local': 'a link-local address',
  'cloud-metadata': 'a cloud metadata address',
  shared: 'a shared (CGNAT) address',
  benchmarking: 'a benchmarking address',
  documentation: 'a documentation address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  reserved: 'a reserved address',
};

const OPT_IN_HINT = '(set allow_private_media_hosts to fetch from private hosts)';

// --- address parsing -------------------------------------------------------------------

// Accepts every spelling inet_aton and the WHATWG URL parser accept (1 to 4 parts, each
// decimal, 0-prefixed octal or 0x-prefixed hex, the last part filling the remaining
// bytes), so `127.1` or `0x7f.0.0.1` cannot slip past as "not an address".
function parseIPv4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length > 4 || parts.some((p) => p === '')) return null;
  const values: number[] = [];
  for (const p of parts) {
    let v: number;
    if (/^0x[0-9a-f]*$/i.test(p)) v = p.length === 2 ? 0 : parseInt(p.slice(2), 16);
    else if (/^0[0-7]+$/.test(p)) v = parseInt(p.slice(1), 8);
    else if (/^(0|[1-9][0-9]*)$/.test(p)) v = Number(p);
    else return null;
    values.push(v);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255) || last >= 256 ** (4 - values.length)) return null;
  const bytes = [...values];
  for (let i = 3 - values.length; i >= 0; i--) bytes.push(Math.floor(last / 256 ** i) % 256);
  return bytes;
}

function parseDottedQuad(text: string): number[] | null {
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(text)) return null;
  const bytes = text.split('.').map(Number);
  return bytes.every((b) => b <= 255) ? bytes : null;
}

function parseIPv6(text: string): number[] | null {
  let s = text;
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone); // the zone picks an interface, not an address
  if (!s.includes(':')) return null;
  const lastColon = s.lastIndexOf(':');
  if (s.includes('.', lastColon)) {
    const v4 = parseDottedQuad(s.slice(lastColon + 1));
    if (!v4) return null;
    s = `${s.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const groups = (h: string): number[] | null => {
    if (h === '') return [];
    const out: number[] = [];
    for (const g of h.split(':')) {
      if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !rest) return null;
  let all: number[];
  if (halves.length === 2) {
    if (head.length + rest.length > 7) return null;
    all = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  } else {
    if (head.length !== 8) return null;
    all = head;
  }
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

// --- classification --------------------------------------------------------------------

type Block = [prefix: number[], bits: number, rule: AddressRule];

// Order matters where blocks nest: the more specific entry comes first.
const IPV4_BLOCKS: Block[] = [
  [[0, 0, 0, 0], 8, 'unspecified'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 64, 0, 0], 10, 'shared'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 169, 254], 32, 'cloud-metadata'],
  [[169, 254, 0, 0], 16, 'link-local'],
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 0], 24, 'reserved'], // IETF protocol assignments
  [[192, 0, 2, 0], 24, 'documentation'],
  [[192, 88, 99, 0], 24, 'reserved'], // retired 6to4 relay anycast
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation'],
  [[203, 0, 113, 0], 24, 'documentation'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[255, 255, 255, 255], 32, 'broadcast'],
  [[240, 0, 0, 0], 4, 'reserved'],
];

const h6 = (...groups: number[]): number[] => [...groups, ...new Array<number>(8 - groups.length).fill(0)].flatMap((g) => [g >> 8, g & 0xff]);

const IPV6_BLOCKS: Block[] = [
  [h6(0x64, 0xff9b, 1), 48, 'private'], // local-use NAT64: its IPv4 mapping is site-specific
  [h6(0x100), 64, 'reserved'], // discard-only
  [h6(0x2001, 0x2), 48, 'benchmarking'],
  [h6(0x2001, 0xdb8), 32, 'documentation'],
  [h6(0x2001), 23, 'reserved'], // IETF protocol assignments, Teredo included
  [h6(0x3fff), 20, 'documentation'],
  [h6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), 128, 'cloud-metadata'],
  [h6(0xfc00), 7, 'private'],
  [h6(0xfe80), 10, 'link-local'],
  [h6(0xfec0), 10, 'private'], // deprecated site-local
  [h6(0xff00), 8, 'multicast'],
];

function inBlock(bytes: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; i < bits; i += 8) {
    const take = Math.min(8, bits - i);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((bytes[i / 8]! & mask) !== (prefix[i / 8]! & mask)) return false;
  }
  return true;
}

function classifyIPv4Bytes(bytes: number[]): AddressRule {
  return IPV4_BLOCKS.find(([p, bits]) => inBlock(bytes, p, bits))?.[2] ?? 'public';
}

function embeddedIPv4(bytes: number[]): { v4: number[]; embedding: string } | null {
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return { v4: bytes.slice(12), embedding: 'IPv4-mapped' };
  if (zeros(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(10, 12)) return { v4: bytes.slice(12), embedding: 'IPv4-translated' };
  if (zeros(0, 12) && !zeros(12, 15)) return { v4: bytes.slice(12), embedding: 'IPv4-compatible' };
  if (inBlock(bytes, h6(0x64, 0xff9b), 96)) return { v4: bytes.slice(12), embedding: 'NAT64' };
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return { v4: bytes.slice(2, 6), embedding: '6to4' };
  return null;
}

/**
 * Classifies an IP address given as text (IPv4 in any inet_aton spelling, IPv6 with or
 * without brackets and zone). Returns null when the text is not an IP address.
 */
export function classifyAddress(text: string): AddressClass | null {
  const v4 = text.includes(':') ? null : parseIPv4(text);
  if (v4) return { rule: classifyIPv4Bytes(v4) };
  const v6 = parseIPv6(text);
  if (!v6) return null;
  if (v6.every((b) => b === 0)) return { rule: 'unspecified' };
  if (v6.slice(0, 15).every((b) => b === 0) && v6[15] === 1) return { rule: 'loopback' };
  const inner = embeddedIPv4(v6);
  if (inner) return { rule: classifyIPv4Bytes(inner.v4), embeddedIPv4: inner.v4.join('.'), embedding: inner.embedding };
  const block = IPV6_BLOCKS.find(([p, bits]) => inBlock(v6, p, bits));
  if (block) return { rule: block[2] };
  return { rule: inBlock(v6, h6(0x2000), 3) ? 'public' : 'reserved' };
}

/** Whether the policy lets an address of this class be connected to. */
export function isAddressAllowed(policy: MediaPolicy, cls: AddressClass): boolean {
  return cls.rule === 'public' || (policy.allowPrivateHosts && OPT_IN_RULES.has(cls.rule));
}

function labelOf(cls: AddressClass): { label: string; hint: string } {
  return {
    label: RULE_LABEL[cls.rule as Exclude<AddressRule, 'public'>],
    hint: OPT_IN_RULES.has(cls.rule) ? ` ${OPT_IN_HINT}` : ', which is never fetched',
  };
}

function describe(address: string, cls: AddressClass): string {
  const { label, hint } = labelOf(cls);
  if (cls.embeddedIPv4) return `${address} is the ${cls.embedding} form of ${cls.embeddedIPv4}, ${label}${hint}`;
  return `${address} is ${label}${hint}`;
}

export function isLocalhostName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

// --- policy ----------------------------------------------------------------------------

function normalizeDomain(entry: string): string {
  const trimmed = entry.trim();
  if (!trimmed) throw new Error('allowed_media_domains has an empty entry; list host names such as images.example.com');
  if (trimmed.includes('*')) throw new Error(`allowed_media_domains entry '${entry}' has a wildcard; entries match exactly, list each host name`);
  const asHost = trimmed.includes(':') && classifyAddress(trimmed) ? `[${trimmed.replace(/^\[(.*)\]$/, '$1')}]` : trimmed;
  let url: URL;
  try {
    url = new URL(`http://${asHost}/`);
  } catch {
    throw new Error(`allowed_media_domains entry '${entry}' is not a host name; list host names such as images.example.com`);
  }
  if (url.port || url.username || url.password || url.pathname !== '/' || url.search || url.hash) {
    throw new Error(`allowed_media_domains entry '${entry}' is not a bare host name (no scheme, port or path); list host names such as images.example.com`);
  }
  return canonicalHost(url.hostname);
}

/** The URL host as compared against the allowlist: lower case, no brackets, no trailing dot. */
function canonicalHost(hostname: string): string {
  return hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
}

export const defaultResolve: Resolver = async (hostname) => {
  const found = await dns.lookup(hostname, { all: true, verbatim: true });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** Validates and freezes the policy; throws an Error naming the bad setting. */
export function createMediaPolicy(options: MediaPolicyOptions = {}): MediaPolicy {
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0) throw new Error(`maxRedirects is ${maxRedirects}, expected an integer >= 0`);
  const domains = (options.allowedMediaDomains ?? []).map(normalizeDomain);
  return Object.freeze({
    allowedMediaDomains: domains.length ? Object.freeze([...new Set(domains)]) : null,
    allowPrivateHosts: options.allowPrivateHosts === true,
    maxRedirects,
    resolve: options.resolve ?? defaultResolve,
  });
}

export const DEFAULT_MEDIA_POLICY: MediaPolicy = createMediaPolicy();

function listDomains(domains: readonly string[]): string {
  const shown = domains.slice(0, 10).join(', ');
  return domains.length > 10 ? `${shown} and ${domains.length - 10} more` : shown;
}

/**
 * Decides whether a URL may be fetched and, if so, which addresses the connection may use.
 * Resolves the host at most once; the caller must connect only to the returned addresses.
 */
export async function checkMediaUrl(policy: MediaPolicy, input: URL | string): Promise<UrlCheck> {
  let url: URL;
  try {
    url = typeof input === 'string' ? new URL(input) : input;
  } catch {
    return { verdict: 'refused', reason: 'it is not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { verdict: 'refused', reason: `its scheme is '${url.protocol}', only http: and https: are fetched` };
  if (url.username || url.password) return { verdict: 'refused', reason: 'URLs with user:password@ credentials are not fetched' };
  const host = canonicalHost(url.hostname);
  if (policy.allowedMediaDomains && !policy.allowedMediaDomains.includes(host)) {
    return { verdict: 'refused', reason: `${host} is not in allowed_media_domains (${listDomains(policy.allowedMediaDomains)})` };
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const literal = classifyAddress(hostname);
  if (literal) {
    if (!isAddressAllowed(policy, literal)) return { verdict: 'refused', reason: describe(hostname, literal) };
    return { verdict: 'allowed', url, hostname, addresses: [{ address: hostname, family: hostname.includes(':') ? 6 : 4 }] };
  }
  if (isLocalhostName(hostname) && !policy.allowPrivateHosts) {
    return { verdict: 'refused', reason: `${hostname} is a loopback host name ${OPT_IN_HINT}` };
  }
  let found: ResolvedAddress[];
  try {
    found = await policy.resolve(hostname);
  } catch {
    // The name does not resolve (no such domain, no answer, the resolver failing): as a name that resolves to nothing.
    return { verdict: 'not-found' };
  }
  if (!found.length) return { verdict: 'not-found' };
  const addresses: ResolvedAddress[] = [];
  for (const a of found) {
    const cls = classifyAddress(a.address);
    if (!cls) return { verdict: 'refused', reason: `${hostname} resolves to something that is not an IP address` };
    // The address itself stays unnamed: for an internal name it is the router's network
    // layout, which the client has no business learning.
    if (!isAddressAllowed(policy, cls)) {
      const { label, hint } = labelOf(cls);
      return { verdict: 'refused', reason: `${hostname} resolves to ${label}${cls.embeddedIPv4 ? ` (${cls.embedding})` : ''}${hint}` };
    }
    addresses.push({ address: a.address, family: a.address.includes(':') ? 6 : 4 });
  }
  return { verdict: 'allowed', url, hostname, addresses };
}
