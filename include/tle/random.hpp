// tle/random.hpp - in-kernel counter-based random numbers: Philox4x32-10 (J. K. Salmon, M. A. Moraes,
// R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11; the Random123
// library), with the seed/offset mapping and the conversions of Triton's triton.language.random
// (tl.randint, tl.randint4x, tl.rand, tl.randn), so that a kernel given the same seed and offsets
// draws the same bits as a Triton kernel.
//
// Everything here is ordinary tile code (no op of its own): 32x32->64-bit products for the
// multiply-high, xors, adds, shifts, casts. So the bits of philox/randint4x/randint/rand are the
// same on the CPU, the interpreter and the GPU (integer arithmetic and one int->f32 conversion,
// round to nearest even, then an exact product). randn adds log, sqrt, cos, sin in f32, whose last
// bits follow each backend's math library (docs/semantics.md, "What backends may differ in").
//
//   auto k = jit("dropout", [](Ptr<float> x, Ptr<float> out, Tile<int64_t> seed, Tile<int32_t> n,
//                              Constexpr<float> p, Constexpr<int> BLOCK) {
//     Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
//     Tile<bool> keep = rand(seed, offs) > p;
//     store(out + offs, where(keep, load(x + offs, offs < n) / (1 - p), 0.0f), offs < n);
//   });
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "tle/tile.hpp"

namespace tle {

namespace detail {
/// Philox4x32 multipliers and Weyl key increments (Salmon et al., section 4.2; Random123).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

/// The high 32 bits of the 64-bit product m * x (PTX mul.hi.u32 after LLVM's instruction selection).
inline Tile<uint32_t> mulhi(uint32_t m, const Tile<uint32_t>& x, loc_t l) {
  return cast<uint32_t>((cast<uint64_t>(x, l) * uint64_t(m)) >> 32, l);
}

/// The seed as Triton takes it: converted to u64 (signed seeds sign-extend), key = (low, high)
/// 32-bit halves. UserError unless the seed is a scalar.
template <IntElem S> std::pair<Tile<uint32_t>, Tile<uint32_t>> philox_key(const Tile<S>& seed, loc_t l) {
  require_value(seed.value(), l);
  if (seed.rank(l) != 0)
    throw UserError(l, "philox/rand: the seed must be a scalar (a Tile<integer> argument or a C++ integer); got "
                       "a tile of rank " +
                           std::to_string(seed.rank(l)));
  Tile<uint64_t> s = cast<uint64_t>(seed, l);
  return {cast<uint32_t>(s & uint64_t(0xFFFFFFFFu), l), cast<uint32_t>(s >> 32, l)};
}

/// The offsets as Philox counter word 0: a 32-bit integer tile, its bits as u32. UserError for
/// another width (Triton's randint with 64-bit offsets runs Philox4x64, which tle does not have).
template <IntElem T> Tile<uint32_t> philox_counter(const Tile<T>& offsets, loc_t l) {
  require_value(offsets.value(), l);
  if constexpr (sizeof(T) != 4) {
    throw UserError(l, "philox/rand: offsets must be an int32_t or uint32_t tile (Philox4x32 counters); cast "
                       "them to int32_t");
  } else {
    return bitcast<uint32_t>(offsets, l);
  }
}

/// Triton's uint32_to_uniform_float: the bits as i32 x, x < 0 -> -x - 1 (so 0 <= x < 2^31), then
/// f32(x) * 2^-31 (4.656613e-10f is exactly 2^-31).
inline Tile<float> uniform_from_bits(const Tile<uint32_t>& bits, loc_t l) {
  Tile<int32_t> x = bitcast<int32_t>(bits, l);
  x = where(x < 0, -x - 1, x, l);
  return cast<float>(x, l) * 4.656613e-10f;
}

/// The first value of Triton's pair_uniform_to_normal (Box-Muller): u1 = max(u1, 1e-7),
/// sqrt(-2 log u1) * cos(6.283185307179586 u2).
inline Tile<float> box_muller(const Tile<float>& u1, const Tile<float>& u2, loc_t l) {
  Tile<float> r = sqrt(-2.0f * log(maximum(u1, 1.0e-7f, l), l), l);
  return r * cos(6.283185307179586f * u2, l);
}
}  // namespace detail

/// Philox4x32-10 of the counters (c0, c1, c2, c3) under the key (low, high 32 bits of `seed`), as
/// Random123's philox4x32(ctr, key) with 10 rounds and Triton's tl.philox: each round
/// (c0, c1, c2, c3) <- (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)), then the
/// key grows by (W0, W1). seed: a scalar integer tile of any width (signed seeds sign-extend to
/// 64 bits, as Triton's seed.to(uint64)); c0..c3: u32 tiles (broadcast to one shape). Returns four
/// u32 tiles of that shape. UserError (at the call) for a non-scalar seed or shapes that do not
/// broadcast.
template <detail::IntElem S>
std::tuple<Tile<uint32_t>, Tile<uint32_t>, Tile<uint32_t>, Tile<uint32_t>>
philox(const Tile<S>& seed, Tile<uint32_t> c0, Tile<uint32_t> c1, Tile<uint32_t> c2, Tile<uint32_t> c3,
       loc_t l = loc_t::current()) {
  auto [k0, k1] = detail::philox_key(seed, l);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 = k0 + detail::kPhiloxW0;
      k1 = k1 + detail::kPhiloxW1;
    }
    Tile<uint32_t> hi0 = detail::mulhi(detail::kPhiloxM0, c0, l), lo0 = c0 * detail::kPhiloxM0;
    Tile<uint32_t> hi1 = detail::mulhi(detail::kPhiloxM1, c2, l), lo1 = c2 * detail::kPhiloxM1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return {c0, c1, c2, c3};
}

