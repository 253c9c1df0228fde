/* Native CPU kernels for SpecLab's decode pass: the small matrix products of a decode or verify pass.
 *
 * Why: a decode pass multiplies a few token vectors (M = 1..16) by every weight matrix of the model, so its
 * time is the time to stream the weights from memory. PyTorch's CPU linear (oneDNN) spends a fixed cost per
 * call and reads the weights at well under the copy bandwidth for M = 1 (measured on the 2-core AMD EPYC,
 * 2026-12-01: 50 us against 28 us here for the fused gate-up matrix, docs/measurements.md). These kernels
 * read each weight once per pass, 64 bytes at a time, and keep up to 8 tokens' sums in registers.
 *
 * Layout (`pack_*`): the rows of W (N x K) in blocks of 16; within a block the weights are interleaved so
 * that one 64-byte load holds the same k for 16 rows (float32), or the same pair k, k+1 for 16 rows
 * (bfloat16, the pair order AVX512-BF16's dot product wants). A block's 16 outputs then accumulate in one
 * vector register per token, with no horizontal sums: y[t][j..j+15] += W[j..j+15][k] * x[t][k].
 *
 * Numerics: products in float32 (bfloat16 x bfloat16 is exact in float32), sums in float32 in this order
 * (two interleaved partial sums over k), bfloat16 outputs rounded to nearest even as PyTorch rounds. The
 * order differs from oneDNN's, so the last bits may too; float32 greedy decoding gives the same tokens
 * (tests/engine/test_cpukernels.py).
 *
 * Threads: OpenMP over row blocks, num_threads set by the caller (torch.get_num_threads()); the library
 * links libgomp by soname, so it shares the runtime (and its thread pool) PyTorch has already loaded.
 * Built by engine/model/cpukernels.py with -O3 -march=native -fopenmp, once per machine. */
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#ifndef __AVX512F__
#error "SpecLab's CPU kernels need AVX-512F"
#endif

#define TMAX 8 /* tokens per register tile */

static inline uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

int speclab_kernels_version(void) { return 1; }

int speclab_has_bf16_dot(void) {
#ifdef __AVX512BF16__
  return 1;
#else
  return 0;
#endif
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

static inline void block_bf16(const uint16_t *wb, const uint32_t *x, int kp2, int T, float *out) {
  __m512 a0[TMAX], a1[TMAX];
  for (int t = 0; t < T; t++) a0[t] = a1[t] = _mm512_setzero_ps();
  int kp = 0;
  for (; kp + 2 <= kp2; kp += 2) {
    __m512i w0 = _mm512_loadu_si512(wb + (int64_t)kp * 32), w1 = _mm512_loadu_si512(wb + (int64_t)(kp + 1) * 32);
    for (int t = 0; t < T; t++) {
      DOT_BF16(a0[t], w0, _mm512_set1_epi32((int)x[(int64_t)t * kp2 + kp]));
      DOT_BF16(a1[t], w1, _mm512_set1_epi32((int)x[(int64_t)t * kp2 + kp + 1]));
    }
  }
  for (; kp < kp2; kp++) {
    __m512i w0 = _mm512_loadu_si512(wb + (int64_t)kp * 32);
    for (int t = 0; t < T; t++) DOT_BF16(a0[t], w0, _mm512_set1_epi32((int)x[(int64_t)t * kp2 + kp]));
  }
  for (int t = 0; t < T; t++) _mm512_storeu_ps(out + t * 16, _mm512_add_ps(a0[t], a1[t]));
}

static inline void block_f32(const float *wb, const float *x, int K, int T, float *out) {
  __m512 a0[TMAX], a1[TMAX];
  for (int t = 0; t < T; t++) a0[t] = a1[t] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 2 <= K; k += 2) {
    __m512 w0 = _mm512_loadu_ps(wb + (int64_t)k * 16), w1 = _mm512_loadu_ps(wb + (int64_t)(k + 1) * 16);
    for (int t = 0; t < T; t++) {
      a0[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(int64_t)t * K + k]), a0[t]);
      a1[t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[(int64_t)t * K + k + 1]), a1[t]);
    }
  }
  for (; k < K; k++) {
    __m512 w0 = _mm512_loadu_ps(wb + (int64_t)k * 16);
    for (int t = 0; t < T; t++) a0[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(int64_t)t * K + k]), a0[t]);
  }
  for (int t = 0; t < T; t++) _mm512_storeu_ps(out + t * 16, _mm512_add_ps(a0[t], a1[t]));
}

/* ---- y (M x N) = x (M x K) W^T, W packed ---------------------------------------------------------- */
void gemm_bf16(const uint16_t *x, const uint16_t *wp, uint16_t *y, int M, int K, int N, int nthreads) {
  int kp2 = K / 2, blocks = (N + 15) / 16;
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int b = 0; b < blocks; b++) {
    float out[TMAX * 16];
    const uint16_t *wb = wp + (int64_t)b * kp2 * 32;
    int rows = N - b * 16 < 16 ? N - b * 16 : 16;
    for (int t0 = 0; t0 < M; t0 += TMAX) {
      int T = M - t0 < TMAX ? M - t0 : TMAX;
      block_bf16(wb, (const uint32_t *)(x + (int64_t)t0 * K), kp2, T, out);
      for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) y[(int64_t)(t0 + t) * N + b * 16 + r] = f2bf(out[t * 16 + r]);
    }
  }
}

