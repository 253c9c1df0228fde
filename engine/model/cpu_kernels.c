/* Native CPU kernels for SpecLab's decode pass: the small matrix products of a decode or verify pass.
 *
 * Why: a decode pass multiplies a few token vectors (M = 1..16) by every weight matrix of the model, so its
 * time is the time to stream the weights from memory. PyTorch's CPU linear (oneDNN) spends a fixed cost per
 * call and reads the weights at well under the copy bandwidth for M = 1 (docs/journal.md, "the fused fast pass";
 * the native pass against it today: docs/measurements.md, "Passes on the CPU"). These kernels
 * read each weight once per pass, 64 bytes at a time, and keep up to 12 tokens' sums in registers; where the CPU
 * has AMX (and the OS lets the process use it), bfloat16 matrices are multiplied on its tiles instead, 16 tokens x
 * 16 outputs per instruction, so a pass of 32 tokens costs about the weights' bytes, as one of 8 does.
 *
 * Layout (`pack_*`): the rows of W (N x K) in blocks of 16; within a block the weights are interleaved so
 * that one 64-byte load holds the same k for 16 rows (float32), or the same pair k, k+1 for 16 rows
 * (bfloat16, the pair order AVX512-BF16's dot product wants). A block's 16 outputs then accumulate in one
 * vector register per token, with no horizontal sums: y[t][j..j+15] += W[j..j+15][k] * x[t][k]. The bfloat16
 * layout is also AMX's second operand as it is (16 pairs of a block: one tile), so one packed copy serves both.
 *
 * Numerics: products in float32 (bfloat16 x bfloat16 is exact in float32), sums in float32 in this order
 * (two interleaved partial sums over k; on AMX's tiles, the tiles' own order), bfloat16 outputs rounded to nearest
 * even as PyTorch rounds. The order differs from oneDNN's, so the last bits may too; float32 greedy decoding gives the
 * same tokens (tests/engine/test_cpukernels.py). On one machine a token's sums do not depend on its pass.
 *
 * Threads: OpenMP over row blocks, num_threads set by the caller (torch.get_num_threads()); the library
 * links libgomp by soname, so it shares the runtime (and its thread pool) PyTorch has already loaded.
 * Built by engine/model/cpukernels.py with -O3 -march=native -fopenmp, once per machine. */
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <omp.h>

#ifndef __AVX512F__
#error "SpecLab's CPU kernels need AVX-512F"
#endif

#define TMAX 12 /* tokens per register tile: 2 x 12 sums and 2 weight vectors fit AVX-512's 32 registers. A pass of
 * more tokens is cut into equal tiles (16 = 8 + 8). With tiles of 8, a 9-token pass read each weight strip twice (8 + 1)
 * and cost clearly more than 8 tokens; in one tile of 9 it costs about what 8 do (docs/measurements.md, "Passes on the
 * CPU"; before and after: docs/journal.md, "the pass past 8 tokens, trees back in the race"). Every tile sums a token's products in one order, so a token's row does not depend on its pass. */
#ifndef PREFETCH
#define PREFETCH 32 /* k pairs (64-byte lines) ahead: the best of 16/32/64 on the 2-core EPYC; without prefetch a small pass cost more */
/* A tile of 3 or more tokens spends more cycles on each line, so it fetches farther ahead and into L2 (T1), not L1: a
 * 5-token pass then cost less against a one-token pass (docs/journal.md, "goodput's acceptance estimate, prefetch
 * per tile"). */
#define PF_DIST(T) ((T) <= 2 ? PREFETCH : 3 * PREFETCH)
#define PF_HINT(T) ((T) <= 2 ? _MM_HINT_T0 : _MM_HINT_T1)
#endif
#define MAX_HEAD_DIM 256 /* the layer kernel keeps one head on the stack (cpukernels.MAX_HEAD_DIM) */

static inline uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* ---- packing ------------------------------------------------------------------------------------- */
void pack_bf16(const uint16_t *w, uint16_t *wp, int K, int N) { /* K even */
  int kp2 = K / 2, blocks = (N + 15) / 16;
  for (int b = 0; b < blocks; b++)
    for (int kp = 0; kp < kp2; kp++)
      for (int r = 0; r < 16; r++) {
        int j = b * 16 + r;
        uint16_t *dst = wp + (((int64_t)b * kp2 + kp) * 16 + r) * 2;
        dst[0] = j < N ? w[(int64_t)j * K + 2 * kp] : 0;
        dst[1] = j < N ? w[(int64_t)j * K + 2 * kp + 1] : 0;
      }
}

void pack_f32(const float *w, float *wp, int K, int N) {
  int blocks = (N + 15) / 16;
  for (int b = 0; b < blocks; b++)
    for (int k = 0; k < K; k++)
      for (int r = 0; r < 16; r++) {
        int j = b * 16 + r;
        wp[((int64_t)b * K + k) * 16 + r] = j < N ? w[(int64_t)j * K + k] : 0.0f;
      }
}

/* ---- one 16-row block times T tokens -------------------------------------------------------------- */
#ifdef __AVX512BF16__
#define DOT_BF16(acc, w, x) acc = _mm512_dpbf16_ps(acc, (__m512bh)(w), (__m512bh)(x))
#else /* AVX-512F without BF16: split each pair into its two float32 halves */
#define DOT_BF16(acc, w, x)                                                                     \
  do {                                                                                          \
    __m512 we_ = _mm512_castsi512_ps(_mm512_slli_epi32((w), 16));                                \
    __m512 wo_ = _mm512_castsi512_ps(_mm512_and_si512((w), _mm512_set1_epi32((int)0xffff0000u))); \
    __m512 xe_ = _mm512_castsi512_ps(_mm512_slli_epi32((x), 16));                                \
    __m512 xo_ = _mm512_castsi512_ps(_mm512_and_si512((x), _mm512_set1_epi32((int)0xffff0000u))); \
    acc = _mm512_fmadd_ps(wo_, xo_, _mm512_fmadd_ps(we_, xe_, acc));                             \
  } while (0)
#endif
#define DOT_BF16_BCAST(acc, w, p) DOT_BF16(acc, w, _mm512_set1_epi32((int)*(p)))

/* T is a compile-time constant in each instance (BLOCKS_BF16[T], BLOCKS_F32[T]), so the 2T sums stay in
 * registers; with a run-time T the compiler keeps them on the stack (measured slower). */
#define BLOCK_BF16(T)                                                                                              \
  static void block_bf16_##T(const uint16_t *wb, const uint32_t *x, int kp2, float *out) {                           \
    __m512 a0[T], a1[T];                                                                                           \
    for (int t = 0; t < T; t++) a0[t] = a1[t] = _mm512_setzero_ps();                                               \
    int kp = 0;                                                                                                    \
    for (; kp + 2 <= kp2; kp += 2) {                                                                               \
      _mm_prefetch((const char *)(wb + (int64_t)(kp + PF_DIST(T)) * 32), PF_HINT(T));                            \
      _mm_prefetch((const char *)(wb + (int64_t)(kp + PF_DIST(T) + 1) * 32), PF_HINT(T));                        \
      __m512i w0 = _mm512_loadu_si512(wb + (int64_t)kp * 32), w1 = _mm512_loadu_si512(wb + (int64_t)(kp + 1) * 32); \
      for (int t = 0; t < T; t++) {                                                                                \
        DOT_BF16_BCAST(a0[t], w0, x + (int64_t)t * kp2 + kp);                                                      \
        DOT_BF16_BCAST(a1[t], w1, x + (int64_t)t * kp2 + kp + 1);                                                  \
      }                                                                                                            \
    }                                                                                                              \
    for (; kp < kp2; kp++) {                                                                                       \
      __m512i w0 = _mm512_loadu_si512(wb + (int64_t)kp * 32);                                                      \
      for (int t = 0; t < T; t++) DOT_BF16_BCAST(a0[t], w0, x + (int64_t)t * kp2 + kp);                            \
    }                                                                                                              \
    for (int t = 0; t < T; t++) _mm512_storeu_ps(out + t * 16, _mm512_add_ps(a0[t], a1[t]));                      \
  }

