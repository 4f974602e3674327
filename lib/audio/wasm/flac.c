/*
 * FLAC frame decoding to PCM16, compiled to WebAssembly by scripts/build-wasm.sh (the result is
 * committed as lib/audio/wasm/flac-kernel.ts; lib/audio/flac-frames.ts drives it).
 *
 * One call decodes one frame (RFC 9639, section 9) that starts at the first byte of its input:
 * the header and its CRC-8, every subframe (constant, verbatim, fixed predictors of order 0 to
 * 4, linear prediction of order 1 to 32), Rice-coded residuals with escaped partitions, wasted
 * bits, the three stereo decorrelation modes, and the CRC-16 of the whole frame. It writes the
 * frame's samples as PCM16 interleaved (depths above 16 bits keep their top 16 bits, lower
 * depths are shifted up) and, for depths other than 16, the samples at their own depth in
 * little-endian bytes (the bytes STREAMINFO's MD5 covers; for 16 bits the PCM16 is those
 * bytes). Depths of 4 to 24 bits and up to 8 channels.
 *
 * Input that ends inside the frame is reported as such (the caller waits for more bytes and
 * calls again from the frame's first byte): the bit reader feeds 1-bits past the end, so every
 * loop ends, and counts them. Nothing is kept between calls.
 */
#include <stdint.h>

/* Results (frame_decode's return value when not a byte count). */
#define NEED_MORE 0
#define ERR_SYNC -1
#define ERR_HEADER_CRC -2
#define ERR_HEADER -3
#define ERR_SUBFRAME -4
#define ERR_FRAME_CRC -5
#define ERR_FORMAT -6

/* Slots of the int32 `info` array shared with the caller. */
#define I_BITS 0        /* in: STREAMINFO bits per sample */
#define I_CHANNELS 1    /* in: STREAMINFO channels */
#define I_MAX_BLOCK 2   /* in: largest block the work area holds */
#define I_BLOCK 3       /* out: samples per channel in the frame */
#define I_NUMBER_LOW 4  /* out: the header's frame number (fixed block size) or first sample number */
#define I_NUMBER_HIGH 5 /*      (variable block size), 36 bits: the low 32 and the rest */
#define I_VARIABLE 6    /* out: 1 for a variable block size stream (the number is a sample number) */

typedef struct {
  const uint8_t *p;   /* next byte to load */
  const uint8_t *end; /* end of the input */
  uint64_t cache;     /* upcoming bits, most significant first; bits below `count` are 0 or upcoming input */
  int32_t count;      /* valid bits in cache */
  int32_t over;       /* bytes fed past the end */
} Bits;

static uint8_t crc8_table[256];
/* crc16_table[k][b]: the CRC-16 of byte b followed by k zero bytes (slicing by 8). */
static uint16_t crc16_table[8][256];
static int32_t tables_ready;

static void make_tables(void) {
  for (int32_t i = 0; i < 256; i++) {
    uint32_t c8 = (uint32_t)i, c16 = (uint32_t)i << 8;
    for (int32_t j = 0; j < 8; j++) {
      c8 = (c8 & 0x80) ? ((c8 << 1) ^ 0x07) : (c8 << 1);
      c16 = (c16 & 0x8000) ? ((c16 << 1) ^ 0x8005) : (c16 << 1);
    }
    crc8_table[i] = (uint8_t)c8;
    crc16_table[0][i] = (uint16_t)c16;
  }
  for (int32_t k = 1; k < 8; k++) {
    for (int32_t i = 0; i < 256; i++) {
      uint32_t prev = crc16_table[k - 1][i];
      crc16_table[k][i] = (uint16_t)(((prev << 8) & 0xffff) ^ crc16_table[0][prev >> 8]);
    }
  }
  tables_ready = 1;
}

