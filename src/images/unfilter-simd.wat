;; The PNG decoder's Sub and Up rows with 128-bit SIMD (png-decode.ts, rows-simd.ts).
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
)
