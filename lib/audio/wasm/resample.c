/*
 * The resampler's inner loops, compiled to WebAssembly with 128-bit SIMD by
 * scripts/build-wasm.sh (the result is committed as lib/audio/wasm/resample-kernel.ts).
 *
 * Exact integer arithmetic: every tap is an integer q scaled by 2^-22, so an output is
 * sum(x * q) / 2^22 computed without rounding, then rounded to the nearest integer (halves away
 * from zero) and clipped to int16. The JavaScript fallback computes the same exact sums in
 * doubles, so both give the same bytes. A tap too large for int16 is split, q = hi * 2^8 + lo
 * (hi and lo int16, |lo| <= 128), and takes two dot products; the filter's tails, where every
 * tap fits int16, take one: there lo is q itself and hi is not read. Blocks of 8 taps
 * [split0, split1) are split; the blocks before and after them (the oldest and the newest taps)
 * are narrow. The resampler only builds tables within the bounds that rule out overflow:
 * sum(|hi|) < 2^16 per row keeps the hi sums under 2^31, and sum(|lo|) < 2^16 per row (every
 * tap of the narrow blocks, the lo parts of the others) keeps the lo sums under 2^31.
 *
 * Table layout: row p holds kp taps (kp a multiple of 8) for x[pos - kp + 1 .. pos], oldest
 * first, as blocks of 8 hi taps followed by the same 8 lo taps (2 * kp int16 per row).
 * Outputs are computed four at a time (four independent dot products keep the SIMD units busy,
 * and the horizontal sums and rounding are done once for the four); shapes that share data
 * have their own loops: decimation (one row for all outputs) and interpolation by 2 or 3 (one
 * input window for all the phases).
 */
#include <stdint.h>
#include <wasm_simd128.h>

#define ADD(a, v, h) a = wasm_i32x4_add(a, wasm_i32x4_dot_i16x8(v, h))

/*
 * Runs LO(b) for every block b of a row, and HI(b) after it for the split blocks [split0, split1):
 * three loops, so no block tests which kind it is.
 */
#define FOR_BLOCKS(LO, HI) \
  for (int32_t b = 0; b < split0; b++) { \
    LO(b) \
  } \
  for (int32_t b = split0; b < split1; b++) { \
    LO(b) \
    HI(b) \
  } \
  for (int32_t b = split1; b < kp >> 3; b++) { \
    LO(b) \
  }

/* Lane i of the result: the sum of the four lanes of a_i (each sum fits in int32). */
static inline v128_t hsum4(v128_t a0, v128_t a1, v128_t a2, v128_t a3) {
  v128_t t0 = wasm_i32x4_add(wasm_i32x4_shuffle(a0, a1, 0, 4, 2, 6), wasm_i32x4_shuffle(a0, a1, 1, 5, 3, 7));
  v128_t t1 = wasm_i32x4_add(wasm_i32x4_shuffle(a2, a3, 0, 4, 2, 6), wasm_i32x4_shuffle(a2, a3, 1, 5, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5), wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7));
}

/*
 * Two exact sums (doubles holding integers H * 2^8 + L, so |v| < 2^39 + 2^31) scaled by 2^-22,
 * rounded half away from zero: truncated toward zero after adding 0.5 with the sum's sign. Every
 * step is exact (the scaled sum has at most 22 fraction bits and 18 integer bits), and the
 * result, about 2^17 at most, fits the int32 lanes; the int16 clipping is the narrowing's
 * saturation.
 */
static inline v128_t round2(v128_t v) {
  v128_t x = wasm_f64x2_mul(v, wasm_f64x2_splat(1.0 / 4194304.0));
  v128_t half = wasm_v128_or(wasm_v128_and(x, wasm_f64x2_splat(-0.0)), wasm_f64x2_splat(0.5));
  return wasm_i32x4_trunc_sat_f64x2_zero(wasm_f64x2_add(x, half));
}

