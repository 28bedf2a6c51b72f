/* Fixed-point formats and scalar helpers of the in-kernel forward pass.
 *
 * This header compiles both as BPF C (clang -target bpf) and as C++ (the
 * bit-exact user-space model the tests compare against), so every formula
 * here runs identically in the kernel and in the model. Only integer
 * arithmetic; no loops without a constant bound (the verifier must see them).
 * docs/numerics.md explains the formats, ranges and overflow arguments.
 * Two concerns have headers of their own, included where used:
 * numerics_rope.h (the RoPE table's math) and numerics_kv.h (the K/V
 * formats and the attention arithmetic over them).
 */
#ifndef QWEN3_BPF_NUMERICS_H
#define QWEN3_BPF_NUMERICS_H

#ifdef __cplusplus
#include <cstdint>
typedef int8_t qn_s8;
typedef uint8_t qn_u8;
typedef uint16_t qn_u16;
typedef int32_t qn_s32;
typedef uint32_t qn_u32;
typedef int64_t qn_s64;
typedef uint64_t qn_u64;
#define QN_INLINE static inline
#define QN_OPAQUE(v) (void)0
#else
#include <linux/types.h>
typedef __s8 qn_s8;
typedef __u8 qn_u8;
typedef __u16 qn_u16;
typedef __s32 qn_s32;
typedef __u32 qn_u32;
typedef __s64 qn_s64;
typedef __u64 qn_u64;
#define QN_INLINE static __attribute__((always_inline)) inline
/* Hides a value from clang's pattern matching so branch-free code stays
 * branch-free (clang would turn min/max/abs back into jumps). */
#define QN_OPAQUE(v) asm volatile("" : "+r"(v))
#endif

/* ---- formats ------------------------------------------------------------ */
#define QN_ACT_FRAC 16      /* activations: int32, value * 2^16 (Q16) */
#define QN_W24_FRAC 24      /* q24 weights: int32, Q24 (fewer bits for matrices with |w| >= 128) */
#define QN_W8_FRAC 30       /* q8 weights: int8 * per-group scale in Q30 (same rule) */
#define QN_NORM_FRAC 16     /* RMSNorm weights: int32, Q16 (|w| < 32768) */
#define QN_TRIG_FRAC 30     /* RoPE cos/sin: int32, Q30 */
#define QN_ONE_Q30 (1LL << 30)
#define QN_GROUP 64         /* columns per q8 scale group (and row padding unit) */
#define QN_ACT_BITS_MAX 30  /* matmul inputs are requantized to |x| <= 2^30 (int32) */
/* q8 matmul inputs keep at most 18 bits: the q8 kernels add two rows' int8
 * products in one 64-bit multiply, (wa + wb * 2^32) * x, and each 32-bit lane
 * holds a group's sum exactly only while 64 * 127 * 2^18 < 2^31. */
#define QN_Q8_ACT_BITS 18
#define QN_RMS_BITS 20      /* rmsnorm squares inputs reduced to |x| < 2^20 */
#define QN_LOG2E_Q30 1549082005LL /* log2(e) * 2^30 */

/* ---- basic helpers ------------------------------------------------------ */

/* Number of significant bits of v (0 for 0), since BPF has no count-leading-
 * zeros instruction. Branch-free: each step's "is the top half non-zero" bit
 * is a carry ((hi + 2^w - 1) >> w for hi < 2^w). With branches, the verifier
 * of newer kernels (6.18.44) followed each of the 2^6 outcomes separately
 * through the norm callbacks and stopped qn_matmul at its 1M limit. */
#define QN_BITS_STEP(w)                                  \
  do {                                                   \
    qn_u64 s_ = ((v >> (w)) + ((1ULL << (w)) - 1)) >> (w); \
    v >>= s_ * (w);                                      \
    n += (int)(s_ * (w));                                \
  } while (0)
QN_INLINE int qn_bits_u64(qn_u64 v) {
  int n = 0;
  QN_BITS_STEP(32);
  QN_BITS_STEP(16);
  QN_BITS_STEP(8);
  QN_BITS_STEP(4);
  QN_BITS_STEP(2);
  QN_BITS_STEP(1);
  return n + (int)v;
}
#undef QN_BITS_STEP

