// tests/test_inline_asm.cpp - tle::inline_asm (elementwise inline PTX).
//
// [ptx]: kernels using inline_asm compile to PTX that contains the snippet and assembles with
// ptxas (sm_90a); skipped with a warning when ptxas is not found ($TLE_PTXAS,
// /usr/local/cuda/bin/ptxas, PATH). [ir]: the op's printed form and its purity in CSE/DCE.
// [errors]: trace-time checks (message, this file, the line of the call) and the CPU backend's
// refusal. [.gpu]: ex2.approx.f32 through inline_asm against tle::exp2 on the GPU.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ir/builder.hpp"
#include "ir/ir.hpp"
#include "tle/tle.hpp"
#include "error_util.hpp"
#include "ptxas_util.hpp"

using namespace tle;
namespace fs = std::filesystem;

namespace {

template <class T> T* fake(uintptr_t a = 0x10000) { return reinterpret_cast<T*>(a); }

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}


/// y[i] = 2^x[i] through ex2.approx.f32.
auto ex2_kernel() {
  return jit("asm_ex2", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<float> v = load(x + o, m, 0.0f);
    store(y + o, inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {v}), m);
  });
}

/// Runs f, which must throw UserError containing `phrase` at this file and `line`.
template <class F> void expect_error(F&& f, const std::string& phrase, const int& line) {
  errtest::expect_user_error(f, {phrase}, "test_inline_asm.cpp", line);
}

}  // namespace

// ============================================================================ PTX

TEST_CASE("inline_asm: ex2.approx.f32 of a tile compiles to PTX and assembles", "[ptx]") {
  auto k = ex2_kernel();
  std::string ir = k.ir(true, fake<float>(), fake<float>(), 1000, 256);
  CHECK_THAT(ir, Catch::Contains("inline_asm"));
  CHECK_THAT(ir, Catch::Contains("asm=\"ex2.approx.f32 $0, $1;\""));
  CHECK_THAT(ir, Catch::Contains("constraints=\"=f,f\""));
  CHECK_THAT(ir, Catch::Contains("pack=1"));
  CHECK_THAT(ir, Catch::Contains("pure=1"));
  std::string ptx = k.ptx(90, 4, fake<float>(), fake<float>(), 1000, 256);
  CHECK_THAT(ptx, Catch::Contains("ex2.approx.f32"));
  ptxtest::assemble("ex2", ptx);
}

TEST_CASE("inline_asm: a two-operand integer asm with a broadcast scalar", "[ptx]") {
  auto k = jit("asm_add", [](Ptr<int32_t> x, Ptr<int32_t> y, Tile<int32_t> s, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<int32_t> v = load(x + o);
    store(y + o, inline_asm<int32_t>("add.s32 $0, $1, $2;", " =r , r, r ", {v, s}));
  });
  std::string ir = k.ir(true, fake<int32_t>(), fake<int32_t>(), 7, 128);
  CHECK_THAT(ir, Catch::Contains("inline_asm"));
  CHECK_THAT(ir, Catch::Contains("broadcast"));  // the scalar takes the tile's shape
  std::string ptx = k.ptx(90, 4, fake<int32_t>(), fake<int32_t>(), 7, 128);
  CHECK_THAT(ptx, Catch::Contains("add.s32"));
  ptxtest::assemble("add.s32", ptx);
}

TEST_CASE("inline_asm: 16-bit, packed, 64-bit and mixed-type operands assemble", "[ptx]") {
  // f16 one per 'h' register, and two per 'r' register with pack = 2 (f16x2 instruction).
  auto kh = jit("asm_f16", [](Ptr<f16> x, Ptr<f16> y, Constexpr<int> BLOCK, Constexpr<int> PACK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<f16> v = load(x + o);
    Tile<f16> r = PACK == 1 ? inline_asm<f16>("ex2.approx.f16 $0, $1;", "=h,h", {v})
                            : inline_asm<f16>("ex2.approx.f16x2 $0, $1;", "=r,r", {v}, true, 2);
    store(y + o, r);
  });
  for (int pack : {1, 2}) {
    for (int block : {128, 1024}) {  // 1 and several registers per thread
      std::string ptx = kh.ptx(90, 4, fake<f16>(), fake<f16>(), block, pack);
      CHECK_THAT(ptx, Catch::Contains(pack == 1 ? "ex2.approx.f16 " : "ex2.approx.f16x2"));
      ptxtest::assemble("f16 pack " + std::to_string(pack) + " block " + std::to_string(block), ptx);
    }
  }
  // pack = 2 on a scalar: one invocation, padded.
  auto ks = jit("asm_f16_scalar", [](Ptr<f16> x, Ptr<f16> y) {
    store(y, inline_asm<f16>("ex2.approx.f16x2 $0, $1;", "=r,r", {load(x)}, true, 2));
  });
  ptxtest::assemble("f16x2 scalar", ks.ptx(90, 4, fake<f16>(), fake<f16>()));
  // u64 ('l'), f64 ('d') and f32 passed as bits ('r'); i8 four per 'r' (pack 4).
  auto km = jit("asm_mixed", [](Ptr<uint64_t> a, Ptr<double> b, Ptr<float> c, Ptr<int8_t> d, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<uint64_t> u = load(a + o);
    store(a + o, inline_asm<uint64_t>("add.u64 $0, $1, $1;", "=l,l", {u}));
    store(b + o, inline_asm<double>("mul.f64 $0, $1, $1;", "=d,d", {load(b + o)}));
    store(c + o, inline_asm<float>("and.b32 $0, $1, 0x7fffffff;", "=r,r", {load(c + o)}));
    store(d + o, inline_asm<int8_t>("xor.b32 $0, $1, $2;", "=r,r,r", {load(d + o), load(d + o)}, true, 4));
  });
  std::string ptx = km.ptx(90, 4, fake<uint64_t>(), fake<double>(), fake<float>(), fake<int8_t>(), 512);
  CHECK_THAT(ptx, Catch::Contains("add.u64"));
  CHECK_THAT(ptx, Catch::Contains("mul.f64"));
  CHECK_THAT(ptx, Catch::Contains("and.b32"));
  CHECK_THAT(ptx, Catch::Contains("xor.b32"));
  ptxtest::assemble("mixed", ptx);
}

