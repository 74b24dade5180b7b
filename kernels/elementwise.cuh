// gett::fn: the functions that translated Python lambdas call (see gett/expr.py).
// One overload per compute type (float, double, int, long long, gett::complex<float|double>)
// so rendered code is type-generic; float overloads call the f32 builtins only (no f64 in f32 code).
// Semantics follow numpy/Python: NaN-propagating maximum/minimum, Python floor division and modulo.
#pragma once

#include "complex.cuh"

namespace gett {
namespace fn {

// ---- transcendental and rounding functions: float and double ---------------------------------
#define GETT_FN_UNARY(name, f32, f64)                                         \
    __device__ __forceinline__ float name(float x) { return ::f32(x); }     \
    __device__ __forceinline__ double name(double x) { return ::f64(x); }
GETT_FN_UNARY(exp, expf, exp)
GETT_FN_UNARY(expm1, expm1f, expm1)
GETT_FN_UNARY(log, logf, log)
GETT_FN_UNARY(log1p, log1pf, log1p)
GETT_FN_UNARY(sqrt, sqrtf, sqrt)
GETT_FN_UNARY(sin, sinf, sin)
GETT_FN_UNARY(cos, cosf, cos)
GETT_FN_UNARY(tan, tanf, tan)
GETT_FN_UNARY(tanh, tanhf, tanh)
GETT_FN_UNARY(sinh, sinhf, sinh)
GETT_FN_UNARY(cosh, coshf, cosh)
GETT_FN_UNARY(erf, erff, erf)
GETT_FN_UNARY(floor, floorf, floor)
GETT_FN_UNARY(ceil, ceilf, ceil)
#undef GETT_FN_UNARY

__device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }

template <class T> __device__ __forceinline__ T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }

// ---- abs ---------------------------------------------------------------------------------------
__device__ __forceinline__ float abs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double abs(double x) { return ::fabs(x); }
__device__ __forceinline__ int abs(int x) { return x < 0 ? -x : x; }
__device__ __forceinline__ long long abs(long long x) { return x < 0 ? -x : x; }
template <class T> __device__ __forceinline__ T abs(complex<T> z) { return gett::abs(z); }

// ---- isnan -------------------------------------------------------------------------------------
__device__ __forceinline__ bool isnan(float x) { return x != x; }
__device__ __forceinline__ bool isnan(double x) { return x != x; }
__device__ __forceinline__ bool isnan(int) { return false; }
__device__ __forceinline__ bool isnan(long long) { return false; }
template <class T> __device__ __forceinline__ bool isnan(complex<T> z) { return z.re != z.re || z.im != z.im; }

// ---- selection, comparison-based functions (any real type) ------------------------------------
template <class T> __device__ __forceinline__ T where(bool c, T a, T b) { return c ? a : b; }
// numpy.maximum/minimum: NaN in either argument propagates (the first one if both are NaN).
template <class T> __device__ __forceinline__ T maximum(T a, T b) { return (a >= b || a != a) ? a : b; }
template <class T> __device__ __forceinline__ T minimum(T a, T b) { return (a <= b || a != a) ? a : b; }
// Python builtins max/min: keep the first argument unless the second compares greater/less.
template <class T> __device__ __forceinline__ T py_max(T a, T b) { return b > a ? b : a; }
template <class T> __device__ __forceinline__ T py_min(T a, T b) { return b < a ? b : a; }
template <class T> __device__ __forceinline__ T clip(T x, T lo, T hi) { return minimum(maximum(x, lo), hi); }
// numpy.sign: -1, 0 or 1; NaN stays NaN.
template <class T> __device__ __forceinline__ T sign(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x); }

// ---- complex parts (real types: x, x, 0) -------------------------------------------------------
template <class T> __device__ __forceinline__ T conj(T x) { return x; }
template <class T> __device__ __forceinline__ T real(T x) { return x; }
template <class T> __device__ __forceinline__ T imag(T) { return T(0); }
template <class T> __device__ __forceinline__ complex<T> conj(complex<T> z) { return gett::conj(z); }
template <class T> __device__ __forceinline__ T real(complex<T> z) { return z.re; }
template <class T> __device__ __forceinline__ T imag(complex<T> z) { return z.im; }

