// Every operation of orch's expression language, written once (docs/language.md, "Arithmetic").
//
// This file is compiled three ways: into expr/ (the evaluator the checker and the runtime use),
// into the host code `orchc --emit=cuda` prints, and into the kernels orchc generates (NVRTC),
// where it is the preamble. So it includes nothing and uses builtin types only; device
// intrinsics sit behind __CUDA_ARCH__. Each function takes values with an error code and returns
// one: an error in an operand passes through, and every result that the exact mathematical
// result would not equal is an error, never a wrap, a saturation or a silent rounding.
#ifndef ORCH_EXPR_OPS_H
#define ORCH_EXPR_OPS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ORCH_HD __host__ __device__ inline
#else
#define ORCH_HD inline
#endif

// Type codes, in the order of orch::expr::ScalarType (and the artifact's ScalarType).
enum orch_type {
  orch_u8, orch_u16, orch_u32, orch_u64, orch_i8, orch_i16, orch_i32, orch_i64,
  orch_f16, orch_bf16, orch_f32, orch_f64, orch_bool
};

// Error codes, as orch::expr::ErrorKind; orch_expr_error() receives them on the device.
enum orch_error_code {
  orch_ok_code = 0,
  orch_overflow = 1,      // the exact result does not fit the type
  orch_div_by_zero = 2,   // x / 0, x % 0, ceil_div(x, 0)
  orch_shift_count = 3,   // a shift count below 0 or at least the width
  orch_conversion = 4,    // a value that the target type cannot hold exactly
  orch_invalid = 5        // an operation the types do not allow (the checker refuses these)
};

ORCH_HD const char* orch_error_text(int e) {
  switch (e) {
    case orch_ok_code: return "no error";
    case orch_overflow: return "overflow";
    case orch_div_by_zero: return "division by zero";
    case orch_shift_count: return "shift count";
    case orch_conversion: return "a value its type cannot hold";
    default: return "invalid operation";
  }
}

// c: the type values are computed in; s: the type they are stored in (f16 and bf16 are
// computed as float and stored as their bits).
template <int K> struct orch_t;
#define ORCH_INT_TYPE(K, C, BITS, SIGNED)          \
  template <> struct orch_t<K> {                   \
    typedef C c;                                   \
    typedef C s;                                   \
    enum { is_float = 0, is_signed = SIGNED, bits = BITS, prec = 0, emin = 0, emax = 0 }; \
  };
ORCH_INT_TYPE(orch_u8, unsigned char, 8, 0)
ORCH_INT_TYPE(orch_u16, unsigned short, 16, 0)
ORCH_INT_TYPE(orch_u32, unsigned int, 32, 0)
ORCH_INT_TYPE(orch_u64, unsigned long long, 64, 0)
ORCH_INT_TYPE(orch_i8, signed char, 8, 1)
ORCH_INT_TYPE(orch_i16, short, 16, 1)
ORCH_INT_TYPE(orch_i32, int, 32, 1)
ORCH_INT_TYPE(orch_i64, long long, 64, 1)
ORCH_INT_TYPE(orch_bool, bool, 1, 0)
#undef ORCH_INT_TYPE
// prec: significant bits; emin, emax: the exponents of the smallest and largest normal numbers.
#define ORCH_FLOAT_TYPE(K, C, S, PREC, EMIN, EMAX)               \
  template <> struct orch_t<K> {                                 \
    typedef C c;                                                 \
    typedef S s;                                                 \
    enum { is_float = 1, is_signed = 1, bits = 8 * sizeof(S), prec = PREC, emin = EMIN, emax = EMAX }; \
  };
ORCH_FLOAT_TYPE(orch_f16, float, unsigned short, 11, -14, 15)
ORCH_FLOAT_TYPE(orch_bf16, float, unsigned short, 8, -126, 127)
ORCH_FLOAT_TYPE(orch_f32, float, float, 24, -126, 127)
ORCH_FLOAT_TYPE(orch_f64, double, double, 53, -1022, 1023)
#undef ORCH_FLOAT_TYPE

// A value and its error code (0: none). On error the value is 0.
template <int K> struct orch_v {
  typename orch_t<K>::c v;
  int e;
};