/* Per-element helpers are branch-free: BPF has no conditional move, and
 * branches inside unrolled loops multiply the states the verifier explores.
 * Selections multiply by a 0/1 sign bit instead of masking with 0/-1: this
 * kernel's verifier forks its state on AND with a [-1, 0] operand, which
 * would be exponential over an unrolled loop.
 * Arguments stay within +-2^62 so the differences below cannot overflow. */
QN_INLINE qn_s64 qn_sign_bit(qn_s64 v) {
  qn_s64 b = (qn_s64)((qn_u64)v >> 63);
  QN_OPAQUE(b);
  return b;
}
QN_INLINE qn_s64 qn_min64(qn_s64 a, qn_s64 b) {
  qn_s64 d = a - b;
  return b + d * qn_sign_bit(d);
}
QN_INLINE qn_s64 qn_max64(qn_s64 a, qn_s64 b) {
  qn_s64 d = a - b;
  return a - d * qn_sign_bit(d);
}
QN_INLINE qn_u64 qn_abs64(qn_s64 v) {
  return (qn_u64)(v * (1 - 2 * qn_sign_bit(v)));
}

/* Rounds v / 2^sh to nearest (ties toward +inf); sh in [0, 62]. */
QN_INLINE qn_s64 qn_round_shift(qn_s64 v, int sh) {
  return (v + ((1LL << sh) >> 1)) >> sh;
}

/* Clamps to +-(2^31 - 1). */
QN_INLINE qn_s32 qn_sat32(qn_s64 v) {
  return (qn_s32)qn_max64(qn_min64(v, 2147483647LL), -2147483647LL);
}

/* Rounded signed division, ties away from zero; d > 0. */
QN_INLINE qn_s64 qn_div_round(qn_s64 n, qn_s64 d) {
  qn_s64 sg = 1 - 2 * qn_sign_bit(n);
  qn_u64 a = (qn_u64)(n * sg);
  qn_s64 q = (qn_s64)((a + (qn_u64)d / 2) / (qn_u64)d);
  return q * sg;
}

/* ---- matmul input requantization (block floating point) ------------------
 * The matmul input is x >> s with s chosen per vector so that |x >> s| <=
 * 2^act_bits; act_bits is fixed per matrix at load so that
 * sum_j |w_j| * 2^act_bits < 2^62 for every row (see docs/numerics.md). */
QN_INLINE int qn_input_shift(qn_u64 max_abs, int act_bits) {
  return (int)qn_max64(qn_bits_u64(max_abs) - act_bits, 0);
}

/* Output of a matmul row: acc is y * 2^(wfrac + 16 - s); returns y in Q16.
 * s may be negative (down to -16) when the input carries more than 16
 * fraction bits (RMSNorm output requantized from Q32). */
QN_INLINE qn_s32 qn_matmul_out(qn_s64 acc, int wfrac, int s) {
  return qn_sat32(qn_round_shift(acc, wfrac - s));
}

/* ---- reciprocal square root ----------------------------------------------
 * For v > 0 returns r (Q30, in (2^29, 2^30]) and *e so that
 * 1/sqrt(v) ~= r * 2^-e. v is normalized to [2^30, 2^32) by an even shift,
 * a 6-entry seed table gives ~3% and four Newton steps reach the Q30 limit. */
QN_INLINE qn_s64 qn_rsqrt_seed(qn_u64 top) {
  if (top <= 2) return 960383883LL;
  if (top == 3) return 811672525LL;
  if (top == 4) return 715827883LL;
  if (top == 5) return 647490682LL;
  if (top == 6) return 595604800LL;
  return 554477894LL;
}