#define BLOCK_F32(T)                                                                                               \
  static void block_f32_##T(const float *wb, const float *x, int K, float *out) {                                  \
    __m512 a0[T], a1[T];                                                                                           \
    for (int t = 0; t < T; t++) a0[t] = a1[t] = _mm512_setzero_ps();                                               \
    int k = 0;                                                                                                     \
    for (; k + 2 <= K; k += 2) {                                                                                   \
      _mm_prefetch((const char *)(wb + (int64_t)(k + PF_DIST(T)) * 16), PF_HINT(T));                             \
      _mm_prefetch((const char *)(wb + (int64_t)(k + PF_DIST(T) + 1) * 16), PF_HINT(T));                         \
      __m512 w0 = _mm512_loadu_ps(wb + (int64_t)k * 16), w1 = _mm512_loadu_ps(wb + (int64_t)(k + 1) * 16);        \
      for (int t = 0; t < T; t++) {                                                                                \
        a0[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(int64_t)t * K + k]), a0[t]);                                 \
        a1[t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[(int64_t)t * K + k + 1]), a1[t]);                             \
      }                                                                                                            \
    }                                                                                                              \
    for (; k < K; k++) {                                                                                           \
      __m512 w0 = _mm512_loadu_ps(wb + (int64_t)k * 16);                                                           \
      for (int t = 0; t < T; t++) a0[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(int64_t)t * K + k]), a0[t]);       \
    }                                                                                                              \
    for (int t = 0; t < T; t++) _mm512_storeu_ps(out + t * 16, _mm512_add_ps(a0[t], a1[t]));                      \
  }

BLOCK_BF16(1) BLOCK_BF16(2) BLOCK_BF16(3) BLOCK_BF16(4) BLOCK_BF16(5) BLOCK_BF16(6) BLOCK_BF16(7) BLOCK_BF16(8)
BLOCK_BF16(9) BLOCK_BF16(10) BLOCK_BF16(11) BLOCK_BF16(12)
BLOCK_F32(1) BLOCK_F32(2) BLOCK_F32(3) BLOCK_F32(4) BLOCK_F32(5) BLOCK_F32(6) BLOCK_F32(7) BLOCK_F32(8)
BLOCK_F32(9) BLOCK_F32(10) BLOCK_F32(11) BLOCK_F32(12)
typedef void (*block_bf16_fn)(const uint16_t *, const uint32_t *, int, float *);
typedef void (*block_f32_fn)(const float *, const float *, int, float *);
static const block_bf16_fn BLOCKS_BF16[TMAX + 1] = {0, block_bf16_1, block_bf16_2, block_bf16_3, block_bf16_4,
                                                    block_bf16_5, block_bf16_6, block_bf16_7, block_bf16_8,
                                                    block_bf16_9, block_bf16_10, block_bf16_11, block_bf16_12};
static const block_f32_fn BLOCKS_F32[TMAX + 1] = {0, block_f32_1, block_f32_2, block_f32_3, block_f32_4,
                                                  block_f32_5, block_f32_6, block_f32_7, block_f32_8,
                                                  block_f32_9, block_f32_10, block_f32_11, block_f32_12};

static inline void block_bf16(const uint16_t *wb, const uint32_t *x, int kp2, int T, float *out) { BLOCKS_BF16[T](wb, x, kp2, out); }
static inline void block_f32(const float *wb, const float *x, int K, int T, float *out) { BLOCKS_F32[T](wb, x, K, out); }

/* ---- one decoder layer of a small pass, in place -------------------------------------------------------
 * The fused eager layer (engine/model/layer.py: decoder_layer with small_attend) as one call: RMSNorm, the
 * QKV product, RoPE, the new keys and values into the float32 buffers, attention over the live columns,
 * the output product and residual, RMSNorm, gate-up, SiLU x up, down and residual. Activations are in the
 * model's dtype (bfloat16 or float32, `bf`) and rounded where PyTorch's ops round them, so a bfloat16 layer
 * differs from the eager one only in the order of float32 sums (and exp to within an ulp). One OpenMP team
 * for the whole layer: the products, the attention heads and the small elementwise steps (norms, RoPE, SiLU,
 * residuals: vectorised) are all shared out, each step ending in the team's barrier (docs/measurements.md, "Passes
 * on the CPU").
 * x: (M = B*n, H); cos, sin: (M, d) RoPE
 * tables in the model's dtype (sin sign-folded, pass_masks.rope_tables); kbuf, vbuf: (B, kv, cap, d)
 * in bfloat16 (`kvbf`: a bfloat16 model's buffers) or float32; bias: (B*kv, groups*n, window) float32
 * (pass_masks.attention_bias). Attention: `attention`'s tasks, below, inside the layer's team. */
static inline __mmask16 tail(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

static inline __m512 vload(const void *p, int64_t i, int bf, __mmask16 m) {
  if (bf) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i)), 16));
  return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}

static inline __m512 vround(__m512 v, int bf) { /* to the nearest bfloat16 (even on ties), as PyTorch stores one */
  if (!bf) return v;
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), _mm512_set1_epi32((int)0xffff0000u));
  __m512i qnan = _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32((int)0xffff0000u)), _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), qnan));
}

static inline void vstore(void *p, int64_t i, __m512 v, int bf, __mmask16 m) { /* rounds in bfloat16 */
  if (bf)
    _mm256_mask_storeu_epi16((uint16_t *)p + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(vround(v, 1)), 16)));
  else
    _mm512_mask_storeu_ps((float *)p + i, m, v);
}

static inline __m512 vexp(__m512 x) { /* Cephes' expf polynomial, 2^n by scalef: within ~1 ulp of expf */
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.72f)), _mm512_set1_ps(-103.9f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

static void gemm_amx_team(const uint16_t *x, const uint16_t *wp, uint16_t *y, int M, int K, int N, int own);

static void gemm_team(const void *x, const void *wp, void *y, int M, int K, int N, int bf, int amx) { /* inside a team */
  if (bf && amx && K % 32 == 0) { /* AMX's tiles (below) */
    gemm_amx_team(x, wp, y, M, K, N, amx == 1);
    return;
  }
  int blocks = (N + 15) / 16;
#pragma omp for schedule(static)
  for (int b = 0; b < blocks; b++) {
    float out[TMAX * 16];
    __mmask16 m = tail(N - (int64_t)b * 16);
    int tiles = (M + TMAX - 1) / TMAX, step = (M + tiles - 1) / tiles; /* balanced: 16 tokens as 8 + 8, not 12 + 4 */
    for (int t0 = 0; t0 < M; t0 += step) {
      int T = M - t0 < step ? M - t0 : step;
      if (bf)
        block_bf16((const uint16_t *)wp + (int64_t)b * (K / 2) * 32, (const uint32_t *)((const uint16_t *)x + (int64_t)t0 * K), K / 2, T, out);
      else
        block_f32((const float *)wp + (int64_t)b * K * 16, (const float *)x + (int64_t)t0 * K, K, T, out);
      for (int t = 0; t < T; t++) vstore(y, (int64_t)(t0 + t) * N + b * 16, _mm512_loadu_ps(out + t * 16), bf, m);
    }
  }
}

/* The small elementwise steps share their rows out over the team that calls them (orphaned `omp for`: inside
 * layer_forward's parallel region both threads work and meet at its barrier; called outside one, a team of one). */
static void rms_norm_rows(const void *x, const void *w, void *h, int M, int H, float eps, int bf) {
#pragma omp for schedule(static)
  for (int m = 0; m < M; m++) {
    __m512 ss = _mm512_setzero_ps();
    for (int e = 0; e < H; e += 16) {
      __m512 v = vload(x, (int64_t)m * H + e, bf, tail(H - e));
      ss = _mm512_fmadd_ps(v, v, ss);
    }
    __m512 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(ss) / H + eps));
    for (int e = 0; e < H; e += 16) {
      __mmask16 k = tail(H - e);
      __m512 normed = vround(_mm512_mul_ps(vload(x, (int64_t)m * H + e, bf, k), inv), bf);
      vstore(h, (int64_t)m * H + e, _mm512_mul_ps(vload(w, e, bf, k), normed), bf, k);
    }
  }
}

static void add_rows(void *x, const void *o, int64_t len, int bf) { /* x += o, rounded */
#pragma omp for schedule(static)
  for (int64_t e = 0; e < len; e += 16) {
    __mmask16 k = tail(len - e);
    vstore(x, e, _mm512_add_ps(vload(x, e, bf, k), vload(o, e, bf, k)), bf, k);
  }
}

