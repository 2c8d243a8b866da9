// tests/test_passes.cpp - constant folding tables, canonicalize / cse / dce rewrites (printed
// before/after), and the pipeline driver (dumps, verification).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "ir/builder.hpp"
#include "ir/ir.hpp"
#include "passes/fold.hpp"
#include "passes/pass.hpp"

using namespace tle;
using namespace tle::ir;
using namespace tle::passes;

namespace {

Type ty(DType d, Shape s = {}) { Type t; t.dtype = d; t.shape = std::move(s); return t; }
Type ptr_ty(DType pointee, Shape s = {}) { Type t = ty(DType::ptr, std::move(s)); t.pointee = pointee; return t; }

struct Fn {
  Function f;
  Builder b;
  Fn(const char* name = "k") : b(&f.entry()) { f.name = name; }
  Value* arg(Type t) {
    f.arg_info.push_back({"a" + std::to_string(f.arg_info.size()), false});
    return f.entry().add_arg(std::move(t));
  }
  void store(Value* p, Value* v) { b.create(OpKind::Store, {p, v}, {}); }
  // Runs `passes` in order, verifying before and after, and returns the printed result.
  std::string run(std::initializer_list<PassFn> passes) {
    verify(f);
    for (auto p : passes) p(f);
    verify(f);
    return print(f);
  }
};

template <class Body>
Op* make_for(Builder& b, Value* lo, Value* hi, Value* step, std::vector<Value*> inits, Body body) {
  std::vector<Value*> ops{lo, hi, step};
  std::vector<Type> res;
  for (auto* v : inits) { ops.push_back(v); res.push_back(v->type); }
  Op* op = b.create(OpKind::For, ops, res, {}, {}, 1);
  Block& blk = op->region().body();
  Value* iv = blk.add_arg(lo->type);
  std::vector<Value*> carried;
  for (auto* v : inits) carried.push_back(blk.add_arg(v->type));
  Builder in(&blk);
  in.yield(body(in, iv, carried));
  return op;
}

// Folding shorthands. Integer results are canonical int64 (u64 as bit pattern).
int64_t ib(BinaryOp op, DType d, int64_t a, int64_t b) {
  auto r = fold_binary(op, d, Attr(a), Attr(b));
  REQUIRE(r);
  return std::get<int64_t>(*r);
}
double fb(BinaryOp op, DType d, double a, double b) {
  auto r = fold_binary(op, d, Attr(a), Attr(b));
  REQUIRE(r);
  return std::get<double>(*r);
}
double cast_f(DType from, DType to, double x) {
  auto r = fold_cast(from, to, Attr(x));
  REQUIRE(r);
  return std::get<double>(*r);
}
int64_t cast_fi(DType from, DType to, double x) {
  auto r = fold_cast(from, to, Attr(x));
  REQUIRE(r);
  return std::get<int64_t>(*r);
}
double cast_if(DType from, DType to, int64_t x) {
  auto r = fold_cast(from, to, Attr(x));
  REQUIRE(r);
  return std::get<double>(*r);
}
int64_t cast_ii(DType from, DType to, int64_t x) {
  auto r = fold_cast(from, to, Attr(x));
  REQUIRE(r);
  return std::get<int64_t>(*r);
}
template <class T> int64_t wrapped(T v) { return static_cast<int64_t>(v); }

}  // namespace

// ---------------------------------------------------------------- folding tables
TEST_CASE("fold: div/rem truncate toward zero like C++ (E04/E19)", "[passes]") {
  for (DType d : {DType::i8, DType::i16, DType::i32, DType::i64}) {
    for (int64_t a = -8; a <= 8; ++a) {
      for (int64_t b : {-3, -2, 2, 3}) {
        INFO(dtype_name(d) << " " << a << " op " << b);
        CHECK(ib(BinaryOp::Div, d, a, b) == a / b);
        CHECK(ib(BinaryOp::Rem, d, a, b) == a % b);
      }
    }
  }
  for (int64_t a = 0; a <= 16; ++a)
    for (int64_t b : {2, 3}) {
      CHECK(ib(BinaryOp::Div, DType::u32, a, b) == a / b);
      CHECK(ib(BinaryOp::Rem, DType::u32, a, b) == a % b);
    }
  // Unsigned operands are unsigned: 0xFFFFFFFF / 2 is not -1 / 2.
  CHECK(ib(BinaryOp::Div, DType::u32, 0xFFFFFFFFll, 2) == 0x7FFFFFFFll);
  CHECK(ib(BinaryOp::Rem, DType::u8, 255, 7) == 255 % 7);
}

TEST_CASE("fold: the same div/rem table through canonicalize", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::i32));
  struct Case { int64_t a, b; Value* div; Value* rem; };
  std::vector<Case> cases;
  for (int64_t a = -8; a <= 8; ++a)
    for (int64_t b : {-3, -2, 2, 3}) {
      Value* ca = k.b.constant(ty(DType::i32), a);
      Value* cb = k.b.constant(ty(DType::i32), b);
      Value* dv = k.b.binary(BinaryOp::Div, ca, cb);
      Value* rm = k.b.binary(BinaryOp::Rem, ca, cb);
      k.store(p, dv);
      k.store(p, rm);
      cases.push_back({a, b, dv, rm});
    }
  REQUIRE(canonicalize(k.f));
  verify(k.f);
  for (auto& c : cases) {
    INFO(c.a << " , " << c.b);
    REQUIRE(c.div->def->kind == OpKind::Constant);
    CHECK(constant_int(c.div) == c.a / c.b);
    CHECK(constant_int(c.rem) == c.a % c.b);
  }
}