/* CRC-16 (polynomial 0x8005, most significant bit first, initial 0) of p[0..n). */
static uint32_t crc16(const uint8_t *p, int32_t n) {
  uint32_t crc = 0;
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint8_t *d = p + i;
    crc = crc16_table[7][d[0] ^ (crc >> 8)] ^ crc16_table[6][d[1] ^ (crc & 0xff)] ^ crc16_table[5][d[2]] ^
          crc16_table[4][d[3]] ^ crc16_table[3][d[4]] ^ crc16_table[2][d[5]] ^ crc16_table[1][d[6]] ^ crc16_table[0][d[7]];
  }
  for (; i < n; i++) crc = ((crc << 8) & 0xffff) ^ crc16_table[0][(crc >> 8) ^ p[i]];
  return crc;
}

static inline uint64_t load_be64(const uint8_t *p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}

/* Tops the cache up to at least 56 valid bits. */
static inline void refill(Bits *b) {
  if (b->end - b->p >= 8) {
    b->cache |= load_be64(b->p) >> b->count;
    int32_t bytes = (63 - b->count) >> 3;
    b->p += bytes;
    b->count += bytes << 3;
    return;
  }
  while (b->count <= 56) {
    uint64_t byte = 0xff;
    if (b->p < b->end) byte = *b->p++;
    else b->over++;
    b->cache |= byte << (56 - b->count);
    b->count += 8;
  }
}

/* The next n bits (0 <= n <= 32) as an unsigned number. */
static inline uint32_t take(Bits *b, int32_t n) {
  if (n == 0) return 0;
  if (b->count < n) refill(b);
  uint32_t v = (uint32_t)(b->cache >> (64 - n));
  b->cache <<= n;
  b->count -= n;
  return v;
}

/* The next n bits (0 <= n <= 32) as a two's complement number. */
static inline int32_t take_signed(Bits *b, int32_t n) {
  if (n == 0) return 0;
  uint32_t v = take(b, n);
  return (int32_t)(v << (32 - n)) >> (32 - n);
}

/* Zero bits before the next 1-bit; the 1-bit is consumed. */
static uint32_t unary(Bits *b) {
  uint32_t q = 0;
  for (;;) {
    if (b->count < 32) refill(b);
    int32_t lz = b->cache ? __builtin_clzll(b->cache) : 64;
    if (lz < b->count) {
      b->cache = (b->cache << lz) << 1;
      b->count -= lz + 1;
      return q + (uint32_t)lz;
    }
    q += (uint32_t)b->count;
    b->cache = 0;
    b->count = 0;
  }
}

/* True once the reader has handed out bits past the end of the input (not merely loaded them). */
static inline int32_t overrun(const Bits *b) {
  return b->over * 8 > b->count;
}

/* Bytes consumed so far (the reader is byte-aligned by the caller where that matters). */
static inline int32_t consumed(const Bits *b, const uint8_t *start) {
  return (int32_t)(b->p - start) + b->over - (b->count >> 3);
}

/* n Rice-coded residuals with parameter k (0 to 30), zigzag-decoded into out. */
static void rice(Bits *b, int32_t *out, int32_t n, int32_t k) {
  for (int32_t i = 0; i < n; i++) {
    if (b->count < 32) refill(b);
    uint64_t c = b->cache;
    int32_t lz = c ? __builtin_clzll(c) : 64;
    uint32_t v;
    if (lz + 1 + k <= b->count) {
      uint64_t t = (c << lz) << 1;
      v = ((uint32_t)lz << k) | (uint32_t)((t >> (63 - k)) >> 1);
      b->cache = t << k;
      b->count -= lz + 1 + k;
    } else {
      uint32_t q = unary(b);
      v = (q << k) | take(b, k);
    }
    out[i] = (int32_t)(v >> 1) ^ -(int32_t)(v & 1);
  }
}

