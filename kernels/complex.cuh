// gett::complex<T>: a minimal complex number for generated kernels (NVRTC has no <complex>).
// Layout matches numpy complex64/complex128 (re, im), aligned to its full size for vector loads.
#pragma once

namespace gett {

template <class T>
struct alignas(2 * sizeof(T)) complex {
    T re, im;

    complex() = default;  // trivial, so complex<T> may live in __shared__ arrays
    __host__ __device__ constexpr complex(T r, T i = T(0)) : re(r), im(i) {}

    __host__ __device__ complex& operator+=(complex b) { re += b.re; im += b.im; return *this; }
    __host__ __device__ complex& operator-=(complex b) { re -= b.re; im -= b.im; return *this; }
    __host__ __device__ complex& operator*=(complex b) { return *this = *this * b; }
    __host__ __device__ complex& operator/=(complex b) { return *this = *this / b; }
};

template <class T> __host__ __device__ inline complex<T> operator+(complex<T> a) { return a; }
template <class T> __host__ __device__ inline complex<T> operator-(complex<T> a) { return {-a.re, -a.im}; }

template <class T> __host__ __device__ inline complex<T> operator+(complex<T> a, complex<T> b) {
    return {a.re + b.re, a.im + b.im};
}
template <class T> __host__ __device__ inline complex<T> operator-(complex<T> a, complex<T> b) {
    return {a.re - b.re, a.im - b.im};
}
template <class T> __host__ __device__ inline complex<T> operator*(complex<T> a, complex<T> b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
// Smith's algorithm, as numpy does it: no overflow in |b|^2, inf/nan for a zero divisor.
template <class T> __host__ __device__ inline complex<T> operator/(complex<T> a, complex<T> b) {
    T abs_re = b.re < T(0) ? -b.re : b.re;
    T abs_im = b.im < T(0) ? -b.im : b.im;
    if (abs_re >= abs_im) {
        if (abs_re == T(0) && abs_im == T(0)) return {a.re / abs_re, a.im / abs_re};
        T rat = b.im / b.re, scl = T(1) / (b.re + b.im * rat);
        return {(a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl};
    }
    T rat = b.re / b.im, scl = T(1) / (b.im + b.re * rat);
    return {(a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl};
}

template <class T> __host__ __device__ inline complex<T> operator+(complex<T> a, T b) { return {a.re + b, a.im}; }
template <class T> __host__ __device__ inline complex<T> operator+(T a, complex<T> b) { return {a + b.re, b.im}; }
template <class T> __host__ __device__ inline complex<T> operator-(complex<T> a, T b) { return {a.re - b, a.im}; }
template <class T> __host__ __device__ inline complex<T> operator-(T a, complex<T> b) { return {a - b.re, -b.im}; }
template <class T> __host__ __device__ inline complex<T> operator*(complex<T> a, T b) { return {a.re * b, a.im * b}; }
template <class T> __host__ __device__ inline complex<T> operator*(T a, complex<T> b) { return {a * b.re, a * b.im}; }
template <class T> __host__ __device__ inline complex<T> operator/(complex<T> a, T b) { return {a.re / b, a.im / b}; }
template <class T> __host__ __device__ inline complex<T> operator/(T a, complex<T> b) { return complex<T>(a) / b; }

template <class T> __host__ __device__ inline bool operator==(complex<T> a, complex<T> b) {
    return a.re == b.re && a.im == b.im;
}
template <class T> __host__ __device__ inline bool operator!=(complex<T> a, complex<T> b) { return !(a == b); }

template <class T> __host__ __device__ inline complex<T> conj(complex<T> a) { return {a.re, -a.im}; }
template <class T> __host__ __device__ inline T real(complex<T> a) { return a.re; }
template <class T> __host__ __device__ inline T imag(complex<T> a) { return a.im; }
// hypot avoids overflow of re*re + im*im; device-only because NVRTC's hypot is a device builtin.
__device__ inline float abs(complex<float> a) { return ::hypotf(a.re, a.im); }
__device__ inline double abs(complex<double> a) { return ::hypot(a.re, a.im); }

}  // namespace gett