// ---- complex exp, log, sqrt --------------------------------------------------------------------
template <class T> __device__ __forceinline__ complex<T> exp(complex<T> z) {
    if (z.im == T(0)) return {exp(z.re), z.im};  // exact for real arguments, incl. exp(inf) = inf
    T m = exp(z.re);
    return {m * cos(z.im), m * sin(z.im)};
}
__device__ __forceinline__ float arg(complex<float> z) { return ::atan2f(z.im, z.re); }
__device__ __forceinline__ double arg(complex<double> z) { return ::atan2(z.im, z.re); }
template <class T> __device__ __forceinline__ complex<T> log(complex<T> z) { return {log(gett::abs(z)), arg(z)}; }
__device__ __forceinline__ float copysign(float x, float y) { return ::copysignf(x, y); }
__device__ __forceinline__ double copysign(double x, double y) { return ::copysign(x, y); }
// Principal root, branch cut along the negative real axis (sign of im kept, as in C99 csqrt).
template <class T> __device__ __forceinline__ complex<T> sqrt(complex<T> z) {
    if (::isinf(z.im)) return {abs(z.im), z.im};  // x ± i inf, even for x NaN (C99 csqrt)
    T r = gett::abs(z);
    if (r == T(0)) return {T(0), z.im};
    T t = sqrt((r + abs(z.re)) * T(0.5));
    if (z.re >= T(0)) return {t, z.im / (T(2) * t)};
    return {abs(z.im) / (T(2) * t), copysign(t, z.im)};
}

// ---- integer powers ----------------------------------------------------------------------------
// x**n for small literal n, as multiplications (evaluated once, unlike a textual x*x*x).
template <class T> __device__ __forceinline__ T square(T x) { return x * x; }
template <class T> __device__ __forceinline__ T cube(T x) { return x * x * x; }
template <class T> __device__ __forceinline__ T pow4(T x) { T s = x * x; return s * s; }
template <class T> __device__ __forceinline__ T recip(T x) { return T(1) / x; }

namespace detail {
// Integer x**n; n < 0 truncates 1/x**|n| toward zero (0 for x == 0). U is the unsigned type, so
// overflow wraps like numpy instead of being undefined.
template <class T, class U> __device__ __forceinline__ T ipow(T x, T n) {
    if (n < 0) return x == 1 ? T(1) : (x == -1 ? ((n & 1) ? T(-1) : T(1)) : T(0));
    U r = 1, b = static_cast<U>(x);
    for (; n != 0; n >>= 1, b *= b)
        if (n & 1) r *= b;
    return static_cast<T>(r);
}
}  // namespace detail
__device__ __forceinline__ int pow(int x, int n) { return detail::ipow<int, unsigned>(x, n); }
__device__ __forceinline__ long long pow(long long x, long long n) {
    return detail::ipow<long long, unsigned long long>(x, n);
}
__device__ __forceinline__ int recip(int x) { return pow(x, -1); }
__device__ __forceinline__ long long recip(long long x) { return pow(x, -1LL); }

// ---- Python floor division and modulo (numpy's npy_divmod for floats) ---------------------------
__device__ __forceinline__ float fmod(float x, float y) { return ::fmodf(x, y); }
__device__ __forceinline__ double fmod(double x, double y) { return ::fmod(x, y); }

namespace detail {
template <class T> __device__ __forceinline__ T float_floordiv(T a, T b) {
    if (b == T(0)) return a / b;
    T m = fmod(a, b);
    T d = (a - m) / b;
    if (m != T(0) && ((b < T(0)) != (m < T(0)))) d -= T(1);
    if (d == T(0)) return copysign(T(0), a / b);
    T f = floor(d);
    return d - f > T(0.5) ? f + T(1) : f;  // snap: a - m is very nearly a multiple of b
}
template <class T> __device__ __forceinline__ T float_mod(T a, T b) {
    T m = fmod(a, b);
    if (b == T(0)) return m;
    if (m == T(0)) return copysign(T(0), b);
    return ((b < T(0)) != (m < T(0))) ? m + b : m;
}
// Division by zero gives 0 and MIN // -1 gives MIN, as in numpy.
template <class T> __device__ __forceinline__ T int_floordiv(T a, T b) {
    if (b == 0) return T(0);
    if (b == -1) return -a;
    T q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <class T> __device__ __forceinline__ T int_mod(T a, T b) {
    if (b == 0 || b == -1) return T(0);
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
}  // namespace detail

__device__ __forceinline__ float floordiv(float a, float b) { return detail::float_floordiv(a, b); }
__device__ __forceinline__ double floordiv(double a, double b) { return detail::float_floordiv(a, b); }
__device__ __forceinline__ int floordiv(int a, int b) { return detail::int_floordiv(a, b); }
__device__ __forceinline__ long long floordiv(long long a, long long b) { return detail::int_floordiv(a, b); }
__device__ __forceinline__ float mod(float a, float b) { return detail::float_mod(a, b); }
__device__ __forceinline__ double mod(double a, double b) { return detail::float_mod(a, b); }
__device__ __forceinline__ int mod(int a, int b) { return detail::int_mod(a, b); }
__device__ __forceinline__ long long mod(long long a, long long b) { return detail::int_mod(a, b); }

}  // namespace fn
}  // namespace gett
