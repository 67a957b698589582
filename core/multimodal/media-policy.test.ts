import { describe, expect, it, vi } from 'vitest';
import { checkMediaUrl, classifyAddress, createMediaPolicy, DEFAULT_MEDIA_POLICY, isAddressAllowed, type ResolvedAddress } from './media-policy.ts';

const HINT = '(set allow_private_media_hosts to fetch from private hosts)';

function resolverOf(table: Record<string, string[]>) {
  return vi.fn(async (host: string): Promise<ResolvedAddress[]> => {
    const found = table[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  });
}

describe('classifyAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['[::1]', 'loopback'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd00::1', 'private'],
    ['fec0::1', 'private'],
    ['64:ff9b:1::a', 'private'],
    ['169.254.0.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['169.254.169.254', 'cloud-metadata'],
    ['fd00:ec2::254', 'cloud-metadata'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['2001:2::1', 'benchmarking'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['192.88.99.1', 'reserved'],
    ['100::1', 'reserved'],
    ['2001::1', 'reserved'], // Teredo
    ['4000::1', 'reserved'], // outside global unicast
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['172.32.0.1', 'public'], // just past 172.16/12
    ['100.128.0.1', 'public'], // just past 100.64/10
    ['198.20.0.1', 'public'], // just past 198.18/15
    ['169.253.255.255', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['2a00:1450::1', 'public'],
  ])('%s is %s', (address, rule) => {
    expect(classifyAddress(address)?.rule).toBe(rule);
  });

  // inet_aton accepts these, so a resolver or socket layer could read them as 127.0.0.1.
  it.each(['127.1', '127.0.1', '2130706433', '0x7f.0.0.1', '0x7f000001', '0177.0.0.1', '017700000001', '0x7f.1'])(
    'legacy spelling %s is loopback',
    (address) => {
      expect(classifyAddress(address)?.rule).toBe('loopback');
    },
  );

  it.each([
    ['::ffff:127.0.0.1', 'loopback', '127.0.0.1', 'IPv4-mapped'],
    ['::ffff:7f00:1', 'loopback', '127.0.0.1', 'IPv4-mapped'],
    ['[::ffff:127.0.0.1]', 'loopback', '127.0.0.1', 'IPv4-mapped'],
    ['::ffff:10.0.0.1', 'private', '10.0.0.1', 'IPv4-mapped'],
    ['::ffff:a9fe:a9fe', 'cloud-metadata', '169.254.169.254', 'IPv4-mapped'],
    ['::ffff:0:a00:1', 'private', '10.0.0.1', 'IPv4-translated'],
    ['::127.0.0.1', 'loopback', '127.0.0.1', 'IPv4-compatible'],
    ['::a00:1', 'private', '10.0.0.1', 'IPv4-compatible'],
    ['64:ff9b::127.0.0.1', 'loopback', '127.0.0.1', 'NAT64'],
    ['64:ff9b::a9fe:a9fe', 'cloud-metadata', '169.254.169.254', 'NAT64'],
    ['64:ff9b::808:808', 'public', '8.8.8.8', 'NAT64'],
    ['2002:7f00:1::', 'loopback', '127.0.0.1', '6to4'],
    ['2002:c0a8:101::1', 'private', '192.168.1.1', '6to4'],
    ['2002:808:808::1', 'public', '8.8.8.8', '6to4'],
  ])('%s is judged as the IPv4 it embeds', (address, rule, v4, embedding) => {
    expect(classifyAddress(address)).toEqual({ rule, embeddedIPv4: v4, embedding });
  });

  it.each(['example.com', 'localhost', '', '1.2.3.4.5', '256.0.0.1', '1.2.3.0x100', '1::2::3', '1:2:3:4:5:6:7:8:9', '::ffff:1.2.3.256', '::gggg', '08.0.0.1'])(
    '%j is not an address',
    (text) => {
      expect(classifyAddress(text)).toBeNull();
    },
  );
});

describe('createMediaPolicy', () => {
  it('defaults: any host name, public addresses only, 3 redirects', () => {
    expect(DEFAULT_MEDIA_POLICY.allowedMediaDomains).toBeNull();
    expect(DEFAULT_MEDIA_POLICY.allowPrivateHosts).toBe(false);
    expect(DEFAULT_MEDIA_POLICY.maxRedirects).toBe(3);
    expect(createMediaPolicy({ allowedMediaDomains: [] }).allowedMediaDomains).toBeNull();
  });

  it('normalizes allowlist entries to the form URLs are compared in', () => {
    expect(
      createMediaPolicy({ allowedMediaDomains: ['Images.Example.COM.', ' cdn.example.org ', '::1', '[::FFFF:127.0.0.1]', '127.1', 'cdn.example.org'] })
        .allowedMediaDomains,
    ).toEqual(['images.example.com', 'cdn.example.org', '::1', '::ffff:7f00:1', '127.0.0.1']);
  });

  it.each([
    ['', 'allowed_media_domains has an empty entry; list host names such as images.example.com'],
    ['*.example.com', "allowed_media_domains entry '*.example.com' has a wildcard; entries match exactly, list each host name"],
    [
      'https://example.com/',
      "allowed_media_domains entry 'https://example.com/' is not a bare host name (no scheme, port or path); list host names such as images.example.com",
    ],
    [
      'example.com:8080',
      "allowed_media_domains entry 'example.com:8080' is not a bare host name (no scheme, port or path); list host names such as images.example.com",
    ],
    ['exa mple.com', "allowed_media_domains entry 'exa mple.com' is not a host name; list host names such as images.example.com"],
  ])('refuses allowlist entry %j', (entry, message) => {
    expect(() => createMediaPolicy({ allowedMediaDomains: [entry] })).toThrow(message);
  });

  it.each([-1, 1.5, Number.NaN])('refuses maxRedirects %s', (n) => {
    expect(() => createMediaPolicy({ maxRedirects: n })).toThrow(`maxRedirects is ${n}, expected an integer >= 0`);
  });

  it('the opt-in unlocks internal unicast ranges, never metadata or non-host addresses', () => {
    const optIn = createMediaPolicy({ allowPrivateHosts: true });
    for (const a of ['127.0.0.1', '10.0.0.1', '169.254.1.1', '100.64.0.1', '198.18.0.1', '192.0.2.1', 'fd00::1', 'fe80::1', '::ffff:10.0.0.1']) {
      expect(isAddressAllowed(optIn, classifyAddress(a)!), a).toBe(true);
      expect(isAddressAllowed(DEFAULT_MEDIA_POLICY, classifyAddress(a)!), a).toBe(false);
    }
    for (const a of [
      '169.254.169.254',
      'fd00:ec2::254',
      '::ffff:169.254.169.254',
      '0.0.0.0',
      '::',
      '224.0.0.1',
      'ff02::1',
      '255.255.255.255',
      '240.0.0.1',
      '4000::1',
    ]) {
      expect(isAddressAllowed(optIn, classifyAddress(a)!), a).toBe(false);
    }
  });
});

describe('checkMediaUrl', () => {
  it('a public host is allowed with every address it resolves to, after one resolution', async () => {
    const resolve = resolverOf({ 'img.example': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'] });
    const check = await checkMediaUrl(createMediaPolicy({ resolve }), 'https://img.example/cat.png');
    expect(check).toMatchObject({
      verdict: 'allowed',
      hostname: 'img.example',
      addresses: [
        { address: '93.184.215.14', family: 4 },
        { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
      ],
    });
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(resolve).toHaveBeenCalledWith('img.example');
  });

  it.each([
    ['10.0.0.1', `internal.test resolves to a private address ${HINT}`],
    ['169.254.169.254', 'internal.test resolves to a cloud metadata address, which is never fetched'],
    ['100.64.0.1', `internal.test resolves to a shared (CGNAT) address ${HINT}`],
    ['fd00::1', `internal.test resolves to a private address ${HINT}`],
    ['::ffff:10.0.0.1', `internal.test resolves to a private address (IPv4-mapped) ${HINT}`],
    ['127.0.0.1', `internal.test resolves to a loopback address ${HINT}`],
    ['0.0.0.0', 'internal.test resolves to an unspecified address, which is never fetched'],
  ])('a name resolving to %s is refused without naming the address', async (address, reason) => {
    const check = await checkMediaUrl(createMediaPolicy({ resolve: resolverOf({ 'internal.test': [address] }) }), 'http://internal.test/x.png');
    expect(check).toEqual({ verdict: 'refused', reason });
  });

  it('one refused address among public ones refuses the host', async () => {
    const resolve = resolverOf({ 'rebind.test': ['93.184.215.14', '10.0.0.1'] });
    expect(await checkMediaUrl(createMediaPolicy({ resolve }), 'http://rebind.test/')).toEqual({
      verdict: 'refused',
      reason: `rebind.test resolves to a private address ${HINT}`,
    });
    const meta = resolverOf({ 'rebind.test': ['127.0.0.1', '169.254.169.254'] });
    expect((await checkMediaUrl(createMediaPolicy({ resolve: meta, allowPrivateHosts: true }), 'http://rebind.test/')).verdict).toBe('refused');
  });

  it('literal addresses are judged without resolving, in the form the URL parser gives them', async () => {
    const resolve = resolverOf({});
    const policy = createMediaPolicy({ resolve });
    expect(await checkMediaUrl(policy, 'http://10.0.0.1/x.png')).toEqual({ verdict: 'refused', reason: `10.0.0.1 is a private address ${HINT}` });
    expect(await checkMediaUrl(policy, 'http://0x7f.1/')).toEqual({ verdict: 'refused', reason: `127.0.0.1 is a loopback address ${HINT}` });
    expect(await checkMediaUrl(policy, 'http://[::ffff:169.254.169.254]/')).toEqual({
      verdict: 'refused',
      reason: '::ffff:a9fe:a9fe is the IPv4-mapped form of 169.254.169.254, a cloud metadata address, which is never fetched',
    });
    expect(await checkMediaUrl(policy, 'http://0/')).toEqual({ verdict: 'refused', reason: '0.0.0.0 is an unspecified address, which is never fetched' });
    expect(await checkMediaUrl(policy, 'http://8.8.8.8/x.png')).toMatchObject({ verdict: 'allowed', addresses: [{ address: '8.8.8.8', family: 4 }] });
    expect(await checkMediaUrl(policy, 'http://[2606:4700::1111]/')).toMatchObject({
      verdict: 'allowed',
      hostname: '2606:4700::1111',
      addresses: [{ address: '2606:4700::1111', family: 6 }],
    });
    expect(resolve).not.toHaveBeenCalled();
  });

  it.each(['localhost', 'LOCALHOST.', 'img.localhost', 'a.b.localhost.'])('%s is loopback without resolving', async (host) => {
    const resolve = resolverOf({});
    const check = await checkMediaUrl(createMediaPolicy({ resolve }), `http://${host}:8080/x.png`);
    expect(check).toEqual({ verdict: 'refused', reason: `${host.toLowerCase()} is a loopback host name ${HINT}` });
    expect(resolve).not.toHaveBeenCalled();
  });

  it('the allowlist is checked before resolving and does not exempt a host from the address rule', async () => {
    const resolve = resolverOf({ 'img.test': ['93.184.215.14'], 'img.test.': ['93.184.215.14'], 'other.test': ['93.184.215.14'], 'lan.test': ['192.168.1.5'] });
    const policy = createMediaPolicy({ resolve, allowedMediaDomains: ['IMG.test.', 'lan.test'] });
    expect((await checkMediaUrl(policy, 'http://img.test/a.png')).verdict).toBe('allowed');
    expect((await checkMediaUrl(policy, 'https://Img.Test./a.png')).verdict).toBe('allowed');
    expect(await checkMediaUrl(policy, 'http://other.test/a.png')).toEqual({
      verdict: 'refused',
      reason: 'other.test is not in allowed_media_domains (img.test, lan.test)',
    });
    expect(await checkMediaUrl(policy, 'http://sub.img.test/a.png')).toEqual({
      verdict: 'refused',
      reason: 'sub.img.test is not in allowed_media_domains (img.test, lan.test)',
    });
    expect(await checkMediaUrl(policy, 'http://93.184.215.14/a.png')).toEqual({
      verdict: 'refused',
      reason: '93.184.215.14 is not in allowed_media_domains (img.test, lan.test)',
    });
    // Refused names never reach the resolver; allowed ones are resolved as the URL spells them.
    expect(resolve.mock.calls.map((c) => c[0])).toEqual(['img.test', 'img.test.']);
    expect(await checkMediaUrl(policy, 'http://lan.test/a.png')).toEqual({ verdict: 'refused', reason: `lan.test resolves to a private address ${HINT}` });
  });

  it('a long allowlist is shortened in the message', async () => {
    const allowedMediaDomains = Array.from({ length: 12 }, (_, i) => `h${i}.example`);
    const check = await checkMediaUrl(createMediaPolicy({ allowedMediaDomains }), 'http://x.example/');
    expect(check).toEqual({
      verdict: 'refused',
      reason: `x.example is not in allowed_media_domains (${allowedMediaDomains.slice(0, 10).join(', ')} and 2 more)`,
    });
  });

  it('resolution failures are "not found", whatever the resolver said', async () => {
    const failing = createMediaPolicy({ resolve: async () => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.53:53')) });
    expect(await checkMediaUrl(failing, 'http://x.test/')).toEqual({ verdict: 'not-found' });
    expect(await checkMediaUrl(createMediaPolicy({ resolve: async () => [] }), 'http://x.test/')).toEqual({ verdict: 'not-found' });
    const garbage = createMediaPolicy({ resolve: async () => [{ address: 'not-an-ip', family: 4 }] });
    expect(await checkMediaUrl(garbage, 'http://x.test/')).toEqual({ verdict: 'refused', reason: 'x.test resolves to something that is not an IP address' });
  });

  it('only plain http(s) URLs', async () => {
    expect(await checkMediaUrl(DEFAULT_MEDIA_POLICY, 'ftp://example.org/x.png')).toEqual({
      verdict: 'refused',
      reason: "its scheme is 'ftp:', only http: and https: are fetched",
    });
    expect(await checkMediaUrl(DEFAULT_MEDIA_POLICY, 'http://user:pw@example.org/x.png')).toEqual({
      verdict: 'refused',
      reason: 'URLs with user:password@ credentials are not fetched',
    });
    expect(await checkMediaUrl(DEFAULT_MEDIA_POLICY, 'http://')).toEqual({ verdict: 'refused', reason: 'it is not a valid URL' });
  });
});