/* The residual of a subframe of n samples after `order` warm-up samples, into out[order..n). */
static int32_t residual(Bits *b, int32_t *out, int32_t n, int32_t order) {
  uint32_t method = take(b, 2);
  if (method > 1) return ERR_SUBFRAME;
  int32_t param_bits = method == 0 ? 4 : 5;
  int32_t escape = method == 0 ? 15 : 31;
  int32_t partition_order = (int32_t)take(b, 4);
  int32_t partitions = 1 << partition_order;
  int32_t size = n >> partition_order;
  if ((size << partition_order) != n || size < order) return ERR_SUBFRAME;
  int32_t at = order;
  for (int32_t p = 0; p < partitions; p++) {
    int32_t count = p == 0 ? size - order : size;
    int32_t k = (int32_t)take(b, param_bits);
    if (k == escape) {
      int32_t width = (int32_t)take(b, 5);
      for (int32_t i = 0; i < count; i++) out[at + i] = take_signed(b, width);
    } else {
      rice(b, out + at, count, k);
    }
    at += count;
    if (overrun(b)) return NEED_MORE;
  }
  return 1;
}

/*
 * out[i] += prediction from the previous `order` samples, fixed polynomial predictors. The sums
 * are taken modulo 2^32 (unsigned): valid streams (at most 25-bit side channels) never wrap, and
 * a damaged frame, which the CRC-16 rejects afterwards, cannot reach undefined behaviour.
 */
static void restore_fixed(int32_t *s, int32_t n, int32_t order) {
  switch (order) {
    case 1:
      for (int32_t i = 1; i < n; i++) s[i] = (int32_t)((uint32_t)s[i] + (uint32_t)s[i - 1]);
      break;
    case 2:
      for (int32_t i = 2; i < n; i++) s[i] = (int32_t)((uint32_t)s[i] + 2u * (uint32_t)s[i - 1] - (uint32_t)s[i - 2]);
      break;
    case 3:
      for (int32_t i = 3; i < n; i++) {
        s[i] = (int32_t)((uint32_t)s[i] + 3u * ((uint32_t)s[i - 1] - (uint32_t)s[i - 2]) + (uint32_t)s[i - 3]);
      }
      break;
    case 4:
      for (int32_t i = 4; i < n; i++) {
        s[i] = (int32_t)((uint32_t)s[i] + 4u * ((uint32_t)s[i - 1] + (uint32_t)s[i - 3]) - 6u * (uint32_t)s[i - 2] - (uint32_t)s[i - 4]);
      }
      break;
    default:
      break;
  }
}

/* Linear prediction of a constant order N: the taps unrolled by the compiler. */
#define LPC(N)                                                                \
  case N:                                                                     \
    for (int32_t i = N; i < n; i++) {                                         \
      int64_t sum = 0;                                                        \
      for (int32_t j = 0; j < N; j++) sum += (int64_t)coef[j] * s[i - 1 - j]; \
      s[i] = (int32_t)((uint32_t)s[i] + (uint32_t)(sum >> shift));            \
    }                                                                         \
    return;

/* Linear prediction: s[i] += (sum of coef[j] * s[i - 1 - j]) >> shift, in 64-bit sums. */
static void restore_lpc(int32_t *s, int32_t n, const int32_t *coef, int32_t order, int32_t shift) {
  switch (order) {
    LPC(1) LPC(2) LPC(3) LPC(4) LPC(5) LPC(6) LPC(7) LPC(8) LPC(9) LPC(10) LPC(11) LPC(12)
    default:
      for (int32_t i = order; i < n; i++) {
        int64_t sum = 0;
        for (int32_t j = 0; j < order; j++) sum += (int64_t)coef[j] * s[i - 1 - j];
        s[i] = (int32_t)((uint32_t)s[i] + (uint32_t)(sum >> shift));
      }
  }
}