TEST_CASE("fold: division by zero and INT_MIN / -1", "[passes]") {
  for (DType d : {DType::i8, DType::i32, DType::i64, DType::u8, DType::u32, DType::u64}) {
    INFO(dtype_name(d));
    CHECK(ib(BinaryOp::Div, d, 7, 0) == 0);
    CHECK(ib(BinaryOp::Rem, d, 7, 0) == 7);
    CHECK(ib(BinaryOp::Div, d, 0, 0) == 0);
  }
  CHECK(ib(BinaryOp::Rem, DType::i32, -7, 0) == -7);
  CHECK(ib(BinaryOp::Div, DType::i8, -128, -1) == -128);
  CHECK(ib(BinaryOp::Rem, DType::i8, -128, -1) == 0);
  CHECK(ib(BinaryOp::Div, DType::i16, -32768, -1) == -32768);
  const int64_t i32min = std::numeric_limits<int32_t>::min(), i64min = std::numeric_limits<int64_t>::min();
  CHECK(ib(BinaryOp::Div, DType::i32, i32min, -1) == i32min);
  CHECK(ib(BinaryOp::Rem, DType::i32, i32min, -1) == 0);
  CHECK(ib(BinaryOp::Div, DType::i64, i64min, -1) == i64min);
  CHECK(ib(BinaryOp::Rem, DType::i64, i64min, -1) == 0);
  // Float division by zero is IEEE, not the integer rule.
  CHECK(std::isinf(fb(BinaryOp::Div, DType::f32, 1.0, 0.0)));
  CHECK(std::isnan(fb(BinaryOp::Div, DType::f32, 0.0, 0.0)));
}

TEST_CASE("fold: integers wrap at the dtype's width", "[passes]") {
  CHECK(ib(BinaryOp::Add, DType::i8, 127, 1) == -128);
  CHECK(ib(BinaryOp::Sub, DType::i8, -128, 1) == 127);
  CHECK(ib(BinaryOp::Mul, DType::i8, 16, 16) == 0);
  CHECK(ib(BinaryOp::Mul, DType::i8, 100, 3) == wrapped(int8_t(300 - 256)));
  CHECK(ib(BinaryOp::Add, DType::u8, 200, 100) == 44);
  CHECK(ib(BinaryOp::Sub, DType::u8, 0, 1) == 255);
  CHECK(ib(BinaryOp::Add, DType::i32, std::numeric_limits<int32_t>::max(), 1) == std::numeric_limits<int32_t>::min());
  CHECK(ib(BinaryOp::Add, DType::i64, std::numeric_limits<int64_t>::max(), 1) == std::numeric_limits<int64_t>::min());
  CHECK(ib(BinaryOp::Sub, DType::u64, 0, 1) == -1);  // bit pattern of UINT64_MAX
  CHECK(ib(BinaryOp::Add, DType::i1, 1, 1) == 0);
  CHECK(ib(BinaryOp::Max, DType::u8, 255, 1) == 255);  // unsigned compare
  CHECK(ib(BinaryOp::Min, DType::i8, -1, 1) == -1);
  CHECK(ib(BinaryOp::Max, DType::u64, -1, 1) == -1);
  auto un = [](UnaryOp op, DType d, int64_t x) { return std::get<int64_t>(*fold_unary(op, d, Attr(x))); };
  CHECK(un(UnaryOp::Neg, DType::i8, -128) == -128);
  CHECK(un(UnaryOp::Abs, DType::i8, -128) == -128);
  CHECK(un(UnaryOp::Abs, DType::i32, -5) == 5);
  CHECK(un(UnaryOp::Not, DType::u8, 0) == 255);
  CHECK(un(UnaryOp::Not, DType::i8, 0) == -1);
  CHECK(un(UnaryOp::Not, DType::i1, 1) == 0);
  CHECK(un(UnaryOp::Neg, DType::u32, 1) == 0xFFFFFFFFll);
  // Non-canonical inputs are wrapped first.
  CHECK(std::get<int64_t>(*normalize_constant(DType::i8, Attr(int64_t(200)))) == -56);
  CHECK(std::get<int64_t>(*normalize_constant(DType::u16, Attr(int64_t(-1)))) == 65535);
}

TEST_CASE("fold: shifts", "[passes]") {
  CHECK(ib(BinaryOp::Shl, DType::i32, 1, 31) == std::numeric_limits<int32_t>::min());
  CHECK(ib(BinaryOp::Shl, DType::i32, 1, 32) == 0);
  CHECK(ib(BinaryOp::Shl, DType::i32, 1, 100) == 0);
  CHECK(ib(BinaryOp::Shl, DType::i32, 1, -1) == 0);
  CHECK(ib(BinaryOp::Shl, DType::i8, 3, 7) == -128);
  CHECK(ib(BinaryOp::Shl, DType::u8, 3, 7) == 128);
  CHECK(ib(BinaryOp::Shl, DType::i64, 1, 63) == std::numeric_limits<int64_t>::min());
  CHECK(ib(BinaryOp::Shl, DType::i64, 1, 64) == 0);
  CHECK(ib(BinaryOp::Shr, DType::i32, -8, 1) == -4);   // arithmetic
  CHECK(ib(BinaryOp::Shr, DType::i32, -8, 40) == -1);  // sign fill
  CHECK(ib(BinaryOp::Shr, DType::i32, -8, -3) == -1);
  CHECK(ib(BinaryOp::Shr, DType::i32, 8, 40) == 0);
  CHECK(ib(BinaryOp::Shr, DType::i8, -128, 7) == -1);
  CHECK(ib(BinaryOp::Shr, DType::u32, 0x80000000ll, 31) == 1);  // logical
  CHECK(ib(BinaryOp::Shr, DType::u8, 0x80, 8) == 0);
  CHECK(ib(BinaryOp::Shr, DType::u64, std::numeric_limits<int64_t>::min(), 63) == 1);
  CHECK(ib(BinaryOp::Shl, DType::u32, 1, 0xFFFFFFFFll) == 0);  // huge unsigned amount
}

