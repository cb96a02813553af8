;; The PNG decoder's rows with 128-bit SIMD (png-decode.ts, rows-simd.ts): Sub, Up, Average
;; and Paeth rows after the first.
;; Compiled by scripts/build-wasm.mjs (wabt) into unfilter-simd-wasm.ts; the test
;; test/images/unfilter-simd.test.ts fails when the two differ.
;;
;; Memory: 10 pages, never grown (rows-simd.ts lays out the inflate output and the pixels in
;; it and keeps views of them). Every offset is a byte offset in it; the caller keeps each row
;; and 16 bytes after it inside the memory.
(module
  (memory (export "memory") 10 10)

  ;; Sub: out[i] = raw[i] + out[i - 3] (mod 256), out[-3..-1] = 0, for the row
  ;; raw[$src, $end) -> out[$dst, ...). Five pixels (15 bytes) a step: within the 16 loaded
  ;; bytes a prefix sum with a stride of 3 (add the vector shifted up by 3, 6 and 12 lanes,
  ;; zeros shifted in), then the previous step's last pixel added to every pixel. Lane 15 is
  ;; the next pixel's first byte: it only ever flows into lanes above it, which do not exist,
  ;; so it is garbage written one byte past the step, where the next step (or, after the
  ;; row's last step, the next row) writes the right value later. 960 bytes a row: 64 steps.
  (func (export "sub") (param $src i32) (param $dst i32) (param $end i32)
    (local $v v128) (local $carry v128) (local $zero v128)
    (local.set $zero (v128.const i32x4 0 0 0 0))
    (local.set $carry (local.get $zero))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (local.set $v (v128.load (local.get $src)))
        (local.set $v (i8x16.add (local.get $v)
          (i8x16.shuffle 0 0 0 16 17 18 19 20 21 22 23 24 25 26 27 28 (local.get $zero) (local.get $v))))
        (local.set $v (i8x16.add (local.get $v)
          (i8x16.shuffle 0 0 0 0 0 0 16 17 18 19 20 21 22 23 24 25 (local.get $zero) (local.get $v))))
        (local.set $v (i8x16.add (local.get $v)
          (i8x16.shuffle 0 0 0 0 0 0 0 0 0 0 0 0 16 17 18 19 (local.get $zero) (local.get $v))))
        ;; lanes 12-14 of the previous step are its last pixel
        (local.set $v (i8x16.add (local.get $v)
          (i8x16.shuffle 12 13 14 12 13 14 12 13 14 12 13 14 12 13 14 12 (local.get $carry) (local.get $carry))))
        (v128.store (local.get $dst) (local.get $v))
        (local.set $carry (local.get $v))
        (local.set $src (i32.add (local.get $src) (i32.const 15)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 15)))
        (br $step))))

  ;; Up: out[i] = raw[i] + out[i - stride] (mod 256), the row above at $up: 16 bytes a step,
  ;; no dependency between them. 960 bytes a row: 60 steps, nothing written past the row.
  (func (export "up") (param $src i32) (param $dst i32) (param $up i32) (param $end i32)
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (v128.store (local.get $dst) (i8x16.add (v128.load (local.get $src)) (v128.load (local.get $up))))
        (local.set $src (i32.add (local.get $src) (i32.const 16)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 16)))
        (local.set $up (i32.add (local.get $up) (i32.const 16)))
        (br $step))))

  ;; Average and Paeth depend on the finished pixel to the left through a non-linear step (a
  ;; halving, Paeth's choice), so no running-sum trick covers them: they go a pixel a step, its
  ;; three bytes widened to 16-bit lanes 0-2 (lane 3: the byte after the pixel, carried along
  ;; lane by lane and never read back; lanes 4-7: zero), which still does three channels in each
  ;; operation and has no branch for the data to mispredict. Each step stores 4 bytes: the
  ;; fourth is garbage one byte past the pixel, written again by the next step (or, after the
  ;; row's last step, by the next row; the caller keeps 16 bytes after the last row). 320 steps
  ;; a row.

  ;; Average: out[i] = raw[i] + floor((out[i - 3] + out[i - stride]) / 2) (mod 256), the row
  ;; above at $up, out[-3..-1] = 0. The left pixel $a stays widened from step to step.
  (func (export "average") (param $src i32) (param $dst i32) (param $up i32) (param $end i32)
    (local $a v128) (local $mask v128)
    (local.set $a (v128.const i32x4 0 0 0 0))
    (local.set $mask (i16x8.splat (i32.const 255)))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (local.set $a (v128.and (local.get $mask)
          (i16x8.add
            (i16x8.extend_low_i8x16_u (v128.load32_zero (local.get $src)))
            (i16x8.shr_u
              (i16x8.add (local.get $a) (i16x8.extend_low_i8x16_u (v128.load32_zero (local.get $up))))
              (i32.const 1)))))
        (v128.store32_lane 0 (local.get $dst) (i8x16.narrow_i16x8_u (local.get $a) (local.get $a)))
        (local.set $src (i32.add (local.get $src) (i32.const 3)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 3)))
        (local.set $up (i32.add (local.get $up) (i32.const 3)))
        (br $step))))

  ;; Paeth: out[i] = raw[i] + the one of a (left), b (above), c (upper left) nearest to
  ;; a + b - c, ties to a, then b (the PNG specification's order), mod 256; a and c are 0 left
  ;; of the first pixel. In 16-bit lanes: pa = |b - c|, pb = |a - c|, pc = |(b - c) + (a - c)|,
  ;; and the choice as two bit selects on the lanes' comparisons. paethPair writes the same
  ;; predictor out again rather than calling a shared function: as a call (V8 does not inline
  ;; WebAssembly calls in node 20) it cost 5-10 % of a Paeth-heavy image's unfilter.
  (func (export "paeth") (param $src i32) (param $dst i32) (param $up i32) (param $end i32)
    (local $a v128) (local $b v128) (local $c v128) (local $bc v128) (local $ac v128)
    (local $pa v128) (local $pb v128) (local $pc v128) (local $mask v128)
    (local.set $a (v128.const i32x4 0 0 0 0))
    (local.set $c (local.get $a))
    (local.set $mask (i16x8.splat (i32.const 255)))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (local.set $b (i16x8.extend_low_i8x16_u (v128.load32_zero (local.get $up))))
        (local.set $bc (i16x8.sub (local.get $b) (local.get $c)))
        (local.set $ac (i16x8.sub (local.get $a) (local.get $c)))
        (local.set $pa (i16x8.abs (local.get $bc)))
        (local.set $pb (i16x8.abs (local.get $ac)))
        (local.set $pc (i16x8.abs (i16x8.add (local.get $bc) (local.get $ac))))
        (local.set $a (v128.and (local.get $mask)
          (i16x8.add
            (i16x8.extend_low_i8x16_u (v128.load32_zero (local.get $src)))
            (v128.bitselect
              (local.get $a)
              (v128.bitselect (local.get $b) (local.get $c) (i16x8.le_s (local.get $pb) (local.get $pc)))
              (v128.and (i16x8.le_s (local.get $pa) (local.get $pb)) (i16x8.le_s (local.get $pa) (local.get $pc)))))))
        (v128.store32_lane 0 (local.get $dst) (i8x16.narrow_i16x8_u (local.get $a) (local.get $a)))
        (local.set $c (local.get $b))
        (local.set $src (i32.add (local.get $src) (i32.const 3)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 3)))
        (local.set $up (i32.add (local.get $up) (i32.const 3)))
        (br $step))))

  ;; Two Paeth rows at once, y and y + 1 (y >= 1), a pixel apart: in step k, lanes 0-3 do row
  ;; y's pixel k and lanes 4-7 row y + 1's pixel k - 1, whose pixel above is row y's pixel k - 1,
  ;; the lanes 0-3 of the step before, still in $a. One serial chain a step, as in `paeth`, so the
  ;; two rows take about the time of one (a photograph's PNG is mostly Paeth rows in a run).
  ;; $pixels + 1 steps: step 0 does row y alone (lanes 4-7 then set to 0, the left and upper-left
  ;; of row y + 1's first pixel), the last does row y + 1 alone. Row y's last 4-byte store lands on
  ;; row y + 1's first byte, written already: that pixel is stored again, 3 bytes, at the end.
  ;; $src, $dst, $up: row y's filtered bytes, its pixels and the row above, as for `paeth`;
  ;; $stride: bytes a row (row y + 1's filtered bytes start $stride + 1 after row y's).
  (func (export "paethPair") (param $src i32) (param $dst i32) (param $up i32) (param $stride i32)
    (local $k i32) (local $pixels i32) (local $first i32)
    (local $a v128) (local $b v128) (local $c v128) (local $x v128) (local $bc v128) (local $ac v128)
    (local $pa v128) (local $pb v128) (local $pc v128) (local $mask v128) (local $low v128) (local $bytes v128)
    (local.set $pixels (i32.div_u (local.get $stride) (i32.const 3)))
    (local.set $a (v128.const i32x4 0 0 0 0))
    (local.set $c (local.get $a))
    (local.set $mask (i16x8.splat (i32.const 255)))
    (local.set $low (v128.const i16x8 -1 -1 -1 -1 0 0 0 0))
    (loop $step
      ;; b: the row above's pixel k (lanes 0-3), row y's pixel k - 1 (lanes 4-7: $a's lanes 0-3)
      (local.set $b (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
        (i16x8.extend_low_i8x16_u (v128.load32_zero (local.get $up)))
        (local.get $a)))
      ;; x: row y's filtered pixel k, row y + 1's pixel k - 1 (at $src + $stride + 1 - 3)
      (local.set $x (i16x8.extend_low_i8x16_u
        (v128.load32_lane 1 (i32.sub (i32.add (local.get $src) (local.get $stride)) (i32.const 2))
          (v128.load32_zero (local.get $src)))))
      (local.set $bc (i16x8.sub (local.get $b) (local.get $c)))
      (local.set $ac (i16x8.sub (local.get $a) (local.get $c)))
      (local.set $pa (i16x8.abs (local.get $bc)))
      (local.set $pb (i16x8.abs (local.get $ac)))
      (local.set $pc (i16x8.abs (i16x8.add (local.get $bc) (local.get $ac))))
      (local.set $a (v128.and (local.get $mask)
        (i16x8.add (local.get $x)
          (v128.bitselect
            (local.get $a)
            (v128.bitselect (local.get $b) (local.get $c) (i16x8.le_s (local.get $pb) (local.get $pc)))
            (v128.and (i16x8.le_s (local.get $pa) (local.get $pb)) (i16x8.le_s (local.get $pa) (local.get $pc)))))))
      (local.set $c (local.get $b))
      (local.set $bytes (i8x16.narrow_i16x8_u (local.get $a) (local.get $a)))
      (if (i32.eqz (local.get $k))
        (then
          (local.set $a (v128.and (local.get $a) (local.get $low)))
          (local.set $c (v128.and (local.get $c) (local.get $low))))
        (else
          ;; row y + 1's pixel k - 1, at $dst + $stride - 3; its pixel 0 kept for the end
          (v128.store32_lane 1 (i32.sub (i32.add (local.get $dst) (local.get $stride)) (i32.const 3)) (local.get $bytes))
          (if (i32.eq (local.get $k) (i32.const 1))
            (then (local.set $first (i32x4.extract_lane 1 (local.get $bytes)))))))
      (if (i32.lt_u (local.get $k) (local.get $pixels))
        (then (v128.store32_lane 0 (local.get $dst) (local.get $bytes))))
      (local.set $src (i32.add (local.get $src) (i32.const 3)))
      (local.set $dst (i32.add (local.get $dst) (i32.const 3)))
      (local.set $up (i32.add (local.get $up) (i32.const 3)))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $step (i32.le_u (local.get $k) (local.get $pixels))))
    ;; row y + 1's pixel 0 again, 3 bytes: $dst is now row y's start + $stride + 3
    (local.set $dst (i32.sub (local.get $dst) (i32.const 3)))
    (i32.store16 (local.get $dst) (local.get $first))
    (i32.store8 (i32.add (local.get $dst) (i32.const 2)) (i32.shr_u (local.get $first) (i32.const 16))))
)
