// The optional native JPEG decoder (native/jpeg): libjpeg-turbo called directly, on the
// thread that decodes. Pillow decodes with the same library and the same settings, so its
// pixels are Pillow's; it takes 40-75 % of sharp's time (the benchmark's 1080p photo 5.3
// against 9.3 ms, 4K 20.7 against 27.6: docs/performance.md, "JPEG decoding without
// libvips"). Built from source on install where a C toolchain and libjpeg-turbo's headers
// are (scripts/build-native.mjs); without it sharp decodes every JPEG, and decode.ts works
// the same.
import { optionalNativeHelper } from './native-helper.ts';

export interface NativeJpeg {
  /**
   * The image's RGB rows, or the reason it is left to sharp: not 8-bit gray or YCbCr/RGB,
   * more than `maxPixels`, or any error or warning libjpeg raised (sharp then decodes or
   * refuses it, with its own message). `into` (at least width × height × 3 bytes) takes the
   * rows [firstRow, endRow) at their place; without it a new array holds the whole image.
   */
  decode(
    bytes: Uint8Array,
    maxPixels: number,
    into?: Uint8Array,
    firstRow?: number,
    endRow?: number,
  ): { width: number; height: number; rgb: Uint8Array } | string;
}

/** The native decoder, or null when it was not built here (or does not load: built for another platform, or this host lacks libjpeg-turbo). */
export const nativeJpeg: () => NativeJpeg | null = optionalNativeHelper<NativeJpeg>('jpeg');
