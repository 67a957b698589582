;; Pillow-exact bicubic resize kernels in WebAssembly SIMD (see resize.ts for the algorithm
;; and its exactness argument). Same integer arithmetic as Pillow: 22-bit fixed-point
;; weights, sums start at 1 << 21, arithmetic shift by 22, clip to 0..255. Only the work is
;; vectorised: 4 lanes of i32 per pixel (horizontal), 16 bytes of a row per step (vertical).
;;
;; Buffers are laid out by the caller in the memory it gives the module: shared memory, so
;; that two threads can each resize a band of the same image with their own instance.
;; Source buffers need 16 bytes of readable slack after their end, destination buffers 16
;; bytes of writable slack: the kernels load and store whole vectors and let the next pixel
;; or row overwrite the spill (so two threads never write into one destination buffer).
(module
  ;; Up to 1 GiB (16384 pages of 64 KiB); larger layouts fall back to the JavaScript passes.
  (import "env" "memory" (memory 1 16384 shared))

  ;; Horizontal pass: `rows` rows of packed RGB, `inW` pixels wide, to `outW` pixels.
  ;; starts/counts: i32 per output pixel; weights: i32, `ksize` per output pixel.
  (func (export "horizontal")
    (param $src i32) (param $inW i32) (param $rows i32) (param $dst i32) (param $outW i32)
    (param $ksize i32) (param $starts i32) (param $counts i32) (param $weights i32)
    (local $y i32) (local $x i32) (local $t i32) (local $n i32) (local $p i32) (local $kb i32)
    (local $srcRow i32) (local $dstPix i32) (local $acc v128)
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
            (local.set $kb (i32.add (local.get $weights) (i32.shl (i32.mul (local.get $x) (local.get $ksize)) (i32.const 2))))
            (local.set $acc (i32x4.splat (i32.const 2097152)))
            (local.set $t (i32.const 0))
            (block $tapsDone
              (loop $tapLoop
                (br_if $tapsDone (i32.ge_u (local.get $t) (local.get $n)))
                (local.set $acc
                  (i32x4.add (local.get $acc)
                    (i32x4.mul
                      (i32x4.extend_low_i16x8_u (i16x8.extend_low_i8x16_u (v128.load32_zero (local.get $p))))
                      (i32x4.splat (i32.load (i32.add (local.get $kb) (i32.shl (local.get $t) (i32.const 2))))))))
                (local.set $p (i32.add (local.get $p) (i32.const 3)))
                (local.set $t (i32.add (local.get $t) (i32.const 1)))
                (br $tapLoop)))
            (local.set $acc
              (i32x4.min_s (i32x4.max_s (i32x4.shr_s (local.get $acc) (i32.const 22)) (v128.const i32x4 0 0 0 0)) (v128.const i32x4 255 255 255 255)))
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
            (local.set $a0 (i32x4.min_s (i32x4.max_s (i32x4.shr_s (local.get $a0) (i32.const 22)) (v128.const i32x4 0 0 0 0)) (v128.const i32x4 255 255 255 255)))
            (local.set $a1 (i32x4.min_s (i32x4.max_s (i32x4.shr_s (local.get $a1) (i32.const 22)) (v128.const i32x4 0 0 0 0)) (v128.const i32x4 255 255 255 255)))
            (local.set $a2 (i32x4.min_s (i32x4.max_s (i32x4.shr_s (local.get $a2) (i32.const 22)) (v128.const i32x4 0 0 0 0)) (v128.const i32x4 255 255 255 255)))
            (local.set $a3 (i32x4.min_s (i32x4.max_s (i32x4.shr_s (local.get $a3) (i32.const 22)) (v128.const i32x4 0 0 0 0)) (v128.const i32x4 255 255 255 255)))
            (v128.store (i32.add (local.get $dstRow) (local.get $i))
              (i8x16.narrow_i16x8_u
                (i16x8.narrow_i32x4_s (local.get $a0) (local.get $a1))
                (i16x8.narrow_i32x4_s (local.get $a2) (local.get $a3))))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $colLoop)))
        (local.set $yy (i32.add (local.get $yy) (i32.const 1)))
        (br $rowLoop))))
)
