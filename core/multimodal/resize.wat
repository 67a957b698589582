;; Pillow-exact bicubic resize kernels in WebAssembly SIMD (see resize.ts for the algorithm
;; and its exactness argument). Same integer arithmetic as Pillow: 22-bit fixed-point
;; weights, sums start at 1 << 21, arithmetic shift by 22, clip to 0..255 (the saturating
;; narrows to 16 then 8 bits clip exactly so: no min or max is needed). Only the work is
;; vectorised: two taps of a pixel's 3 channels per step (horizontal), 16 bytes of a row per
;; step (vertical).
;;
;; Buffers are laid out by the caller in the memory it gives the module: shared memory, so
;; that two threads can each resize a band of the same image with their own instance.
;; Source buffers need 16 bytes of readable slack after their end, destination buffers 16
;; bytes of writable slack: the kernels load and store whole vectors and let the next pixel
;; or row overwrite the spill (so two threads never write into one destination buffer).
(module
  ;; Up to 1 GiB (16384 pages of 64 KiB); larger layouts fall back to the JavaScript passes.
  (import "env" "memory" (memory 1 16384 shared))

  ;; The horizontal pass four rows at a time: the four rows' pixels at the same columns share
  ;; each output pixel's coefficients and their loads. The last pixel of a row is stored as
  ;; exactly its 3 bytes (the 4-byte store of the others would spill into the next row's first
  ;; pixel, already written). Rows left over (fewer than four) go through $horizontalRows.
  ;; The pair shuffle is a swizzle by a mask loaded from memory: a constant shuffle mask was
  ;; rebuilt from immediates at every use in TurboFan's code.
  (func (export "horizontal")
    (param $src i32) (param $inW i32) (param $rows i32) (param $dst i32) (param $outW i32)
    (param $pairs i32) (param $starts i32) (param $counts i32) (param $vectors i32)
    (local $y i32) (local $x i32) (local $j i32) (local $n i32) (local $p i32) (local $wv i32)
    (local $srcRow i32) (local $dstPix i32) (local $in1 i32) (local $in2 i32) (local $in3 i32)
    (local $out1 i32) (local $out2 i32) (local $out3 i32) (local $full i32)
    (local $mask v128) (local $px v128) (local $wh v128) (local $wl v128) (local $acc v128)
    (local $h0 v128) (local $l0 v128) (local $h1 v128) (local $l1 v128) (local $h2 v128) (local $l2 v128) (local $h3 v128) (local $l3 v128)
    (local.set $in1 (i32.mul (local.get $inW) (i32.const 3)))
    (local.set $in2 (i32.shl (local.get $in1) (i32.const 1)))
    (local.set $in3 (i32.add (local.get $in2) (local.get $in1)))
    (local.set $out1 (i32.mul (local.get $outW) (i32.const 3)))
    (local.set $out2 (i32.shl (local.get $out1) (i32.const 1)))
    (local.set $out3 (i32.add (local.get $out2) (local.get $out1)))
    ;; (R0 R1 G0 G1 B0 B1 0 0) as 16-bit lanes from 8 source bytes (0 0x80 3 0x80 1 0x80 4
    ;; 0x80 2 0x80 5 0x80 0x80 0x80 0x80 0x80; index 0x80 gives 0), loaded from the vectors'
    ;; first 16 bytes so that it stays in a register.
    (local.set $mask (v128.load (local.get $vectors)))
    (local.set $full (i32.and (local.get $rows) (i32.const -4)))
    (local.set $y (i32.const 0))
    (block $rowsDone
      (loop $rowLoop
        (br_if $rowsDone (i32.ge_u (local.get $y) (local.get $full)))
        (local.set $srcRow (i32.add (local.get $src) (i32.mul (local.get $y) (local.get $in1))))
        (local.set $dstPix (i32.add (local.get $dst) (i32.mul (local.get $y) (local.get $out1))))
        (local.set $x (i32.const 0))
        (block $colsDone
          (loop $colLoop
            (br_if $colsDone (i32.ge_u (local.get $x) (local.get $outW)))
            (local.set $p (i32.add (local.get $srcRow)
              (i32.mul (i32.load (i32.add (local.get $starts) (i32.shl (local.get $x) (i32.const 2)))) (i32.const 3))))
            (local.set $n (i32.load (i32.add (local.get $counts) (i32.shl (local.get $x) (i32.const 2)))))
            (local.set $wv (i32.add (i32.add (local.get $vectors) (i32.const 16)) (i32.shl (i32.mul (local.get $x) (local.get $pairs)) (i32.const 5))))
            ;; The low sums start at Pillow's rounding term, 1 << 21.
            (local.set $h0 (v128.const i32x4 0 0 0 0))
            (local.set $l0 (v128.const i32x4 2097152 2097152 2097152 2097152))
            (local.set $h1 (v128.const i32x4 0 0 0 0))
            (local.set $l1 (local.get $l0))
            (local.set $h2 (v128.const i32x4 0 0 0 0))
            (local.set $l2 (local.get $l0))
            (local.set $h3 (v128.const i32x4 0 0 0 0))
            (local.set $l3 (local.get $l0))
            (local.set $j (i32.const 0))
            (block $pairsDone
              (loop $pairLoop
                (br_if $pairsDone (i32.ge_u (local.get $j) (local.get $n)))
                (local.set $wh (v128.load (local.get $wv)))
                (local.set $wl (v128.load offset=16 (local.get $wv)))
                (local.set $px (i8x16.swizzle (v128.load64_zero (local.get $p)) (local.get $mask)))
                (local.set $h0 (i32x4.add (local.get $h0) (i32x4.dot_i16x8_s (local.get $px) (local.get $wh))))
                (local.set $l0 (i32x4.add (local.get $l0) (i32x4.dot_i16x8_s (local.get $px) (local.get $wl))))
                (local.set $px (i8x16.swizzle (v128.load64_zero (i32.add (local.get $p) (local.get $in1))) (local.get $mask)))
                (local.set $h1 (i32x4.add (local.get $h1) (i32x4.dot_i16x8_s (local.get $px) (local.get $wh))))
                (local.set $l1 (i32x4.add (local.get $l1) (i32x4.dot_i16x8_s (local.get $px) (local.get $wl))))
                (local.set $px (i8x16.swizzle (v128.load64_zero (i32.add (local.get $p) (local.get $in2))) (local.get $mask)))
                (local.set $h2 (i32x4.add (local.get $h2) (i32x4.dot_i16x8_s (local.get $px) (local.get $wh))))
                (local.set $l2 (i32x4.add (local.get $l2) (i32x4.dot_i16x8_s (local.get $px) (local.get $wl))))
                (local.set $px (i8x16.swizzle (v128.load64_zero (i32.add (local.get $p) (local.get $in3))) (local.get $mask)))
                (local.set $h3 (i32x4.add (local.get $h3) (i32x4.dot_i16x8_s (local.get $px) (local.get $wh))))
                (local.set $l3 (i32x4.add (local.get $l3) (i32x4.dot_i16x8_s (local.get $px) (local.get $wl))))
                (local.set $p (i32.add (local.get $p) (i32.const 6)))
                (local.set $wv (i32.add (local.get $wv) (i32.const 32)))
                (local.set $j (i32.add (local.get $j) (i32.const 1)))
                (br $pairLoop)))
            ;; Each row's sum shifted down; the four rows narrowed into one vector with saturation,
            ;; which is Pillow's clip to 0..255 (to -32768..32767, then to 0..255): bytes 4r..4r+2
            ;; are row r's pixel.
            (local.set $acc
              (i8x16.narrow_i16x8_u
                (i16x8.narrow_i32x4_s
                  (i32x4.shr_s (i32x4.add (i32x4.shl (local.get $h0) (i32.const 11)) (local.get $l0)) (i32.const 22))
                  (i32x4.shr_s (i32x4.add (i32x4.shl (local.get $h1) (i32.const 11)) (local.get $l1)) (i32.const 22)))
                (i16x8.narrow_i32x4_s
                  (i32x4.shr_s (i32x4.add (i32x4.shl (local.get $h2) (i32.const 11)) (local.get $l2)) (i32.const 22))
                  (i32x4.shr_s (i32x4.add (i32x4.shl (local.get $h3) (i32.const 11)) (local.get $l3)) (i32.const 22)))))
            (if (i32.lt_u (i32.add (local.get $x) (i32.const 1)) (local.get $outW))
              (then
                (v128.store32_lane 0 (local.get $dstPix) (local.get $acc))
                (v128.store32_lane 1 (i32.add (local.get $dstPix) (local.get $out1)) (local.get $acc))
                (v128.store32_lane 2 (i32.add (local.get $dstPix) (local.get $out2)) (local.get $acc))
                (v128.store32_lane 3 (i32.add (local.get $dstPix) (local.get $out3)) (local.get $acc)))
              (else
                (v128.store16_lane 0 (local.get $dstPix) (local.get $acc))
                (v128.store8_lane 2 (i32.add (local.get $dstPix) (i32.const 2)) (local.get $acc))
                (v128.store16_lane 2 (i32.add (local.get $dstPix) (local.get $out1)) (local.get $acc))
                (v128.store8_lane 6 (i32.add (i32.add (local.get $dstPix) (local.get $out1)) (i32.const 2)) (local.get $acc))
                (v128.store16_lane 4 (i32.add (local.get $dstPix) (local.get $out2)) (local.get $acc))
                (v128.store8_lane 10 (i32.add (i32.add (local.get $dstPix) (local.get $out2)) (i32.const 2)) (local.get $acc))
                (v128.store16_lane 6 (i32.add (local.get $dstPix) (local.get $out3)) (local.get $acc))
                (v128.store8_lane 14 (i32.add (i32.add (local.get $dstPix) (local.get $out3)) (i32.const 2)) (local.get $acc))))
            (local.set $dstPix (i32.add (local.get $dstPix) (i32.const 3)))
            (local.set $x (i32.add (local.get $x) (i32.const 1)))
            (br $colLoop)))
        (local.set $y (i32.add (local.get $y) (i32.const 4)))
        (br $rowLoop)))
    (if (i32.lt_u (local.get $full) (local.get $rows))
      (then
        (call $horizontalRows
          (i32.add (local.get $src) (i32.mul (local.get $full) (local.get $in1))) (local.get $inW)
          (i32.sub (local.get $rows) (local.get $full))
          (i32.add (local.get $dst) (i32.mul (local.get $full) (local.get $out1))) (local.get $outW)
          (local.get $pairs) (local.get $starts) (local.get $counts) (local.get $vectors)))))

    ;; Horizontal pass: `rows` rows of packed RGB, `inW` pixels wide, to `outW` pixels, two taps
  ;; per step: the two pixels' channels as 16-bit lanes (R0 R1 G0 G1 B0 B1 0 0) times the two
  ;; taps' weights, summed pairwise (i32x4.dot_i16x8_s). Pillow's 22-bit weights do not fit 16
  ;; bits, so each is split as w = hi * 2048 + lo (lo in 0..2047) with one dot product for each
  ;; half; (sum_hi << 11) + sum_lo is exactly Pillow's 32-bit sum.
  ;; starts: i32 first source pixel per output pixel; counts: i32 tap pairs per output pixel;
  ;; vectors: the pair mask (16 bytes, used by the four-row kernel above), then per output pixel `pairs` entries of 32
  ;; bytes (hi weights, lo weights; a missing second tap has weight 0).
  (func $horizontalRows
    (param $src i32) (param $inW i32) (param $rows i32) (param $dst i32) (param $outW i32)
    (param $pairs i32) (param $starts i32) (param $counts i32) (param $vectors i32)
    (local $y i32) (local $x i32) (local $j i32) (local $n i32) (local $p i32) (local $wv i32)
    (local $srcRow i32) (local $dstPix i32) (local $px v128) (local $hi v128) (local $lo v128) (local $acc v128)
    (local.set $y (i32.const 0))
    (block $rowsDone
      (loop $rowLoop
        (br_if $rowsDone (i32.ge_u (local.get $y) (local.get $rows)))
        (local.set $srcRow (i32.add (local.get $src) (i32.mul (local.get $y) (i32.mul (local.get $inW) (i32.const 3)))))
        (local.set $dstPix (i32.add (local.get $dst) (i32.mul (local.get $y) (i32.mul (local.get $outW) (i32.const 3)))))
        (local.set $x (i32.const 0))
        (block $colsDone
          (loop $colLoop
            (br_if $colsDone (i32.ge_u (local.get $x) (local.get $outW)))
            (local.set $p (i32.add (local.get $srcRow)
              (i32.mul (i32.load (i32.add (local.get $starts) (i32.shl (local.get $x) (i32.const 2)))) (i32.const 3))))
            (local.set $n (i32.load (i32.add (local.get $counts) (i32.shl (local.get $x) (i32.const 2)))))
            (local.set $wv (i32.add (i32.add (local.get $vectors) (i32.const 16)) (i32.shl (i32.mul (local.get $x) (local.get $pairs)) (i32.const 5))))
            (local.set $hi (v128.const i32x4 0 0 0 0))
            (local.set $lo (v128.const i32x4 0 0 0 0))
            (local.set $j (i32.const 0))
            (block $pairsDone
              (loop $pairLoop
                (br_if $pairsDone (i32.ge_u (local.get $j) (local.get $n)))
                (local.set $px (i8x16.shuffle 0 16 3 16 1 16 4 16 2 16 5 16 16 16 16 16
                  (v128.load64_zero (local.get $p)) (v128.const i32x4 0 0 0 0)))
                (local.set $hi (i32x4.add (local.get $hi) (i32x4.dot_i16x8_s (local.get $px) (v128.load (local.get $wv)))))
                (local.set $lo (i32x4.add (local.get $lo) (i32x4.dot_i16x8_s (local.get $px) (v128.load offset=16 (local.get $wv)))))
                (local.set $p (i32.add (local.get $p) (i32.const 6)))
                (local.set $wv (i32.add (local.get $wv) (i32.const 32)))
                (local.set $j (i32.add (local.get $j) (i32.const 1)))
                (br $pairLoop)))
            ;; Rounded, shifted down, narrowed with saturation (Pillow's clip to 0..255).
            (local.set $acc (i32x4.shr_s (i32x4.add (i32x4.add (i32x4.shl (local.get $hi) (i32.const 11)) (local.get $lo))
              (v128.const i32x4 2097152 2097152 2097152 2097152)) (i32.const 22)))
            (local.set $acc (i16x8.narrow_i32x4_s (local.get $acc) (local.get $acc)))
            (v128.store32_lane 0 (local.get $dstPix) (i8x16.narrow_i16x8_u (local.get $acc) (local.get $acc)))
            (local.set $dstPix (i32.add (local.get $dstPix) (i32.const 3)))
            (local.set $x (i32.add (local.get $x) (i32.const 1)))
            (br $colLoop)))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br $rowLoop))))

  ;; Vertical pass over rows of `stride` bytes: output row yy sums source rows
  ;; starts[yy]-rowShift .. +counts[yy], 16 bytes at a time with four i32x4 accumulators.
  (func (export "vertical")
    (param $src i32) (param $stride i32) (param $outH i32) (param $dst i32) (param $ksize i32)
    (param $starts i32) (param $counts i32) (param $weights i32) (param $rowShift i32)
    (local $yy i32) (local $i i32) (local $t i32) (local $n i32) (local $p i32) (local $kb i32)
    (local $base i32) (local $dstRow i32) (local $w v128) (local $v v128) (local $lo v128) (local $hi v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local.set $yy (i32.const 0))
    (block $rowsDone
      (loop $rowLoop
        (br_if $rowsDone (i32.ge_u (local.get $yy) (local.get $outH)))
        (local.set $base (i32.add (local.get $src)
          (i32.mul (i32.sub (i32.load (i32.add (local.get $starts) (i32.shl (local.get $yy) (i32.const 2)))) (local.get $rowShift)) (local.get $stride))))
        (local.set $n (i32.load (i32.add (local.get $counts) (i32.shl (local.get $yy) (i32.const 2)))))
        (local.set $kb (i32.add (local.get $weights) (i32.shl (i32.mul (local.get $yy) (local.get $ksize)) (i32.const 2))))
        (local.set $dstRow (i32.add (local.get $dst) (i32.mul (local.get $yy) (local.get $stride))))
        (local.set $i (i32.const 0))
        (block $colsDone
          (loop $colLoop
            (br_if $colsDone (i32.ge_u (local.get $i) (local.get $stride)))
            (local.set $a0 (i32x4.splat (i32.const 2097152)))
            (local.set $a1 (local.get $a0))
            (local.set $a2 (local.get $a0))
            (local.set $a3 (local.get $a0))
            (local.set $p (i32.add (local.get $base) (local.get $i)))
            (local.set $t (i32.const 0))
            (block $tapsDone
              (loop $tapLoop
                (br_if $tapsDone (i32.ge_u (local.get $t) (local.get $n)))
                (local.set $w (i32x4.splat (i32.load (i32.add (local.get $kb) (i32.shl (local.get $t) (i32.const 2))))))
                (local.set $v (v128.load (local.get $p)))
                (local.set $lo (i16x8.extend_low_i8x16_u (local.get $v)))
                (local.set $hi (i16x8.extend_high_i8x16_u (local.get $v)))
                (local.set $a0 (i32x4.add (local.get $a0) (i32x4.mul (i32x4.extend_low_i16x8_u (local.get $lo)) (local.get $w))))
                (local.set $a1 (i32x4.add (local.get $a1) (i32x4.mul (i32x4.extend_high_i16x8_u (local.get $lo)) (local.get $w))))
                (local.set $a2 (i32x4.add (local.get $a2) (i32x4.mul (i32x4.extend_low_i16x8_u (local.get $hi)) (local.get $w))))
                (local.set $a3 (i32x4.add (local.get $a3) (i32x4.mul (i32x4.extend_high_i16x8_u (local.get $hi)) (local.get $w))))
                (local.set $p (i32.add (local.get $p) (local.get $stride)))
                (local.set $t (i32.add (local.get $t) (i32.const 1)))
                (br $tapLoop)))
            ;; Shifted down, then narrowed with saturation: Pillow's clip to 0..255.
            (local.set $a0 (i32x4.shr_s (local.get $a0) (i32.const 22)))
            (local.set $a1 (i32x4.shr_s (local.get $a1) (i32.const 22)))
            (local.set $a2 (i32x4.shr_s (local.get $a2) (i32.const 22)))
            (local.set $a3 (i32x4.shr_s (local.get $a3) (i32.const 22)))
            (v128.store (i32.add (local.get $dstRow) (local.get $i))
              (i8x16.narrow_i16x8_u
                (i16x8.narrow_i32x4_s (local.get $a0) (local.get $a1))
                (i16x8.narrow_i32x4_s (local.get $a2) (local.get $a3))))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $colLoop)))
        (local.set $yy (i32.add (local.get $yy) (i32.const 1)))
        (br $rowLoop))))

  ;; Patch scatter: the resized rows of merge-block rows bh0 .. bh0+blockRows (packed RGB,
  ;; `stride` bytes apart from $rowsPtr, the first of them block row bh0's first pixel row)
  ;; into the encoder input, rescaled and normalised per channel exactly as
  ;; qwen-vl.ts's level table computes it: float32(value * rescale) in float64 then rounded,
  ;; then (x - mean) / std in float32 (the same IEEE operations, so the same bits). In one
  ;; pass: float32 at $outF when $kinds has bit 0, bfloat16 (round to nearest even, NaN kept
  ;; quiet) at $outB when it has bit 1. Each patch
  ;; row's P values per channel are written once per temporal copy (T), 4 values per step;
  ;; the last step of a patch row starts at P-4 and rewrites up to 3 values with the same
  ;; bits, so P must be at least 4. Reads up to 4 bytes past a row's last pixel.
  ;; $consts: float64 rescale at +0, float32 mean[3] at +16, float32 std[3] at +32.
  ;; The 8-bit levels go to float64 by the signed conversion: for 0..255 it gives the same
  ;; values as the unsigned one, in one x64 instruction instead of three.
  (func (export "scatter")
    (param $rowsPtr i32) (param $stride i32) (param $bh0 i32) (param $blockRows i32) (param $outF i32) (param $outB i32) (param $kinds i32)
    (param $P i32) (param $m i32) (param $F i32) (param $T i32) (param $gridW i32) (param $rowStride i32) (param $consts i32)
    (local $pr i32) (local $bh i32) (local $mr i32) (local $mc i32) (local $patchSrc i32)
    (local $rowSrc i32) (local $bw i32) (local $base i32)
    (local $pc i32) (local $at i32) (local $t i32) (local $e i32) (local $cs i32) (local $PP i32)
    (local $v v128) (local $ch v128) (local $f v128) (local $bits v128) (local $scale v128)
    (local $p i32) (local $means0 v128) (local $means1 v128) (local $means2 v128)
    (local $stds0 v128) (local $stds1 v128) (local $stds2 v128) (local $patchBase i32)
    (local.set $PP (i32.mul (local.get $P) (local.get $P)))
    (local.set $cs (i32.mul (local.get $T) (local.get $PP)))
    (local.set $scale (f64x2.splat (f64.load (local.get $consts))))
    (local.set $means0 (f32x4.splat (f32.load offset=16 (local.get $consts))))
    (local.set $means1 (f32x4.splat (f32.load offset=20 (local.get $consts))))
    (local.set $means2 (f32x4.splat (f32.load offset=24 (local.get $consts))))
    (local.set $stds0 (f32x4.splat (f32.load offset=32 (local.get $consts))))
    (local.set $stds1 (f32x4.splat (f32.load offset=36 (local.get $consts))))
    (local.set $stds2 (f32x4.splat (f32.load offset=40 (local.get $consts))))
    ;; Patch by patch, in the encoder input's order (so the element index just counts up): a
    ;; patch's 3·T store streams advance together, row by row of the patch. No division
    ;; anywhere in the loops: TurboFan re-evaluated the loop-invariant divisions of an earlier
    ;; version at every store (row by row across the image, with every patch column's stores
    ;; in flight at once, it ran at a fifth of the memory's write speed).
    (local.set $patchBase (i32.mul (local.get $bh0) (local.get $rowStride)))
    (local.set $bh (i32.const 0))
    (block $blockRowsDone
      (loop $blockRowLoop
        (br_if $blockRowsDone (i32.ge_u (local.get $bh) (local.get $blockRows)))
        (local.set $bw (i32.const 0))
        (block $blockColsDone
          (loop $blockColLoop
            (br_if $blockColsDone (i32.ge_u (i32.mul (local.get $bw) (local.get $m)) (local.get $gridW)))
            (local.set $mr (i32.const 0))
            (block $mrDone
              (loop $mrLoop
                (br_if $mrDone (i32.ge_u (local.get $mr) (local.get $m)))
                (local.set $mc (i32.const 0))
                (block $mcDone
                  (loop $mcLoop
                    (br_if $mcDone (i32.ge_u (local.get $mc) (local.get $m)))
                    ;; the patch's top-left pixel in the band's rows
                    (local.set $patchSrc (i32.add (local.get $rowsPtr) (i32.add
                      (i32.mul (i32.mul (i32.add (i32.mul (local.get $bh) (local.get $m)) (local.get $mr)) (local.get $P)) (local.get $stride))
                      (i32.mul (i32.mul (i32.add (i32.mul (local.get $bw) (local.get $m)) (local.get $mc)) (local.get $P)) (i32.const 3)))))
                    (local.set $pr (i32.const 0))
                    (block $prDone
                      (loop $prLoop
                        (br_if $prDone (i32.ge_u (local.get $pr) (local.get $P)))
            (local.set $rowSrc (i32.add (local.get $patchSrc) (i32.mul (local.get $pr) (local.get $stride))))
            (local.set $base (i32.add (local.get $patchBase) (i32.mul (local.get $pr) (local.get $P))))
            (local.set $pc (i32.const 0))
            (block $pixDone
              (loop $pixLoop
                (br_if $pixDone (i32.ge_u (local.get $pc) (local.get $P)))
                ;; 4 pixels from $at (the last group starts at P-4)
                (local.set $at (select (i32.sub (local.get $P) (i32.const 4)) (local.get $pc)
                  (i32.gt_u (i32.add (local.get $pc) (i32.const 4)) (local.get $P))))
                (local.set $v (v128.load (i32.add (local.get $rowSrc) (i32.mul (local.get $at) (i32.const 3)))))
                ;; channel 0
                (local.set $ch (i8x16.shuffle 0 16 16 16 3 16 16 16 6 16 16 16 9 16 16 16 (local.get $v) (v128.const i64x2 0 0)))
                (local.set $f
                  (f32x4.div
                    (f32x4.sub
                      (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
                        (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $ch)) (local.get $scale)))
                        (f32x4.demote_f64x2_zero (f64x2.mul
                          (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $ch) (local.get $ch)))
                          (local.get $scale))))
                      (local.get $means0))
                    (local.get $stds0)))
                (local.set $e (i32.add (i32.add (local.get $base) (i32.mul (i32.const 0) (local.get $cs))) (local.get $at)))
                (if (i32.and (local.get $kinds) (i32.const 2))
                  (then
                    (local.set $bits
                      (v128.bitselect
                        (v128.or (i32x4.shr_u (local.get $f) (i32.const 16)) (i32x4.splat (i32.const 0x40)))
                        (i32x4.shr_u
                          (i32x4.add (i32x4.add (local.get $f) (i32x4.splat (i32.const 0x7fff)))
                                     (v128.and (i32x4.shr_u (local.get $f) (i32.const 16)) (i32x4.splat (i32.const 1))))
                          (i32.const 16))
                        (i32x4.gt_s (v128.and (local.get $f) (i32x4.splat (i32.const 0x7fffffff))) (i32x4.splat (i32.const 0x7f800000)))))
                    (local.set $bits (i16x8.narrow_i32x4_u (local.get $bits) (local.get $bits)))
                    (local.set $p (i32.add (local.get $outB) (i32.shl (local.get $e) (i32.const 1))))
                    (local.set $t (i32.const 0))
                    (loop $tLoopB0
                      (v128.store64_lane 0 (local.get $p) (local.get $bits))
                      (local.set $p (i32.add (local.get $p) (i32.shl (local.get $PP) (i32.const 1))))
                      (local.set $t (i32.add (local.get $t) (i32.const 1)))
                      (br_if $tLoopB0 (i32.lt_u (local.get $t) (local.get $T))))))
                (if (i32.and (local.get $kinds) (i32.const 1))
                  (then
                    (local.set $p (i32.add (local.get $outF) (i32.shl (local.get $e) (i32.const 2))))
                    (local.set $t (i32.const 0))
                    (loop $tLoopF0
                      (v128.store (local.get $p) (local.get $f))
                      (local.set $p (i32.add (local.get $p) (i32.shl (local.get $PP) (i32.const 2))))
                      (local.set $t (i32.add (local.get $t) (i32.const 1)))
                      (br_if $tLoopF0 (i32.lt_u (local.get $t) (local.get $T))))))
                ;; channel 1
                (local.set $ch (i8x16.shuffle 1 16 16 16 4 16 16 16 7 16 16 16 10 16 16 16 (local.get $v) (v128.const i64x2 0 0)))
                (local.set $f
                  (f32x4.div
                    (f32x4.sub
                      (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
                        (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $ch)) (local.get $scale)))
                        (f32x4.demote_f64x2_zero (f64x2.mul
                          (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $ch) (local.get $ch)))
                          (local.get $scale))))
                      (local.get $means1))
                    (local.get $stds1)))
                (local.set $e (i32.add (i32.add (local.get $base) (i32.mul (i32.const 1) (local.get $cs))) (local.get $at)))
                (if (i32.and (local.get $kinds) (i32.const 2))
                  (then
                    (local.set $bits
                      (v128.bitselect
                        (v128.or (i32x4.shr_u (local.get $f) (i32.const 16)) (i32x4.splat (i32.const 0x40)))
                        (i32x4.shr_u
                          (i32x4.add (i32x4.add (local.get $f) (i32x4.splat (i32.const 0x7fff)))
                                     (v128.and (i32x4.shr_u (local.get $f) (i32.const 16)) (i32x4.splat (i32.const 1))))
                          (i32.const 16))
                        (i32x4.gt_s (v128.and (local.get $f) (i32x4.splat (i32.const 0x7fffffff))) (i32x4.splat (i32.const 0x7f800000)))))
                    (local.set $bits (i16x8.narrow_i32x4_u (local.get $bits) (local.get $bits)))
                    (local.set $p (i32.add (local.get $outB) (i32.shl (local.get $e) (i32.const 1))))
                    (local.set $t (i32.const 0))
                    (loop $tLoopB1
                      (v128.store64_lane 0 (local.get $p) (local.get $bits))
                      (local.set $p (i32.add (local.get $p) (i32.shl (local.get $PP) (i32.const 1))))
                      (local.set $t (i32.add (local.get $t) (i32.const 1)))
                      (br_if $tLoopB1 (i32.lt_u (local.get $t) (local.get $T))))))
                (if (i32.and (local.get $kinds) (i32.const 1))
                  (then
                    (local.set $p (i32.add (local.get $outF) (i32.shl (local.get $e) (i32.const 2))))
                    (local.set $t (i32.const 0))
                    (loop $tLoopF1
                      (v128.store (local.get $p) (local.get $f))
                      (local.set $p (i32.add (local.get $p) (i32.shl (local.get $PP) (i32.const 2))))
                      (local.set $t (i32.add (local.get $t) (i32.const 1)))
                      (br_if $tLoopF1 (i32.lt_u (local.get $t) (local.get $T))))))
                ;; channel 2
                (local.set $ch (i8x16.shuffle 2 16 16 16 5 16 16 16 8 16 16 16 11 16 16 16 (local.get $v) (v128.const i64x2 0 0)))
                (local.set $f
                  (f32x4.div
                    (f32x4.sub
                      (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
                        (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $ch)) (local.get $scale)))
                        (f32x4.demote_f64x2_zero (f64x2.mul
                          (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $ch) (local.get $ch)))
                          (local.get $scale))))
                      (local.get $means2))
                    (local.get $stds2)))
                (local.set $e (i32.add (i32.add (local.get $base) (i32.mul (i32.const 2) (local.get $cs))) (local.get $at)))
                (if (i32.and (local.get $kinds) (i32.const 2))
                  (then
                    (local.set $bits
                      (v128.bitselect
                        (v128.or (i32x4.shr_u (local.get $f) (i32.const 16)) (i32x4.splat (i32.const 0x40)))
                        (i32x4.shr_u
                          (i32x4.add (i32x4.add (local.get $f) (i32x4.splat (i32.const 0x7fff)))
                                     (v128.and (i32x4.shr_u (local.get $f) (i32.const 16)) (i32x4.splat (i32.const 1))))
                          (i32.const 16))
                        (i32x4.gt_s (v128.and (local.get $f) (i32x4.splat (i32.const 0x7fffffff))) (i32x4.splat (i32.const 0x7f800000)))))
                    (local.set $bits (i16x8.narrow_i32x4_u (local.get $bits) (local.get $bits)))
                    (local.set $p (i32.add (local.get $outB) (i32.shl (local.get $e) (i32.const 1))))
                    (local.set $t (i32.const 0))
                    (loop $tLoopB2
                      (v128.store64_lane 0 (local.get $p) (local.get $bits))
                      (local.set $p (i32.add (local.get $p) (i32.shl (local.get $PP) (i32.const 1))))
                      (local.set $t (i32.add (local.get $t) (i32.const 1)))
                      (br_if $tLoopB2 (i32.lt_u (local.get $t) (local.get $T))))))
                (if (i32.and (local.get $kinds) (i32.const 1))
                  (then
                    (local.set $p (i32.add (local.get $outF) (i32.shl (local.get $e) (i32.const 2))))
                    (local.set $t (i32.const 0))
                    (loop $tLoopF2
                      (v128.store (local.get $p) (local.get $f))
                      (local.set $p (i32.add (local.get $p) (i32.shl (local.get $PP) (i32.const 2))))
                      (local.set $t (i32.add (local.get $t) (i32.const 1)))
                      (br_if $tLoopF2 (i32.lt_u (local.get $t) (local.get $T))))))
                (local.set $pc (i32.add (local.get $pc) (i32.const 4)))
                (br $pixLoop)))
                        (local.set $pr (i32.add (local.get $pr) (i32.const 1)))
                        (br $prLoop)))
                    (local.set $patchBase (i32.add (local.get $patchBase) (local.get $F)))
                    (local.set $mc (i32.add (local.get $mc) (i32.const 1)))
                    (br $mcLoop)))
                (local.set $mr (i32.add (local.get $mr) (i32.const 1)))
                (br $mrLoop)))
            (local.set $bw (i32.add (local.get $bw) (i32.const 1)))
            (br $blockColLoop)))
        (local.set $bh (i32.add (local.get $bh) (i32.const 1)))
        (br $blockRowLoop))))

  ;; Pixels through per-channel level tables (the crop families' normalize, crop-writer.ts):
  ;; $count pixels of packed RGB bytes from $src, each channel's byte looked up in its table
  ;; and stored at $dst + c·$plane + i·$step (bytes). $tables holds the three channels' tables
  ;; of 256 entries one after another, each entry $size bytes: 4 (float32 bits, moved as
  ;; integers) or 2 (bfloat16 bits). Scalar: WebAssembly has no gather, and one load, one
  ;; table load and one store a value already run at a fraction of JavaScript's time for the
  ;; same loop (its three bounds checks a value).
  (func (export "levels")
    (param $src i32) (param $count i32) (param $dst i32) (param $plane i32) (param $step i32) (param $tables i32) (param $size i32)
    (local $end i32) (local $d1 i32) (local $d2 i32) (local $t1 i32) (local $t2 i32)
    (local.set $end (i32.add (local.get $src) (i32.mul (local.get $count) (i32.const 3))))
    (local.set $d1 (i32.add (local.get $dst) (local.get $plane)))
    (local.set $d2 (i32.add (local.get $d1) (local.get $plane)))
    (if (i32.eq (local.get $size) (i32.const 4))
      (then
        (local.set $t1 (i32.add (local.get $tables) (i32.const 1024)))
        (local.set $t2 (i32.add (local.get $tables) (i32.const 2048)))
        (block $done4
          (loop $pixel4
            (br_if $done4 (i32.ge_u (local.get $src) (local.get $end)))
            (i32.store (local.get $dst)
              (i32.load (i32.add (local.get $tables) (i32.shl (i32.load8_u (local.get $src)) (i32.const 2)))))
            (i32.store (local.get $d1)
              (i32.load (i32.add (local.get $t1) (i32.shl (i32.load8_u offset=1 (local.get $src)) (i32.const 2)))))
            (i32.store (local.get $d2)
              (i32.load (i32.add (local.get $t2) (i32.shl (i32.load8_u offset=2 (local.get $src)) (i32.const 2)))))
            (local.set $src (i32.add (local.get $src) (i32.const 3)))
            (local.set $dst (i32.add (local.get $dst) (local.get $step)))
            (local.set $d1 (i32.add (local.get $d1) (local.get $step)))
            (local.set $d2 (i32.add (local.get $d2) (local.get $step)))
            (br $pixel4))))
      (else
        (local.set $t1 (i32.add (local.get $tables) (i32.const 512)))
        (local.set $t2 (i32.add (local.get $tables) (i32.const 1024)))
        (block $done2
          (loop $pixel2
            (br_if $done2 (i32.ge_u (local.get $src) (local.get $end)))
            (i32.store16 (local.get $dst)
              (i32.load16_u (i32.add (local.get $tables) (i32.shl (i32.load8_u (local.get $src)) (i32.const 1)))))
            (i32.store16 (local.get $d1)
              (i32.load16_u (i32.add (local.get $t1) (i32.shl (i32.load8_u offset=1 (local.get $src)) (i32.const 1)))))
            (i32.store16 (local.get $d2)
              (i32.load16_u (i32.add (local.get $t2) (i32.shl (i32.load8_u offset=2 (local.get $src)) (i32.const 1)))))
            (local.set $src (i32.add (local.get $src) (i32.const 3)))
            (local.set $dst (i32.add (local.get $dst) (local.get $step)))
            (local.set $d1 (i32.add (local.get $d1) (local.get $step)))
            (local.set $d2 (i32.add (local.get $d2) (local.get $step)))
            (br $pixel2))))))
)