TEST_CASE("fold: float rounding (E26)", "[passes]") {
  // f64 -> f16/bf16 round once from the double (through f32 would give 1026, 1.0, 1.0).
  CHECK(cast_f(DType::f64, DType::f16, 1025.49995) == 1025.0);
  CHECK(cast_f(DType::f64, DType::f16, 1.0 + std::ldexp(1, -11) + std::ldexp(1, -30)) == 1.0009765625);
  CHECK(cast_f(DType::f64, DType::bf16, 1.0 + std::ldexp(1, -8) + std::ldexp(1, -30)) == 1.0078125);
  // f32 -> f16: nearest even; overflow to inf.
  CHECK(cast_f(DType::f32, DType::f16, 2049.0) == 2048.0);
  CHECK(cast_f(DType::f32, DType::f16, 2051.0) == 2052.0);
  CHECK(cast_f(DType::f32, DType::f16, 65520.0) == std::numeric_limits<double>::infinity());
  CHECK(cast_f(DType::f32, DType::f16, 65519.0) == 65504.0);
  CHECK(cast_f(DType::f64, DType::f32, 0.1) == static_cast<double>(0.1f));
  // f32 ops are rounded to f32; f16 ops computed in f32 and rounded to f16.
  CHECK(fb(BinaryOp::Add, DType::f32, 1.0, std::ldexp(1, -30)) == 1.0);
  CHECK(fb(BinaryOp::Add, DType::f64, 1.0, std::ldexp(1, -30)) == 1.0 + std::ldexp(1, -30));
  CHECK(fb(BinaryOp::Add, DType::f16, 2048.0, 1.0) == 2048.0);
  CHECK(fb(BinaryOp::Add, DType::f16, 2048.0, 3.0) == 2052.0);
  CHECK(fb(BinaryOp::Mul, DType::bf16, 1.0078125, 1.0078125) == 1.015625);  // 1.01568604 -> bf16
  CHECK(fb(BinaryOp::Add, DType::f16, 65504.0, 32.0) == std::numeric_limits<double>::infinity());
  // fma rounds once: (1+2^-12)^2 - 1 keeps the 2^-24 term a*b+c would lose.
  double a = 1.0 + std::ldexp(1, -12);
  CHECK(std::get<double>(*fold_fma(DType::f32, Attr(a), Attr(a), Attr(-1.0))) == std::ldexp(1, -11) + std::ldexp(1, -24));
  CHECK(fb(BinaryOp::Sub, DType::f32, fb(BinaryOp::Mul, DType::f32, a, a), 1.0) == std::ldexp(1, -11));
  // f16: a*b+c formed in f64 and rounded once: (1+2^-10)(1+2^-10) + 2^-11 = 1 + 2^-9 + 2^-11 + 2^-20
  // is above the midpoint 1 + 2^-9 + 2^-11, so it rounds up to 1 + 3*2^-10 (mul, then add: a tie, to 1+2^-9).
  double h = 1.0 + std::ldexp(1, -10);
  CHECK(std::get<double>(*fold_fma(DType::f16, Attr(h), Attr(h), Attr(std::ldexp(1, -11)))) == 1.0 + 3 * std::ldexp(1, -10));
  CHECK(fb(BinaryOp::Add, DType::f16, fb(BinaryOp::Mul, DType::f16, h, h), std::ldexp(1, -11)) == 1.0 + std::ldexp(1, -9));
  // bf16: once, also when the addend is too small for f64 to keep next to the product. 1.25 *
  // 1.203125 is the midpoint 1.50390625 between 1.5 (even) and 1.5078125; + 2^-133 (the smallest
  // bf16) puts it above, so it rounds up (an f64 fma would drop 2^-133, tie, and round to even).
  auto fb16 = [](double x, double y, double z) {
    return std::get<double>(*fold_fma(DType::bf16, Attr(x), Attr(y), Attr(z)));
  };
  CHECK(fb16(1.25, 1.203125, std::ldexp(1, -133)) == 1.5078125);
  CHECK(fb16(1.25, 1.203125, -std::ldexp(1, -133)) == 1.5);
  CHECK(fb16(1.5, 1.0078125, -std::ldexp(1, -133)) == 1.5078125);  // 1.51171875 - tiny: down, not to even
  CHECK(fb16(1.5, 1.0078125, std::ldexp(1, -133)) == 1.515625);
  CHECK(fb16(1.5, 1.0078125, 0.0) == 1.515625);  // an exact tie still rounds to even
  // Transcendentals use the f32 libm function for f32.
  auto ex = std::get<double>(*fold_unary(UnaryOp::Exp, DType::f32, Attr(1.0)));
  CHECK(ex == static_cast<double>(::expf(1.0f)));
  CHECK(ex != std::exp(1.0));
  CHECK(std::get<double>(*fold_unary(UnaryOp::Sqrt, DType::f16, Attr(2.0))) == 1.4140625);
}

TEST_CASE("fold: NaN-propagating min/max, ordered compares", "[passes]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType d : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    INFO(dtype_name(d));
    CHECK(std::isnan(fb(BinaryOp::Max, d, nan, 1.0)));
    CHECK(std::isnan(fb(BinaryOp::Max, d, 1.0, nan)));
    CHECK(std::isnan(fb(BinaryOp::Min, d, nan, 1.0)));
    CHECK(std::isnan(fb(BinaryOp::Min, d, 1.0, nan)));
    CHECK(fb(BinaryOp::Max, d, -2.0, 1.0) == 1.0);
    CHECK(!std::signbit(fb(BinaryOp::Max, d, -0.0, 0.0)));
    CHECK(std::signbit(fb(BinaryOp::Min, d, 0.0, -0.0)));
  }
  auto cmp = [](CmpPred p, DType d, Attr a, Attr b) { return std::get<int64_t>(*fold_compare(p, d, a, b)); };
  CHECK(cmp(CmpPred::Eq, DType::f32, Attr(nan), Attr(nan)) == 0);
  CHECK(cmp(CmpPred::Ne, DType::f32, Attr(nan), Attr(nan)) == 1);
  CHECK(cmp(CmpPred::Lt, DType::f32, Attr(nan), Attr(1.0)) == 0);
  CHECK(cmp(CmpPred::Ge, DType::f32, Attr(nan), Attr(1.0)) == 0);
  CHECK(cmp(CmpPred::Eq, DType::f32, Attr(-0.0), Attr(0.0)) == 1);
  CHECK(cmp(CmpPred::Gt, DType::u32, Attr(int64_t(0xFFFFFFFF)), Attr(int64_t(1))) == 1);
  CHECK(cmp(CmpPred::Gt, DType::i32, Attr(int64_t(-1)), Attr(int64_t(1))) == 0);
  CHECK(cmp(CmpPred::Lt, DType::u64, Attr(int64_t(1)), Attr(int64_t(-1))) == 1);
  // Integer-only ops on floats and float-only ops on ints do not fold.
  CHECK(!fold_binary(BinaryOp::And, DType::f32, Attr(1.0), Attr(1.0)));
  CHECK(!fold_binary(BinaryOp::Pow, DType::i32, Attr(int64_t(2)), Attr(int64_t(2))));
  CHECK(!fold_binary(BinaryOp::Add, DType::i32, Attr(1.0), Attr(int64_t(2))));  // wrong kind
}