// ============================================================================ IR and passes

TEST_CASE("inline_asm: pure ops are merged and deleted, impure ones kept", "[ir]") {
  auto k = jit("asm_purity", [](Ptr<float> x, Ptr<float> y, Constexpr<bool> PURE) {
    Tile<int32_t> o = arange(0, 64);
    Tile<float> v = load(x + o);
    Tile<float> a = inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {v}, PURE);
    Tile<float> b = inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {v}, PURE);
    Tile<float> unused = inline_asm<float>("lg2.approx.f32 $0, $1;", "=f,f", {v}, PURE);
    store(y + o, a + b);
  });
  std::string pure = k.ir(true, fake<float>(), fake<float>(), true);
  CHECK(count(pure, "inline_asm") == 1);  // a and b merged, the unused one deleted
  std::string impure = k.ir(true, fake<float>(), fake<float>(), false);
  CHECK(count(impure, "inline_asm") == 3);
  CHECK(count(impure, "pure=0") == 3);
  std::string ptx = k.ptx(90, 4, fake<float>(), fake<float>(), false);
  CHECK(count(ptx, "lg2.approx.f32") >= 1);  // has side effects: survives LLVM too
  ptxtest::assemble("impure", ptx);
}

TEST_CASE("inline_asm: the verifier checks operands, attributes and constraints", "[ir]") {
  using namespace tle::ir;
  auto check = [](auto&& mutate, const char* phrase) {
    Function f;
    f.name = "v";
    Type t = scalar_type(DType::f32).with_shape({8});
    Value* x = f.entry().add_arg(scalar_type(DType::f32));
    Builder b(&f.entry());
    Value* xs = b.create(OpKind::Broadcast, {b.create(OpKind::Reshape, {x}, {t.with_shape({1})})->result()}, {t})->result();
    Op* op = b.create(OpKind::InlineAsm, {xs}, {t},
                      {{"asm", std::string("ex2.approx.f32 $0, $1;")}, {"constraints", std::string("=f,f")},
                       {"pure", int64_t(1)}, {"pack", int64_t(1)}});
    mutate(*op, x);
    if (!phrase) {
      CHECK_NOTHROW(verify(f));
      return;
    }
    try {
      verify(f);
      FAIL("verify accepted invalid inline_asm: " << phrase);
    } catch (const InternalError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains(phrase));
    }
  };
  check([](Op&, Value*) {}, nullptr);
  check([](Op& op, Value*) { op.attrs["constraints"] = std::string("=f,f,f"); }, "has 3 register constraints");
  check([](Op& op, Value*) { op.attrs["constraints"] = std::string("=r,d"); }, "does not fit operand 0");
  check([](Op& op, Value*) { op.attrs.erase("asm"); }, "missing string attribute 'asm'");
  check([](Op& op, Value*) { op.attrs["pure"] = int64_t(2); }, "pure must be 0 or 1");
  check([](Op& op, Value*) { op.attrs["pack"] = int64_t(8); }, "pack must be 1, 2 or 4");
  check([](Op& op, Value* x) { op.operands[0] = x; }, "shape differs from the result");
  check([](Op& op, Value*) { op.operands.clear(); }, "at least one operand");
}

// ============================================================================ errors

