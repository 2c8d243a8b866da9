// tle/dtype.hpp - element types of tiles, host storage types for f16/bf16/fp8, and the promotion rule.
//
// Every tile has an element type (DType) fixed in its C++ type: Tile<float> is an f32 tile,
// Tile<tle::bf16> a bf16 tile, Ptr<float> a tile of pointers to f32. The promotion rule below is
// the single source of truth for mixed-type arithmetic; docs/semantics.md states it in prose.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace tle {

/// Element types. `ptr` is a pointer to global memory; its pointee is carried separately.
/// `f8e4m3` and `f8e5m2` are the OCP 8-bit floating-point formats (OCP "8-bit Floating Point
/// Specification (OFP8)" rev. 1.0; PTX's .e4m3 / .e5m2, PyTorch's float8_e4m3fn / float8_e5m2):
/// storage types, see is_fp8.
enum class DType : uint8_t { i1, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, ptr, f8e4m3, f8e5m2 };

/// Short name used by the IR printer and in error messages ("f32", "ptr", ...).
std::string_view dtype_name(DType t) noexcept;

/// The fp8 formats: E4M3 (bias 7, no infinities, NaN = S.1111.111, max finite 448) and E5M2 (bias 15,
/// IEEE-like: infinities S.11111.00, NaNs S.11111.xx, max finite 57344). Storage types, as in
/// Triton: loads, stores, casts, where/select and shape ops take them; arithmetic, comparisons,
/// reductions, scans, sorts and atomics on them are a UserError asking for a cast to f16, bf16 or
/// f32 first (docs/semantics.md, "fp8"); `dot` of two tiles of one fp8 format gives f32. Conversions: to any float exact; from floats and integers
/// rounded to nearest even once, saturating (|x| beyond the max finite value, infinities included,
/// gives +-max), NaN gives the NaN with the input's sign (S.1111.111 / S.11111.11).
constexpr bool is_fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }
constexpr bool is_float(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64 || is_fp8(t);
}
constexpr bool is_int(DType t) { return t >= DType::i1 && t <= DType::u64; }
constexpr bool is_signed_int(DType t) { return t >= DType::i8 && t <= DType::i64; }
constexpr bool is_unsigned_int(DType t) { return t >= DType::u8 && t <= DType::u64; }
/// Width in bits (i1 counts as 1, ptr as 64).
constexpr int bit_width(DType t) {
  switch (t) {
    case DType::i1: return 1;
    case DType::i8: case DType::u8: case DType::f8e4m3: case DType::f8e5m2: return 8;
    case DType::i16: case DType::u16: case DType::f16: case DType::bf16: return 16;
    case DType::i32: case DType::u32: case DType::f32: return 32;
    default: return 64;
  }
}
/// Size in bytes in memory (i1 is stored as one byte).
constexpr int byte_size(DType t) { return t == DType::i1 ? 1 : bit_width(t) / 8; }

/// Promotion rule for binary arithmetic on two tiles (numpy/Triton-like, no promotion to int):
///  1. equal types stay;  2. i1 with X gives X;  3. float with integer gives the float;
///  4. two floats give the wider; f16 with bf16 gives f32 (tile operators on such a pair do not
///     compile: neither side promotes into the other, so cast one side explicitly); the two fp8
///     formats together give f16 (Triton's rule; such operators do not compile either), an fp8
///     with a wider float gives that float (exact: f16, bf16 and f32 hold every fp8 value);
///  5. two integers of one signedness give the wider;
///  6. signed with unsigned: the unsigned if it is at least as wide, else the signed (C++ rule).
/// C++ scalars (literals) are weak: they take the tile's type (see Tile operators).
constexpr DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::i1) return b;
  if (b == DType::i1) return a;
  if (is_float(a) && !is_float(b)) return a;
  if (is_float(b) && !is_float(a)) return b;
  if (is_float(a)) {
    if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
    if (is_fp8(a) && is_fp8(b)) return DType::f16;
    return bit_width(a) >= bit_width(b) ? a : b;
  }
  if (is_signed_int(a) == is_signed_int(b)) return bit_width(a) >= bit_width(b) ? a : b;
  DType s = is_signed_int(a) ? a : b, u = is_signed_int(a) ? b : a;
  return bit_width(u) >= bit_width(s) ? u : s;
}