TEST_CASE("fold: casts", "[passes]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Float -> int saturates, NaN -> 0, truncation toward zero.
  CHECK(cast_fi(DType::f32, DType::i32, 1e10) == std::numeric_limits<int32_t>::max());
  CHECK(cast_fi(DType::f32, DType::i32, -1e10) == std::numeric_limits<int32_t>::min());
  CHECK(cast_fi(DType::f32, DType::i32, nan) == 0);
  CHECK(cast_fi(DType::f32, DType::i32, -3.7) == -3);
  CHECK(cast_fi(DType::f32, DType::i8, 300.0) == 127);
  CHECK(cast_fi(DType::f32, DType::u8, 300.7) == 255);
  CHECK(cast_fi(DType::f32, DType::u8, -1.5) == 0);
  CHECK(cast_fi(DType::f64, DType::i64, 9223372036854775808.0) == std::numeric_limits<int64_t>::max());
  CHECK(cast_fi(DType::f64, DType::i64, -9223372036854775808.0) == std::numeric_limits<int64_t>::min());
  CHECK(cast_fi(DType::f64, DType::u64, 1e30) == -1);  // UINT64_MAX pattern
  CHECK(cast_fi(DType::f64, DType::u32, std::numeric_limits<double>::infinity()) == 0xFFFFFFFFll);
  // Anything -> i1 is x != 0 (NaN != 0).
  CHECK(cast_fi(DType::f32, DType::i1, 0.5) == 1);
  CHECK(cast_fi(DType::f32, DType::i1, -0.0) == 0);
  CHECK(cast_fi(DType::f32, DType::i1, nan) == 1);
  CHECK(cast_ii(DType::i32, DType::i1, 2) == 1);
  CHECK(cast_ii(DType::i32, DType::i1, 0) == 0);
  // Int -> int: truncation wraps, extension follows the source's signedness.
  CHECK(cast_ii(DType::i32, DType::i8, 300) == 44);
  CHECK(cast_ii(DType::i8, DType::u32, -1) == 0xFFFFFFFFll);
  CHECK(cast_ii(DType::u8, DType::i32, 255) == 255);
  CHECK(cast_ii(DType::i1, DType::i32, 1) == 1);
  CHECK(cast_ii(DType::u64, DType::i64, -1) == -1);
  // Int -> float rounds once to nearest even.
  CHECK(cast_if(DType::i32, DType::f16, 2049) == 2048.0);
  CHECK(cast_if(DType::i32, DType::f32, 16777217) == 16777216.0);
  CHECK(cast_if(DType::u64, DType::f32, -1) == 18446744073709551616.0);
  CHECK(cast_if(DType::u32, DType::f64, 0xFFFFFFFFll) == 4294967295.0);
  CHECK(cast_if(DType::i8, DType::f32, -128) == -128.0);
  // 2^60 + 2^52 + 1 is above the bf16 midpoint; via double it would tie and round down to 2^60.
  int64_t big = (int64_t(1) << 60) + (int64_t(1) << 52) + 1;
  CHECK(cast_if(DType::i64, DType::bf16, big) == std::ldexp(1, 60) + std::ldexp(1, 53));
  CHECK(cast_if(DType::i64, DType::bf16, -big) == -(std::ldexp(1, 60) + std::ldexp(1, 53)));
  CHECK(cast_if(DType::i64, DType::f16, big) == std::numeric_limits<double>::infinity());
  // Float -> float: widening exact.
  CHECK(cast_f(DType::f16, DType::f64, 1.0009765625) == 1.0009765625);
  // Bitcast: bit patterns; NaN payloads are not folded.
  CHECK(std::get<int64_t>(*fold_bitcast(DType::f32, DType::i32, Attr(1.0))) == 0x3f800000);
  CHECK(std::get<int64_t>(*fold_bitcast(DType::f16, DType::u16, Attr(-2.0))) == 0xC000);
  CHECK(std::get<double>(*fold_bitcast(DType::i64, DType::f64, Attr(int64_t(0x3FF0000000000000)))) == 1.0);
  CHECK(!fold_bitcast(DType::i32, DType::f32, Attr(int64_t(0x7fc00000))));
  CHECK(!fold_bitcast(DType::f32, DType::i32, Attr(nan)));
}

// ---------------------------------------------------------------- canonicalize
TEST_CASE("canonicalize: constant folding in place, then dce", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* c3 = k.b.constant(ty(DType::i32), int64_t(3));
  Value* c4 = k.b.constant(ty(DType::i32), int64_t(4));
  Value* s = k.b.binary(BinaryOp::Add, c3, c4);
  Value* c2 = k.b.constant(ty(DType::i32), int64_t(2));
  k.store(p, k.b.binary(BinaryOp::Mul, s, c2));
  CHECK(k.run({canonicalize}) ==
        "func @k(%0: ptr<i32>) {\n"
        "  %1 = constant {value=3} : i32\n"
        "  %2 = constant {value=4} : i32\n"
        "  %3 = constant {value=7} : i32\n"
        "  %4 = constant {value=2} : i32\n"
        "  %5 = constant {value=14} : i32\n"
        "  store %0, %5 : (ptr<i32>, i32)\n"
        "}\n");
  CHECK(k.run({dce}) ==
        "func @k(%0: ptr<i32>) {\n"
        "  %1 = constant {value=14} : i32\n"
        "  store %0, %1 : (ptr<i32>, i32)\n"
        "}\n");
}

TEST_CASE("canonicalize: shape ops, casts and compares of constants", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::f16, {2, 4}));
  Value* q = k.arg(ptr_ty(DType::i1, {4}));
  Value* c = k.b.constant(ty(DType::f32), 65520.0);
  Value* e = k.b.create(OpKind::ExpandDims, {c}, {ty(DType::f32, {1})}, {{"axis", int64_t(0)}})->result();
  Value* b4 = k.b.create(OpKind::Broadcast, {e}, {ty(DType::f32, {4})})->result();
  Value* r = k.b.create(OpKind::Reshape, {b4}, {ty(DType::f32, {2, 2})})->result();
  Value* pr = k.b.create(OpKind::Permute, {r}, {ty(DType::f32, {2, 2})}, {{"order", std::vector<int64_t>{1, 0}}})->result();
  Value* rr = k.b.create(OpKind::Reshape, {pr}, {ty(DType::f32, {1, 4})})->result();
  Value* bb = k.b.create(OpKind::Broadcast, {rr}, {ty(DType::f32, {2, 4})})->result();
  k.store(p, k.b.cast(bb, DType::f16));
  Value* lt = k.b.cmp(CmpPred::Lt, b4, k.b.constant(ty(DType::f32, {4}), 7.0));
  k.store(q, lt);
  CHECK(k.run({canonicalize, dce}) ==
        "func @k(%0: ptr<f16>[2,4], %1: ptr<i1>[4]) {\n"
        "  %2 = constant {value=inf} : f16[2,4]\n"
        "  store %0, %2 : (ptr<f16>[2,4], f16[2,4])\n"
        "  %3 = constant {value=0} : i1[4]\n"
        "  store %1, %3 : (ptr<i1>[4], i1[4])\n"
        "}\n");
}