static void rope_and_store(void *qkv, const void *cos, const void *sin, void *kbuf, void *vbuf, int M, int n, int n_heads, int n_kv,
                           int d, int cap, int col0, int bf, int kvbf) {
  /* RoPE over the q and k heads (x*cos + swapped*sin, each product rounded), new k and v into the buffers */
  int half = d / 2, nqkv = (n_heads + 2 * n_kv) * d;
  int heads = n_heads + 2 * n_kv;
#pragma omp for schedule(static)
  for (int task = 0; task < M * heads; task++) {
    int m = task / heads, hh = task % heads, b = m / n, i = m % n;
    float tmp[MAX_HEAD_DIM], sw[MAX_HEAD_DIM];
    {
      int64_t base = (int64_t)m * nqkv + (int64_t)hh * d;
      for (int e = 0; e < d; e += 16) _mm512_mask_storeu_ps(tmp + e, tail(d - e), vload(qkv, base + e, bf, tail(d - e)));
      if (hh < n_heads + n_kv) {
        for (int e = 0; e < d; e++) sw[e] = tmp[e < half ? e + half : e - half];
        for (int e = 0; e < d; e += 16) {
          __mmask16 k = tail(d - e);
          __m512 a = vround(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, tmp + e), vload(cos, (int64_t)m * d + e, bf, k)), bf);
          __m512 c = vround(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, sw + e), vload(sin, (int64_t)m * d + e, bf, k)), bf);
          __m512 r = vround(_mm512_add_ps(a, c), bf);
          _mm512_mask_storeu_ps(tmp + e, k, r);
          vstore(qkv, base + e, r, bf, k);
        }
      }
      if (hh >= n_heads) { /* a key or a value head: its buffer row */
        int kv = hh < n_heads + n_kv;
        int64_t at = (((int64_t)b * n_kv + (hh - n_heads - (kv ? 0 : n_kv))) * cap + col0 + i) * d;
        for (int e = 0; e < d; e += 16) vstore(kv ? kbuf : vbuf, at + e, _mm512_maskz_loadu_ps(tail(d - e), tmp + e), kvbf, tail(d - e));
      }
    }
  }
}

static inline __m512 sum16(const __m512 *v) {
  /* lane j: the sum of v[j]'s 16 lanes. Halving rounds pair vectors up (their 256-bit halves, then 128-bit
   * quarters, then within quarters), which leaves lane 4c + {0, 1, 2, 3} holding v[c], v[8 + c], v[4 + c],
   * v[12 + c]; one permutation puts them in order. Each sum adds in _mm512_reduce_add_ps's order (i + 8, i + 4,
   * i + 2, i + 1), so a score is bit for bit what the column-at-a-time loop below gives, and a 32-token pass faster
   * (docs/measurements.md, "Passes on the CPU"). */
  __m512 t[8], u[4], x[2];
  for (int i = 0; i < 8; i++)
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; i++)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88), _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; i++) x[i] = _mm512_add_ps(_mm512_unpacklo_ps(u[2 * i], u[2 * i + 1]), _mm512_unpackhi_ps(u[2 * i], u[2 * i + 1]));
  __m512 r = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15), r);
}

/* ---- attention of a pass's queries, each KV column read once per (row, kv head) ------------------------------
 * A task is one row's kv head j over one segment of ATT_SEG columns: all its queries at once (the `groups` query heads
 * that share j, times the row's n new tokens: Q = groups * n), a block of 16 columns at a time, fetched ATT_PF blocks
 * ahead. A block's keys and values are read once into a tile that every query of the task uses from L1: bfloat16 keys
 * under bfloat16 queries as column-major pairs (`att_key_pairs`: AVX512-BF16's pair products land in the 16 columns'
 * lanes), else float32 rows (converted, zero-padded past the window and past d) and one transposing sum per query
 * (`sum16`); plus the bias; an online softmax (the running maximum m, the running sum l, the accumulator rescaled when m
 * rises); the values times the probabilities, 4 queries x 64 lanes per register tile: bfloat16 values as (column,
 * next column) pairs under the probabilities rounded to bfloat16 (`att_values_bf16`, AVX512-BF16's pair products, as
 * torch's flash attention rounds them for bfloat16), else float32 values. Segments split a long window over the
 * team; `attend_combine` merges their (m, l, acc) per query. A segment's boundaries are fixed column indices, so a
 * query's arithmetic does not depend on how many queries its pass holds: a masked column adds an exact zero.
 * q: token m's query head h at q + m * qstride + h * d (bfloat16 when `bf`); k, v: (B, n_kv, cap, d) in bfloat16
 * (`kvbf`) or float32; bias: (B * n_kv, groups * n, window) float32 (pass_masks.attention_bias); out: (B * n,
 * n_heads * d) in q's dtype. Numerics: float32 products and sums (bar the probabilities' rounding above), vexp within
 * ~1 ulp of expf. */
#define ATT_SEG 512 /* columns per task */
#define ATT_QT 4    /* queries per register tile of the value product */
#define ATT_PF 2    /* blocks of keys and values fetched ahead (2 to 16 measured alike into L1; 1 to 4 into L2) */

typedef struct {
  const void *q, *k, *v;
  const float *bias;
  void *out;
  int64_t qstride;
  int bf, kvbf, cap, window, B, n, n_heads, n_kv, d, segs;
  float scale;
  int amx; /* the bfloat16 scores on AMX's tiles (`amx_ready`): 1, each thread's configuration kept around the attention; 2, by
           * the caller (layer_forward: once around the layer, not around each product) */
} attn_t;

static inline __mmask16 tailz(int64_t left) { return left <= 0 ? (__mmask16)0 : tail(left); }
static inline int att_dp(int d) { return (d + 63) / 64 * 64; } /* d padded to whole register tiles */
static inline int att_qp(const attn_t *A) { return (A->n_heads / A->n_kv * A->n + ATT_QT - 1) / ATT_QT * ATT_QT; }
static size_t attend_workspace(const attn_t *A) { /* floats of one thread's workspace (AMX's operands last) */
  size_t dp = att_dp(A->d), qp = att_qp(A), q16 = (qp + 15) / 16 * 16;
  return qp * dp * 2 + qp * 16 * 2 + qp + 16 * dp * 2 + 16 + q16 * dp / 2 + 256 + 8 * dp + qp * 8;
}

static inline __attribute__((always_inline)) void att_scores(const float *qf, const float *kf, const float *brow, int64_t bstride,
                                                             int Q, int chunks, int dp, __mmask16 cm, float scale, float *s) {
  __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
  for (int q = 0; q < Q; q++) {
    __m512 qv[MAX_HEAD_DIM / 16], col[16];
    for (int c = 0; c < chunks; c++) qv[c] = _mm512_loadu_ps(qf + (int64_t)q * dp + c * 16);
    for (int t = 0; t < 16; t++) {
      __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kf + t * dp));
      for (int c = 1; c < chunks; c++) acc = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kf + t * dp + c * 16), acc);
      col[t] = acc;
    }
    __m512 bw = _mm512_mask_loadu_ps(ninf, cm, brow + q * bstride);
    __m512 sc = _mm512_add_ps(bw, _mm512_mul_ps(vscale, sum16(col)));
    _mm512_storeu_ps(s + q * 16, _mm512_mask_mov_ps(sc, _mm512_cmp_ps_mask(bw, ninf, _CMP_EQ_OQ), ninf));
  }
}