/* Lanes 0..3: the four int16 outputs of the hi and lo sums H and L (saturated to int16). */
static inline v128_t finish4(v128_t H, v128_t L) {
  const v128_t k = wasm_f64x2_splat(256.0);
  v128_t low = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(H), k), wasm_f64x2_convert_low_i32x4(L));
  v128_t high = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(wasm_i32x4_shuffle(H, H, 2, 3, 0, 1)), k),
                               wasm_f64x2_convert_low_i32x4(wasm_i32x4_shuffle(L, L, 2, 3, 0, 1)));
  v128_t r = wasm_i32x4_shuffle(round2(low), round2(high), 0, 1, 4, 5);
  return wasm_i16x8_narrow_i32x4(r, r);
}

/* Writes output v to out[n * stride], `copies` times (1 or 2). */
static inline void store1(int16_t v, int16_t *out, int32_t n, int32_t stride, int32_t copies) {
  int16_t *o = out + n * stride;
  o[0] = v;
  if (copies == 2) o[1] = v;
}

/*
 * Writes the four outputs in r (lanes 0 to 3) to out[n * stride] and on: as one vector store
 * where they are contiguous (mono, or mono written to both channels), else one by one.
 */
static inline void store4(v128_t r, int16_t *out, int32_t n, int32_t stride, int32_t copies) {
  if (stride == 1 && copies == 1) {
    wasm_v128_store64_lane(out + n, r, 0);
    return;
  }
  if (stride == 2 && copies == 2) {
    wasm_v128_store(out + 2 * n, wasm_i16x8_shuffle(r, r, 0, 0, 1, 1, 2, 2, 3, 3));
    return;
  }
  store1(wasm_i16x8_extract_lane(r, 0), out, n, stride, copies);
  store1(wasm_i16x8_extract_lane(r, 1), out, n + 1, stride, copies);
  store1(wasm_i16x8_extract_lane(r, 2), out, n + 2, stride, copies);
  store1(wasm_i16x8_extract_lane(r, 3), out, n + 3, stride, copies);
}

typedef struct {
  int32_t pos, phase;
} Cursor;

static inline Cursor step(Cursor c, int32_t up, int32_t sf, int32_t sp) {
  c.pos += sf;
  c.phase += sp;
  if (c.phase >= up) {
    c.phase -= up;
    c.pos++;
  }
  return c;
}

/* Four outputs at any positions and rows. */
static inline v128_t general4(const int16_t *x, const int16_t *t, int32_t kp, int32_t split0, int32_t split1,
                              const Cursor *c) {
  const v128_t *s0 = (const v128_t *)(x + c[0].pos - kp + 1), *s1 = (const v128_t *)(x + c[1].pos - kp + 1);
  const v128_t *s2 = (const v128_t *)(x + c[2].pos - kp + 1), *s3 = (const v128_t *)(x + c[3].pos - kp + 1);
  const v128_t *h0 = (const v128_t *)(t + c[0].phase * 2 * kp), *h1 = (const v128_t *)(t + c[1].phase * 2 * kp);
  const v128_t *h2 = (const v128_t *)(t + c[2].phase * 2 * kp), *h3 = (const v128_t *)(t + c[3].phase * 2 * kp);
  v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
#define LO(b) \
  v128_t v0 = wasm_v128_load(s0 + b), v1 = wasm_v128_load(s1 + b); \
  v128_t v2 = wasm_v128_load(s2 + b), v3 = wasm_v128_load(s3 + b); \
  ADD(b0, v0, h0[2 * b + 1]); \
  ADD(b1, v1, h1[2 * b + 1]); \
  ADD(b2, v2, h2[2 * b + 1]); \
  ADD(b3, v3, h3[2 * b + 1]);
#define HI(b) \
  ADD(a0, v0, h0[2 * b]); \
  ADD(a1, v1, h1[2 * b]); \
  ADD(a2, v2, h2[2 * b]); \
  ADD(a3, v3, h3[2 * b]);
  FOR_BLOCKS(LO, HI)
#undef LO
#undef HI
  return finish4(hsum4(a0, a1, a2, a3), hsum4(b0, b1, b2, b3));
}

