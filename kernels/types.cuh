// Element types, vectors of them, and conversions between storage and compute types.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "complex.cuh"

namespace gett {

// V elements moved as one aligned access (V * sizeof(T) is 2, 4, 8 or 16 bytes).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class To>
struct Convert {
  template <class From>
  __device__ __forceinline__ static To from(From x) { return static_cast<To>(x); }
  __device__ __forceinline__ static To from(__half x) { return static_cast<To>(__half2float(x)); }
  __device__ __forceinline__ static To from(__nv_bfloat16 x) { return static_cast<To>(__bfloat162float(x)); }
};

template <>
struct Convert<__half> {
  __device__ __forceinline__ static __half from(__half x) { return x; }
  template <class From>
  __device__ __forceinline__ static __half from(From x) { return __float2half_rn(static_cast<float>(x)); }
};

template <>
struct Convert<__nv_bfloat16> {
  __device__ __forceinline__ static __nv_bfloat16 from(__nv_bfloat16 x) { return x; }
  template <class From>
  __device__ __forceinline__ static __nv_bfloat16 from(From x) { return __float2bfloat16_rn(static_cast<float>(x)); }
};

template <class T>
struct Convert<complex<T>> {
  __device__ __forceinline__ static complex<T> from(complex<T> x) { return x; }
};

template <class To, class From>
__device__ __forceinline__ To convert(From x) { return Convert<To>::from(x); }

template <class T>
__device__ __forceinline__ T zero() { return convert<T>(0.0f); }
template <> __device__ __forceinline__ complex<float> zero<complex<float>>() { return complex<float>{0.f, 0.f}; }
template <> __device__ __forceinline__ complex<double> zero<complex<double>>() { return complex<double>{0.0, 0.0}; }
template <> __device__ __forceinline__ int zero<int>() { return 0; }
template <> __device__ __forceinline__ long long zero<long long>() { return 0; }

// The elementwise op that does nothing; apply_op passes values through untouched.
struct Identity {
  static constexpr bool is_identity = true;
  template <class T>
  __device__ __forceinline__ T operator()(T x) const { return x; }
};

template <class A, class B> struct SameType { static constexpr bool value = false; };
template <class A> struct SameType<A, A> { static constexpr bool value = true; };
// Type selection without <type_traits> (NVRTC compiles without the standard library).
template <bool C, class A, class B> struct Select { using type = A; };
template <class A, class B> struct Select<false, A, B> { using type = B; };
template <bool C, class A, class B> using Conditional = typename Select<C, A, B>::type;

// Op applied to each element of a vector in the compute type Acc and rounded back to T; zeros instead
// where !keep (out-of-range elements, since op(0) need not be 0). 16-bit floats computed in float
// convert a pair at a time (same rounding, half the instructions), and !keep clears whole words.
template <class Acc, class Op, class T, int V>
__device__ __forceinline__ Vec<T, V> apply_op(const Vec<T, V>& x, bool keep) {
  Vec<T, V> out;
  constexpr bool kHalfPairs = SameType<T, __half>::value && SameType<Acc, float>::value && V % 2 == 0;
  constexpr bool kBf16Pairs = SameType<T, __nv_bfloat16>::value && SameType<Acc, float>::value && V % 2 == 0;
  if constexpr (Op::is_identity) {
    out = x;
  } else if constexpr (kHalfPairs || kBf16Pairs) {
#pragma unroll
    for (int e = 0; e < V; e += 2) {
      if constexpr (kHalfPairs) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&x.v[e]));
        *reinterpret_cast<__half2*>(&out.v[e]) = __floats2half2_rn(Op{}(f.x), Op{}(f.y));
      } else {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x.v[e]));
        *reinterpret_cast<__nv_bfloat162*>(&out.v[e]) = __floats2bfloat162_rn(Op{}(f.x), Op{}(f.y));
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) out.v[e] = convert<T>(Op{}(convert<Acc>(x.v[e])));
  }
  if constexpr (sizeof(out) % 4 == 0) {
    unsigned* w = reinterpret_cast<unsigned*>(&out);
#pragma unroll
    for (int i = 0; i < int(sizeof(out) / 4); ++i) w[i] = keep ? w[i] : 0u;   // 0 bits are 0 in every type
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) out.v[e] = keep ? out.v[e] : zero<T>();
  }
  return out;
}

// Ordinary (+, ×): zero-filled padding contributes nothing, so no masking along K is needed.
struct PlusTimes {
  static constexpr bool mask_k = false;
  template <class T> __device__ __forceinline__ static T identity() { return zero<T>(); }
  template <class T> __device__ __forceinline__ static T mul(T a, T b) { return a * b; }
  template <class T> __device__ __forceinline__ static T add(T acc, T p) { return acc + p; }
};

}  // namespace gett
