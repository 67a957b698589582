// `mmtc worker --user NAME`: the user is looked up in /etc/passwd, and a name that is not there
// (or a malformed line) is an error naming it, before anything is served.
import { describe, expect, it } from 'vitest';
import { runMmtc } from '../test/cli.ts';
import { lookupUser } from './user.ts';

const PASSWD = ['root:x:0:0:root:/root:/bin/bash', 'broken:x:abc:1::/:/bin/false', 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin', ''].join('\n');

describe("the worker's --user", () => {
  it('finds the uid and primary gid of a user; a missing or malformed entry is an error naming it', () => {
    expect(lookupUser('nobody', PASSWD)).toEqual({ name: 'nobody', uid: 65534, gid: 65534 });
    expect(lookupUser('root', PASSWD)).toEqual({ name: 'root', uid: 0, gid: 0 });
    expect(() => lookupUser('broken', PASSWD)).toThrow('--user broken: no such user in /etc/passwd');
    expect(() => lookupUser('nob', PASSWD)).toThrow('--user nob: no such user in /etc/passwd');
  });

  it('mmtc worker --user with an unknown name exits 2 with that error and serves nothing', () => {
    const r = runMmtc(['worker', '--runtime', 'sglang', '--port', '0', '--user', 'no-such-user-mmtc']);
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe('error: --user no-such-user-mmtc: no such user in /etc/passwd');
    expect(r.stdout).not.toContain('listening');
  });
});