TEST_CASE("inline_asm: trace-time errors name the call", "[errors]") {
  std::vector<float> buf(64, 1.0f);
  // Kernel lambdas capture nothing: each case's body reaches the kernel through this hook.
  static std::function<void(Tile<float>)> hook;
  auto run = [&](auto&& body) {
    hook = body;
    auto k = jit("asm_err", [](Ptr<float> x) { hook(load(x + arange(0, 16))); });
    return k.ir(false, buf.data());
  };
  int line = 0;
  SECTION("constraint count") {
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("add.f32 $0, $1, $2;", "=f,f", {v, v}); }); },
                 "has 2 register constraints, but 1 result and 2 operands with pack = 1 need 3", line);
  }
  SECTION("letter for the dtype") {
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,d", {v}); }); },
                 "constraint 1 ('d') does not fit operand 0, f32", line);
    expect_error(
        [&] {
          run([&](Tile<float> v) {
            Tile<int32_t> i = v.to<int32_t>();
            line = __LINE__; inline_asm<int32_t>("add.s32 $0, $1, $1;", "=f,r", {i});
          });
        },
        "constraint 0 ('=f') does not fit the result, i32", line);
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,=f", {v}); }); },
                 "must be an input", line);
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("ex2.approx.f32 $0, $1;", "f,f", {v}); }); },
                 "must be an output", line);
  }
  SECTION("empty asm, $n out of range, pack, unsupported dtypes") {
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("  ", "=f,f", {v}); }); },
                 "the asm text is empty", line);
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("ex2.approx.f32 $0, $2;", "=f,f", {v}); }); },
                 "refers to $2, but there are only 2 registers", line);
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {v}, true, 3); }); },
                 "pack must be 1, 2 or 4", line);
    expect_error(
        [&] {
          run([&](Tile<float> v) {
            Tile<int8_t> b = v.to<int8_t>();
            line = __LINE__; inline_asm<int8_t>("mov.b16 $0, $1;", "=h,h", {b});
          });
        },
        "no 8-bit registers", line);
    expect_error([&] { run([&](Tile<float> v) { line = __LINE__; inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {}); }); },
                 "at least one operand", line);
    expect_error(
        [&] {
          run([&](Tile<float> v) {
            Tile<int32_t> a = arange(0, 8);
            line = __LINE__; inline_asm<float>("add.f32 $0, $1, $2;", "=f,f,r", {v, a});
          });
        },
        "cannot be broadcast", line);
  }
}

TEST_CASE("inline_asm: the CPU backend refuses it at the op's line", "[errors]") {
  static int line;  // set while tracing (kernel lambdas capture nothing)
  line = 0;
  auto k = jit("asm_on_cpu", [](Ptr<float> x, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<float> v = load(x + o);
    line = __LINE__; Tile<float> r = inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {v});
    store(x + o, r);
  });
  std::vector<float> buf(16, 1.0f);
  expect_error([&] { k(Grid(1).backend(Backend::CPU), buf.data(), 16); }, "inline_asm runs on the GPU backend only",
               line);
  CHECK(buf[0] == 1.0f);  // nothing ran
  // Still refused on a second launch (a failed compile is not cached as a success).
  expect_error([&] { k(Grid(1).backend(Backend::CPU), buf.data(), 16); }, "inline_asm runs on the GPU backend only",
               line);
}

// ============================================================================ GPU

TEST_CASE("gpu: inline ex2.approx.f32 is within 2 ulp of exp2", "[.gpu]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  auto k = jit("asm_ex2_vs_exp2", [](Ptr<float> x, Ptr<float> a, Ptr<float> b, Ptr<int32_t> c, Tile<int32_t> n,
                                     Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = o < n;
    Tile<float> v = load(x + o, m, 0.0f);
    store(a + o, inline_asm<float>("ex2.approx.f32 $0, $1;", "=f,f", {v}), m);
    store(b + o, exp2(v), m);
    store(c + o, inline_asm<int32_t>("add.s32 $0, $1, $2;", "=r,r,r", {o, Tile<int32_t>(7)}), m);
  });
  const int n = 5000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = -30.0f + 60.0f * float(i) / float(n);  // results stay normal
  DeviceBuffer<float> dx(n), da(n), db(n);
  DeviceBuffer<int32_t> dc(n);
  dx.copy_from_host(x.data(), n);
  k(Grid(cdiv(n, 256)).backend(Backend::GPU), dx.data(), da.data(), db.data(), dc.data(), n, 256);
  synchronize();
  std::vector<float> a(n), b(n);
  std::vector<int32_t> c(n);
  da.copy_to_host(a.data(), n);
  db.copy_to_host(b.data(), n);
  dc.copy_to_host(c.data(), n);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    int64_t ulp = std::llabs(int64_t(std::bit_cast<int32_t>(a[i])) - int64_t(std::bit_cast<int32_t>(b[i])));
    if (ulp > 2 && bad++ < 5) FAIL_CHECK("x = " << x[i] << ": ex2.approx " << a[i] << ", exp2 " << b[i] << " (" << ulp << " ulp)");
    if (c[i] != i + 7 && bad++ < 5) FAIL_CHECK("add.s32 at " << i << ": " << c[i]);
  }
  CHECK(bad == 0);
}