TEST_CASE("canonicalize: exact identities only", "[passes]") {
  Fn k;
  Value* pi = k.arg(ptr_ty(DType::i32));
  Value* x = k.arg(ty(DType::i32));
  Value* y = k.arg(ty(DType::f32));
  Value* pf = k.arg(ptr_ty(DType::f32));
  Value* i0 = k.b.constant(ty(DType::i32), int64_t(0));
  Value* i1 = k.b.constant(ty(DType::i32), int64_t(1));
  Value* v = k.b.binary(BinaryOp::Add, x, i0);  // x + 0 -> x
  v = k.b.binary(BinaryOp::Sub, v, i0);         // x - 0 -> x
  v = k.b.binary(BinaryOp::Mul, i1, v);         // 1 * x -> x
  v = k.b.binary(BinaryOp::Shl, v, i0);         // x << 0 -> x
  k.store(pi, v);
  k.store(pi, k.b.binary(BinaryOp::Sub, x, x));  // x - x -> 0 (ints)
  Value* f0 = k.b.constant(ty(DType::f32), 0.0);
  Value* f1 = k.b.constant(ty(DType::f32), 1.0);
  Value* w = k.b.binary(BinaryOp::Add, y, f0);  // kept: -0.0 + 0.0 is +0.0
  w = k.b.binary(BinaryOp::Mul, w, f1);         // w * 1 -> w
  w = k.b.binary(BinaryOp::Div, w, f1);         // w / 1 -> w
  k.store(pf, w);
  k.store(pf, k.b.binary(BinaryOp::Sub, y, y));  // kept: NaN - NaN, inf - inf
  k.store(pf, k.b.binary(BinaryOp::Mul, y, f0));  // kept: NaN * 0
  Value* ne = k.b.unary(UnaryOp::Neg, k.b.unary(UnaryOp::Neg, y));  // -(-y) -> y
  k.store(pf, ne);
  CHECK(k.run({canonicalize, dce}) ==
        "func @k(%0: ptr<i32>, %1: i32, %2: f32, %3: ptr<f32>) {\n"
        "  store %0, %1 : (ptr<i32>, i32)\n"
        "  %4 = constant {value=0} : i32\n"
        "  store %0, %4 : (ptr<i32>, i32)\n"
        "  %5 = constant {value=0.0} : f32\n"
        "  %6 = binary %2, %5 {op=add} : (f32, f32) -> f32\n"
        "  store %3, %6 : (ptr<f32>, f32)\n"
        "  %7 = binary %2, %2 {op=sub} : (f32, f32) -> f32\n"
        "  store %3, %7 : (ptr<f32>, f32)\n"
        "  %8 = binary %2, %5 {op=mul} : (f32, f32) -> f32\n"
        "  store %3, %8 : (ptr<f32>, f32)\n"
        "  store %3, %2 : (ptr<f32>, f32)\n"
        "}\n");
}

TEST_CASE("canonicalize: select, same-type cast/broadcast, double reshape", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::f32, {8}));
  Value* a = k.arg(ty(DType::f32, {8}));
  Value* b = k.arg(ty(DType::f32, {8}));
  Value* c = k.arg(ty(DType::i1, {8}));
  Value* t = k.b.constant(ty(DType::i1, {8}), int64_t(1));
  k.store(p, k.b.create(OpKind::Select, {t, a, b}, {a->type})->result());  // -> a
  k.store(p, k.b.create(OpKind::Select, {c, b, b}, {a->type})->result());  // -> b
  k.store(p, k.b.create(OpKind::Cast, {a}, {a->type})->result());          // -> a
  k.store(p, k.b.create(OpKind::Broadcast, {b}, {b->type})->result());     // -> b
  Value* r1 = k.b.create(OpKind::Reshape, {a}, {ty(DType::f32, {2, 4})})->result();
  Value* r2 = k.b.create(OpKind::Reshape, {r1}, {ty(DType::f32, {4, 2})})->result();
  Value* r3 = k.b.create(OpKind::Reshape, {r2}, {ty(DType::f32, {8})})->result();  // -> a
  k.store(p, r3);
  Value* r4 = k.b.create(OpKind::Reshape, {r1}, {ty(DType::f32, {1, 8})})->result();
  Value* e = k.b.create(OpKind::Reshape, {r4}, {ty(DType::f32, {8, 1})})->result();  // -> reshape a
  Value* pe = k.b.create(OpKind::Broadcast, {k.b.create(OpKind::ExpandDims, {p}, {ptr_ty(DType::f32, {8, 1})},
                                                          {{"axis", int64_t(1)}})->result()},
                         {ptr_ty(DType::f32, {8, 1})})->result();
  k.store(pe, e);
  Value* f = k.b.constant(ty(DType::i1, {8}), int64_t(0));
  Value* q = k.arg(ptr_ty(DType::i1, {8}));
  k.store(q, k.b.create(OpKind::Select, {c, t, f}, {c->type})->result());  // -> c
  CHECK(k.run({canonicalize, dce}) ==
        "func @k(%0: ptr<f32>[8], %1: f32[8], %2: f32[8], %3: i1[8], %4: ptr<i1>[8]) {\n"
        "  store %0, %1 : (ptr<f32>[8], f32[8])\n"
        "  store %0, %2 : (ptr<f32>[8], f32[8])\n"
        "  store %0, %1 : (ptr<f32>[8], f32[8])\n"
        "  store %0, %2 : (ptr<f32>[8], f32[8])\n"
        "  store %0, %1 : (ptr<f32>[8], f32[8])\n"
        "  %5 = reshape %1 : (f32[8]) -> f32[8,1]\n"
        "  %6 = expand_dims %0 {axis=1} : (ptr<f32>[8]) -> ptr<f32>[8,1]\n"
        "  store %6, %5 : (ptr<f32>[8,1], f32[8,1])\n"
        "  store %4, %3 : (ptr<i1>[8], i1[8])\n"
        "}\n");
}