QN_INLINE qn_s64 qn_rsqrt_q30(qn_u64 v, int *e) {
  if (v == 0) v = 1;
  int b = qn_bits_u64(v);
  /* k: v = mn * 4^k with mn in [2^30, 2^32) */
  int k = (b - 31) >> 1; /* floor((b - 31) / 2): arithmetic shift */
  qn_u64 mn = k >= 0 ? (v >> (2 * k)) : (v << (-2 * k));
  qn_s64 r = qn_rsqrt_seed(mn >> 29);
  for (int it = 0; it < 4; it++) {
    qn_u64 r2 = ((qn_u64)r * (qn_u64)r) >> 30;
    qn_s64 ur2 = (qn_s64)((mn * r2) >> 30);
    r = (r * ((3LL << 30) - ur2)) >> 31;
  }
  *e = 45 + k;
  return r;
}

/* ---- exponentials --------------------------------------------------------
 * 2^-(t / 2^16) in Q30 for t >= 0: the fraction bit by bit (16 constant
 * factors 2^-(2^-k), each rounded to Q30), then a shift for the integer part. */
QN_INLINE qn_s64 qn_exp2_frac_factor(int k) {
  switch (k) {
    case 1: return 759250125LL;
    case 2: return 902905651LL;
    case 3: return 984625594LL;
    case 4: return 1028218693LL;
    case 5: return 1050733751LL;
    case 6: return 1062175491LL;
    case 7: return 1067942999LL;
    case 8: return 1070838486LL;
    case 9: return 1072289173LL;
    case 10: return 1073015252LL;
    case 11: return 1073378477LL;
    case 12: return 1073560135LL;
    case 13: return 1073650976LL;
    case 14: return 1073696399LL;
    case 15: return 1073719111LL;
    default: return 1073730468LL;
  }
}

QN_INLINE qn_s64 qn_exp2_neg_q30(qn_u64 t_q16) {
  qn_s64 n = (qn_s64)qn_min64((qn_s64)(t_q16 >> 16), 40); /* 2^-40 rounds to 0 in Q30 */
  qn_s64 r = QN_ONE_Q30;
#ifndef __cplusplus
#pragma unroll
#endif
  for (int k = 1; k <= 16; k++) {
    /* factor 2^-(2^-k) when fraction bit k is set, else exactly 1.0 (r unchanged) */
    qn_s64 bit = (qn_s64)((t_q16 >> (16 - k)) & 1);
    QN_OPAQUE(bit);
    qn_s64 f = QN_ONE_Q30 + (qn_exp2_frac_factor(k) - QN_ONE_Q30) * bit;
    r = (r * f + (1LL << 29)) >> 30;
  }
  return qn_round_shift(r, (int)n);
}

/* exp(d) in Q30 for d <= 0 given in Q16 (d > 0 is treated as 0). */
QN_INLINE qn_s64 qn_exp_neg_q30(qn_s64 d_q16) {
  /* |d| beyond 2^26 (exp(-1024)) is clamped: the result is 0 either way */
  qn_u64 a = (qn_u64)qn_min64(qn_max64(-d_q16, 0), 1LL << 26);
  qn_u64 t = (a * (qn_u64)QN_LOG2E_Q30 + (1ULL << 29)) >> 30;
  return qn_exp2_neg_q30(t);
}

/* exp(d) is exactly 0 in Q30 for d <= -23 (Q16): 23 nats are 33.2 octaves,
 * past the 2^-32 below which qn_exp2_neg_q30 rounds to 0. */
#define QN_EXP_ZERO_Q16 (23LL << 16)

/* sigmoid(g) in Q30 for g in Q16 (one exponential, one division):
 * g >= 0: 1 / (1 + e), g < 0: e / (1 + e), with e = exp(-|g|). */
QN_INLINE qn_s64 qn_sigmoid_q30(qn_s32 g_q16) {
  qn_s64 g = g_q16;
  qn_s64 neg = qn_sign_bit(g); /* 1 when g < 0 */
  qn_s64 e = qn_exp_neg_q30(-(qn_s64)qn_abs64(g));
  qn_u64 den = (qn_u64)(QN_ONE_Q30 + e);
  qn_u64 num = (qn_u64)((1LL << 60) * (1 - neg) + (e << 30) * neg);
  return (qn_s64)((num + den / 2) / den);
}