/* One output (the same arithmetic, lanes 1 to 3 empty). */
static inline int16_t single(const int16_t *x, const int16_t *t, int32_t kp, int32_t split0, int32_t split1,
                             Cursor c) {
  const v128_t *s = (const v128_t *)(x + c.pos - kp + 1);
  const v128_t *h = (const v128_t *)(t + c.phase * 2 * kp);
  v128_t z = wasm_i32x4_splat(0), hi = z, lo = z;
#define LO(b) \
  v128_t v = wasm_v128_load(s + b); \
  ADD(lo, v, h[2 * b + 1]);
#define HI(b) ADD(hi, v, h[2 * b]);
  FOR_BLOCKS(LO, HI)
#undef LO
#undef HI
  return wasm_i16x8_extract_lane(finish4(hsum4(hi, z, z, z), hsum4(lo, z, z, z)), 0);
}

/* Decimation (up == 1): four outputs `sf` frames apart, one row. */
static inline v128_t decimate4(const int16_t *x, const int16_t *t, int32_t kp, int32_t split0, int32_t split1,
                               int32_t pos, int32_t sf) {
  const int16_t *base = x + pos - kp + 1;
  const v128_t *s0 = (const v128_t *)base, *s1 = (const v128_t *)(base + sf);
  const v128_t *s2 = (const v128_t *)(base + 2 * sf), *s3 = (const v128_t *)(base + 3 * sf);
  const v128_t *h = (const v128_t *)t;
  v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
#define LO(b) \
  v128_t v0 = wasm_v128_load(s0 + b), v1 = wasm_v128_load(s1 + b); \
  v128_t v2 = wasm_v128_load(s2 + b), v3 = wasm_v128_load(s3 + b); \
  v128_t hl = h[2 * b + 1]; \
  ADD(b0, v0, hl); \
  ADD(b1, v1, hl); \
  ADD(b2, v2, hl); \
  ADD(b3, v3, hl);
#define HI(b) \
  v128_t hh = h[2 * b]; \
  ADD(a0, v0, hh); \
  ADD(a1, v1, hh); \
  ADD(a2, v2, hh); \
  ADD(a3, v3, hh);
  FOR_BLOCKS(LO, HI)
#undef LO
#undef HI
  return finish4(hsum4(a0, a1, a2, a3), hsum4(b0, b1, b2, b3));
}

/* Interpolation by 2 from row 0: rows 0 and 1 on the windows ending at pos and pos + 1. */
static inline v128_t interpolate2(const int16_t *x, const int16_t *t, int32_t kp, int32_t split0, int32_t split1,
                                  int32_t pos) {
  const int16_t *base = x + pos - kp + 1;
  const v128_t *s0 = (const v128_t *)base, *s1 = (const v128_t *)(base + 1);
  const v128_t *h0 = (const v128_t *)t, *h1 = (const v128_t *)(t + 2 * kp);
  v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
#define LO(b) \
  v128_t v0 = wasm_v128_load(s0 + b), v1 = wasm_v128_load(s1 + b); \
  v128_t q0 = h0[2 * b + 1], q1 = h1[2 * b + 1]; \
  ADD(b0, v0, q0); \
  ADD(b1, v0, q1); \
  ADD(b2, v1, q0); \
  ADD(b3, v1, q1);
#define HI(b) \
  v128_t p0 = h0[2 * b], p1 = h1[2 * b]; \
  ADD(a0, v0, p0); \
  ADD(a1, v0, p1); \
  ADD(a2, v1, p0); \
  ADD(a3, v1, p1);
  FOR_BLOCKS(LO, HI)
#undef LO
#undef HI
  return finish4(hsum4(a0, a1, a2, a3), hsum4(b0, b1, b2, b3));
}