TEST_CASE("canonicalize: if with a constant condition, for without trips", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* x = k.arg(ty(DType::i32));
  Value* c1 = k.b.constant(ty(DType::i32), int64_t(1));
  Value* c2 = k.b.constant(ty(DType::i32), int64_t(2));
  Value* cond = k.b.cmp(CmpPred::Lt, c1, c2);
  Op* br = k.b.create(OpKind::If, {cond}, {ty(DType::i32)}, {}, {}, 2);
  {
    Builder t(&br->region(0).body());
    Value* v = t.binary(BinaryOp::Mul, x, x);
    t.create(OpKind::Store, {p, v}, {});
    t.yield({v});
    Builder e(&br->region(1).body());
    e.yield({x});
  }
  Value* ten = k.b.constant(ty(DType::i32), int64_t(10));
  Value* one = k.b.constant(ty(DType::i32), int64_t(1));
  Op* loop = make_for(k.b, ten, one, one, {br->result()}, [&](Builder& in, Value*, std::vector<Value*> c) {
    Value* v = in.binary(BinaryOp::Add, c[0], x);
    in.create(OpKind::Store, {p, v}, {});
    return std::vector<Value*>{v};
  });
  k.store(p, loop->result());
  CHECK(k.run({canonicalize, dce}) ==
        "func @k(%0: ptr<i32>, %1: i32) {\n"
        "  %2 = binary %1, %1 {op=mul} : (i32, i32) -> i32\n"
        "  store %0, %2 : (ptr<i32>, i32)\n"
        "  store %0, %2 : (ptr<i32>, i32)\n"
        "}\n");
}

TEST_CASE("canonicalize: a for with trips is kept, unsigned bounds compare unsigned", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::u32));
  Value* lo = k.b.constant(ty(DType::u32), int64_t(1));
  Value* hi = k.b.constant(ty(DType::u32), int64_t(0xFFFFFFFF));  // > lo as unsigned
  Op* loop = make_for(k.b, lo, hi, lo, {lo}, [&](Builder& in, Value* iv, std::vector<Value*>) {
    return std::vector<Value*>{iv};
  });
  k.store(p, loop->result());
  std::string before = print(k.f);
  k.run({canonicalize});
  CHECK(print(k.f) == before);
}

// ---------------------------------------------------------------- cse
TEST_CASE("cse: equal pure ops merge within a block and into nested regions", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::f32));
  Value* x = k.arg(ty(DType::f32));
  Value* n = k.arg(ty(DType::i32));
  Value* a1 = k.b.binary(BinaryOp::Add, x, x);
  Value* a2 = k.b.binary(BinaryOp::Add, x, x);
  k.store(p, k.b.binary(BinaryOp::Mul, a1, a2));
  Value* zero = k.b.constant(ty(DType::i32), int64_t(0));
  Value* one = k.b.constant(ty(DType::i32), int64_t(1));
  Value* zero2 = k.b.constant(ty(DType::i32), int64_t(0));
  make_for(k.b, zero, n, one, {}, [&](Builder& in, Value*, std::vector<Value*>) {
    in.create(OpKind::Store, {p, in.binary(BinaryOp::Add, x, x)}, {});  // reuses the outer one
    in.create(OpKind::Store, {p, in.binary(BinaryOp::Sub, x, x)}, {});  // stays in the loop
    return std::vector<Value*>{};
  });
  k.store(p, k.b.binary(BinaryOp::Sub, x, x));  // not merged with the loop's
  Value* l1 = k.b.create(OpKind::Load, {p}, {ty(DType::f32)})->result();
  Value* l2 = k.b.create(OpKind::Load, {p}, {ty(DType::f32)})->result();  // impure: kept
  k.store(p, k.b.binary(BinaryOp::Add, l1, l2));
  k.store(p, k.b.cast(zero2, DType::f32));
  CHECK(k.run({cse}) ==
        "func @k(%0: ptr<f32>, %1: f32, %2: i32) {\n"
        "  %3 = binary %1, %1 {op=add} : (f32, f32) -> f32\n"
        "  %4 = binary %3, %3 {op=mul} : (f32, f32) -> f32\n"
        "  store %0, %4 : (ptr<f32>, f32)\n"
        "  %5 = constant {value=0} : i32\n"
        "  %6 = constant {value=1} : i32\n"
        "  for %5, %2, %6 : (i32, i32, i32) {\n"
        "  ^(%7: i32):\n"
        "    store %0, %3 : (ptr<f32>, f32)\n"
        "    %8 = binary %1, %1 {op=sub} : (f32, f32) -> f32\n"
        "    store %0, %8 : (ptr<f32>, f32)\n"
        "    yield\n"
        "  }\n"
        "  %9 = binary %1, %1 {op=sub} : (f32, f32) -> f32\n"
        "  store %0, %9 : (ptr<f32>, f32)\n"
        "  %10 = load %0 : (ptr<f32>) -> f32\n"
        "  %11 = load %0 : (ptr<f32>) -> f32\n"
        "  %12 = binary %10, %11 {op=add} : (f32, f32) -> f32\n"
        "  store %0, %12 : (ptr<f32>, f32)\n"
        "  %13 = cast %5 : (i32) -> f32\n"
        "  store %0, %13 : (ptr<f32>, f32)\n"
        "}\n");
}

TEST_CASE("cse: sibling regions stay apart, attributes, types and -0.0 distinguish", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::f32));
  Value* x = k.arg(ty(DType::f32));
  Value* c = k.arg(ty(DType::i1));
  Op* br = k.b.create(OpKind::If, {c}, {ty(DType::f32)}, {}, {}, 2);
  Builder t(&br->region(0).body());
  t.yield({t.unary(UnaryOp::Exp, x)});
  Builder e(&br->region(1).body());
  e.yield({e.unary(UnaryOp::Exp, x)});
  k.store(p, br->result());
  k.store(p, k.b.constant(ty(DType::f32), 0.0));
  k.store(p, k.b.constant(ty(DType::f32), -0.0));
  k.store(p, k.b.constant(ty(DType::f32), 0.0));        // merged with the first 0.0
  k.b.constant(ty(DType::f64), 0.0);                    // other type: kept
  k.store(p, k.b.unary(UnaryOp::Exp2, x));              // other attribute: kept
  CHECK(k.run({cse}) ==
        "func @k(%0: ptr<f32>, %1: f32, %2: i1) {\n"
        "  %3 = if %2 : (i1) -> f32 {\n"
        "    %4 = unary %1 {op=exp} : (f32) -> f32\n"
        "    yield %4\n"
        "  } else {\n"
        "    %5 = unary %1 {op=exp} : (f32) -> f32\n"
        "    yield %5\n"
        "  }\n"
        "  store %0, %3 : (ptr<f32>, f32)\n"
        "  %6 = constant {value=0.0} : f32\n"
        "  store %0, %6 : (ptr<f32>, f32)\n"
        "  %7 = constant {value=-0.0} : f32\n"
        "  store %0, %7 : (ptr<f32>, f32)\n"
        "  store %0, %6 : (ptr<f32>, f32)\n"
        "  %8 = constant {value=0.0} : f64\n"
        "  %9 = unary %1 {op=exp2} : (f32) -> f32\n"
        "  store %0, %9 : (ptr<f32>, f32)\n"
        "}\n");
}