/* silu(g) * u in Q16, saturated to int32. */
QN_INLINE qn_s32 qn_silu_mul(qn_s32 g_q16, qn_s32 u_q16) {
  qn_s64 silu = qn_round_shift((qn_s64)g_q16 * qn_sigmoid_q30(g_q16), 30); /* Q16, |silu| <= |g| */
  return qn_sat32(qn_round_shift(silu * (qn_s64)u_q16, 16));
}

/* ---- RMSNorm ---------------------------------------------------------------
 * Three steps so the kernel and the model loop the same way:
 *   t  = qn_rms_reduce_shift(max |x|)       squares use x >> t, |x >> t| < 2^20
 *   ss = sum (x >> t)^2                       < 2^53 for n <= 8192
 *   qn_rms_factor(ss, n, t, eps_q32, &sh) -> r: x * r >> sh is x / rms in Q16
 *   y  = qn_rms_apply(x, r, sh, w_q16)       (x / rms) * w, Q16, saturated */
QN_INLINE int qn_rms_reduce_shift(qn_u64 max_abs) {
  return (int)qn_max64(qn_bits_u64(max_abs) - QN_RMS_BITS, 0);
}

QN_INLINE qn_s64 qn_rms_factor(qn_u64 ss, qn_u32 n, int t, qn_u64 eps_q32, int *sh) {
  /* mean square in units of 2^(2t - 32) */
  qn_u64 ms = (ss + n / 2) / n;
  ms += eps_q32 >> (2 * t);
  int e = 0;
  qn_s64 r = qn_rsqrt_q30(ms, &e);
  /* 1/rms = r * 2^-e * 2^(16 - t); x_Q16 / rms in Q16 = x * r >> (e + t - 16) */
  *sh = e + t - 16;
  return r;
}

/* RMSNorm feeding a matmul: (x / rms) * w in Q32 as int64 (|.| < 2^23 * 2^31),
 * requantized once for the matmul instead of being rounded to Q16 first: with
 * outlier channels the other normalized channels are small, and Q16 would
 * leave them only ~10 bits. */
QN_INLINE qn_s64 qn_rms_apply_wide(qn_s32 x, qn_s64 r, int sh, qn_s32 w_q16) {
  qn_s64 nrm = qn_round_shift((qn_s64)x * r, sh);
  return nrm * (qn_s64)w_q16;
}

QN_INLINE qn_s32 qn_rms_apply(qn_s32 x, qn_s64 r, int sh, qn_s32 w_q16) {
  qn_s64 nrm = qn_round_shift((qn_s64)x * r, sh); /* |nrm| <= sqrt(n) * 2^16 < 2^23 */
  return qn_sat32(qn_round_shift(nrm * (qn_s64)w_q16, QN_NORM_FRAC));
}

/* ---- RoPE (rotate-half pairs i and i + d/2) --------------------------------- */
QN_INLINE qn_s32 qn_rope_first(qn_s32 x1, qn_s32 x2, qn_s32 c, qn_s32 s) {
  return qn_sat32(qn_round_shift((qn_s64)x1 * c - (qn_s64)x2 * s, QN_TRIG_FRAC));
}
QN_INLINE qn_s32 qn_rope_second(qn_s32 x1, qn_s32 x2, qn_s32 c, qn_s32 s) {
  return qn_sat32(qn_round_shift((qn_s64)x2 * c + (qn_s64)x1 * s, QN_TRIG_FRAC));
}

/* ---- wide products (Q62: the RoPE table, the draw, the logprobs) ---------- */
#define QN_ONE_Q62 (1ULL << 62)
#define QN_LN2_Q62 3196577161300663915ULL      /* ln 2 * 2^62 */

