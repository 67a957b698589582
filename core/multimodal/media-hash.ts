// The identity of an image, as the gateway gives it (docs/router.md, "What each servicer
// reads"): BLAKE3 of the image's encoded bytes, exactly as they arrived (a data: URL's decoded
// payload, an http(s) URL's body), computed once per image when the request is admitted. The
// workers key their encoder and prefix caches on it, so the same image sent by mmtc and by the
// gateway shares their entries:
//   vLLM       mm_hashes[i]            the 64-character lowercase hex of the hash
//   TokenSpeed content_hash (32 bytes) BLAKE3 of that hex text (the gateway hashes the list of
//                                      an item's media hashes, here a list of one)
// The pixel cache keys its entries on it too, and EPD's consistent hashing places the image by
// it. One BLAKE3 instance (WebAssembly; its speed: docs/performance.md, "The pixel cache")
// serves the whole thread; every call is synchronous once this module has loaded.
import { createBLAKE3 } from 'hash-wasm';

const hasher = await createBLAKE3();

/** BLAKE3 (32 bytes) of `bytes`. */
export function blake3(bytes: Uint8Array | string): Buffer {
  return Buffer.from(hasher.init().update(bytes).digest('binary'));
}

/** An image's media hash: BLAKE3 of its encoded bytes. */
export function mediaHash(encoded: Uint8Array): Buffer {
  return blake3(encoded);
}

/** vLLM's mm_hashes entry for an image: its media hash in lowercase hex. */
export function mediaHashHex(hash: Uint8Array): string {
  return Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength).toString('hex');
}

/** TokenSpeed's MultimodalItem.content_hash for an image: BLAKE3 of its media hash's hex text. */
export function tokenSpeedContentHash(hash: Uint8Array): Buffer {
  return blake3(mediaHashHex(hash));
}