/* Interpolation by 3 from row 0: rows 0, 1 and 2 on the window ending at pos (lane 3 unused). */
static inline v128_t interpolate3(const int16_t *x, const int16_t *t, int32_t kp, int32_t split0, int32_t split1,
                                  int32_t pos) {
  const v128_t *s = (const v128_t *)(x + pos - kp + 1);
  const v128_t *h0 = (const v128_t *)t, *h1 = (const v128_t *)(t + 2 * kp), *h2 = (const v128_t *)(t + 4 * kp);
  v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, b0 = a0, b1 = a0, b2 = a0;
#define LO(b) \
  v128_t v = wasm_v128_load(s + b); \
  ADD(b0, v, h0[2 * b + 1]); \
  ADD(b1, v, h1[2 * b + 1]); \
  ADD(b2, v, h2[2 * b + 1]);
#define HI(b) \
  ADD(a0, v, h0[2 * b]); \
  ADD(a1, v, h1[2 * b]); \
  ADD(a2, v, h2[2 * b]);
  FOR_BLOCKS(LO, HI)
#undef LO
#undef HI
  v128_t z = wasm_i32x4_splat(0);
  return finish4(hsum4(a0, a1, a2, z), hsum4(b0, b1, b2, z));
}

/*
 * Computes outputs of one channel while their newest input frame is in x[0 .. len), at most
 * `limit`. state[0] is the index in x of the newest frame the next output needs, state[1] its
 * row; both are advanced (outputs advance `down / up` frames: `sf` whole frames and `sp` rows).
 * Output n goes to out[n * stride], `copies` times in a row (2 writes mono as both channels of
 * a stereo frame). Returns the number of outputs written.
 */
