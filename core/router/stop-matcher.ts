// The client's stop strings, matched by the router on the completion's text as the gateway
// matches them (its StopSequenceDecoder, crates/tokenizer/src/stop.rs), whatever the runtime:
// SGLang's workers take no stop strings at all (only the one-token ones reach them, as
// stop_token_ids), and the others stop on them too, but the text the client sees is cut here.
// The text up to the first stop is sent; the stop and anything after it are not. A stream holds
// back only the end of the text that could begin a stop (the gateway holds back the longest
// stop's length whatever the text), until the next text shows whether it does, so a stop split
// across chunks is still found and never half sent.
export class StopMatcher {
  private held = '';
  private stopped = false;
  private matchedStop: string | undefined;
  private readonly longest: number;

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((n, s) => Math.max(n, s.length), 0);
  }

  /** Whether a stop was found: no more text is to be sent. */
  get done(): boolean {
    return this.stopped;
  }

  /** The stop string that ended the text, when one did. */
  get matched(): string | undefined {
    return this.matchedStop;
  }

  /** The text of a stream's next delta that may be sent now. */
  push(delta: string): string {
    if (this.stopped) return '';
    if (this.longest === 0) return delta;
    this.held += delta;
    const hit = firstStop(this.held, this.stops);
    if (hit) {
      this.stopped = true;
      this.matchedStop = hit.stop;
      const out = this.held.slice(0, hit.at);
      this.held = '';
      return out;
    }
    // Keep what could still be the start of a stop: the longest end of the text that begins one.
    let cut = this.held.length - this.openPrefix();
    if (cut <= 0) return '';
    // Never split a surrogate pair.
    if (isHighSurrogate(this.held.charCodeAt(cut - 1))) cut -= 1;
    const out = this.held.slice(0, cut);
    this.held = this.held.slice(cut);
    return out;
  }

  /** How many characters at the end of the held text are the beginning of some stop (at most its length less one). */
  private openPrefix(): number {
    for (let k = Math.min(this.longest - 1, this.held.length); k > 0; k--) {
      const tail = this.held.slice(this.held.length - k);
      if (this.stops.some((s) => s.length > k && s.startsWith(tail))) return k;
    }
    return 0;
  }

  /** The text held back, at the end of the stream (nothing when a stop was found). */
  flush(): string {
    const out = this.stopped ? '' : this.held;
    this.held = '';
    return out;
  }

  /** A whole completion's text cut at its first stop. */
  cut(text: string): string {
    return this.push(text) + this.flush();
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** The stop that ends first in `text` (the gateway's matcher reports a match as soon as its last character arrives); ties go to the earlier start. */
function firstStop(text: string, stops: readonly string[]): { at: number; stop: string } | undefined {
  let best: { at: number; end: number; stop: string } | undefined;
  for (const stop of stops) {
    if (stop.length === 0) continue;
    const at = text.indexOf(stop);
    if (at < 0) continue;
    const end = at + stop.length;
    if (!best || end < best.end || (end === best.end && at < best.at)) best = { at, end, stop };
  }
  return best;
}