static inline void transpose16(__m512i *r) { /* a 16 x 16 matrix of 32-bit elements, in place: r[k] lane t = old r[t] lane k */
  __m512i a[16], b[16], c[16];
  for (int i = 0; i < 8; i++) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      c[8 * i + j] = _mm512_shuffle_i32x4(b[8 * i + j], b[8 * i + 4 + j], 0x88);
      c[8 * i + 4 + j] = _mm512_shuffle_i32x4(b[8 * i + j], b[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; j++) {
    r[j] = _mm512_shuffle_i32x4(c[j], c[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(c[j], c[8 + j], 0xdd);
  }
}

static void att_key_pairs(const uint16_t *kb, int rows, int d, uint32_t *kt) {
  /* a block's bfloat16 keys by pair: kt[p * 16 + t] = key t's pair p (elements 2p, 2p + 1), zero past `rows` */
  for (int p0 = 0; p0 < d / 2; p0 += 16) {
    __m512i r[16];
    for (int t = 0; t < 16; t++) r[t] = t < rows ? _mm512_loadu_si512(kb + (int64_t)t * d + 2 * p0) : _mm512_setzero_si512();
    transpose16(r);
    for (int k = 0; k < 16; k++) _mm512_storeu_si512(kt + (int64_t)(p0 + k) * 16, r[k]);
  }
}

static inline __attribute__((always_inline)) void att_scores_bf16(const uint16_t *qb, const uint32_t *kt, const float *brow, int64_t bstride,
                                                                  int Q, int pairs, int dp, __mmask16 cm, float scale, float *s) {
  /* att_scores over bfloat16 queries and keys as they are: AVX512-BF16's pair products (exact in float32) into the 16
   * columns' lanes, even and odd pairs summed apart in float32 and then added; 4 queries share each load of the keys.
   * No horizontal sums, and the keys are not converted. */
  __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
  for (int q0 = 0; q0 < Q; q0 += 4) {
    __m512 a[4][2];
    const uint32_t *qp[4];
    for (int i = 0; i < 4; i++) {
      a[i][0] = a[i][1] = _mm512_setzero_ps();
      qp[i] = (const uint32_t *)(qb + (int64_t)(q0 + i) * dp); /* rows past Q are zero */
    }
    for (int p = 0; p < pairs; p += 2) {
      __m512i k0 = _mm512_loadu_si512(kt + (int64_t)p * 16), k1 = _mm512_loadu_si512(kt + (int64_t)(p + 1) * 16);
      for (int i = 0; i < 4; i++) {
        DOT_BF16(a[i][0], k0, _mm512_set1_epi32((int)qp[i][p]));
        DOT_BF16(a[i][1], k1, _mm512_set1_epi32((int)qp[i][p + 1]));
      }
    }
    for (int i = 0; i < 4 && q0 + i < Q; i++) {
      __m512 bw = _mm512_mask_loadu_ps(ninf, cm, brow + (q0 + i) * bstride);
      __m512 sc = _mm512_add_ps(bw, _mm512_mul_ps(vscale, _mm512_add_ps(a[i][0], a[i][1])));
      _mm512_storeu_ps(s + (q0 + i) * 16, _mm512_mask_mov_ps(sc, _mm512_cmp_ps_mask(bw, ninf, _CMP_EQ_OQ), ninf));
    }
  }
}

/* AMX (where the compiler targets it and the OS lets the process use it): a block's 16 x Q scores of bfloat16 keys and
 * queries as one tile product per 32 elements of d, float32 sums (16 tiles of queries at most in flight: one at a
 * time). The AVX-512 products above are the fallback, so a CPU without AMX runs the same kernel. */
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <sys/syscall.h>
#include <unistd.h>
static int amx_state; /* 0: not asked yet; 1: usable; -1: refused */
static int amx_ready(void) { /* outside parallel regions: the permission is the process's (Linux, arch_prctl) */
  if (!amx_state) amx_state = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 1 : -1;
  return amx_state > 0;
}

typedef struct {
  uint8_t palette, start_row, zero[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((packed)) tilecfg_t;

/* GCC does not see that ldtilecfg reads its 64 bytes (nor that sttilecfg writes them): without a compiler barrier it may
 * drop the stores that fill a configuration (it did, in a build without inlining: a fault in ldtilecfg) */
#define AMX_MEMORY() __asm__ __volatile__("" ::: "memory")

static void amx_config(void) { /* tile 0: 16 columns x 16 queries of float32 scores; 1: 16 keys x 32 bfloat16; 2: 16 pairs x 16 queries */
  tilecfg_t c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 3; t++) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  AMX_MEMORY();
  _tile_loadconfig(&c);
}

static void amx_save(float *cfg) { /* 64 bytes: zeros where no tiles are configured */
  _tile_storeconfig(cfg);
  AMX_MEMORY();
}
static void amx_restore(const float *cfg) {
  AMX_MEMORY();
  if (((const uint8_t *)cfg)[0])
    _tile_loadconfig(cfg);
  else
    _tile_release();
}

static void att_query_pairs(const uint16_t *qb, int Qp, int d, int dp, uint32_t *qt) {
  /* the queries as the tile product's second operand: qt[((tile * d / 32 + kc) * 16 + r) * 16 + i] = query 16 tile + i's
   * pair 16 kc + r (zero past Qp) */
  for (int t = 0; t < (Qp + 15) / 16; t++)
    for (int kc = 0; kc < d / 32; kc++)
      for (int r = 0; r < 16; r++)
        for (int i = 0; i < 16; i++) {
          int q = t * 16 + i;
          qt[((t * (d / 32) + kc) * 16 + r) * 16 + i] = q < Qp ? ((const uint32_t *)(qb + (int64_t)q * dp))[kc * 16 + r] : 0;
        }
}

static void att_scores_amx(const uint32_t *qt, const uint16_t *kb, int rows, int d, const float *brow, int64_t bstride, int Q, __mmask16 cm,
                           float scale, float *s, float *ct, uint16_t *kpad) {
  __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
  if (rows < 16) { /* a last block: its keys zero-padded to 16 rows (the rows past the window may be past the buffer) */
    memset(kpad, 0, sizeof(uint16_t) * 16 * d);
    memcpy(kpad, kb, sizeof(uint16_t) * rows * d);
    kb = kpad;
  }
  AMX_MEMORY(); /* the padded keys and the query pairs stored before a tile reads them */
  for (int q0 = 0; q0 < Q; q0 += 16) {
    _tile_zero(0);
    for (int kc = 0; kc < d / 32; kc++) {
      _tile_loadd(1, kb + kc * 32, d * 2);
      _tile_loadd(2, qt + (int64_t)((q0 / 16) * (d / 32) + kc) * 256, 64);
      _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, ct, 64);
    __m512i r[16];
    for (int k = 0; k < 16; k++) r[k] = _mm512_loadu_si512(ct + k * 16);
    transpose16(r); /* r[i] lane t: column t's score for query q0 + i */
    for (int i = 0; i < 16 && q0 + i < Q; i++) {
      __m512 bw = _mm512_mask_loadu_ps(ninf, cm, brow + (q0 + i) * bstride);
      __m512 sc = _mm512_add_ps(bw, _mm512_mul_ps(vscale, _mm512_castsi512_ps(r[i])));
      _mm512_storeu_ps(s + (q0 + i) * 16, _mm512_mask_mov_ps(sc, _mm512_cmp_ps_mask(bw, ninf, _CMP_EQ_OQ), ninf));
    }
  }
}
#else
static int amx_ready(void) { return 0; }
static void amx_config(void) {}
static void amx_save(float *cfg) { (void)cfg; }
static void amx_restore(const float *cfg) { (void)cfg; }
static void att_query_pairs(const uint16_t *qb, int Qp, int d, int dp, uint32_t *qt) { (void)qb, (void)Qp, (void)d, (void)dp, (void)qt; }
static void att_scores_amx(const uint32_t *qt, const uint16_t *kb, int rows, int d, const float *brow, int64_t bstride, int Q, __mmask16 cm,
                           float scale, float *s, float *ct, uint16_t *kpad) {
  (void)qt, (void)kb, (void)rows, (void)d, (void)brow, (void)bstride, (void)Q, (void)cm, (void)scale, (void)s, (void)ct, (void)kpad;
}
#endif

/* ---- the weights' products on AMX's tiles (bfloat16, K a multiple of 32, where `amx_ready`) -------------------------
 * The packed layout is already AMX's second operand: a block's 16 pairs kp .. kp + 15 (16 rows x 64 bytes) are one tile of
 * 32 elements of k for its 16 output rows. The tokens are the first operand (16 tokens x 32 elements a tile, straight
 * from x). Per 32 elements of k, a tile product takes 16 tokens x 16 outputs in one instruction, where the register tiles
 * above take 2 x 16 `vdpbf16ps` per token: a 32-token pass's products stop costing more than the weights' bytes. Tiles:
 * float32 sums in 0-3 (a token tile's outputs of up to 4 blocks: 1 x 4, 2 x 2 or 3 x 1), tokens in 3-5, weights in 6-7;
 * a token tile's sums and tokens are configured with its rows, so no row past x is read. The sums are float32 in AMX's
 * order (not the register tiles'), the same order for a token whatever its pass; bfloat16 outputs rounded as above.
 * Each thread takes a contiguous share of the blocks and keeps the tile configuration it found (oneDNN's, or none). */
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
static void gemm_amx_config(int M) { /* token tiles of M <= 48 tokens: C and A tiles of the last one get its rows */
  tilecfg_t c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 8; t++) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  int T = (M + 15) / 16, last = M - 16 * (T - 1);
  static const int8_t LAST[4][5] = {{-1}, {0, 1, 2, 3, 4}, {2, 3, 5, -1}, {2, 5, -1}}; /* the last token tile's tiles */
  for (int i = 0; i < 5 && LAST[T][i] >= 0; i++) c.rows[LAST[T][i]] = (uint8_t)last;
  AMX_MEMORY();
  _tile_loadconfig(&c);
}

/* tiles: T = 1: sums of block j in j, tokens in 4; T = 2: token tile t, block j in 2t + j, tokens in 4 + t; T = 3: token
 * tile t in t, tokens in 3 + t. x: the first token's row (stride xs bytes), w: the first block's pair kp = 0 (blocks bs
 * apart). */
static void amx_t1(const uint16_t *x, int64_t xs, const uint16_t *w, int64_t bs, int kp2, int nb, float *c) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  if (nb == 4)
    for (int kp = 0; kp < kp2; kp += 16) {
      _tile_loadd(4, x + 2 * kp, xs);
      _tile_loadd(6, w + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_loadd(7, w + bs + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(6, w + 2 * bs + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(2, 4, 6);
      _tile_loadd(7, w + 3 * bs + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(3, 4, 7);
    }
  else
    for (int kp = 0; kp < kp2; kp += 16) {
      _tile_loadd(4, x + 2 * kp, xs);
      _tile_loadd(6, w + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(0, 4, 6);
    }
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
  _tile_stored(2, c + 512, 64);
  _tile_stored(3, c + 768, 64);
}

static void amx_t2(const uint16_t *x, int64_t xs, const uint16_t *w, int64_t bs, int kp2, int nb, float *c) {
  const uint16_t *x1 = x + 16 * xs / 2;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  if (nb == 2)
    for (int kp = 0; kp < kp2; kp += 16) {
      _tile_loadd(4, x + 2 * kp, xs);
      _tile_loadd(5, x1 + 2 * kp, xs);
      _tile_loadd(6, w + (int64_t)kp * 32, 64);
      _tile_loadd(7, w + bs + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  else
    for (int kp = 0; kp < kp2; kp += 16) {
      _tile_loadd(4, x + 2 * kp, xs);
      _tile_loadd(5, x1 + 2 * kp, xs);
      _tile_loadd(6, w + (int64_t)kp * 32, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(2, 5, 6);
    }
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
  _tile_stored(2, c + 512, 64);
  _tile_stored(3, c + 768, 64);
}

static void amx_t3(const uint16_t *x, int64_t xs, const uint16_t *w, int kp2, float *c) {
  const uint16_t *x1 = x + 16 * xs / 2, *x2 = x + 32 * xs / 2;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  for (int kp = 0; kp < kp2; kp += 16) {
    _tile_loadd(6, w + (int64_t)kp * 32, 64);
    _tile_loadd(3, x + 2 * kp, xs);
    _tile_dpbf16ps(0, 3, 6);
    _tile_loadd(4, x1 + 2 * kp, xs);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(5, x2 + 2 * kp, xs);
    _tile_dpbf16ps(2, 5, 6);
  }
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
  _tile_stored(2, c + 512, 64);
}

static void gemm_amx_rows(const uint16_t *x, const uint16_t *wp, uint16_t *y, int M, int K, int N, int b0, int b1) {
  /* M <= 48 tokens times blocks b0 .. b1 - 1, in groups of up to 4 / T blocks */
  int T = (M + 15) / 16, per = T == 1 ? 4 : T == 2 ? 2 : 1, kp2 = K / 2;
  int64_t bs = (int64_t)kp2 * 32, xs = (int64_t)K * 2;
  float c[4 * 256] __attribute__((aligned(64)));
  gemm_amx_config(M);
  for (int b = b0; b < b1;) {
    int nb = b1 - b >= per ? per : 1;
    const uint16_t *w = wp + b * bs;
    if (T == 1)
      amx_t1(x, xs, w, bs, kp2, nb, c);
    else if (T == 2)
      amx_t2(x, xs, w, bs, kp2, nb, c);
    else
      amx_t3(x, xs, w, kp2, c);
    for (int t = 0; t < T; t++)
      for (int j = 0; j < nb; j++) {
        const float *ct = c + 256 * (T == 1 ? j : T == 2 ? 2 * t + j : t);
        int rows = M - 16 * t < 16 ? M - 16 * t : 16, col = (b + j) * 16;
        __mmask16 m = tail(N - col);
        for (int i = 0; i < rows; i++) vstore(y, (int64_t)(16 * t + i) * N + col, _mm512_load_ps(ct + 16 * i), 1, m);
      }
    b += nb;
  }
}

static void gemm_amx_team(const uint16_t *x, const uint16_t *wp, uint16_t *y, int M, int K, int N, int own) { /* inside a team */
  int nt = omp_get_num_threads(), id = omp_get_thread_num(), blocks = (N + 15) / 16;
  int b0 = (int)((int64_t)blocks * id / nt), b1 = (int)((int64_t)blocks * (id + 1) / nt);
  float saved[16] __attribute__((aligned(64)));
  if (own) amx_save(saved);
  int step = M <= 48 ? 48 : 32; /* more than 48 tokens: sweeps of 32 */
  for (int m0 = 0; m0 < M; m0 += step)
    gemm_amx_rows(x + (int64_t)m0 * K, wp, y + (int64_t)m0 * N, M - m0 < step ? M - m0 : step, K, N, b0, b1);
  if (own) amx_restore(saved);
#pragma omp barrier
}
#else
static void gemm_amx_team(const uint16_t *x, const uint16_t *wp, uint16_t *y, int M, int K, int N, int own) {
  (void)x, (void)wp, (void)y, (void)M, (void)K, (void)N, (void)own;
}
#endif

static inline void att_prefetch(const void *p, int64_t row0, int rows, int d, int es) {
  /* rows of a later block, into L2 (T1): fetched into L1 (T0), 64 lines a block filled the core's queue of misses and
   * the attention waited on its own prefetches: on the 2-core EPYC a long cache's attention took 1.6x as long
   * (docs/journal.md, "the attention's prefetch into L2") */
  const char *c = (const char *)p + row0 * d * es;
  for (int64_t o = 0; o < (int64_t)rows * d * es; o += 64) _mm_prefetch(c + o, _MM_HINT_T1);
}

static void att_values(const float *vf, const float *s, float *acc, int Qp, int dp) { /* acc[q] += sum_t p[q][t] * v[t] */
  for (int q0 = 0; q0 < Qp; q0 += ATT_QT)
    for (int c0 = 0; c0 < dp; c0 += 64) {
      __m512 a[ATT_QT][4];
      for (int i = 0; i < ATT_QT; i++)
        for (int c = 0; c < 4; c++) a[i][c] = _mm512_loadu_ps(acc + (int64_t)(q0 + i) * dp + c0 + c * 16);
      for (int t = 0; t < 16; t++) {
        __m512 vv[4];
        for (int c = 0; c < 4; c++) vv[c] = _mm512_loadu_ps(vf + t * dp + c0 + c * 16);
        for (int i = 0; i < ATT_QT; i++) {
          __m512 p = _mm512_set1_ps(s[(q0 + i) * 16 + t]);
          for (int c = 0; c < 4; c++) a[i][c] = _mm512_fmadd_ps(p, vv[c], a[i][c]);
        }
      }
      for (int i = 0; i < ATT_QT; i++)
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(acc + (int64_t)(q0 + i) * dp + c0 + c * 16, a[i][c]);
    }
}

static void att_value_pairs(const uint16_t *vb, int rows, int d, uint32_t *vp) {
  /* a block's bfloat16 values as (column t, column t + 1) pairs per element, for AVX512-BF16's pair products: vp[(t / 2
   * * d / 16 + r) * 16 + lane] holds, for register r of the pair's rows, the interleave of `unpacklo`/`unpackhi` (zero
   * past `rows`), so the sums land in the interleave's order (att_unpermute puts them back) */
  for (int t = 0; t < 16; t += 2)
    for (int c = 0; c < d / 32; c++) {
      __m512i a = t < rows ? _mm512_loadu_si512(vb + (int64_t)t * d + c * 32) : _mm512_setzero_si512();
      __m512i b = t + 1 < rows ? _mm512_loadu_si512(vb + (int64_t)(t + 1) * d + c * 32) : _mm512_setzero_si512();
      _mm512_storeu_si512(vp + ((int64_t)(t / 2) * (d / 16) + 2 * c) * 16, _mm512_unpacklo_epi16(a, b));
      _mm512_storeu_si512(vp + ((int64_t)(t / 2) * (d / 16) + 2 * c + 1) * 16, _mm512_unpackhi_epi16(a, b));
    }
}

static void att_values_bf16(const uint32_t *vp, const float *s, float *acc, int Qp, int d, int dp, uint32_t *pp) {
  /* acc[q] += sum_t p[q][t] * v[t] with each probability rounded to bfloat16 (as torch's flash attention does for
   * bfloat16) and the pair products of AVX512-BF16, float32 sums in the same order for every query; d a multiple of 64 */
  for (int q = 0; q < Qp; q++) /* rounded as vround rounds (AVX512-BF16 or not), packed two to a 32-bit pair */
    _mm256_storeu_si256((__m256i *)(pp + q * 8), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(vround(_mm512_loadu_ps(s + q * 16), 1)), 16)));
  int regs = d / 16;
  for (int q0 = 0; q0 < Qp; q0 += ATT_QT)
    for (int r0 = 0; r0 < regs; r0 += 4) {
      __m512 a[ATT_QT][4];
      for (int i = 0; i < ATT_QT; i++)
        for (int c = 0; c < 4; c++) a[i][c] = _mm512_loadu_ps(acc + (int64_t)(q0 + i) * dp + (r0 + c) * 16);
      for (int t2 = 0; t2 < 8; t2++) {
        __m512i vv[4];
        for (int c = 0; c < 4; c++) vv[c] = _mm512_loadu_si512(vp + ((int64_t)t2 * regs + r0 + c) * 16);
        for (int i = 0; i < ATT_QT; i++) {
          __m512i p = _mm512_set1_epi32((int)pp[(q0 + i) * 8 + t2]);
          for (int c = 0; c < 4; c++) DOT_BF16(a[i][c], vv[c], p);
        }
      }
      for (int i = 0; i < ATT_QT; i++)
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(acc + (int64_t)(q0 + i) * dp + (r0 + c) * 16, a[i][c]);
    }
}

static void att_unpermute(float *acc, int d) { /* one query's sums from att_values_bf16's order back to the elements' */
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i hi = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int c = 0; c < d / 32; c++) {
    __m512 x = _mm512_loadu_ps(acc + c * 32), y = _mm512_loadu_ps(acc + c * 32 + 16);
    _mm512_storeu_ps(acc + c * 32, _mm512_permutex2var_ps(x, lo, y));
    _mm512_storeu_ps(acc + c * 32 + 16, _mm512_permutex2var_ps(x, hi, y));
  }
}

static void att_load_tile(const void *src, int64_t row0, int rows, int d, int dp, int bf, float *dst) { /* rows x d, zero-padded to 16 x dp */
  if (rows == 16 && d == dp) { /* a whole block: 16 consecutive rows, nothing to pad */
    for (int64_t i = 0; i < 16 * (int64_t)d; i += 16) _mm512_storeu_ps(dst + i, vload(src, row0 * d + i, bf, 0xffff));
    return;
  }
  for (int t = 0; t < 16; t++)
    for (int c = 0; c < dp; c += 16) {
      __mmask16 m = t < rows ? tailz(d - c) : 0;
      _mm512_storeu_ps(dst + t * dp + c, m ? vload(src, (row0 + t) * d + c, bf, m) : _mm512_setzero_ps());
    }
}

static void att_softmax(float *s, float *m, float *l, float *acc, int Q, int dp) { /* the block's probabilities, online */
  __m512 ninf = _mm512_set1_ps(-INFINITY);
  for (int q = 0; q < Q; q++) {
    __m512 sc = _mm512_loadu_ps(s + q * 16);
    float mo = m[q];
    if (!_mm512_cmp_ps_mask(sc, _mm512_set1_ps(mo), _CMP_GT_OQ)) { /* no new maximum (the common block) */
      if (mo == -INFINITY) { /* nor any live column yet */
        _mm512_storeu_ps(s + q * 16, _mm512_setzero_ps());
        continue;
      }
    } else { /* a new maximum: what was summed so far scales by exp(m_old - m_new) */
      float bm = _mm512_reduce_max_ps(sc);
      __m512 alpha = _mm512_set1_ps(mo == -INFINITY ? 0.0f : expf(mo - bm));
      for (int c = 0; c < dp; c += 16) _mm512_storeu_ps(acc + (int64_t)q * dp + c, _mm512_mul_ps(alpha, _mm512_loadu_ps(acc + (int64_t)q * dp + c)));
      _mm512_storeu_ps(l + q * 16, _mm512_mul_ps(alpha, _mm512_loadu_ps(l + q * 16)));
      m[q] = mo = bm;
    }
    __mmask16 live = _mm512_cmp_ps_mask(sc, ninf, _CMP_NEQ_OQ);
    __m512 p = _mm512_maskz_mov_ps(live, vexp(_mm512_sub_ps(sc, _mm512_set1_ps(mo))));
    _mm512_storeu_ps(s + q * 16, p);
    _mm512_storeu_ps(l + q * 16, _mm512_add_ps(p, _mm512_loadu_ps(l + q * 16)));
  }
}

static void attend_task(const attn_t *A, int task, float *ws, float *part) {
  /* one (row, kv head, segment): every query of the group over the segment's columns; writes (m, l, acc) per query */
  int groups = A->n_heads / A->n_kv, n = A->n, d = A->d, Q = groups * n, Qp = att_qp(A), dp = att_dp(d), chunks = dp / 16;
  int bj = task / A->segs, seg = task % A->segs, b = bj / A->n_kv, j = bj % A->n_kv;
  int c_begin = seg * ATT_SEG, c_end = c_begin + ATT_SEG < A->window ? c_begin + ATT_SEG : A->window;
  float *qf = ws, *acc = qf + (size_t)Qp * dp, *s = acc + (size_t)Qp * dp, *l = s + Qp * 16, *m = l + Qp * 16;
  float *kf = m + Qp, *vf = kf + 16 * dp, *ct = vf + 16 * dp + 16, *qt = ct + 256, *kpad = qt + (size_t)(Qp + 15) / 16 * 16 * dp / 2, *pp = kpad + 8 * dp;
  for (int q = 0; q < Qp; q++) {
    int g = q / n, i = q % n, hq = j * groups + g;
    for (int c = 0; c < dp; c += 16) {
      __mmask16 k = q < Q ? tailz(d - c) : 0;
      _mm512_storeu_ps(qf + (int64_t)q * dp + c, k ? vload(A->q, (int64_t)(b * n + i) * A->qstride + (int64_t)hq * d + c, A->bf, k) : _mm512_setzero_ps());
      _mm512_storeu_ps(acc + (int64_t)q * dp + c, _mm512_setzero_ps());
    }
    _mm512_storeu_ps(s + q * 16, _mm512_setzero_ps());
    _mm512_storeu_ps(l + q * 16, _mm512_setzero_ps());
    m[q] = -INFINITY;
  }
  const float *bias = A->bias + (int64_t)bj * Q * A->window;
  int64_t kv0 = (int64_t)bj * A->cap;
  int es = A->kvbf ? 2 : 4, raw = A->bf && A->kvbf && d % 32 == 0; /* raw: bfloat16 scores straight from the buffer */
  int pv = raw && d % 64 == 0; /* and the values' products in bfloat16 pairs */
  if (raw) /* the queries as bfloat16 pairs, in place (each row's floats are read before a later row's pairs land on them) */
    for (int q = 0; q < Qp; q++)
      for (int c = 0; c < d; c += 16)
        _mm256_storeu_si256((__m256i *)((uint16_t *)qf + (int64_t)q * dp + c), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(qf + (int64_t)q * dp + c)), 16)));
  int amx = raw && A->amx;
  if (amx) {
    amx_config();
    att_query_pairs((const uint16_t *)qf, Qp, d, dp, (uint32_t *)qt);
  }
  for (int c0 = c_begin; c0 < c_begin + ATT_PF * 16 && c0 < c_end; c0 += 16) {
    att_prefetch(A->k, kv0 + c0, c_end - c0 < 16 ? c_end - c0 : 16, d, es);
    att_prefetch(A->v, kv0 + c0, c_end - c0 < 16 ? c_end - c0 : 16, d, es);
  }
  for (int c0 = c_begin; c0 < c_end; c0 += 16) {
    int ahead = c0 + ATT_PF * 16;
    if (ahead < c_end) {
      att_prefetch(A->k, kv0 + ahead, c_end - ahead < 16 ? c_end - ahead : 16, d, es);
      att_prefetch(A->v, kv0 + ahead, c_end - ahead < 16 ? c_end - ahead : 16, d, es);
    }
    int cols = c_end - c0 < 16 ? c_end - c0 : 16;
    __mmask16 cm = tail(cols), any = 0;
    for (int q = 0; q < Q && !any; q++)
      any = _mm512_mask_cmp_ps_mask(cm, _mm512_maskz_loadu_ps(cm, bias + (int64_t)q * A->window + c0), _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    if (!any) continue; /* every query masked here (left padding, holes, a row's unused columns) */
    if (pv)
      att_value_pairs((const uint16_t *)A->v + (kv0 + c0) * d, cols, d, (uint32_t *)vf);
    else
      att_load_tile(A->v, kv0 + c0, cols, d, dp, A->kvbf, vf);
    if (amx)
      att_scores_amx((const uint32_t *)qt, (const uint16_t *)A->k + (kv0 + c0) * d, cols, d, bias + c0, A->window, Q, cm, A->scale, s, ct, (uint16_t *)kpad);
    else if (raw) {
      att_key_pairs((const uint16_t *)A->k + (kv0 + c0) * d, cols, d, (uint32_t *)kf);
      if (d == 64)
        att_scores_bf16((const uint16_t *)qf, (const uint32_t *)kf, bias + c0, A->window, Q, 32, dp, cm, A->scale, s);
      else
        att_scores_bf16((const uint16_t *)qf, (const uint32_t *)kf, bias + c0, A->window, Q, d / 2, dp, cm, A->scale, s);
    } else {
      att_load_tile(A->k, kv0 + c0, cols, d, dp, A->kvbf, kf);
      if (chunks == 4)
        att_scores(qf, kf, bias + c0, A->window, Q, 4, dp, cm, A->scale, s);
      else
        att_scores(qf, kf, bias + c0, A->window, Q, chunks, dp, cm, A->scale, s);
    }
    att_softmax(s, m, l, acc, Q, dp);
    if (pv)
      att_values_bf16((const uint32_t *)vf, s, acc, Qp, d, dp, (uint32_t *)pp);
    else
      att_values(vf, s, acc, Qp, dp);
  }
  if (pv)
    for (int q = 0; q < Q; q++) att_unpermute(acc + (int64_t)q * dp, d);
  for (int q = 0; q < Q; q++) {
    float *dst = part + ((int64_t)task * Q + q) * (dp + 2);
    dst[0] = m[q];
    dst[1] = _mm512_reduce_add_ps(_mm512_loadu_ps(l + q * 16));
    memcpy(dst + 2, acc + (int64_t)q * dp, sizeof(float) * dp);
  }
}

static void attend_combine(const attn_t *A, int r, const float *part) { /* one (row, kv head, query): its segments merged, / l */
  int groups = A->n_heads / A->n_kv, n = A->n, d = A->d, Q = groups * n, dp = att_dp(d);
  int bj = r / Q, q = r % Q, b = bj / A->n_kv, j = bj % A->n_kv, g = q / n, i = q % n;
  float mx = -INFINITY, total = 0.0f;
  const float *p0 = part + ((int64_t)bj * A->segs * Q + q) * (dp + 2);
  int64_t step = (int64_t)Q * (dp + 2);
  for (int s = 0; s < A->segs; s++) mx = p0[s * step] > mx ? p0[s * step] : mx;
  __m512 acc[MAX_HEAD_DIM / 16];
  for (int c = 0; c < dp / 16; c++) acc[c] = _mm512_setzero_ps();
  for (int s = 0; s < A->segs; s++) {
    const float *ps = p0 + s * step;
    if (ps[0] == -INFINITY) continue;
    float f = A->segs == 1 ? 1.0f : expf(ps[0] - mx);
    total += f * ps[1];
    for (int c = 0; c < dp / 16; c++) acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(f), _mm512_loadu_ps(ps + 2 + c * 16), acc[c]);
  }
  __m512 inv = _mm512_set1_ps(total > 0.0f ? 1.0f / total : 0.0f);
  int64_t o = (int64_t)(b * n + i) * A->n_heads * d + (int64_t)(j * groups + g) * d;
  for (int c = 0; c < d; c += 16) vstore(A->out, o + c, _mm512_mul_ps(acc[c / 16], inv), A->bf, tail(d - c));
}

static void attend_team(const attn_t *A, float *part) { /* inside a parallel region: the tasks, the team's barrier, the merge */
  float *ws = malloc(sizeof(float) * (attend_workspace(A) + 16));
  if (A->amx == 1) amx_save(ws + attend_workspace(A));
  int tasks = A->B * A->n_kv * A->segs, Q = A->n_heads / A->n_kv * A->n;
#pragma omp for schedule(dynamic, 1) /* a window's last segment may be a few columns: taken as threads come free */
  for (int t = 0; t < tasks; t++) attend_task(A, t, ws, part);
  if (A->amx == 1) amx_restore(ws + attend_workspace(A)); /* the thread's tile configuration as it was (oneDNN's, or none) */
#pragma omp for schedule(static)
  for (int r = 0; r < A->B * A->n_kv * Q; r++) attend_combine(A, r, part);
  free(ws);
}

static float *attend_part(const attn_t *A) { /* the segments' (m, l, acc) per query */
  return malloc(sizeof(float) * (size_t)A->B * A->n_kv * A->segs * (A->n_heads / A->n_kv * A->n) * (att_dp(A->d) + 2));
}

void attention(const void *q, int64_t qstride, int bf, const void *k, const void *v, int kvbf, int cap, const float *bias, int window, int B,
               int n, int n_heads, int n_kv, int d, float scale, void *out, int nthreads) {
  attn_t A = {q, k, v, bias, out, qstride, bf, kvbf, cap, window, B, n, n_heads, n_kv, d, (window + ATT_SEG - 1) / ATT_SEG, scale, amx_ready()};
  float *part = attend_part(&A);
#pragma omp parallel num_threads(nthreads)
  attend_team(&A, part);
  free(part);
}

static void silu_mul(const void *gu, void *mid, int M, int inter, int bf) { /* silu(gate) rounded, times up */
  int chunks = (inter + 15) / 16;
#pragma omp for schedule(static)
  for (int task = 0; task < M * chunks; task++) {
    int m = task / chunks, e = (task % chunks) * 16;
    {
      __mmask16 k = tail(inter - e);
      __m512 g = vload(gu, (int64_t)m * 2 * inter + e, bf, k), u = vload(gu, (int64_t)m * 2 * inter + inter + e, bf, k);
      __m512 s = vround(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), vexp(_mm512_sub_ps(_mm512_setzero_ps(), g)))), bf);
      vstore(mid, (int64_t)m * inter + e, _mm512_mul_ps(s, u), bf, k);
    }
  }
}

void layer_forward(void *x, int B, int n, int H, int bf, const void *cos, const void *sin, void *kbuf, void *vbuf, int kvbf, int cap, int col0,
                   int window, const float *bias, const void *ln1, const void *wqkv, const void *wo, const void *ln2, const void *wgu,
                   const void *wd, int n_heads, int n_kv, int d, int inter, float eps, float scale, int nthreads) {
  int M = B * n, nq = n_heads * d, nqkv = (n_heads + 2 * n_kv) * d;
  size_t es = bf ? 2 : 4;
  char *h = malloc(es * (size_t)M * H), *qkv = malloc(es * (size_t)M * nqkv), *a = malloc(es * (size_t)M * nq);
  char *gu = malloc(es * (size_t)M * 2 * inter), *mid = malloc(es * (size_t)M * inter), *o = malloc(es * (size_t)M * H);
  attn_t A = {qkv, kbuf, vbuf, bias, a, nqkv, bf, kvbf, cap, window, B, n, n_heads, n_kv, d, (window + ATT_SEG - 1) / ATT_SEG, scale,
              amx_ready() ? 2 : 0};
  float *part = attend_part(&A);
#pragma omp parallel num_threads(nthreads)
  { /* every step is a worksharing loop of the team, each ending in its barrier */
    float saved[16] __attribute__((aligned(64))); /* the thread's tile configuration as it was (oneDNN's, or none) */
    if (A.amx) amx_save(saved);
    rms_norm_rows(x, ln1, h, M, H, eps, bf);
    gemm_team(h, wqkv, qkv, M, H, nqkv, bf, A.amx);
    rope_and_store(qkv, cos, sin, kbuf, vbuf, M, n, n_heads, n_kv, d, cap, col0, bf, kvbf);
    attend_team(&A, part);
    gemm_team(a, wo, o, M, nq, H, bf, A.amx);
    add_rows(x, o, (int64_t)M * H, bf);
    rms_norm_rows(x, ln2, h, M, H, eps, bf);
    gemm_team(h, wgu, gu, M, H, 2 * inter, bf, A.amx);
    silu_mul(gu, mid, M, inter, bf);
    gemm_team(mid, wd, o, M, inter, H, bf, A.amx);
    add_rows(x, o, (int64_t)M * H, bf);
    if (A.amx) amx_restore(saved);
  }
  free(part);
  free(h);
  free(qkv);
  free(a);
  free(gu);
  free(mid);
  free(o);
}

/* ---- y (M x N) = x (M x K) W^T, W packed: one product, its own team ------------------------------------ */
void gemm_bf16(const uint16_t *x, const uint16_t *wp, uint16_t *y, int M, int K, int N, int nthreads) {
  int amx = amx_ready();
#pragma omp parallel num_threads(nthreads)
  gemm_team(x, wp, y, M, K, N, 1, amx);
}

void gemm_f32(const float *x, const float *wp, float *y, int M, int K, int N, int nthreads) {
#pragma omp parallel num_threads(nthreads)
  gemm_team(x, wp, y, M, K, N, 0, 0);
}

/* ---- greedy statistics of logits rows: the argmax and log-sum-exp in two passes over each row ----------
 * What greedy verification and greedy drafting read of a row of logits (engine/sampling.py, greedy_stats):
 * the index of its first maximum (as torch's max(dim).indices, ties to the lowest index) and
 * log(sum(exp(x))) in float32 (the max subtracted first, as torch.logsumexp does; sums in another order and
 * vexp within ~1 ulp of expf, so the last bits may differ). PyTorch takes several times as long for the pair, as
 * two reductions with a float copy between. A row holding a NaN
 * reports its first NaN and a NaN log-sum-exp, as torch does; an all -inf row reports index 0 and -inf.
 * x: (rows, V) bfloat16 (`bf`) or float32; ids: (rows,) int64; logz: (rows,) float32; top: (rows,) float32 or NULL,
 * each row's value at its reported index (the maximum; the NaN of a row holding one), exactly. Rows in parallel. */
static void stats_row(const void *x, int64_t V, int bf, int64_t *id, float *lz, float *top) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  __m512i vidx = _mm512_setzero_si512(), lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int nan = 0;
  for (int64_t i = 0; i < V; i += 16) {
    __mmask16 m = tail(V - i);
    __m512 v = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), m, vload(x, i, bf, m));
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0;
    __mmask16 gt = _mm512_cmp_ps_mask(v, vmax, _CMP_GT_OQ); /* strictly greater: a lane keeps its first maximum */
    vmax = _mm512_mask_mov_ps(vmax, gt, v);
    vidx = _mm512_mask_mov_epi32(vidx, gt, _mm512_add_epi32(lane, _mm512_set1_epi32((int)i)));
  }
  if (nan) { /* the first NaN, scalar: rare */
    for (int64_t i = 0; i < V; i++) {
      float f;
      if (bf) {
        uint32_t u = (uint32_t)((const uint16_t *)x)[i] << 16;
        memcpy(&f, &u, 4);
      } else
        f = ((const float *)x)[i];
      if (f != f) {
        *id = i;
        *lz = NAN;
        if (top) *top = f;
        return;
      }
    }
  }
  float best = _mm512_reduce_max_ps(vmax);
  __mmask16 at = _mm512_cmp_ps_mask(vmax, _mm512_set1_ps(best), _CMP_EQ_OQ);
  int32_t first = _mm512_mask_reduce_min_epi32(at, vidx); /* of the lanes holding the maximum, the lowest index */
  *id = best == -INFINITY ? 0 : first;
  if (top) *top = best; /* x[*id]: the lane that holds the maximum holds its value (an all -inf row: -inf) */
  if (isinf(best)) { /* all -inf: -inf; a +inf: +inf (torch.logsumexp's values) */
    *lz = best;
    return;
  }
  __m512 sum = _mm512_setzero_ps(), shift = _mm512_set1_ps(best);
  for (int64_t i = 0; i < V; i += 16) {
    __mmask16 m = tail(V - i);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, vexp(_mm512_sub_ps(vload(x, i, bf, m), shift))));
  }
  *lz = best + logf(_mm512_reduce_add_ps(sum));
}

