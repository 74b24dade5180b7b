// Index tables as types: the offset of a linear GEMM index in one tensor (see gett/layout.py).
// A Table lists a group's modes innermost first; each Mode carries its extent, divisor and the
// tensor's stride. Everything is a compile-time constant, so the divisions and modulos become
// multiply-shifts and modes with stride 0 cost nothing.
#pragma once

namespace gett {

template <long long Extent, long long Divisor, long long Stride>
struct Mode {};

template <class Offset, class... Modes>
struct Table;

template <class Offset>
struct Table<Offset> {
  template <class Index>
  __device__ __forceinline__ static Offset offset(Index) { return Offset(0); }
};

template <class Offset, long long E, long long D, long long S, class... Rest>
struct Table<Offset, Mode<E, D, S>, Rest...> {
  template <class Index>
  __device__ __forceinline__ static Offset offset(Index i) {
    Offset o = Offset(0);
    if constexpr (S != 0) {
      Index q = (D == 1) ? i : Index(i / Index(D));
      // The outermost mode needs no modulo: valid indices are below the group's size.
      if constexpr (sizeof...(Rest) > 0) q = q % Index(E);
      o = Offset(q) * Offset(S);
    }
    return o + Table<Offset, Rest...>::offset(i);
  }
};

}  // namespace gett