/// IEEE binary16 storage type for host data and kernel arguments. Conversions round to nearest
/// even exactly once (from double or float), per IEEE 754-2008 section 4.3.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  f16(double v);  // round once from double
  f16(float v) : f16(static_cast<double>(v)) {}
  f16(int v) : f16(static_cast<double>(v)) {}
  operator float() const;
  static f16 from_bits(uint16_t b) { f16 h; h.bits = b; return h; }
};
/// bfloat16 storage type (top 16 bits of an f32), round to nearest even once from double or float.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  bf16(double v);
  bf16(float v) : bf16(static_cast<double>(v)) {}
  bf16(int v) : bf16(static_cast<double>(v)) {}
  operator float() const;
  static bf16 from_bits(uint16_t b) { bf16 h; h.bits = b; return h; }
};

/// OCP FP8 E4M3 storage type (DType::f8e4m3) for host data and kernel arguments. From double or
/// float: round to nearest even once, saturating to +-448 (infinities included), NaN -> S.1111.111.
/// To float: exact (the NaN becomes a quiet f32 NaN with its sign).
struct f8e4m3 {
  uint8_t bits = 0;
  f8e4m3() = default;
  f8e4m3(double v);
  f8e4m3(float v) : f8e4m3(static_cast<double>(v)) {}
  f8e4m3(int v) : f8e4m3(static_cast<double>(v)) {}
  operator float() const;
  static f8e4m3 from_bits(uint8_t b) { f8e4m3 h; h.bits = b; return h; }
};
/// OCP FP8 E5M2 storage type (DType::f8e5m2): as f8e4m3, saturating to +-57344 (an infinity input
/// too: the conversion is PTX's .satfinite), NaN -> S.11111.11; the codes 0x7C / 0xFC (infinities)
/// convert to +-inf.
struct f8e5m2 {
  uint8_t bits = 0;
  f8e5m2() = default;
  f8e5m2(double v);
  f8e5m2(float v) : f8e5m2(static_cast<double>(v)) {}
  f8e5m2(int v) : f8e5m2(static_cast<double>(v)) {}
  operator float() const;
  static f8e5m2 from_bits(uint8_t b) { f8e5m2 h; h.bits = b; return h; }
};

/// Pointer element tag: Tile<ptr_t<float>> (alias Ptr<float>) is a tile of pointers to f32.
template <class T> struct ptr_t { using pointee = T; };

namespace detail {
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::i1; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::u32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::u64; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<f8e4m3> { static constexpr DType value = DType::f8e4m3; };
template <> struct dtype_of<f8e5m2> { static constexpr DType value = DType::f8e5m2; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <class T> struct dtype_of<ptr_t<T>> { static constexpr DType value = DType::ptr; };

template <class T> concept Element = requires { dtype_of<T>::value; };
template <class T> concept ScalarElement = Element<T> && (dtype_of<T>::value != DType::ptr);
template <class T> struct is_ptr : std::false_type {};
template <class T> struct is_ptr<ptr_t<T>> : std::true_type {};

template <DType D> struct type_of;
template <> struct type_of<DType::i1> { using type = bool; };
template <> struct type_of<DType::i8> { using type = int8_t; };
template <> struct type_of<DType::i16> { using type = int16_t; };
template <> struct type_of<DType::i32> { using type = int32_t; };
template <> struct type_of<DType::i64> { using type = int64_t; };
template <> struct type_of<DType::u8> { using type = uint8_t; };
template <> struct type_of<DType::u16> { using type = uint16_t; };
template <> struct type_of<DType::u32> { using type = uint32_t; };
template <> struct type_of<DType::u64> { using type = uint64_t; };
template <> struct type_of<DType::f16> { using type = f16; };
template <> struct type_of<DType::bf16> { using type = bf16; };
template <> struct type_of<DType::f32> { using type = float; };
template <> struct type_of<DType::f64> { using type = double; };
template <> struct type_of<DType::f8e4m3> { using type = f8e4m3; };
template <> struct type_of<DType::f8e5m2> { using type = f8e5m2; };
}  // namespace detail

/// The promoted C++ element type of two element types (rule above).
template <class A, class B>
using promote_t = typename detail::type_of<promote(detail::dtype_of<A>::value, detail::dtype_of<B>::value)>::type;

}  // namespace tle