__attribute__((export_name("fir"))) int32_t fir(const int16_t *x, int32_t len, int32_t *state, int32_t up,
                                                  int32_t sf, int32_t sp, const int16_t *t, int32_t kp, int32_t split0,
                                                  int32_t split1, int16_t *out, int32_t stride, int32_t copies,
                                                  int32_t limit) {
  Cursor c = {state[0], state[1]};
  int32_t n = 0;
  if (up == 1) {
    while (c.pos + 3 * sf < len && n + 4 <= limit) {
      store4(decimate4(x, t, kp, split0, split1, c.pos, sf), out, n, stride, copies);
      c.pos += 4 * sf;
      n += 4;
    }
  } else if (sf == 0 && sp == 1 && (up == 2 || up == 3)) {
    /* Interpolation: one output per row for each input frame, rows in order. */
    while (c.pos < len && n < limit && c.phase != 0) {
      store1(single(x, t, kp, split0, split1, c), out, n++, stride, copies);
      c = step(c, up, sf, sp);
    }
    if (up == 2) {
      while (c.pos + 1 < len && n + 4 <= limit) {
        store4(interpolate2(x, t, kp, split0, split1, c.pos), out, n, stride, copies);
        c.pos += 2;
        n += 4;
      }
    } else {
      /* Four windows at a time, one row per pass: the rows' taps are loaded once per four outputs. */
      while (c.pos + 3 < len && n + 12 <= limit) {
        v128_t v[3];
        for (int32_t r = 0; r < 3; r++) v[r] = decimate4(x, t + r * 2 * kp, kp, split0, split1, c.pos, 1);
        if (stride == 1 && copies == 1) {
          /* Interleaved back into output order (window by window, rows in order): 8 + 4 outputs. */
          v128_t rows01 = wasm_i16x8_shuffle(v[0], v[1], 0, 1, 2, 3, 8, 9, 10, 11);
          wasm_v128_store(out + n, wasm_i16x8_shuffle(rows01, v[2], 0, 4, 8, 1, 5, 9, 2, 6));
          wasm_v128_store64_lane(out + n + 8, wasm_i16x8_shuffle(rows01, v[2], 10, 3, 7, 11, 0, 0, 0, 0), 0);
        } else {
          for (int32_t r = 0; r < 3; r++) {
            store1(wasm_i16x8_extract_lane(v[r], 0), out, n + r, stride, copies);
            store1(wasm_i16x8_extract_lane(v[r], 1), out, n + 3 + r, stride, copies);
            store1(wasm_i16x8_extract_lane(v[r], 2), out, n + 6 + r, stride, copies);
            store1(wasm_i16x8_extract_lane(v[r], 3), out, n + 9 + r, stride, copies);
          }
        }
        c.pos += 4;
        n += 12;
      }
      while (c.pos < len && n + 3 <= limit) {
        v128_t r = interpolate3(x, t, kp, split0, split1, c.pos);
        store1(wasm_i16x8_extract_lane(r, 0), out, n, stride, copies);
        store1(wasm_i16x8_extract_lane(r, 1), out, n + 1, stride, copies);
        store1(wasm_i16x8_extract_lane(r, 2), out, n + 2, stride, copies);
        c.pos += 1;
        n += 3;
      }
    }
  } else {
    for (;;) {
      Cursor q[4] = {c, step(c, up, sf, sp), c, c};
      q[2] = step(q[1], up, sf, sp);
      q[3] = step(q[2], up, sf, sp);
      if (q[3].pos >= len || n + 4 > limit) break;
      store4(general4(x, t, kp, split0, split1, q), out, n, stride, copies);
      c = step(q[3], up, sf, sp);
      n += 4;
    }
  }
  /* The last few outputs, one at a time. */
  while (c.pos < len && n < limit) {
    store1(single(x, t, kp, split0, split1, c), out, n++, stride, copies);
    c = step(c, up, sf, sp);
  }
  state[0] = c.pos;
  state[1] = c.phase;
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

/* G.711 decoding through the law's table of 256 int16 values. */
__attribute__((export_name("g711_decode"))) void g711_decode(const uint8_t *src, int32_t n, const int16_t *table,
                                                              int16_t *dst) {
  for (int32_t i = 0; i < n; i++) dst[i] = table[src[i]];
}

/* G.711 encoding through the law's table of 65536 code words, indexed by the int16 bits. */
__attribute__((export_name("g711_encode"))) void g711_encode(const int16_t *src, int32_t n, const uint8_t *table,
                                                              uint8_t *dst) {
  for (int32_t i = 0; i < n; i++) dst[i] = table[(uint16_t)src[i]];
}

/*
 * Float samples to int16: dst[i * stride] = x * scale rounded to nearest (halves away from
 * zero) and clipped to int16, computed in double precision as flac-decoder.ts does.
 */
__attribute__((export_name("f32_to_i16"))) void f32_to_i16(const float *src, int32_t n, double scale, int16_t *dst,
                                                            int32_t stride) {
  int32_t i = 0;
  if (stride == 1) {
    const v128_t k = wasm_f64x2_splat(scale), half = wasm_f64x2_splat(0.5), hi = wasm_f64x2_splat(32767.0),
                 lo = wasm_f64x2_splat(-32768.0);
    for (; i + 4 <= n; i += 4) {
      v128_t f = wasm_v128_load(src + i);
      v128_t a = wasm_f64x2_mul(wasm_f64x2_promote_low_f32x4(f), k);
      v128_t b = wasm_f64x2_mul(wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(f, f, 2, 3, 0, 1)), k);
      a = wasm_f64x2_min(wasm_f64x2_max(a, lo), hi);
      b = wasm_f64x2_min(wasm_f64x2_max(b, lo), hi);
      /* Halves away from zero: truncate x + 0.5 * sign(x). */
      a = wasm_f64x2_add(a, wasm_v128_or(half, wasm_v128_and(a, wasm_f64x2_splat(-0.0))));
      b = wasm_f64x2_add(b, wasm_v128_or(half, wasm_v128_and(b, wasm_f64x2_splat(-0.0))));
      v128_t r = wasm_i32x4_shuffle(wasm_i32x4_trunc_sat_f64x2_zero(a), wasm_i32x4_trunc_sat_f64x2_zero(b), 0, 1, 4, 5);
      wasm_v128_store64_lane(dst + i, wasm_i16x8_narrow_i32x4(r, r), 0);
    }
  }
  for (; i < n; i++) {
    double x = (double)src[i] * scale;
    int32_t v = x >= 32767.0 ? 32767 : x <= -32768.0 ? -32768 : x >= 0 ? (int32_t)(x + 0.5) : (int32_t)(x - 0.5);
    dst[i * stride] = (int16_t)v;
  }
}