template <int K> ORCH_HD orch_v<K> orch_ok(typename orch_t<K>::c v) {
  orch_v<K> r;
  r.v = v;
  r.e = 0;
  return r;
}
template <int K> ORCH_HD orch_v<K> orch_fail(int e) {
  orch_v<K> r;
  r.v = 0;
  r.e = e;
  return r;
}

// ---- bits and powers of two ------------------------------------------------------------------

ORCH_HD unsigned long long orch_double_bits(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<unsigned long long>(__double_as_longlong(x));
#else
  unsigned long long u;
  __builtin_memcpy(&u, &x, 8);
  return u;
#endif
}
ORCH_HD double orch_bits_double(unsigned long long u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  __builtin_memcpy(&x, &u, 8);
  return x;
#endif
}
ORCH_HD unsigned int orch_float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  unsigned int u;
  __builtin_memcpy(&u, &x, 4);
  return u;
#endif
}
ORCH_HD float orch_bits_float(unsigned int u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
#endif
}
// 2^k for -1022 <= k <= 1023, exactly.
ORCH_HD double orch_pow2(int k) {
  return orch_bits_double(static_cast<unsigned long long>(k + 1023) << 52);
}
ORCH_HD double orch_rint(double x) {  // round half to even
#ifdef __CUDA_ARCH__
  return rint(x);
#else
  return __builtin_rint(x);
#endif
}
ORCH_HD bool orch_finite(double x) { return x == x && x - x == 0; }
ORCH_HD double orch_inf() { return orch_bits_double(0x7ff0000000000000ull); }

// x rounded to nearest even with `prec` significant bits and the exponent range [emin, emax]
// (subnormals below emin); +-infinity when it overflows. NaN and infinities stay.
ORCH_HD double orch_round_format(double x, int prec, int emin, int emax) {
  if (!orch_finite(x) || x == 0) return x;
  const bool negative = x < 0;
  const double a = negative ? -x : x;
  int e = static_cast<int>((orch_double_bits(a) >> 52) & 0x7ff) - 1023;  // subnormal doubles: < emin
  const int q = (e < emin ? emin : e) - (prec - 1);  // the exponent of one unit in the last place
  double r = orch_rint(a * orch_pow2(-q)) * orch_pow2(q);  // both scalings are exact
  const double largest = (2.0 - orch_pow2(1 - prec)) * orch_pow2(emax);
  if (r > largest) r = orch_inf();
  return negative ? -r : r;
}

// A finite or infinite double rounded to float type K (for f64: itself).
template <int K> ORCH_HD typename orch_t<K>::c orch_round_to(double x) {
  if (K == orch_f64) return static_cast<typename orch_t<K>::c>(x);
  if (K == orch_f32) return static_cast<typename orch_t<K>::c>(x);  // C rounds to nearest even
  return static_cast<typename orch_t<K>::c>(
      orch_round_format(x, orch_t<K>::prec, orch_t<K>::emin, orch_t<K>::emax));
}

// The magnitude m as a double, rounded to odd when it needs more than 53 bits: rounding that
// once more to at most 51 bits gives the correctly rounded result (no double rounding).
ORCH_HD double orch_u64_round_odd(unsigned long long m) {
  if (m < (1ull << 53)) return static_cast<double>(m);
  int s = 0;
  unsigned long long t = m;
  while (t >= (1ull << 53)) {
    t >>= 1;
    ++s;
  }
  if (m & ((1ull << s) - 1)) t |= 1;
  return static_cast<double>(t) * orch_pow2(s);
}

// Integer value (sign, magnitude) rounded to float type K, to nearest even.
template <int K> ORCH_HD typename orch_t<K>::c orch_int_to_float(bool negative, unsigned long long m) {
  typedef typename orch_t<K>::c C;
  if (K == orch_f64 || K == orch_f32) {
    C r = static_cast<C>(m);  // one correct rounding
    return negative ? -r : r;
  }
  double d = orch_u64_round_odd(m);
  return orch_round_to<K>(negative ? -d : d);
}

// ---- integers as (sign, magnitude) -------------------------------------------------------------