/* High 64 bits of the 128-bit product a * b (BPF has no 128-bit multiply). */
QN_INLINE qn_u64 qn_mulhi_u64(qn_u64 a, qn_u64 b) {
  qn_u64 al = a & 0xffffffffULL, ah = a >> 32, bl = b & 0xffffffffULL, bh = b >> 32;
  qn_u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  qn_u64 mid = (ll >> 32) + (lh & 0xffffffffULL) + (hl & 0xffffffffULL);
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}
/* a * b of Q62 values whose product is below 4, in Q62 (truncated). */
QN_INLINE qn_u64 qn_mul_q62(qn_u64 a, qn_u64 b) { return qn_mulhi_u64(a, b) << 2; }

/* log2(v / 2^16) in Q57 for 2^16 <= v < 2^63. */
QN_INLINE qn_u64 qn_log2_q16_q57(qn_u64 v) {
  int b = qn_bits_u64(v); /* v in [2^(b-1), 2^b) */
  qn_u64 m = v << (63 - b); /* the mantissa in [1, 2), Q62 */
  qn_u64 r = (qn_u64)(b - 17) << 57;
  for (int k = 1; k <= 57; k++) {
    qn_u64 m2 = qn_mulhi_u64(m, m); /* m^2 in Q60, in [1, 4) */
    qn_u64 ge2 = m2 >> 61;          /* 1 when m^2 >= 2: this bit of the log is set */
    m = m2 << (2 - ge2);            /* m^2 / 2^ge2 back in Q62 */
    r += ge2 << (57 - k);
  }
  return r;
}

