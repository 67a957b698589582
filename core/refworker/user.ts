// `mmtc worker --user NAME`: the reference worker as a worker under another uid, the way a
// container runs its server as a non-root user. It starts as root, loads everything it needs
// (code, model directory) and binds, then drops to NAME and NAME's primary group with no
// supplementary groups, before it serves a request; from then on it can open only what that
// user may open (a root router's 0600 files in /dev/shm are not among them). Starting as root
// and dropping, rather than starting as NAME, lets it run from a checkout NAME cannot enter.
import { readFileSync } from 'node:fs';

export interface UserIds {
  name: string;
  uid: number;
  gid: number;
}

/** NAME's uid and primary gid from /etc/passwd. */
export function lookupUser(name: string, passwd = readFileSync('/etc/passwd', 'utf8')): UserIds {
  for (const line of passwd.split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid !== undefined && gid !== undefined && /^\d+$/.test(uid) && /^\d+$/.test(gid)) return { name, uid: Number(uid), gid: Number(gid) };
  }
  throw new Error(`--user ${name}: no such user in /etc/passwd`);
}

/** Become `name` for good (real, effective and saved ids): needs root. */
export function dropPrivileges(name: string): UserIds {
  const ids = lookupUser(name);
  if (typeof process.getuid !== 'function' || process.getuid() !== 0)
    throw new Error(`--user ${name} needs the worker to start as root (it drops to ${name} once loaded)`);
  process.setgroups!([]);
  process.setgid!(ids.gid);
  process.setuid!(ids.uid);
  if (process.getuid() !== ids.uid || process.geteuid!() !== ids.uid || process.getgid!() !== ids.gid)
    throw new Error(`--user ${name}: the worker is still uid ${process.getuid()}`);
  return ids;
}