// Written with casts so that no unsigned type is compared with zero (compilers warn).
template <int K> ORCH_HD bool orch_negative(typename orch_t<K>::c v) {
  if (orch_t<K>::is_float) return static_cast<double>(v) < 0;
  return orch_t<K>::is_signed && static_cast<long long>(v) < 0;
}
template <int K> ORCH_HD unsigned long long orch_magnitude(typename orch_t<K>::c v) {
  if (!orch_negative<K>(v)) return static_cast<unsigned long long>(v);
  unsigned long long u = static_cast<unsigned long long>(static_cast<long long>(v));
#if defined(__CUDA_ARCH__)
  // Opaque to the optimizer: NVVM would otherwise fold this negation into PTX abs.s64, which
  // ptxas takes as never negative, and drop the range check of |INT64_MIN| = 2^63 (-a of i64's
  // smallest value then "fits"; measured on sm_90 with CUDA 13.0).
  asm("" : "+l"(u));
#endif
  return 0ull - u;
}
// The largest value of integer type K, and the magnitude of its smallest (0 if unsigned).
template <int K> ORCH_HD unsigned long long orch_max_of() {
  if (K == orch_bool) return 1;
  if (orch_t<K>::is_signed) return (1ull << (orch_t<K>::bits - 1)) - 1;
  return orch_t<K>::bits == 64 ? ~0ull : (1ull << orch_t<K>::bits) - 1;
}
template <int K> ORCH_HD unsigned long long orch_min_magnitude() {
  return orch_t<K>::is_signed ? (1ull << (orch_t<K>::bits - 1)) : 0ull;
}
// (negative, m) as integer type K, or `err` if it is out of range.
template <int K> ORCH_HD orch_v<K> orch_int_fit(bool negative, unsigned long long m, int err) {
  typedef typename orch_t<K>::c C;
  if (m == 0) return orch_ok<K>(static_cast<C>(0));
  if (negative) {
    if (m > orch_min_magnitude<K>()) return orch_fail<K>(err);
    return orch_ok<K>(static_cast<C>(static_cast<long long>(0ull - m)));
  }
  if (m > orch_max_of<K>()) return orch_fail<K>(err);
  return orch_ok<K>(static_cast<C>(m));
}

// ---- conversions -------------------------------------------------------------------------------

// Promotion of an operand to the type an operation computes in (docs/language.md): integers
// exactly (u64 into i64 only up to INT64_MAX), integers into floats rounded to nearest, floats
// into wider floats exactly; a result that does not fit is an overflow.
template <int To, int From> ORCH_HD orch_v<To> orch_promote(orch_v<From> a) {
  typedef typename orch_t<To>::c C;
  if (a.e) return orch_fail<To>(a.e);
  if (orch_t<From>::is_float) {
    if (!orch_t<To>::is_float) return orch_fail<To>(orch_invalid);
    const double d = static_cast<double>(a.v);
    const C r = orch_round_to<To>(d);
    if (orch_finite(d) && !orch_finite(static_cast<double>(r))) return orch_fail<To>(orch_overflow);
    return orch_ok<To>(r);
  }
  const bool neg = orch_negative<From>(a.v);
  const unsigned long long m = orch_magnitude<From>(a.v);
  if (orch_t<To>::is_float) {
    const C r = orch_int_to_float<To>(neg, m);
    if (!orch_finite(static_cast<double>(r))) return orch_fail<To>(orch_overflow);
    return orch_ok<To>(r);
  }
  return orch_int_fit<To>(neg, m, orch_overflow);
}

// Conversion of a value into a type (binding, defaults, arguments, fills, assignments): the
// value must be held exactly (floats into floats round to nearest, but must stay finite).
template <int To, int From> ORCH_HD orch_v<To> orch_convert(orch_v<From> a) {
  typedef typename orch_t<To>::c C;
  if (a.e) return orch_fail<To>(a.e);
  if (orch_t<From>::is_float) {
    const double d = static_cast<double>(a.v);
    if (orch_t<To>::is_float) {
      const C r = orch_round_to<To>(d);
      if (orch_finite(d) && !orch_finite(static_cast<double>(r))) return orch_fail<To>(orch_conversion);
      return orch_ok<To>(r);
    }
    if (!orch_finite(d) || orch_rint(d) != d) return orch_fail<To>(orch_conversion);
    const bool neg = d < 0;
    const double mag = neg ? -d : d;
    if (mag >= 18446744073709551616.0) return orch_fail<To>(orch_conversion);  // 2^64
    return orch_int_fit<To>(neg, static_cast<unsigned long long>(mag), orch_conversion);
  }
  const bool neg = orch_negative<From>(a.v);
  const unsigned long long m = orch_magnitude<From>(a.v);
  if (orch_t<To>::is_float) {
    // Exact when the significant bits fit the precision and the value is finite in To.
    unsigned long long t = m;
    while (t != 0 && (t & 1) == 0) t >>= 1;
    if (t >> orch_t<To>::prec) return orch_fail<To>(orch_conversion);
    const C r = orch_int_to_float<To>(neg, m);
    if (!orch_finite(static_cast<double>(r))) return orch_fail<To>(orch_conversion);
    return orch_ok<To>(r);
  }
  return orch_int_fit<To>(neg, m, orch_conversion);
}