/// Four tiles of random u32 bits for each offset: philox(seed, offsets, 0, 0, 0), Triton's
/// tl.randint4x. seed: a scalar integer tile (i32, i64, u64, ...); offsets: an int32_t or uint32_t
/// tile (its bits are the counter). The same (seed, offset) always gives the same bits; distinct
/// offsets give independent streams. UserError for a non-scalar seed or 64-bit offsets.
template <detail::IntElem S, detail::IntElem T>
std::tuple<Tile<uint32_t>, Tile<uint32_t>, Tile<uint32_t>, Tile<uint32_t>>
randint4x(const Tile<S>& seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  Tile<uint32_t> c0 = detail::philox_counter(offsets, l);
  Tile<uint32_t> z = c0 * 0u;
  return philox(seed, c0, z, z, z, l);
}
/// The first of randint4x's tiles (Triton's tl.randint): random u32 bits, offsets' shape.
template <detail::IntElem S, detail::IntElem T>
Tile<uint32_t> randint(const Tile<S>& seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  return std::get<0>(randint4x(seed, offsets, l));
}
/// Uniform f32 values (Triton's tl.rand): randint's bits x as i32, x < 0 -> -x - 1, then
/// f32(x) * 2^-31. In [0, 1]: 1.0 exactly when f32(x) rounds up to 2^31 (x >= 2^31 - 64, probability
/// 2^-25), as in Triton; every other value is in [0, 1).
template <detail::IntElem S, detail::IntElem T>
Tile<float> rand(const Tile<S>& seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  return detail::uniform_from_bits(randint(seed, offsets, l), l);
}
/// Standard normal f32 values (Triton's tl.randn): the Box-Muller transform of the uniform values
/// u1, u2 of randint4x's first two tiles, r cos(2 pi u2) with r = sqrt(-2 log max(u1, 1e-7)), so
/// |value| <= 5.68. The last bits follow the backend's f32 log, sqrt and cos (a few ulp).
template <detail::IntElem S, detail::IntElem T>
Tile<float> randn(const Tile<S>& seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  auto [i1, i2, i3, i4] = randint4x(seed, offsets, l);  // i3, i4 unused (removed by DCE)
  return detail::box_muller(detail::uniform_from_bits(i1, l), detail::uniform_from_bits(i2, l), l);
}

// A C++ integer seed (a trace-time constant): as the scalar tile of its value.
template <std::integral S, detail::IntElem T>
  requires(!std::is_same_v<S, bool>)
std::tuple<Tile<uint32_t>, Tile<uint32_t>, Tile<uint32_t>, Tile<uint32_t>>
randint4x(S seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  return randint4x(Tile<S>(seed, l), offsets, l);
}
template <std::integral S, detail::IntElem T>
  requires(!std::is_same_v<S, bool>)
Tile<uint32_t> randint(S seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  return randint(Tile<S>(seed, l), offsets, l);
}
template <std::integral S, detail::IntElem T>
  requires(!std::is_same_v<S, bool>)
Tile<float> rand(S seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  return rand(Tile<S>(seed, l), offsets, l);
}
template <std::integral S, detail::IntElem T>
  requires(!std::is_same_v<S, bool>)
Tile<float> randn(S seed, const Tile<T>& offsets, loc_t l = loc_t::current()) {
  return randn(Tile<S>(seed, l), offsets, l);
}

}  // namespace tle