// ---------------------------------------------------------------- dce
TEST_CASE("dce: unused pure ops go, side effects stay", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::f32));
  Value* x = k.arg(ty(DType::f32));
  Value* a = k.b.binary(BinaryOp::Add, x, x);
  k.b.binary(BinaryOp::Mul, a, a);                              // unused chain
  k.b.create(OpKind::Load, {p}, {ty(DType::f32)});             // unused load: kept (not pure)
  Op* red = k.b.create(OpKind::Reduce, {k.b.constant(ty(DType::f32, {4}), 1.0)}, {ty(DType::f32)},
                       {{"axis", int64_t(0)}, {"kind", int64_t(ReduceKind::Combine)}}, {}, 1);
  Block& rb = red->region().body();
  Value* u = rb.add_arg(ty(DType::f32));
  Value* v = rb.add_arg(ty(DType::f32));
  Builder rbld(&rb);
  rbld.yield({rbld.binary(BinaryOp::Add, u, v)});  // unused reduce with a region: removed
  CHECK(k.run({dce}) ==
        "func @k(%0: ptr<f32>, %1: f32) {\n"
        "  %2 = load %0 : (ptr<f32>) -> f32\n"
        "}\n");
}

TEST_CASE("dce: invariant loop-carried values are replaced by their init", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::f32));
  Value* n = k.arg(ty(DType::i32));
  Value* x = k.arg(ty(DType::f32));
  Value* zero = k.b.constant(ty(DType::i32), int64_t(0));
  Value* one = k.b.constant(ty(DType::i32), int64_t(1));
  Value* acc0 = k.b.constant(ty(DType::f32), 0.0);
  // carried (acc, inv, same): acc += inv; inv yields itself; same yields its init.
  Op* loop = make_for(k.b, zero, n, one, {acc0, x, x}, [&](Builder& in, Value*, std::vector<Value*> c) {
    Value* s = in.binary(BinaryOp::Add, c[0], c[1]);
    return std::vector<Value*>{s, c[1], x};
  });
  k.store(p, loop->result(0));
  k.store(p, loop->result(1));
  k.store(p, k.b.binary(BinaryOp::Mul, loop->result(2), loop->result(1)));
  CHECK(k.run({dce}) ==
        "func @k(%0: ptr<f32>, %1: i32, %2: f32) {\n"
        "  %3 = constant {value=0} : i32\n"
        "  %4 = constant {value=1} : i32\n"
        "  %5 = constant {value=0.0} : f32\n"
        "  %6 = for %3, %1, %4 iter(%5) : (i32, i32, i32, f32) -> f32 {\n"
        "  ^(%7: i32, %8: f32):\n"
        "    %9 = binary %8, %2 {op=add} : (f32, f32) -> f32\n"
        "    yield %9\n"
        "  }\n"
        "  store %0, %6 : (ptr<f32>, f32)\n"
        "  store %0, %2 : (ptr<f32>, f32)\n"
        "  %10 = binary %2, %2 {op=mul} : (f32, f32) -> f32\n"
        "  store %0, %10 : (ptr<f32>, f32)\n"
        "}\n");
  CHECK(loop->result(0)->index == 0);
  CHECK(loop->region().body().arg(1)->index == 1);
}

TEST_CASE("dce: dead loop-carried chains go, a slot feeding a live one stays", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* n = k.arg(ty(DType::i32));
  Value* zero = k.b.constant(ty(DType::i32), int64_t(0));
  Value* one = k.b.constant(ty(DType::i32), int64_t(1));
  // carried (a, b, junk, junk2): a += b; b += 1; junk = junk * 2; junk2 = junk2 + junk.
  // Only a's result is used: b lives through a; junk and junk2 feed only themselves.
  Op* loop = make_for(k.b, zero, n, one, {zero, one, one, zero}, [&](Builder& in, Value*, std::vector<Value*> c) {
    Value* a = in.binary(BinaryOp::Add, c[0], c[1]);
    Value* b = in.binary(BinaryOp::Add, c[1], one);
    Value* j = in.binary(BinaryOp::Mul, c[2], c[2]);
    Value* j2 = in.binary(BinaryOp::Add, c[3], c[2]);
    return std::vector<Value*>{a, b, j, j2};
  });
  k.store(p, loop->result(0));
  CHECK(k.run({dce}) ==
        "func @k(%0: ptr<i32>, %1: i32) {\n"
        "  %2 = constant {value=0} : i32\n"
        "  %3 = constant {value=1} : i32\n"
        "  %4, %5 = for %2, %1, %3 iter(%2, %3) : (i32, i32, i32, i32, i32) -> (i32, i32) {\n"
        "  ^(%6: i32, %7: i32, %8: i32):\n"
        "    %9 = binary %7, %8 {op=add} : (i32, i32) -> i32\n"
        "    %10 = binary %8, %3 {op=add} : (i32, i32) -> i32\n"
        "    yield %9, %10\n"
        "  }\n"
        "  store %0, %4 : (ptr<i32>, i32)\n"
        "}\n");
}