// Truthiness: non-zero (NaN is non-zero).
template <int K> ORCH_HD orch_v<orch_bool> orch_truth(orch_v<K> a) {
  if (a.e) return orch_fail<orch_bool>(a.e);
  return orch_ok<orch_bool>(a.v != 0);
}

// Storage: f16 and bf16 values are kept as their bits in memory and kernel parameters.
template <int K> ORCH_HD typename orch_t<K>::c orch_from_storage(typename orch_t<K>::s s) {
  if (K == orch_f16) {
    const unsigned int h = static_cast<unsigned int>(s);
    const unsigned int sign = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f) v = m ? orch_bits_double(0x7ff8000000000000ull) : orch_inf();
    else if (e == 0) v = static_cast<double>(m) * orch_pow2(-24);
    else v = static_cast<double>(m + 1024) * orch_pow2(static_cast<int>(e) - 25);
    return static_cast<typename orch_t<K>::c>(sign ? -v : v);
  }
  if (K == orch_bf16) return static_cast<typename orch_t<K>::c>(orch_bits_float(static_cast<unsigned int>(s) << 16));
  return static_cast<typename orch_t<K>::c>(s);
}
// The storage of a value of K (f16 and bf16: held exactly, so only the bits are rearranged).
template <int K> ORCH_HD typename orch_t<K>::s orch_to_storage(typename orch_t<K>::c v) {
  typedef typename orch_t<K>::s S;
  if (K == orch_f16) {
    const float f = static_cast<float>(v);
    const unsigned int x = orch_float_bits(f);
    const unsigned int sign = (x >> 16) & 0x8000u;
    if (f != f) return static_cast<S>(sign | 0x7e00u);
    const double a = static_cast<double>(f < 0 ? -f : f);
    if (a > 65504.0) return static_cast<S>(sign | 0x7c00u);
    if (a < orch_pow2(-14))  // subnormal: a multiple of 2^-24
      return static_cast<S>(sign | static_cast<unsigned int>(a * orch_pow2(24)));
    const int e = static_cast<int>((x >> 23) & 0xff) - 127;
    const unsigned int m = (x >> 13) & 0x3ff;
    return static_cast<S>(sign | (static_cast<unsigned int>(e + 15) << 10) | m);
  }
  if (K == orch_bf16) {
    const float f = static_cast<float>(v);
    if (f != f) return static_cast<S>(0x7fc0u);
    return static_cast<S>(orch_float_bits(f) >> 16);
  }
  return static_cast<S>(v);
}
template <int K> ORCH_HD orch_v<K> orch_load(const typename orch_t<K>::s* p) {
  return orch_ok<K>(orch_from_storage<K>(*p));
}

// ---- arithmetic (both operands already of the result type K) ---------------------------------

enum orch_float_op { orch_fadd, orch_fsub, orch_fmul, orch_fdiv };

// One IEEE operation rounded once to K. On the host in double and rounded to K (correct, as
// double has more than 2p+2 bits); on the device with intrinsics that are never contracted into
// an FMA, f16 and bf16 through float (correct for the same reason).
template <int K> ORCH_HD typename orch_t<K>::c orch_float_op_rn(int op, typename orch_t<K>::c a, typename orch_t<K>::c b) {
#ifdef __CUDA_ARCH__
  typedef typename orch_t<K>::c C;
  if (K == orch_f64) {
    const double x = static_cast<double>(a), y = static_cast<double>(b);
    const double r = op == orch_fadd ? __dadd_rn(x, y) : op == orch_fsub ? __dsub_rn(x, y)
                     : op == orch_fmul ? __dmul_rn(x, y) : __ddiv_rn(x, y);
    return static_cast<C>(r);
  }
  const float x = static_cast<float>(a), y = static_cast<float>(b);
  const float r = op == orch_fadd ? __fadd_rn(x, y) : op == orch_fsub ? __fsub_rn(x, y)
                  : op == orch_fmul ? __fmul_rn(x, y) : __fdiv_rn(x, y);
  if (K == orch_f32) return static_cast<C>(r);
  return orch_round_to<K>(static_cast<double>(r));
#else
  const double x = static_cast<double>(a), y = static_cast<double>(b);
  // volatile: the host compiler may not fuse this with a neighbouring operation.
  volatile double r = op == orch_fadd ? x + y : op == orch_fsub ? x - y : op == orch_fmul ? x * y : x / y;
  return orch_round_to<K>(r);
#endif
}