/* ---- 2^-x tables (attention's softmax weights, the sampling weights) ----- */
/* 2^-(j / 256) in Q30, correctly rounded */
static const qn_u32 qn_exp2_t1[256] = {
  1073741824, 1070838486, 1067942999, 1065055341, 1062175491, 1059303428, 1056439131, 1053582579,
  1050733751, 1047892626, 1045059183, 1042233401, 1039415261, 1036604740, 1033801819, 1031006477,
  1028218693, 1025438448, 1022665720, 1019900489, 1017142735, 1014392438, 1011649578, 1008914134,
  1006186087, 1003465416, 1000752102, 998046124, 995347464, 992656100, 989972014, 987295185,
  984625594, 981963222, 979308048, 976660054, 974019220, 971385527, 968758955, 966139485,
  963527098, 960921775, 958323496, 955732243, 953147997, 950570738, 948000448, 945437108,
  942880699, 940331203, 937788600, 935252872, 932724001, 930201967, 927686753, 925178340,
  922676710, 920181844, 917693724, 915212331, 912737649, 910269657, 907808339, 905353676,
  902905651, 900464244, 898029440, 895601218, 893179563, 890764456, 888355878, 885953814,
  883558244, 881169153, 878786521, 876410331, 874040567, 871677210, 869320244, 866969651,
  864625413, 862287515, 859955938, 857630665, 855311680, 852998965, 850692504, 848392279,
  846098274, 843810471, 841528855, 839253408, 836984114, 834720956, 832463917, 830212982,
  827968132, 825729353, 823496627, 821269938, 819049271, 816834607, 814625932, 812423229,
  810226483, 808035676, 805850792, 803671817, 801498734, 799331526, 797170178, 795014675,
  792865000, 790721137, 788583072, 786450787, 784324269, 782203500, 780088465, 777979150,
  775875538, 773777614, 771685363, 769598769, 767517817, 765442492, 763372778, 761308661,
  759250125, 757197155, 755149737, 753107854, 751071493, 749040637, 747015274, 744995386,
  742980960, 740971982, 738968435, 736970306, 734977579, 732990241, 731008277, 729031671,
  727060411, 725094480, 723133865, 721178552, 719228525, 717283772, 715344277, 713410026,
  711481005, 709557200, 707638598, 705725183, 703816941, 701913860, 700015924, 698123120,
  696235434, 694352853, 692475362, 690602947, 688735596, 686873293, 685016026, 683163781,
  681316545, 679474303, 677637043, 675804750, 673977412, 672155015, 670337545, 668524990,
  666717336, 664914570, 663116678, 661323648, 659535466, 657752119, 655973594, 654199878,
  652430958, 650666822, 648907455, 647152846, 645402981, 643657847, 641917433, 640181724,
  638450708, 636724373, 635002706, 633285695, 631573326, 629865587, 628162466, 626463950,
  624770026, 623080683, 621395908, 619715688, 618040012, 616368866, 614702239, 613040119,
  611382493, 609729349, 608080675, 606436459, 604796689, 603161352, 601530438, 599903933,
  598281827, 596664106, 595050760, 593441776, 591837143, 590236848, 588640881, 587049229,
  585461881, 583878825, 582300049, 580725543, 579155293, 577589290, 576027521, 574469975,
  572916640, 571367506, 569822560, 568281792, 566745190, 565212742, 563684439, 562160268,
  560640218, 559124278, 557612438, 556104685, 554601009, 553101399, 551605844, 550114332,
  548626854, 547143398, 545663953, 544188508, 542717053, 541249576, 539786068, 538326517,
};
/* 2^-(j / 65536) in Q30, correctly rounded */
static const qn_u32 qn_exp2_t2[256] = {
  1073741824, 1073730468, 1073719111, 1073707755, 1073696399, 1073685043, 1073673687, 1073662331,
  1073650976, 1073639620, 1073628265, 1073616910, 1073605554, 1073594199, 1073582844, 1073571490,
  1073560135, 1073548780, 1073537426, 1073526072, 1073514718, 1073503363, 1073492010, 1073480656,
  1073469302, 1073457948, 1073446595, 1073435242, 1073423888, 1073412535, 1073401182, 1073389829,
  1073378477, 1073367124, 1073355772, 1073344419, 1073333067, 1073321715, 1073310363, 1073299011,
  1073287659, 1073276307, 1073264956, 1073253605, 1073242253, 1073230902, 1073219551, 1073208200,
  1073196849, 1073185499, 1073174148, 1073162797, 1073151447, 1073140097, 1073128747, 1073117397,
  1073106047, 1073094697, 1073083348, 1073071998, 1073060649, 1073049299, 1073037950, 1073026601,
  1073015252, 1073003904, 1072992555, 1072981206, 1072969858, 1072958510, 1072947162, 1072935814,
  1072924466, 1072913118, 1072901770, 1072890422, 1072879075, 1072867728, 1072856380, 1072845033,
  1072833686, 1072822340, 1072810993, 1072799646, 1072788300, 1072776953, 1072765607, 1072754261,
  1072742915, 1072731569, 1072720223, 1072708878, 1072697532, 1072686187, 1072674841, 1072663496,
  1072652151, 1072640806, 1072629461, 1072618117, 1072606772, 1072595428, 1072584083, 1072572739,
  1072561395, 1072550051, 1072538707, 1072527363, 1072516020, 1072504676, 1072493333, 1072481990,
  1072470646, 1072459303, 1072447961, 1072436618, 1072425275, 1072413933, 1072402590, 1072391248,
  1072379906, 1072368564, 1072357222, 1072345880, 1072334538, 1072323197, 1072311855, 1072300514,
  1072289173, 1072277831, 1072266490, 1072255150, 1072243809, 1072232468, 1072221128, 1072209787,
  1072198447, 1072187107, 1072175767, 1072164427, 1072153087, 1072141748, 1072130408, 1072119069,
  1072107729, 1072096390, 1072085051, 1072073712, 1072062373, 1072051035, 1072039696, 1072028358,
  1072017019, 1072005681, 1071994343, 1071983005, 1071971667, 1071960329, 1071948992, 1071937654,
  1071926317, 1071914980, 1071903642, 1071892305, 1071880969, 1071869632, 1071858295, 1071846959,
  1071835622, 1071824286, 1071812950, 1071801614, 1071790278, 1071778942, 1071767606, 1071756271,
  1071744935, 1071733600, 1071722264, 1071710929, 1071699594, 1071688260, 1071676925, 1071665590,
  1071654256, 1071642921, 1071631587, 1071620253, 1071608919, 1071597585, 1071586251, 1071574917,
  1071563584, 1071552251, 1071540917, 1071529584, 1071518251, 1071506918, 1071495585, 1071484252,
  1071472920, 1071461587, 1071450255, 1071438923, 1071427591, 1071416259, 1071404927, 1071393595,
  1071382264, 1071370932, 1071359601, 1071348269, 1071336938, 1071325607, 1071314276, 1071302945,
  1071291615, 1071280284, 1071268954, 1071257624, 1071246293, 1071234963, 1071223633, 1071212303,
  1071200974, 1071189644, 1071178315, 1071166985, 1071155656, 1071144327, 1071132998, 1071121669,
  1071110340, 1071099012, 1071087683, 1071076355, 1071065027, 1071053698, 1071042370, 1071031043,
  1071019715, 1071008387, 1070997059, 1070985732, 1070974405, 1070963078, 1070951750, 1070940424,
  1070929097, 1070917770, 1070906443, 1070895117, 1070883791, 1070872464, 1070861138, 1070849812,
};

