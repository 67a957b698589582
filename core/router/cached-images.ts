// A request's use of the pixel cache (docs/performance.md, "The pixel cache"): which of its
// images the cache answered, their tensors for placement (a hard link over SHM, the cached
// bytes read into pooled memory otherwise), and the misses it keeps once computed.
import type { PreparedImage } from '../engines/engine.ts';
import type { PooledPreprocessResult } from '../multimodal/pool.ts';
import type { CachedEntry, CacheMiss, CachedKind, PixelCache } from '../transport/pixel-cache.ts';
import { pixelFingerprint } from '../transport/pixel-cache.ts';
import type { CachedTensor, CachedTensors } from '../transport/placement.ts';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import type { ImageModelTensor } from '../multimodal/families/index.ts';

interface Use {
  bytes: Uint8Array;
  tensor: CachedTensor;
}

/** The key's second half: what changes an image's tensor besides its bytes (the family's processor and settings among them). */
export function imageFingerprint(model: ModelDirectory, imageConfig: ModelDirectory['imageConfig'], kind: CachedKind): string {
  return pixelFingerprint({ model: model.path, modelType: model.modelType, family: model.family, imageConfig, kind });
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.buffer === b.buffer && a.byteOffset === b.byteOffset && a.byteLength === b.byteLength;
}

/** The cached images of one request, found by their tensors' bytes; release() when the request is over. */
export class RequestCacheUses implements CachedTensors {
  private readonly uses: Use[] = [];
  /**
   * `copy` (`multimodal_pixel_cache_shm: copy`): every SHM hit gets a copy of its own instead of
   * a link. `borrow`: memory for a hit's bytes when they must be read (the preprocessing pool's).
   */
  constructor(
    private readonly copy = false,
    private readonly borrow: (bytes: number) => { bytes: Uint8Array; release(): void } | undefined = () => undefined,
  ) {}
  private readonly releases: Array<() => void> = [];

  find(bytes: Uint8Array): CachedTensor | undefined {
    return this.uses.find((u) => sameBytes(u.bytes, bytes))?.tensor;
  }

  get hits(): number {
    return this.uses.filter((u) => u.tensor.status === 'hit').length;
  }

  /** A computed image the cache will keep: its tensor's events say `miss`. */
  noteMiss(bytes: Uint8Array): void {
    this.uses.push({ bytes, tensor: { status: 'miss', nbytes: bytes.byteLength } });
  }

  /**
   * The image of a hit. `readNow`: its bytes are read at once into pool memory (the tensor
   * will be read as it is: inline, converted, concatenated). Otherwise they stay in the cache
   * and the tensor goes as a hard link: the image's pixel array is an empty placeholder whose
   * identity placement knows (a buffer of the image's size allocated per hit would cost its time
   * and its pages; measured: docs/performance.md, "A buffer allocated per pixel-cache hit"), and
   * a placement that turns to another path reads the bytes then. Undefined when the
   * entry could not be read (the image is then computed).
   */
  async hitImage(entry: CachedEntry, readNow: boolean, encoded: Uint8Array | undefined): Promise<PreparedImage | undefined> {
    const { shape } = entry;
    this.releases.push(() => entry.release());
    let bytes: Uint8Array | undefined;
    // The preprocessing pool's memory (pre-faulted, in its budget, let go when idle). With none
    // free now, a hit read at once is computed instead (queued for the budget like any image:
    // memory stays bounded); a placement that must have the bytes takes a plain allocation.
    const read = async (mustHave: boolean): Promise<Uint8Array | undefined> => {
      const lease = this.borrow(shape.nbytes) ?? (mustHave ? { bytes: new Uint8Array(shape.nbytes), release: () => {} } : undefined);
      if (!lease) return undefined;
      this.releases.push(() => lease.release());
      return (await entry.read(lease.bytes)) ? lease.bytes : undefined;
    };
    if (readNow) {
      bytes = await read(false);
      if (!bytes) return undefined;
    }
    const view = bytes ?? new Uint8Array(new ArrayBuffer(0));
    let filling: Promise<Uint8Array> | undefined;
    const tensor: CachedTensor = {
      status: 'hit',
      nbytes: shape.nbytes,
      place: (scope, worker, readWrite) => entry.place(scope, worker, this.copy || readWrite),
      fill: () =>
        (filling ??= bytes
          ? Promise.resolve(bytes)
          : read(true).then((b) => {
              if (!b) throw new Error("the pixel cache's file for this image changed while the request used it; send the request again");
              return b;
            })),
    };
    this.uses.push({ bytes: view, tensor });
    const n = bytes ? shape.nbytes : 0;
    const image: PreparedImage = {
      ...(shape.kind === 'float32'
        ? { pixelValues: new Float32Array(view.buffer, view.byteOffset, n / 4) }
        : { bf16: new Uint16Array(view.buffer, view.byteOffset, n / 2) }),
      patches: shape.patches,
      features: shape.features,
      encoderShape: shape.encoderShape,
      modelTensors: shape.modelTensors,
      placeholder: { offset: 0, length: shape.tokens },
      mediaHash: shape.mediaHash,
      ...(encoded ? { encoded } : {}),
    };
    return image;
  }

  /**
   * Keep a computed image. From its /dev/shm file when the request wrote one (a second name for
   * the inode: no copy; awaited, since the worker unlinks the request's name; pinned until the
   * request ends and then checked, as a hit's link is), else from the pool's memory by a write
   * off the event loop: the pool gets that memory back only once it is done (`release` is the
   * pool result's). `readWrite`: the worker attaches the request's file read-write, so the
   * file stays the request's alone (the cache could not see a write through a shared map) and
   * the entry is written from memory.
   */
  async keep(
    cache: PixelCache,
    miss: CacheMiss,
    r: PooledPreprocessResult,
    modelTensors: ImageModelTensor[],
    encoderShape: number[],
    kind: CachedKind,
    mediaHash: Buffer,
    file: string | undefined,
    worker: string,
    readWrite: boolean,
  ): Promise<{ release: () => void; stored: boolean }> {
    const values = kind === 'float32' ? r.pixelValues : r.bf16;
    if (!values) {
      miss.abandon();
      return { release: r.release, stored: false };
    }
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    this.noteMiss(bytes);
    const shape = { kind, nbytes: bytes.byteLength, patches: r.patches, features: r.features, encoderShape, modelTensors, tokens: r.tokens, mediaHash };
    // The request's file becomes the entry unless every hit is to get a copy, the worker
    // attaches it read-write, or this worker was caught writing into its files: then the entry
    // is a file of its own, written from memory.
    if (file && !this.copy && !readWrite && !cache.isSuspect(worker)) {
      const pinned = await miss.storeShared(shape, file, worker);
      if (pinned) this.releases.push(() => pinned.release());
      return { release: r.release, stored: pinned !== undefined };
    }
    const storing = miss.store(shape, { kind: 'memory', bytes });
    let released = false;
    return {
      stored: false,
      release: () => {
        if (released) return;
        released = true;
        void storing.finally(r.release);
      },
    };
  }

  release(): void {
    for (const r of this.releases.splice(0)) r();
  }
}