/* One subframe of n samples at depth bps into s. */
static int32_t subframe(Bits *b, int32_t *s, int32_t n, int32_t bps) {
  if (take(b, 1) != 0) return ERR_SUBFRAME;
  uint32_t type = take(b, 6);
  int32_t wasted = 0;
  if (take(b, 1)) {
    wasted = (int32_t)unary(b) + 1;
    if (wasted > bps) return ERR_SUBFRAME;
    bps -= wasted;
  }
  if (type == 0) {
    int32_t v = take_signed(b, bps);
    for (int32_t i = 0; i < n; i++) s[i] = v;
  } else if (type == 1) {
    for (int32_t i = 0; i < n; i++) s[i] = take_signed(b, bps);
  } else if (type >= 8 && type <= 12) {
    int32_t order = (int32_t)type - 8;
    if (order > n) return ERR_SUBFRAME;
    for (int32_t i = 0; i < order; i++) s[i] = take_signed(b, bps);
    int32_t r = residual(b, s, n, order);
    if (r <= 0) return r;
    restore_fixed(s, n, order);
  } else if (type >= 32) {
    int32_t order = (int32_t)type - 31;
    if (order > n) return ERR_SUBFRAME;
    for (int32_t i = 0; i < order; i++) s[i] = take_signed(b, bps);
    int32_t precision = (int32_t)take(b, 4) + 1;
    if (precision == 16) return ERR_SUBFRAME;
    int32_t shift = take_signed(b, 5);
    if (shift < 0) return ERR_SUBFRAME;
    int32_t coef[32];
    for (int32_t j = 0; j < order; j++) coef[j] = take_signed(b, precision);
    int32_t r = residual(b, s, n, order);
    if (r <= 0) return r;
    restore_lpc(s, n, coef, order, shift);
  } else {
    return ERR_SUBFRAME;
  }
  if (overrun(b)) return NEED_MORE;
  if (wasted) {
    for (int32_t i = 0; i < n; i++) s[i] = (int32_t)((uint32_t)s[i] << wasted);
  }
  return 1;
}

static const int32_t DEPTHS[8] = {0, 8, 12, 0, 16, 20, 24, 32};

/*
 * Decodes the frame at in[0..len). Returns its length in bytes, NEED_MORE when the input ends
 * inside it, or a negative ERR_*. work holds channels * info[I_MAX_BLOCK] int32; pcm receives
 * block * channels int16; raw (depths other than 16) block * channels * ceil(bits / 8) bytes.
 */
