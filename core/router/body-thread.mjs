// Parses large request bodies off the router's event loop (body-json.ts). It also measures
// the text of a chat request: a body whose text alone proves it longer than the model's
// context is answered with its length and never sent back whole (cloning a 50 MB string into
// the main thread would cost what parsing it there would have).
import { parentPort } from 'node:worker_threads';

function textChars(body) {
  let n = 0;
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  for (const m of messages) {
    if (typeof m?.content === 'string') n += m.content.length;
    else if (Array.isArray(m?.content)) for (const p of m.content) if (p?.type === 'text' && typeof p.text === 'string') n += p.text.length;
  }
  return n;
}

parentPort.on('message', ({ id, bytes, maxTextChars }) => {
  let value;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    parentPort.postMessage({ id, error: String(err?.message ?? err) });
    return;
  }
  const chars = textChars(value);
  if (chars > maxTextChars) parentPort.postMessage({ id, textChars: chars });
  else parentPort.postMessage({ id, value });
});