void logit_stats(const void *x, int rows, int64_t V, int bf, int64_t *ids, float *logz, float *top, int nthreads) {
  int team = rows < nthreads ? rows : nthreads;
#pragma omp parallel for num_threads(team > 0 ? team : 1) schedule(static)
  for (int r = 0; r < rows; r++) stats_row((const char *)x + (size_t)r * V * (bf ? 2 : 4), V, bf, ids + r, logz + r, top ? top + r : NULL);
}

/* ---- a draft tree's children: each row's top k and its log-probabilities, in one call ------------------------
 * What EAGLE-2's tree builder reads of a drafter's logits row (engine/drafters/tree.py, TreeBuilder._children):
 * the k largest entries (best first; ties to the lower index) and log_softmax(x / T) at them, i.e.
 * x_j / T - max / T - log(sum(exp(x / T - max / T))), in float32 (sums in another order and vexp within ~1 ulp of
 * expf, so the last bits may differ from torch's). One pass here for the top k (a sorted list, touched only by
 * entries above its smallest) and one for the sum take a fraction of PyTorch's float copy, division, log_softmax
 * and topk.
 * x: (rows, V) bfloat16 (`bf`) or float32, no NaN; ids: (rows, k) int64; logq: (rows, k) float32; 1 <= k <= V,
 * k <= 64. Rows in parallel. */
