// A system call's error as an operator reads it: its code once, then what it says (Node's own
// messages already start with the code: "EROFS: read-only file system, open '…'").
export function errnoText(err: unknown): string {
  const e = err as NodeJS.ErrnoException | undefined;
  const message = String(e?.message ?? err);
  return e?.code && !message.startsWith(`${e.code}:`) ? `${e.code}: ${message}` : message;
}