template <int K> ORCH_HD orch_v<K> orch_float_arith(int op, orch_v<K> a, orch_v<K> b) {
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const double x = static_cast<double>(a.v), y = static_cast<double>(b.v);
  const bool finite = orch_finite(x) && orch_finite(y);
  if (op == orch_fdiv && finite && y == 0) return orch_fail<K>(orch_div_by_zero);
  const typename orch_t<K>::c r = orch_float_op_rn<K>(op, a.v, b.v);
  if (finite && !orch_finite(static_cast<double>(r))) return orch_fail<K>(orch_overflow);
  return orch_ok<K>(r);
}

template <int K> ORCH_HD orch_v<K> orch_add(orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_float_arith<K>(orch_fadd, a, b);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const bool na = orch_negative<K>(a.v), nb = orch_negative<K>(b.v);
  const unsigned long long ma = orch_magnitude<K>(a.v), mb = orch_magnitude<K>(b.v);
  if (na == nb) {
    if (ma > ~0ull - mb) return orch_fail<K>(orch_overflow);
    return orch_int_fit<K>(na, ma + mb, orch_overflow);
  }
  return ma >= mb ? orch_int_fit<K>(na, ma - mb, orch_overflow) : orch_int_fit<K>(nb, mb - ma, orch_overflow);
}

template <int K> ORCH_HD orch_v<K> orch_neg(orch_v<K> a) {
  if (a.e) return a;
  if (orch_t<K>::is_float) return orch_ok<K>(-a.v);
  return orch_int_fit<K>(!orch_negative<K>(a.v), orch_magnitude<K>(a.v), orch_overflow);
}

template <int K> ORCH_HD orch_v<K> orch_sub(orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_float_arith<K>(orch_fsub, a, b);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  // a - b = a + (-b) over the integers, with -b as (sign, magnitude): no range limit on -b.
  const bool na = orch_negative<K>(a.v), nb = !orch_negative<K>(b.v);
  const unsigned long long ma = orch_magnitude<K>(a.v), mb = orch_magnitude<K>(b.v);
  if (mb == 0) return a;
  if (na == nb) {
    if (ma > ~0ull - mb) return orch_fail<K>(orch_overflow);
    return orch_int_fit<K>(na, ma + mb, orch_overflow);
  }
  return ma >= mb ? orch_int_fit<K>(na, ma - mb, orch_overflow) : orch_int_fit<K>(nb, mb - ma, orch_overflow);
}

template <int K> ORCH_HD orch_v<K> orch_mul(orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_float_arith<K>(orch_fmul, a, b);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const bool neg = orch_negative<K>(a.v) != orch_negative<K>(b.v);
  const unsigned long long ma = orch_magnitude<K>(a.v), mb = orch_magnitude<K>(b.v);
  if (ma != 0 && mb > ~0ull / ma) return orch_fail<K>(orch_overflow);
  return orch_int_fit<K>(neg, ma * mb, orch_overflow);
}

template <int K> ORCH_HD orch_v<K> orch_div(orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_float_arith<K>(orch_fdiv, a, b);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const unsigned long long ma = orch_magnitude<K>(a.v), mb = orch_magnitude<K>(b.v);
  if (mb == 0) return orch_fail<K>(orch_div_by_zero);
  return orch_int_fit<K>(orch_negative<K>(a.v) != orch_negative<K>(b.v), ma / mb, orch_overflow);
}