/* ---- sampling probabilities (the qn_sample program, ops_sample.h) -----------
 * Candidates carry Q16 logits l (the kernel's logits, exactly). Parameters
 * come as the float's own mantissa and exponent, so they enter exactly:
 *   repetition penalty pen = pm * 2^-pe (pm in [2^23, 2^24), pe in [0, 32]);
 *   temperature T = tm * 2^-te (tm in [2^31, 2^32), te in [-16, 46]).
 * Penalty (CTRL rule, on ids seen): l > 0: l / pen, else l * pen, rounded to Q16.
 * Weight relative to the best logit M: w = 2^-t in Q44 (the best weighs 2^44
 * exactly), t = (M - l) * cm >> csh in Q32 octaves, cm * 2^-csh = log2(e) *
 * 2^16 / T; 2^-t: the top 16 fraction bits by two 256-entry tables (Q30),
 * the low 16 by 1 - x ln 2 (x < 2^-16: error < 2^-33).
 * Probabilities of the kept set: floor(w * 2^40 / Wk) (Q40). Error bounds
 * against double: docs/numerics.md, "Sampling probabilities". */
#define QN_LOG2E_Q63 13306513097844322491ULL /* log2(e) * 2^63 */
#define QN_LN2_Q30 744261118LL                /* ln 2 * 2^30 */
#define QN_SAMPLE_WFRAC 44                    /* weights: Q44, the best candidate 2^44 */
#define QN_SAMPLE_PFRAC 40                    /* probabilities out: Q40 */
#define QN_SAMPLE_W_ZERO 46                   /* t >= 46 octaves: the weight rounds to 0 */

QN_INLINE qn_s32 qn_rep_penalty(qn_s32 l, qn_u32 pm, qn_u32 pe) {
  if (l > 0) return qn_sat32(qn_div_round((qn_s64)l << pe, (qn_s64)pm)); /* l * 2^pe < 2^63 */
  return qn_sat32(qn_round_shift((qn_s64)l * (qn_s64)pm, (int)pe));     /* |l * pm| < 2^55 */
}

/* cm (in [2^31, 2^32)) and csh (returned, in [0, 63]) of log2(e) * 2^16 / T. */
QN_INLINE qn_u64 qn_temp_factor(qn_u32 tm, qn_s32 te, int *csh) {
  qn_u64 cm = QN_LOG2E_Q63 / (qn_u64)tm; /* log2(e) * 2^63 / tm, in [2^31.5, 2^32.6) */
  int sh = 47 - te;                      /* c = cm * 2^(te - 47) */
  if (cm >> 32) {
    cm >>= 1;
    sh -= 1;
  }
  *csh = sh;
  return cm;
}

/* Octaves below the best (Q32) of a candidate d = M - l Q16 units below it. */
QN_INLINE qn_u64 qn_sample_octaves(qn_u64 d, qn_u64 cm, int csh) { return (d * cm) >> csh; }

/* 2^-t in Q44 for t in Q32 (0 from 46 octaves on): the fraction's top 8 bits
 * and next 8 bits by the two tables, the low 16 by 1 - x ln 2 (x < 2^-16). */