TEST_CASE("dce: loops with only dead work disappear, side effects keep them", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* n = k.arg(ty(DType::i32));
  Value* zero = k.b.constant(ty(DType::i32), int64_t(0));
  Value* one = k.b.constant(ty(DType::i32), int64_t(1));
  make_for(k.b, zero, n, one, {zero}, [&](Builder& in, Value* iv, std::vector<Value*> c) {
    return std::vector<Value*>{in.binary(BinaryOp::Add, c[0], iv)};
  });
  make_for(k.b, zero, n, one, {}, [&](Builder& in, Value* iv, std::vector<Value*>) {
    in.create(OpKind::Store, {p, iv}, {});
    return std::vector<Value*>{};
  });
  CHECK(k.run({dce}) ==
        "func @k(%0: ptr<i32>, %1: i32) {\n"
        "  %2 = constant {value=0} : i32\n"
        "  %3 = constant {value=1} : i32\n"
        "  for %2, %1, %3 : (i32, i32, i32) {\n"
        "  ^(%4: i32):\n"
        "    store %0, %4 : (ptr<i32>, i32)\n"
        "    yield\n"
        "  }\n"
        "}\n");
}

TEST_CASE("dce: if results yielding one outside value, and unused ones", "[passes]") {
  Fn k;
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* x = k.arg(ty(DType::i32));
  Value* c = k.arg(ty(DType::i1));
  Op* br = k.b.create(OpKind::If, {c}, {ty(DType::i32), ty(DType::i32), ty(DType::i32)}, {}, {}, 2);
  {
    Builder t(&br->region(0).body());
    Value* m = t.binary(BinaryOp::Mul, x, x);
    t.yield({x, m, t.binary(BinaryOp::Sub, x, x)});
    Builder e(&br->region(1).body());
    e.create(OpKind::Store, {p, x}, {});
    e.yield({x, x, x});
  }
  k.store(p, br->result(0));  // -> x
  k.store(p, br->result(1));  // kept, renumbered
  // result 2 unused -> removed
  Op* empty = k.b.create(OpKind::If, {c}, {ty(DType::i32)}, {}, {}, 2);
  Builder(&empty->region(0).body()).yield({x});
  Builder(&empty->region(1).body()).yield({x});
  CHECK(k.run({dce}) ==
        "func @k(%0: ptr<i32>, %1: i32, %2: i1) {\n"
        "  %3 = if %2 : (i1) -> i32 {\n"
        "    %4 = binary %1, %1 {op=mul} : (i32, i32) -> i32\n"
        "    yield %4\n"
        "  } else {\n"
        "    store %0, %1 : (ptr<i32>, i32)\n"
        "    yield %1\n"
        "  }\n"
        "  store %0, %1 : (ptr<i32>, i32)\n"
        "  store %0, %3 : (ptr<i32>, i32)\n"
        "}\n");
  CHECK(br->result(0)->index == 0);
}

// ---------------------------------------------------------------- pipeline
TEST_CASE("pipeline: order, dumps per stage, and folding exposed by dce", "[passes]") {
  Fn k("kern");
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* n = k.arg(ty(DType::i32));
  Value* zero = k.b.constant(ty(DType::i32), int64_t(0));
  Value* one = k.b.constant(ty(DType::i32), int64_t(1));
  Value* three = k.b.constant(ty(DType::i32), int64_t(3));
  // The carried value is invariant (always 3); dce turns it into the constant and the next round
  // folds 3 * 2.
  Op* loop = make_for(k.b, zero, n, one, {three, zero}, [&](Builder& in, Value*, std::vector<Value*> c) {
    Value* two = in.constant(ty(DType::i32), int64_t(2));
    Value* t = in.binary(BinaryOp::Mul, c[0], two);
    in.create(OpKind::Store, {p, t}, {});
    return std::vector<Value*>{c[0], in.binary(BinaryOp::Add, c[1], t)};
  });
  k.store(p, loop->result(1));
  std::vector<std::pair<std::string, std::string>> dumps;
  PipelineOptions opt;
  opt.verify = true;
  opt.dump_from_env = false;
  opt.dumps = &dumps;
  run_pipeline(k.f, opt);
  std::vector<std::string> names;
  for (auto& d : dumps) names.push_back(d.first);
  CHECK(names == std::vector<std::string>{"trace", "canonicalize", "cse", "dce", "canonicalize", "cse", "dce",
                                          "canonicalize", "cse", "dce"});
  CHECK(dumps.front().second.find("iter(%4, %2)") != std::string::npos);
  CHECK(print(k.f) ==
        "func @kern(%0: ptr<i32>, %1: i32) {\n"
        "  %2 = constant {value=0} : i32\n"
        "  %3 = constant {value=1} : i32\n"
        "  %4 = for %2, %1, %3 iter(%2) : (i32, i32, i32, i32) -> i32 {\n"
        "  ^(%5: i32, %6: i32):\n"
        "    %7 = constant {value=6} : i32\n"
        "    store %0, %7 : (ptr<i32>, i32)\n"
        "    %8 = binary %6, %7 {op=add} : (i32, i32) -> i32\n"
        "    yield %8\n"
        "  }\n"
        "  store %0, %4 : (ptr<i32>, i32)\n"
        "}\n");
}

TEST_CASE("pipeline: TLE_DUMP_IR=<dir> writes one file per stage, verify rejects bad input", "[passes]") {
  auto dir = std::filesystem::temp_directory_path() / "tle_test_dump_ir";
  std::filesystem::remove_all(dir);
  Fn k("my kernel");
  Value* p = k.arg(ptr_ty(DType::i32));
  Value* c1 = k.b.constant(ty(DType::i32), int64_t(1));
  Value* c2 = k.b.constant(ty(DType::i32), int64_t(2));
  k.store(p, k.b.binary(BinaryOp::Add, c1, c2));
  ::setenv("TLE_DUMP_IR", dir.c_str(), 1);
  PipelineOptions opt = default_pipeline_options();
  opt.verify = true;
  run_pipeline(k.f, opt);
  ::unsetenv("TLE_DUMP_IR");
  REQUIRE(std::filesystem::exists(dir / "my_kernel.00.trace.tir"));
  REQUIRE(std::filesystem::exists(dir / "my_kernel.03.dce.tir"));
  std::ifstream in(dir / "my_kernel.03.dce.tir");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "func @my kernel(%0: ptr<i32>) {\n  %1 = constant {value=3} : i32\n  store %0, %1 : (ptr<i32>, i32)\n}\n");
  std::filesystem::remove_all(dir);

  Fn bad;
  Value* a = bad.b.constant(ty(DType::i32), int64_t(1));
  bad.b.create(OpKind::Binary, {a, a}, {ty(DType::f32)}, {{"op", int64_t(0)}});
  CHECK_THROWS_AS(run_pipeline(bad.f, opt), InternalError);
}
