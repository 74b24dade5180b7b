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

// The elementwise op that does nothing; the loaders skip it entirely.
struct Identity {
  static constexpr bool is_identity = true;
  template <class T>
  __device__ __forceinline__ T operator()(T x) const { return x; }
};

// Ordinary (+, ×): zero-filled padding contributes nothing, so no masking along K is needed.
struct PlusTimes {
  static constexpr bool mask_k = false;
  template <class T> __device__ __forceinline__ static T identity() { return zero<T>(); }
  template <class T> __device__ __forceinline__ static T mul(T a, T b) { return a * b; }
  template <class T> __device__ __forceinline__ static T add(T acc, T p) { return acc + p; }
};

}  // namespace gett
