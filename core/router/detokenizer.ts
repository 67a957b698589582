// The completion's text as token ids arrive: what a stream may send now, holding back a
// trailing partial UTF-8 sequence (shown as U+FFFD until its last byte's token comes) so a
// client never receives half a character.
import type { ModelDirectory } from '../multimodal/model-dir.ts';

export class IncrementalDetokenizer {
  private ids: number[] = [];
  private emitted = '';
  constructor(private readonly model: ModelDirectory) {}

  collect(tokenIds: readonly number[]): void {
    this.ids.push(...tokenIds);
  }

  push(tokenIds: readonly number[]): string {
    this.ids.push(...tokenIds);
    const text = this.text();
    const safe = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
    if (!safe.startsWith(this.emitted)) return '';
    const delta = safe.slice(this.emitted.length);
    this.emitted = safe;
    return delta;
  }

  flush(): string {
    const text = this.text();
    const delta = text.startsWith(this.emitted) ? text.slice(this.emitted.length) : '';
    this.emitted = text;
    return delta;
  }

  get count(): number {
    return this.ids.length;
  }

  /** The whole text of every token so far. */
  text(): string {
    return this.model.tokenizer.decode(this.ids, true);
  }
}
