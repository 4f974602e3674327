/*
 * The resampler's inner loop, compiled to WebAssembly with 128-bit SIMD by
 * scripts/build-wasm.sh (the result is committed as lib/audio/wasm/resample-kernel.ts).
 *
 * Exact integer arithmetic: every coefficient is an integer q = hi * 2^10 + lo scaled by 2^-24
 * (hi and lo are int16, |lo| <= 512), so one output is sum(x * q) / 2^24 computed without any
 * rounding, then rounded to the nearest integer (halves away from zero) and clipped to int16.
 * The JavaScript fallback computes the same exact sum in doubles, so both give the same bytes.
 * Overflow cannot happen for the tables the resampler builds (it checks the bounds):
 * sum(|hi|) < 2^16 keeps the hi lanes under 2^31, and rows of at most 512 taps keep the lo lanes
 * under 2^31.
 */
#include <stdint.h>
#include <wasm_simd128.h>

#define LO_BITS 10
#define SCALE_BITS 24

static inline int32_t hsum(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
         wasm_i32x4_extract_lane(v, 3);
}

/*
 * Computes outputs of one channel while their newest input frame is in x[0 .. len), at most
 * `limit`. state[0] is the index in x of the newest frame the next output needs, state[1] its
 * polyphase row; both are advanced. Row p of hi/lo holds kp taps (kp a multiple of 8) applied
 * to x[pos - kp + 1 .. pos], oldest first. Output n goes to out[n * stride], `copies` times in a
 * row (2 writes mono as both channels of a stereo frame). Returns the number of outputs.
 */
__attribute__((export_name("fir"))) int32_t fir(const int16_t *x, int32_t len, int32_t *state, int32_t up,
                                                  int32_t step_frames, int32_t step_phase, const int16_t *hi,
                                                  const int16_t *lo, int32_t kp, int16_t *out, int32_t stride,
                                                  int32_t copies, int32_t limit) {
  int32_t pos = state[0];
  int32_t phase = state[1];
  int32_t n = 0;
  while (pos < len && n < limit) {
    const int16_t *src = x + pos - kp + 1;
    const int16_t *h = hi + phase * kp;
    const int16_t *l = lo + phase * kp;
    v128_t acc_hi = wasm_i32x4_splat(0);
    v128_t acc_lo = wasm_i32x4_splat(0);
    for (int32_t k = 0; k < kp; k += 8) {
      v128_t v = wasm_v128_load(src + k);
      acc_hi = wasm_i32x4_add(acc_hi, wasm_i32x4_dot_i16x8(v, wasm_v128_load(h + k)));
      acc_lo = wasm_i32x4_add(acc_lo, wasm_i32x4_dot_i16x8(v, wasm_v128_load(l + k)));
    }
    int64_t s = ((int64_t)hsum(acc_hi) << LO_BITS) + (int64_t)hsum(acc_lo);
    int64_t half = (int64_t)1 << (SCALE_BITS - 1);
    int64_t r = s >= 0 ? (s + half) >> SCALE_BITS : -((-s + half) >> SCALE_BITS);
    if (r > 32767) r = 32767;
    if (r < -32768) r = -32768;
    for (int32_t c = 0; c < copies; c++) out[n * stride + c] = (int16_t)r;
    n++;
    pos += step_frames;
    phase += step_phase;
    if (phase >= up) {
      phase -= up;
      pos++;
    }
  }
  state[0] = pos;
  state[1] = phase;
  return n;
}

/* Copies channel `channel` of `frames` interleaved int16 frames of `channels` channels to dst. */
__attribute__((export_name("deinterleave"))) void deinterleave(const int16_t *src, int32_t frames, int32_t channels,
                                                                int32_t channel, int16_t *dst) {
  const int16_t *s = src + channel;
  for (int32_t i = 0; i < frames; i++) dst[i] = s[i * channels];
}

/*
 * Mixes `frames` interleaved stereo int16 frames to mono: (L + R) / 2 rounded to nearest, halves
 * to even (as channels.ts does).
 */
__attribute__((export_name("downmix"))) void downmix(const int16_t *src, int32_t frames, int16_t *dst) {
  for (int32_t i = 0; i < frames; i++) {
    int32_t sum = (int32_t)src[2 * i] + (int32_t)src[2 * i + 1];
    int32_t half = sum >> 1;
    dst[i] = (int16_t)(half + (sum & half & 1));
  }
}