// The remainder has the sign of the dividend (C's %); MIN % -1 is 0.
template <int K> ORCH_HD orch_v<K> orch_mod(orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_fail<K>(orch_invalid);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const unsigned long long ma = orch_magnitude<K>(a.v), mb = orch_magnitude<K>(b.v);
  if (mb == 0) return orch_fail<K>(orch_div_by_zero);
  return orch_int_fit<K>(orch_negative<K>(a.v), ma % mb, orch_overflow);
}

// The ceiling of the exact quotient, for any signs.
template <int K> ORCH_HD orch_v<K> orch_ceil_div(orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_fail<K>(orch_invalid);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const unsigned long long ma = orch_magnitude<K>(a.v), mb = orch_magnitude<K>(b.v);
  if (mb == 0) return orch_fail<K>(orch_div_by_zero);
  const bool neg = orch_negative<K>(a.v) != orch_negative<K>(b.v);
  unsigned long long q = ma / mb;
  // A positive quotient with a remainder rounds up; a negative one truncates toward zero.
  if (!neg && ma % mb != 0) ++q;
  return orch_int_fit<K>(neg, q, orch_overflow);
}

template <int K> ORCH_HD orch_v<K> orch_min(orch_v<K> a, orch_v<K> b) {
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  if (orch_t<K>::is_float) {  // IEEE fmin: a NaN operand yields the other
    if (a.v != a.v) return b;
    if (b.v != b.v) return a;
  }
  return a.v < b.v ? a : b;
}
template <int K> ORCH_HD orch_v<K> orch_max(orch_v<K> a, orch_v<K> b) {
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  if (orch_t<K>::is_float) {
    if (a.v != a.v) return b;
    if (b.v != b.v) return a;
  }
  return a.v > b.v ? a : b;
}

// ---- bits ----------------------------------------------------------------------------------------

template <int K> ORCH_HD orch_v<K> orch_bitnot(orch_v<K> a) {
  if (orch_t<K>::is_float) return orch_fail<K>(orch_invalid);
  if (a.e) return a;
  return orch_ok<K>(static_cast<typename orch_t<K>::c>(~0ull - static_cast<unsigned long long>(a.v)));  // ~a
}
enum orch_bit_op { orch_band, orch_bor, orch_bxor };
// & | ^ on the two's complement bits in K.
template <int K> ORCH_HD orch_v<K> orch_bitwise(int op, orch_v<K> a, orch_v<K> b) {
  if (orch_t<K>::is_float) return orch_fail<K>(orch_invalid);
  if (a.e) return a;
  if (b.e) return orch_fail<K>(b.e);
  const unsigned long long x = static_cast<unsigned long long>(a.v), y = static_cast<unsigned long long>(b.v);
  return orch_ok<K>(static_cast<typename orch_t<K>::c>(op == orch_band ? x & y : op == orch_bor ? x | y : x ^ y));
}
template <int K> ORCH_HD orch_v<K> orch_bitand(orch_v<K> a, orch_v<K> b) { return orch_bitwise<K>(orch_band, a, b); }
template <int K> ORCH_HD orch_v<K> orch_bitor(orch_v<K> a, orch_v<K> b) { return orch_bitwise<K>(orch_bor, a, b); }
template <int K> ORCH_HD orch_v<K> orch_bitxor(orch_v<K> a, orch_v<K> b) { return orch_bitwise<K>(orch_bxor, a, b); }

// The shift count: 0 <= y < width of K, else the error code.
template <int K, int C> ORCH_HD int orch_shift_ok(orch_v<C> y) {
  if (orch_t<C>::is_float) return orch_invalid;
  if (orch_negative<C>(y.v) || orch_magnitude<C>(y.v) >= static_cast<unsigned long long>(orch_t<K>::bits))
    return orch_shift_count;
  return 0;
}
// x << y is x * 2^y, which must fit; x >> y is floor(x / 2^y).
template <int K, int C> ORCH_HD orch_v<K> orch_shift(bool left, orch_v<K> a, orch_v<C> y) {
  if (orch_t<K>::is_float) return orch_fail<K>(orch_invalid);
  if (a.e) return a;
  if (y.e) return orch_fail<K>(y.e);
  if (int e = orch_shift_ok<K, C>(y)) return orch_fail<K>(e);
  const unsigned s = static_cast<unsigned>(orch_magnitude<C>(y.v));
  const unsigned long long m = orch_magnitude<K>(a.v);
  const bool neg = orch_negative<K>(a.v);
  if (left) {
    if (m > (~0ull >> s)) return orch_fail<K>(orch_overflow);
    return orch_int_fit<K>(neg, m << s, orch_overflow);
  }
  // floor(-m / 2^s) = -ceil(m / 2^s)
  const unsigned long long q = (m >> s) + (neg && (m & ((1ull << s) - 1)) != 0 ? 1 : 0);
  return orch_int_fit<K>(neg, q, orch_overflow);
}
template <int K, int C> ORCH_HD orch_v<K> orch_shl(orch_v<K> a, orch_v<C> y) { return orch_shift<K, C>(true, a, y); }
template <int K, int C> ORCH_HD orch_v<K> orch_shr(orch_v<K> a, orch_v<C> y) { return orch_shift<K, C>(false, a, y); }