void gemm_f32(const float *x, const float *wp, float *y, int M, int K, int N, int nthreads) {
  int blocks = (N + 15) / 16;
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int b = 0; b < blocks; b++) {
    float out[TMAX * 16];
    const float *wb = wp + (int64_t)b * K * 16;
    int rows = N - b * 16 < 16 ? N - b * 16 : 16;
    for (int t0 = 0; t0 < M; t0 += TMAX) {
      int T = M - t0 < TMAX ? M - t0 : TMAX;
      block_f32(wb, x + (int64_t)t0 * K, K, T, out);
      for (int t = 0; t < T; t++) memcpy(y + (int64_t)(t0 + t) * N + b * 16, out + t * 16, sizeof(float) * rows);
    }
  }
}

/* ---- one decoder layer of a small pass, in place -------------------------------------------------------
 * The fused eager layer (engine/model/fastpass.py: fast_layer with small_attend) as one call: RMSNorm, the
 * QKV product, RoPE, the new keys and values into the float32 buffers, attention over the live columns,
 * the output product and residual, RMSNorm, gate-up, SiLU x up, down and residual. Activations are in the
 * model's dtype `D` (bfloat16 or float32) and rounded where PyTorch's ops round them, so a bfloat16 layer
 * differs from the eager one only in the order of float32 sums. One OpenMP team for the whole layer: the
 * products and attention heads are shared out, the small elementwise steps run on one thread between
 * barriers. x: (M = B*n, H); cos, sin: (M, d) RoPE tables in D (sin sign-folded, fastpass.rope_tables);
 * kbuf, vbuf: (B, kv, cap, d) float32; bias: (B*kv, groups*n, window) float32 (fastpass.attention_bias). */
static inline float ld(const void *p, int64_t i, int bf) {
  if (bf) {
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  return ((const float *)p)[i];
}
static inline float rd(float f, int bf) { /* round to the model's dtype, as PyTorch stores a result */
  if (!bf) return f;
  uint32_t u = (uint32_t)f2bf(f) << 16;
  memcpy(&f, &u, 4);
  return f;
}
static inline void st(void *p, int64_t i, float f, int bf) {
  if (bf)
    ((uint16_t *)p)[i] = f2bf(f);
  else
    ((float *)p)[i] = f;
}

static void gemm_team(const void *x, const void *wp, void *y, int M, int K, int N, int bf) { /* inside a team */
  int blocks = (N + 15) / 16;
#pragma omp for schedule(static)
  for (int b = 0; b < blocks; b++) {
    float out[TMAX * 16];
    int rows = N - b * 16 < 16 ? N - b * 16 : 16;
    for (int t0 = 0; t0 < M; t0 += TMAX) {
      int T = M - t0 < TMAX ? M - t0 : TMAX;
      if (bf)
        block_bf16((const uint16_t *)wp + (int64_t)b * (K / 2) * 32, (const uint32_t *)((const uint16_t *)x + (int64_t)t0 * K), K / 2, T, out);
      else
        block_f32((const float *)wp + (int64_t)b * K * 16, (const float *)x + (int64_t)t0 * K, K, T, out);
      for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) st(y, (int64_t)(t0 + t) * N + b * 16 + r, out[t * 16 + r], bf);
    }
  }
}

static void rms_norm_rows(const void *x, const void *w, void *h, int M, int H, float eps, int bf) {
  for (int m = 0; m < M; m++) {
    double ss = 0.0; /* float32 in PyTorch; a double sum here rounds once at the end */
    for (int e = 0; e < H; e++) {
      float v = ld(x, (int64_t)m * H + e, bf);
      ss += (double)v * v;
    }
    float inv = 1.0f / sqrtf((float)(ss / H) + eps);
    for (int e = 0; e < H; e++) {
      float normed = rd(ld(x, (int64_t)m * H + e, bf) * inv, bf);
      st(h, (int64_t)m * H + e, ld(w, e, bf) * normed, bf);
    }
  }
}