__attribute__((export_name("frame_decode"))) int32_t frame_decode(const uint8_t *in, int32_t len, int32_t *info, int32_t *work, int16_t *pcm, uint8_t *raw) {
  if (!tables_ready) make_tables();
  if (len < 2) return NEED_MORE;
  if (in[0] != 0xff || (in[1] & 0xfe) != 0xf8) return ERR_SYNC;
  /* The header: at most 16 bytes (2 + 2 + 7 of coded number + 2 + 2 + 1). */
  int32_t h = 4;
  if (len < h) return NEED_MORE;
  uint32_t block_code = in[2] >> 4, rate_code = in[2] & 15, channel_code = in[3] >> 4, depth_code = (in[3] >> 1) & 7;
  if ((in[3] & 1) || rate_code == 15 || channel_code > 10 || depth_code == 3 || block_code == 0) return ERR_HEADER;
  /* The coded frame or sample number (UTF-8 style, up to 7 bytes, 36 bits). */
  if (len < h + 1) return NEED_MORE;
  uint32_t lead = in[h];
  int32_t extra = lead < 0x80 ? 0 : lead < 0xc0 ? -1 : lead < 0xe0 ? 1 : lead < 0xf0 ? 2 : lead < 0xf8 ? 3 : lead < 0xfc ? 4 : lead < 0xfe ? 5 : lead == 0xfe ? 6 : -1;
  if (extra < 0) return ERR_HEADER;
  if (len < h + 1 + extra) return NEED_MORE;
  uint64_t number = extra == 0 ? lead : lead & (0x3fu >> extra);
  for (int32_t i = 1; i <= extra; i++) {
    if ((in[h + i] & 0xc0) != 0x80) return ERR_HEADER;
    number = (number << 6) | (in[h + i] & 0x3f);
  }
  h += 1 + extra;
  int32_t block;
  if (block_code == 1) block = 192;
  else if (block_code <= 5) block = 576 << (block_code - 2);
  else if (block_code == 6) {
    if (len < h + 1) return NEED_MORE;
    block = in[h] + 1;
    h += 1;
  } else if (block_code == 7) {
    if (len < h + 2) return NEED_MORE;
    block = ((in[h] << 8) | in[h + 1]) + 1;
    h += 2;
  } else block = 256 << (block_code - 8);
  /* A rate written out in the header (codes 12 to 14) is skipped: the output is PCM16 as found. */
  if (rate_code >= 12) h += rate_code == 12 ? 1 : 2;
  if (len < h + 1) return NEED_MORE;
  uint32_t crc8 = 0;
  for (int32_t i = 0; i < h; i++) crc8 = crc8_table[crc8 ^ in[i]];
  if (crc8 != in[h]) return ERR_HEADER_CRC;
  h += 1;

  int32_t channels = channel_code <= 7 ? (int32_t)channel_code + 1 : 2;
  int32_t bits = depth_code == 0 ? info[I_BITS] : DEPTHS[depth_code];
  if (channels != info[I_CHANNELS] || bits != info[I_BITS] || bits < 4 || bits > 24 || block > info[I_MAX_BLOCK]) return ERR_FORMAT;
  info[I_BLOCK] = block;
  info[I_NUMBER_LOW] = (int32_t)(uint32_t)number;
  info[I_NUMBER_HIGH] = (int32_t)(number >> 32);
  info[I_VARIABLE] = in[1] & 1;

  Bits b = {in + h, in + len, 0, 0, 0};
  int32_t max = info[I_MAX_BLOCK];
  for (int32_t c = 0; c < channels; c++) {
    /* The side channel of a decorrelated pair carries one more bit. */
    int32_t side = (channel_code == 8 && c == 1) || (channel_code == 9 && c == 0) || (channel_code == 10 && c == 1);
    int32_t r = subframe(&b, work + c * max, block, bits + side);
    if (overrun(&b)) return NEED_MORE;
    if (r < 0) return r;
  }
  /* Zero padding to a byte boundary, then the CRC-16 of everything before it. */
  int32_t pad = b.count & 7;
  if (take(&b, pad) != 0) return ERR_SUBFRAME;
  if (overrun(&b)) return NEED_MORE;
  int32_t end = consumed(&b, in);
  if (end + 2 > len) return NEED_MORE;
  if (crc16(in, end) != (((uint32_t)in[end] << 8) | in[end + 1])) return ERR_FRAME_CRC;

  int32_t *s0 = work, *s1 = work + max;
  if (channel_code == 8) {
    for (int32_t i = 0; i < block; i++) s1[i] = (int32_t)((uint32_t)s0[i] - (uint32_t)s1[i]);
  } else if (channel_code == 9) {
    for (int32_t i = 0; i < block; i++) s0[i] = (int32_t)((uint32_t)s0[i] + (uint32_t)s1[i]);
  } else if (channel_code == 10) {
    for (int32_t i = 0; i < block; i++) {
      int32_t side = s1[i];
      int32_t mid = (int32_t)((uint32_t)s0[i] << 1) | (side & 1);
      s0[i] = (int32_t)((uint32_t)mid + (uint32_t)side) >> 1;
      s1[i] = (int32_t)((uint32_t)mid - (uint32_t)side) >> 1;
    }
  }

  int32_t down = bits > 16 ? bits - 16 : 0, up = bits < 16 ? 16 - bits : 0;
  for (int32_t c = 0; c < channels; c++) {
    const int32_t *s = work + c * max;
    int16_t *o = pcm + c;
    for (int32_t i = 0; i < block; i++, o += channels) *o = (int16_t)((uint32_t)(s[i] >> down) << up);
  }
  if (bits != 16) {
    int32_t width = (bits + 7) >> 3;
    for (int32_t c = 0; c < channels; c++) {
      const int32_t *s = work + c * max;
      uint8_t *o = raw + c * width;
      int32_t stride = channels * width;
      for (int32_t i = 0; i < block; i++, o += stride) {
        uint32_t v = (uint32_t)s[i];
        o[0] = (uint8_t)v;
        if (width > 1) o[1] = (uint8_t)(v >> 8);
        if (width > 2) o[2] = (uint8_t)(v >> 16);
      }
    }
  }
  return end + 2;
}