QN_INLINE qn_u64 qn_exp2_neg_q44(qn_u64 t_q32) {
  qn_u64 n = t_q32 >> 32;
  if (n >= QN_SAMPLE_W_ZERO) return 0;
  qn_u64 r = qn_exp2_t1[(t_q32 >> 24) & 255];
  r = (r * qn_exp2_t2[(t_q32 >> 16) & 255] + (1ULL << 29)) >> 30;
  qn_u64 x = ((t_q32 & 0xffff) * (qn_u64)QN_LN2_Q30) >> 16; /* low bits * ln 2, Q46 (< 2^30) */
  r -= (r * x + (1ULL << 45)) >> 46;
  return (qn_u64)qn_round_shift((qn_s64)(r << (QN_SAMPLE_WFRAC - 30)), (int)n);
}

/* The top-p mass target: ceil(W * tp / 2^32), tp = top_p * 2^32 (<= 2^32), W < 2^62. */
QN_INLINE qn_u64 qn_top_p_target(qn_u64 W, qn_u64 tp_q32) {
  qn_u64 hi = (W >> 32) * tp_q32;
  qn_u64 lo = (W & 0xffffffffULL) * tp_q32;
  return hi + (lo >> 32) + ((lo & 0xffffffffULL) != 0);
}

/* The kept set's total Wk (>= 2^44) as ~d * 2^s, d in [2^31, 2^32) (the
 * truncation scales every probability alike, by less than 2^-31), and
 * R = floor(2^94 / d), once per call; then each probability is one 64x64-bit
 * product: floor(w * R / 2^(54 + s)) = w * 2^40 / Wk in Q40, within one unit
 * of that scaled quotient. */
QN_INLINE int qn_prob_shift(qn_u64 Wk) { return (int)qn_max64(qn_bits_u64(Wk) - 32, 13); }
QN_INLINE qn_u64 qn_prob_recip(qn_u64 d) {
  qn_u64 q1 = (1ULL << 62) / d, r1 = (1ULL << 62) - q1 * d;
  return (q1 << 32) + (r1 << 32) / d;
}
QN_INLINE qn_u64 qn_sample_prob_q40(qn_u64 w, qn_u64 R, int s) { return qn_mulhi_u64(w, R) >> (s - 10); }

/* ---- the log-normalizer of the reported logprobs (qn_sample, QN_SAMPLE_LSE) ----
 * lse = M + ln(S / 2^44) in Q16, M the best of the candidates' Q16 logits and
 * S the sum of their softmax weights at temperature 1, each computed as the
 * sampling weights are (qn_exp2_neg_q44 of qn_sample_octaves, the best
 * 2^44 exactly, 0 from 46 octaves on); S < 2^62 for QN_SAMPLE_MAX candidates.
 * A logprob is then (l - lse) / 2^16: two kernel integers subtracted.
 * ln(S / 2^44): log2 bit by bit in Q57 (qn_log2_q16_q57), times ln 2 (Q62),
 * rounded to Q16 once. Error bound: docs/numerics.md, "Logprobs in BPF". */
/* The temperature factor of T = 1 = 2^31 * 2^-31 (qn_temp_factor). */
QN_INLINE qn_u64 qn_lse_factor(int *csh) { return qn_temp_factor(1u << 31, 31, csh); }

/* ln(S / 2^44) in Q16, rounded to nearest, for 2^44 <= S < 2^62. */
QN_INLINE qn_s64 qn_ln_q44_q16(qn_u64 S) {
  qn_u64 l2 = qn_log2_q16_q57(S) - (28ULL << 57); /* log2(S / 2^44) in Q57, in [0, 18) */
  qn_u64 ln = qn_mulhi_u64(l2, QN_LN2_Q62);        /* ln(S / 2^44) in Q55 (truncated) */
  return (qn_s64)((ln + (1ULL << 38)) >> 39);
}

/* lse in Q16 (int64: M + ln(n) may pass 2^31) from the best logit and the weight sum. */
QN_INLINE qn_s64 qn_lse_q16(qn_s32 M, qn_u64 S) { return (qn_s64)M + qn_ln_q44_q16(S); }

#endif