void layer_forward(void *x, int B, int n, int H, int bf, const void *cos, const void *sin, float *kbuf, float *vbuf, int cap, int col0,
                   int window, const float *bias, const void *ln1, const void *wqkv, const void *wo, const void *ln2, const void *wgu,
                   const void *wd, int n_heads, int n_kv, int d, int inter, float eps, float scale, int nthreads) {
  int M = B * n, groups = n_heads / n_kv, nq = n_heads * d, nqkv = (n_heads + 2 * n_kv) * d;
  size_t es = bf ? 2 : 4;
  char *h = malloc(es * (size_t)M * H), *qkv = malloc(es * (size_t)M * nqkv), *a = malloc(es * (size_t)M * nq);
  char *gu = malloc(es * (size_t)M * 2 * inter), *mid = malloc(es * (size_t)M * inter), *o = malloc(es * (size_t)M * H);
#pragma omp parallel num_threads(nthreads)
  {
#pragma omp single
    rms_norm_rows(x, ln1, h, M, H, eps, bf);
    gemm_team(h, wqkv, qkv, M, H, nqkv, bf);
#pragma omp single
    { /* RoPE over the q and k heads (x*cos + swapped*sin, each product rounded), new k and v into the buffers */
      int half = d / 2;
      for (int m = 0; m < M; m++) {
        int b = m / n, i = m % n;
        float tmp[1024];
        for (int hh = 0; hh < n_heads + n_kv; hh++) {
          int64_t base = (int64_t)m * nqkv + (int64_t)hh * d;
          for (int e = 0; e < d; e++) {
            float v = ld(qkv, base + e, bf), sw = ld(qkv, base + (e < half ? e + half : e - half), bf);
            tmp[e] = rd(rd(v * ld(cos, (int64_t)m * d + e, bf), bf) + rd(sw * ld(sin, (int64_t)m * d + e, bf), bf), bf);
          }
          for (int e = 0; e < d; e++) st(qkv, base + e, tmp[e], bf);
          if (hh >= n_heads) {
            float *dst = kbuf + (((int64_t)b * n_kv + (hh - n_heads)) * cap + col0 + i) * d;
            for (int e = 0; e < d; e++) dst[e] = tmp[e];
          }
        }
        for (int j = 0; j < n_kv; j++) {
          float *dst = vbuf + (((int64_t)b * n_kv + j) * cap + col0 + i) * d;
          int64_t base = (int64_t)m * nqkv + (int64_t)(n_heads + n_kv + j) * d;
          for (int e = 0; e < d; e++) dst[e] = ld(qkv, base + e, bf);
        }
      }
    }
    { /* attention: one (row, query head, query) per task, float32 scores over the live columns */
      float *p = malloc(sizeof(float) * (size_t)window), *acc = malloc(sizeof(float) * (size_t)d);
#pragma omp for schedule(static)
      for (int task = 0; task < B * n_heads * n; task++) {
        int b = task / (n_heads * n), hq = (task / n) % n_heads, i = task % n, j = hq / groups, g = hq % groups;
        int64_t qbase = ((int64_t)(b * n + i)) * nqkv + (int64_t)hq * d;
        const float *brow = bias + (((int64_t)b * n_kv + j) * groups * n + (int64_t)g * n + i) * window;
        const float *kb = kbuf + ((int64_t)b * n_kv + j) * cap * d, *vb = vbuf + ((int64_t)b * n_kv + j) * cap * d;
        float q[1024], mx = -INFINITY;
        for (int e = 0; e < d; e++) q[e] = ld(qkv, qbase + e, bf);
        for (int w = 0; w < window; w++) {
          float s = 0.0f;
          for (int e = 0; e < d; e++) s += q[e] * kb[(int64_t)w * d + e];
          p[w] = brow[w] + scale * s;
          if (p[w] > mx) mx = p[w];
        }
        float sum = 0.0f;
        for (int w = 0; w < window; w++) {
          p[w] = p[w] == -INFINITY ? 0.0f : expf(p[w] - mx);
          sum += p[w];
        }
        for (int e = 0; e < d; e++) acc[e] = 0.0f;
        for (int w = 0; w < window; w++) {
          float pw = p[w] / sum;
          if (pw != 0.0f)
            for (int e = 0; e < d; e++) acc[e] += pw * vb[(int64_t)w * d + e];
        }
        for (int e = 0; e < d; e++) st(a, ((int64_t)(b * n + i)) * nq + (int64_t)hq * d + e, acc[e], bf);
      }
      free(p);
      free(acc);
    }
    gemm_team(a, wo, o, M, nq, H, bf);
#pragma omp single
    {
      for (int64_t e = 0; e < (int64_t)M * H; e++) st(x, e, ld(x, e, bf) + ld(o, e, bf), bf);
      rms_norm_rows(x, ln2, h, M, H, eps, bf);
    }
    gemm_team(h, wgu, gu, M, H, 2 * inter, bf);
#pragma omp single
    for (int m = 0; m < M; m++)
      for (int e = 0; e < inter; e++) {
        float g = ld(gu, (int64_t)m * 2 * inter + e, bf), u = ld(gu, (int64_t)m * 2 * inter + inter + e, bf);
        st(mid, (int64_t)m * inter + e, rd(g / (1.0f + expf(-g)), bf) * u, bf);
      }
    gemm_team(mid, wd, o, M, inter, H, bf);
#pragma omp single
    for (int64_t e = 0; e < (int64_t)M * H; e++) st(x, e, ld(x, e, bf) + ld(o, e, bf), bf);
  }
  free(h);
  free(qkv);
  free(a);
  free(gu);
  free(mid);
  free(o);
}