static void topk_row(const void *x, int64_t V, int bf, int k, float inv_t, int64_t *ids, float *logq) {
  float val[64];
  int64_t idx[64];
  int n = 0;
  float floor = -INFINITY; /* the list's smallest once full: only larger entries get in */
  for (int64_t i = 0; i < V; i += 16) {
    __mmask16 m = tail(V - i);
    __m512 v = vload(x, i, bf, m);
    __mmask16 in = n < k ? m : (__mmask16)(_mm512_cmp_ps_mask(v, _mm512_set1_ps(floor), _CMP_GT_OQ) & m);
    float lanes[16];
    _mm512_storeu_ps(lanes, v);
    while (in) {
      int l = __builtin_ctz(in);
      in &= in - 1;
      float f = lanes[l];
      if (n == k && !(f > val[k - 1])) continue; /* the floor rose within this vector */
      int j = n < k ? n++ : k - 1; /* insert after every equal or larger entry: ties keep the lower index first */
      while (j > 0 && val[j - 1] < f) {
        val[j] = val[j - 1];
        idx[j] = idx[j - 1];
        j--;
      }
      val[j] = f;
      idx[j] = i + l;
      if (n == k) floor = val[k - 1];
    }
  }
  float best = val[0] * inv_t;
  __m512 sum = _mm512_setzero_ps(), shift = _mm512_set1_ps(best), scale = _mm512_set1_ps(inv_t);
  for (int64_t i = 0; i < V; i += 16) {
    __mmask16 m = tail(V - i);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, vexp(_mm512_sub_ps(_mm512_mul_ps(vload(x, i, bf, m), scale), shift))));
  }
  float lz = isinf(best) ? best : best + logf(_mm512_reduce_add_ps(sum));
  for (int j = 0; j < k; j++) {
    ids[j] = idx[j];
    logq[j] = val[j] * inv_t - lz;
  }
}

void topk_logq(const void *x, int rows, int64_t V, int bf, int k, float inv_t, int64_t *ids, float *logq, int nthreads) {
  int team = rows < nthreads ? rows : nthreads;
#pragma omp parallel for num_threads(team > 0 ? team : 1) schedule(static)
  for (int r = 0; r < rows; r++)
    topk_row((const char *)x + (size_t)r * V * (bf ? 2 : 4), V, bf, k, inv_t, ids + (int64_t)r * k, logq + (int64_t)r * k);
}

/* ---- a pass's final RMSNorm: rms_norm_rows on its own, one thread (M x H is a few KB) ---------------------- */
void rms_norm(const void *x, const void *w, void *out, int M, int H, float eps, int bf) { rms_norm_rows(x, w, out, M, H, eps, bf); }
