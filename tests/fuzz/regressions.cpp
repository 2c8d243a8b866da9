// tests/fuzz/regressions.cpp - every fuzz program that ever failed, as a named regression test
// (tag [fuzz][regression]). Each test case is what `tle_fuzz` printed for the reduced failing
// program (fuzz::to_cpp): the kernel as C++ source, its buffers, and a launch on the interpreter
// and on the CPU backend whose outputs must agree (integers and floats bit for bit, NaN = NaN).
// docs/testing.md lists the bug behind each one.
#include "fuzz/regression.hpp"

// ---- regressions (appended by hand from tle_fuzz's output)
//
// No difference between the interpreter and the CPU backend has come from a real bug yet
// (docs/testing.md lists the runs). The three below are the reduced programs of bugs planted, one
// at a time, to check that the fuzzer catches them; each fails with its bug back in place
// (checked with all three planted) and guards that corner.

// tle_fuzz --seed 13 --reduce, with the CPU backend giving masked-off lanes 0 instead of `other`
// (src/backend/cpu/lower_memory.cpp): +0.0 where -0.0 was asked for.
TEST_CASE("fuzz regression: a fully masked load yields its other value -0.0 (planted in the CPU backend)", "[fuzz][regression]") {
  auto kernel = tle::jit("fuzz_13", [](tle::Ptr<tle::f16> a0, tle::Ptr<tle::f16> a1) {
    tle::Tile<int32_t> v26 = tle::full<int32_t>({5}, int64_t(0));
    tle::Tile<bool> v32 = tle::full<bool>({5}, false);
    tle::Ptr<tle::f16> v33 = a0 + v26;
    tle::Tile<tle::f16> v34 = tle::load(v33, v32, -0x0p+0);
    tle::Tile<int32_t> v39 = tle::full<int32_t>({5}, int64_t(0));
    tle::Ptr<tle::f16> v40 = a1 + v39;
    tle::store(v40, v34);
  });
  fuzz::Program p;
  p.seed = 13ull;
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f16, 100, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f16, 46, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(1, 1, 1).backend(backend), m.ptr<tle::f16>(0), m.ptr<tle::f16>(1));
  });
}

// tle_fuzz --seed 3 --reduce, with ScalarEmitter computing a signed x % 0 as 0 instead of x (rule E04).
// The divisor is 0 only at run time (num_programs(0) * program_id(1) with one program), so folding
// cannot see it.
TEST_CASE("fuzz regression: INT_MAX % a run-time 0 is INT_MAX (planted in ScalarEmitter)", "[fuzz][regression]") {
  auto kernel = tle::jit("fuzz_3", [](tle::Ptr<int32_t> a0) {
    tle::Tile<int32_t> v3 = tle::program_id(1);
    tle::Tile<int32_t> v5 = tle::num_programs(0);
    tle::Tile<int32_t> v7 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v8 = v3 + v7;
    tle::Tile<int32_t> v9 = v5 * v8;
    tle::Tile<int32_t> v68 = tle::Tile<int32_t>(int64_t(2147483647));
    tle::Tile<int32_t> v69 = v68 % v9;
    tle::Tile<int32_t> v99 = tle::Tile<int32_t>(int64_t(0));
    tle::Ptr<int32_t> v100 = a0 + v99;
    tle::store(v100, v69);
  });
  fuzz::Program p;
  p.seed = 3ull;
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i32, 8, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(1, 1, 1).backend(backend), m.ptr<int32_t>(0));
  });
}

// tle_fuzz --seed 375 --reduce, with canonicalize rewriting x - x to 0 for floats as for integers
// (src/passes/canonicalize.cpp). The interpreter runs the traced IR; the CPU backend runs it after the
// passes, so a wrong rewrite shows as a difference.
TEST_CASE("fuzz regression: x - x of f16 inf and NaN is NaN, not 0 (planted in canonicalize)", "[fuzz][regression]") {
  auto kernel = tle::jit("fuzz_375", [](tle::Ptr<tle::f16> a0, tle::Ptr<tle::f16> a1) {
    tle::Tile<int32_t> v43 = tle::arange(0, 32);
    tle::Tile<int32_t> v44 = tle::reshape(v43, {4, 8});
    tle::Tile<int32_t> v45 = tle::permute(v44, {1, 0});
    tle::Tile<int32_t> v47 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v48 = v47 + v45;
    tle::Tile<int32_t> v69 = tle::arange(0, 32);
    tle::Tile<int32_t> v70 = tle::reshape(v69, {8, 4});
    tle::Ptr<tle::f16> v71 = a0 + v70;
    tle::Tile<tle::f16> v72 = tle::load(v71);
    tle::Tile<tle::f16> v73 = v72 - v72;
    tle::Ptr<tle::f16> v111 = a1 + v48;
    tle::store(v111, v73);
  });
  fuzz::Program p;
  p.seed = 375ull;
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f16, 32, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f16, 192, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(1, 1, 1).backend(backend), m.ptr<tle::f16>(0), m.ptr<tle::f16>(1));
  });
}