/*
 * Frame levels for the voice and barge-in detectors: out[f] is the sum of the squares of the
 * `len` samples of frame f (x[f * len .. f * len + len)), exactly. A dot product of 8 samples with
 * themselves gives per lane the sum of two squares, at most 2^31: read as unsigned it is exact,
 * and it is widened to 64 bits before it is added. The sums are below 2^53 for any frame shorter
 * than 2^22 samples, so the doubles written are exact too.
 */
__attribute__((export_name("frame_power"))) void frame_power(const int16_t *x, int32_t frames, int32_t len, double *out) {
  for (int32_t f = 0; f < frames; f++) {
    const int16_t *p = x + f * len;
    v128_t acc = wasm_i64x2_splat(0);
    int32_t i = 0;
    for (; i + 8 <= len; i += 8) {
      v128_t v = wasm_v128_load(p + i);
      v128_t d = wasm_i32x4_dot_i16x8(v, v);
      acc = wasm_i64x2_add(acc, wasm_u64x2_extend_low_u32x4(d));
      acc = wasm_i64x2_add(acc, wasm_u64x2_extend_high_u32x4(d));
    }
    uint64_t sum = (uint64_t)wasm_i64x2_extract_lane(acc, 0) + (uint64_t)wasm_i64x2_extract_lane(acc, 1);
    for (; i < len; i++) sum += (uint64_t)((int32_t)p[i] * (int32_t)p[i]);
    out[f] = (double)sum;
  }
}

/*
 * Base64 (RFC 4648 alphabet, '=' padding) of the n bytes at src, written to dst
 * (4 * ceil(n / 3) bytes): the realtime stream writes an append's audio straight into the bytes
 * of its text frame, with no string in between. Twelve bytes become sixteen characters per
 * step: each group of three lands in a 32-bit lane as a 24-bit number, its four 6-bit fields
 * are moved to the lane's four bytes, and each field gets the offset of its alphabet range.
 */
__attribute__((export_name("base64_encode"))) void base64_encode(const uint8_t *src, int32_t n, uint8_t *dst) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  int32_t i = 0, o = 0;
  /* Lane j holds bytes 3j + 2, 3j + 1, 3j (c | b << 8 | a << 16); the 16-byte load reads 4 past the 12 used. */
  const v128_t groups = wasm_i8x16_make(2, 1, 0, -1, 5, 4, 3, -1, 8, 7, 6, -1, 11, 10, 9, -1);
  const v128_t m = wasm_i32x4_splat(0x3f);
  /* Offset to ASCII by range: 52-61 -> 1-10, 62 -> 11, 63 -> 12, 26-51 -> 0, 0-25 -> 13. */
  const v128_t offsets = wasm_i8x16_make(71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 65, 0, 0);
  for (; i + 16 <= n; i += 12, o += 16) {
    v128_t v = wasm_i8x16_swizzle(wasm_v128_load(src + i), groups);
    v128_t idx = wasm_v128_or(
        wasm_v128_or(wasm_v128_and(wasm_u32x4_shr(v, 18), m), wasm_v128_and(wasm_u32x4_shr(v, 4), wasm_i32x4_shl(m, 8))),
        wasm_v128_or(wasm_v128_and(wasm_i32x4_shl(v, 10), wasm_i32x4_shl(m, 16)), wasm_v128_and(wasm_i32x4_shl(v, 24), wasm_i32x4_shl(m, 24))));
    v128_t range = wasm_u8x16_sub_sat(idx, wasm_i8x16_splat(51));
    range = wasm_v128_bitselect(wasm_i8x16_splat(13), range, wasm_u8x16_lt(idx, wasm_i8x16_splat(26)));
    wasm_v128_store(dst + o, wasm_i8x16_add(idx, wasm_i8x16_swizzle(offsets, range)));
  }
  for (; i + 3 <= n; i += 3, o += 4) {
    uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
    dst[o] = alphabet[v >> 18];
    dst[o + 1] = alphabet[(v >> 12) & 63];
    dst[o + 2] = alphabet[(v >> 6) & 63];
    dst[o + 3] = alphabet[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0);
    dst[o] = alphabet[v >> 18];
    dst[o + 1] = alphabet[(v >> 12) & 63];
    dst[o + 2] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
    dst[o + 3] = '=';
  }
}