// ---- comparisons and logic --------------------------------------------------------------------

// -1, 0 or 1, or 2 when unordered (a NaN). Integers compare exactly; an integer against a float
// is first rounded to that float type; floats compare exactly.
template <int A, int B> ORCH_HD int orch_compare(typename orch_t<A>::c a, typename orch_t<B>::c b) {
  if (orch_t<A>::is_float || orch_t<B>::is_float) {
    double x, y;
    if (orch_t<A>::is_float) x = static_cast<double>(a);
    else x = static_cast<double>(orch_int_to_float<B>(orch_negative<A>(a), orch_magnitude<A>(a)));
    if (orch_t<B>::is_float) y = static_cast<double>(b);
    else y = static_cast<double>(orch_int_to_float<A>(orch_negative<B>(b), orch_magnitude<B>(b)));
    if (x != x || y != y) return 2;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const bool na = orch_negative<A>(a), nb = orch_negative<B>(b);
  const unsigned long long ma = orch_magnitude<A>(a), mb = orch_magnitude<B>(b);
  if (na != nb) return (ma == 0 && mb == 0) ? 0 : na ? -1 : 1;
  const int c = ma < mb ? -1 : ma > mb ? 1 : 0;
  return na ? -c : c;
}

enum orch_cmp_op { orch_lt, orch_le, orch_gt, orch_ge, orch_eq, orch_ne };

template <int A, int B> ORCH_HD orch_v<orch_bool> orch_cmp(int op, orch_v<A> a, orch_v<B> b) {
  if (a.e) return orch_fail<orch_bool>(a.e);
  if (b.e) return orch_fail<orch_bool>(b.e);
  const int c = orch_compare<A, B>(a.v, b.v);
  bool r;
  switch (op) {
    case orch_lt: r = c == -1; break;
    case orch_le: r = c == -1 || c == 0; break;
    case orch_gt: r = c == 1; break;
    case orch_ge: r = c == 1 || c == 0; break;
    case orch_eq: r = c == 0; break;
    default: r = c != 0; break;  // NaN != anything
  }
  return orch_ok<orch_bool>(r);
}

// && and || decide on the left operand first: an error in the right one is hidden when the left
// one decides.
template <int A, int B> ORCH_HD orch_v<orch_bool> orch_and(orch_v<A> a, orch_v<B> b) {
  if (a.e) return orch_fail<orch_bool>(a.e);
  if (a.v == 0) return orch_ok<orch_bool>(false);
  return orch_truth<B>(b);
}
template <int A, int B> ORCH_HD orch_v<orch_bool> orch_or(orch_v<A> a, orch_v<B> b) {
  if (a.e) return orch_fail<orch_bool>(a.e);
  if (a.v != 0) return orch_ok<orch_bool>(true);
  return orch_truth<B>(b);
}
template <int K> ORCH_HD orch_v<orch_bool> orch_not(orch_v<K> a) {
  if (a.e) return orch_fail<orch_bool>(a.e);
  return orch_ok<orch_bool>(a.v == 0);
}

// ---- the device hook ------------------------------------------------------------------------------

#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && !defined(orch_expr_error)
// Generated kernels call this with the error code of an expression they could not evaluate
// (after leaving the handle false or the scalar unchanged). A no-op unless the code that
// includes this defines `orch_expr_error` first (a macro that records the code in the
// executable's device status record).
__device__ inline void orch_expr_error(int code) { (void)code; }
#endif

#endif  // ORCH_EXPR_OPS_H
