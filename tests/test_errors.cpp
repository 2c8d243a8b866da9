// tests/test_errors.cpp - every user-error path: the tle::UserError's message (a key phrase), its
// file (this file) and line (the line of the offending call, taken with __LINE__ on that line),
// and that the library works normally afterwards.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tle/tle.hpp"
#include "error_util.hpp"

using namespace tle;

namespace {

/// A correct kernel, launched after each error: the library must still work.
void still_usable() {
  static auto inc = jit("errors_still_usable", [](Ptr<float> x, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> m = o < n;
    store(x + o, load(x + o, m) + 1.0f, m);
  });
  std::vector<float> x = {1, 2, 3, 4, 5, 100};
  inc(Grid(1), x.data(), 5, 8);
  CHECK(x == std::vector<float>{2, 3, 4, 5, 6, 100});
}

/// Runs f, which must throw tle::UserError whose message contains `phrase`, at this file and at
/// `line` (read after f ran: kernels set it while tracing).
template <class F> void expect_error(F&& f, const std::string& phrase, const int& line) {
  errtest::expect_user_error(f, {phrase}, "test_errors.cpp", line);
  still_usable();
}

std::vector<float> buf(64, 1.0f);

// Set by kernels while they are traced: kernel lambdas capture nothing (tle::jit rejects captures),
// so the line of the offending call reaches the test through these.
int line = 0;
int stages = 0;

}  // namespace

// ============================================================================ shapes and dtypes

TEST_CASE("errors: shape mismatch in a binary op", "[errors]") {
  line = 0;
  auto k = jit("err_binary_shape", [](Ptr<float> x) {
    Tile<float> a = load(x + arange(0, 4)), b = load(x + arange(0, 8));
    line = __LINE__; Tile<float> c = a + b;
    store(x + arange(0, 4), c);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "cannot be broadcast", line);
  // Nothing was cached: the same launch reports the same error again.
  line = 0;
  expect_error([&] { k(Grid(1), buf.data()); }, "cannot be broadcast", line);
  // Also in a comparison and with 2-D tiles.
  auto k2 = jit("err_cmp_shape", [](Ptr<float> x) {
    Tile<float> a = load(x + expand_dims(arange(0, 4), 1) * 8 + expand_dims(arange(0, 8), 0));  // [4, 8]
    Tile<float> b = load(x + arange(0, 4));                                                     // [4]
    line = __LINE__; Tile<bool> c = a < b;
    store(x + arange(0, 8), sum(c.to<float>(), 0));
  });
  expect_error([&] { k2(Grid(1), buf.data()); }, "cannot be broadcast", line);
}

TEST_CASE("errors: shape mismatch in store", "[errors]") {
  line = 0;
  auto k = jit("err_store_shape", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; store(x + arange(0, 4), v);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "store", line);
  auto k2 = jit("err_store_rank", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 4), 0));  // [1, 4]
    line = __LINE__; store(x + arange(0, 4), v);
  });
  expect_error([&] { k2(Grid(1), buf.data()); }, "does not fit the pointer tile's shape", line);
  auto k3 = jit("err_store_mask_shape", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; store(x + o, 1.0f, arange(0, 8) < 3);
  });
  expect_error([&] { k3(Grid(1), buf.data()); }, "cannot be broadcast", line);
}

namespace {
template <class A, class B> concept CanDot = requires(const A& a, const B& b) { tle::dot(a, b); };
}

TEST_CASE("errors: dtype and shape mismatches in dot", "[errors]") {
  // Different element types of a and b do not even compile (one T for both); no silent mixing.
  STATIC_REQUIRE_FALSE(CanDot<Tile<float>, Tile<int8_t>>);
  STATIC_REQUIRE_FALSE(CanDot<Tile<f16>, Tile<bf16>>);
  STATIC_REQUIRE(CanDot<Tile<f16>, Tile<f16>>);
  line = 0;
  auto k = jit("err_dot_dtype", [](Ptr<int32_t> x, Ptr<int32_t> y) {
    Tile<int32_t> a = load(x + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0));
    line = __LINE__; Tile<int32_t> c = dot(a, a);
    store(y + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0), c);
  });
  std::vector<int32_t> xi(256), yi(256);
  expect_error([&] { k(Grid(1), xi.data(), yi.data()); }, "dot supports f16, bf16, f32", line);
  auto k2 = jit("err_dot_tf32_f16", [](Ptr<f16> x, Ptr<float> y) {
    Tile<f16> a = load(x + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0));
    line = __LINE__; Tile<float> c = dot(a, a, Precision::TF32);
    store(y + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0), c);
  });
  std::vector<f16> xh(256);
  std::vector<float> yf(256);
  expect_error([&] { k2(Grid(1), xh.data(), yf.data()); }, "TF32", line);
  auto k3 = jit("err_dot_inner", [](Ptr<float> x, Ptr<float> y) {
    Tile<float> a = load(x + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0));  // [16, 16]
    Tile<float> b = load(x + expand_dims(arange(0, 8), 1) * 16 + expand_dims(arange(0, 16), 0));   // [8, 16]
    line = __LINE__; Tile<float> c = dot(a, b);
    store(y + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0), c);
  });
  expect_error([&] { k3(Grid(1), yf.data(), yf.data()); }, "inner dimensions differ", line);
  auto k4 = jit("err_dot_acc", [](Ptr<float> x, Ptr<float> y) {
    Tile<float> a = load(x + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0));
    line = __LINE__; Tile<float> c = dot(a, a, zeros<float>({16, 8}));
    store(y + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0), c);
  });
  expect_error([&] { k4(Grid(1), yf.data(), yf.data()); }, "accumulator", line);
}

TEST_CASE("errors: bad axis in sum, expand_dims and permute", "[errors]") {
  line = 0;
  auto ks = jit("err_sum_axis", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; Tile<float> s = sum(v, 1);
    store(x, s);
  });
  expect_error([&] { ks(Grid(1), buf.data()); }, "axis 1 is out of range", line);
  auto ks2 = jit("err_max_axis", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; Tile<int32_t> s = argmax(v, -2);
    store(x, s.to<float>());
  });
  expect_error([&] { ks2(Grid(1), buf.data()); }, "axis -2 is out of range", line);
  auto ke = jit("err_expand_axis", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; Tile<float> e = expand_dims(v, 3);
    store(x + arange(0, 8), reshape(e, {8}));
  });
  expect_error([&] { ke(Grid(1), buf.data()); }, "axis 3 is out of range", line);
  auto kp = jit("err_permute_order", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0));
    line = __LINE__; Tile<float> p = permute(v, {0, 2});
    store(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0), p);
  });
  expect_error([&] { kp(Grid(1), buf.data()); }, "not a permutation", line);
  auto kp2 = jit("err_permute_dup", [](Ptr<float> x) {
    Tile<float> v = load(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0));
    line = __LINE__; Tile<float> p = permute(v, {1, 1});
    store(x + expand_dims(arange(0, 4), 1) * 4 + expand_dims(arange(0, 4), 0), p);
  });
  expect_error([&] { kp2(Grid(1), buf.data()); }, "not a permutation", line);
  auto kc = jit("err_cumsum_scalar", [](Ptr<float> x) {
    Tile<float> v = load(x);
    line = __LINE__; Tile<float> c = cumsum(v, 0);
    store(x, c);
  });
  expect_error([&] { kc(Grid(1), buf.data()); }, "cannot scan a scalar", line);
}

TEST_CASE("errors: a tile dimension of 0 (rule E07)", "[errors]") {
  line = 0;
  auto k = jit("err_arange_empty", [](Ptr<float> x) {
    line = __LINE__; Tile<int32_t> o = arange(0, 0);
    store(x + o, 1.0f);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "arange(0, 0)", line);
  auto k1 = jit("err_arange_negative", [](Ptr<float> x) {
    line = __LINE__; Tile<int32_t> o = arange(5, 3);
    store(x + o, 1.0f);
  });
  expect_error([&] { k1(Grid(1), buf.data()); }, "arange(5, 3)", line);
  // A Constexpr block size of 0 reaches arange the same way.
  auto k2 = jit("err_arange_block0", [](Ptr<float> x, Constexpr<int> BLOCK) {
    line = __LINE__; Tile<int32_t> o = arange(0, BLOCK);
    store(x + o, 1.0f);
  });
  expect_error([&] { k2(Grid(1), buf.data(), 0); }, "at least 1", line);
  // The constexpr came from the launch: the message names the launch's line and the value too.
  const int op_line = line;
  const int launch_line = __LINE__ + 2;
  errtest::expect_user_error(
      [&] { k2(Grid(1), buf.data(), 0); },
      {"at least 1", "test_errors.cpp:" + std::to_string(launch_line) +
                         ": note: kernel err_arange_block0(Ptr<f32>, Constexpr<integer>) was traced for this launch, "
                         "constexpr argument 2 = 0"},
      "test_errors.cpp", op_line);
  k2(Grid(1), buf.data(), 4);  // the same kernel with a valid block works
  auto k3 = jit("err_zeros_0", [](Ptr<float> x) {
    line = __LINE__; Tile<float> z = zeros<float>({0});
    store(x, sum(z, 0));
  });
  expect_error([&] { k3(Grid(1), buf.data()); }, "dimension <= 0", line);
  auto k4 = jit("err_full_0", [](Ptr<float> x) {
    line = __LINE__; Tile<float> z = full<float>({4, 0}, 1.0f);
    store(x, sum(sum(z, 0), 0));
  });
  expect_error([&] { k4(Grid(1), buf.data()); }, "dimension <= 0", line);
  auto k5 = jit("err_broadcast_0", [](Ptr<float> x) {
    Tile<float> v = load(x);
    line = __LINE__; Tile<float> z = broadcast_to(v, {0});
    store(x, sum(z, 0));
  });
  expect_error([&] { k5(Grid(1), buf.data()); }, "dimension <= 0", line);
  auto k6 = jit("err_histogram_0", [](Ptr<int32_t> x) {
    Tile<int32_t> v = load(x + arange(0, 4));
    line = __LINE__; Tile<int32_t> h = histogram(v, 0);
    store(x, sum(h, 0));
  });
  std::vector<int32_t> xi(4);
  expect_error([&] { k6(Grid(1), xi.data()); }, "bins must be at least 1", line);
  auto k7 = jit("err_histogram_ranks_0", [](Ptr<int32_t> x) {
    Tile<int32_t> v = load(x + arange(0, 4));
    line = __LINE__; Tile<int32_t> r = histogram_ranks(v, 0);
    store(x + arange(0, 4), r);
  });
  expect_error([&] { k7(Grid(1), xi.data()); }, "histogram_ranks: bins must be at least 1", line);
  auto k8 = jit("err_histogram_ranks_2d", [](Ptr<int32_t> x) {
    Tile<int32_t> v = load(x + expand_dims(arange(0, 2), 1) * 2 + expand_dims(arange(0, 2), 0));
    line = __LINE__; Tile<int32_t> r = histogram_ranks(v, 4);
    store(x + expand_dims(arange(0, 2), 1) * 2 + expand_dims(arange(0, 2), 0), r);
  });
  expect_error([&] { k8(Grid(1), xi.data()); }, "histogram_ranks needs a 1-D tile", line);
  auto k9 = jit("err_histogram_ranks_bins", [](Ptr<int32_t> x) {
    Tile<int32_t> v = load(x + arange(0, 4));
    line = __LINE__; Tile<int32_t> r = histogram_ranks(v, int64_t(1) << 40);
    store(x + arange(0, 4), r);
  });
  expect_error([&] { k9(Grid(1), xi.data()); }, "bins = 1099511627776 is more than 2^20", line);
}

TEST_CASE("errors: arange with a runtime bound", "[errors]") {
  line = 0;
  auto k = jit("err_arange_runtime", [](Ptr<float> x, Tile<int32_t> n) {
    line = __LINE__; Tile<int32_t> o = arange(0, n);
    store(x + o, 1.0f);
  });
  expect_error([&] { k(Grid(1), buf.data(), 8); }, "known at trace time", line);
}

TEST_CASE("errors: constants that do not fit their tile", "[errors]") {
  line = 0;
  auto k = jit("err_const_i8", [](Ptr<int8_t> x) {
    Tile<int8_t> v = load(x + arange(0, 4));
    line = __LINE__; Tile<int8_t> w = v + 300;
    store(x + arange(0, 4), w);
  });
  std::vector<int8_t> x8(4);
  expect_error([&] { k(Grid(1), x8.data()); }, "the constant 300 does not fit in i8", line);
  auto k2 = jit("err_const_u8", [](Ptr<uint8_t> x) {
    Tile<uint8_t> v = load(x + arange(0, 4));
    line = __LINE__; Tile<uint8_t> w = v * -1;
    store(x + arange(0, 4), w);
  });
  std::vector<uint8_t> xu(4);
  expect_error([&] { k2(Grid(1), xu.data()); }, "the constant -1 does not fit in u8", line);
  auto k3 = jit("err_const_fill", [](Ptr<int8_t> x) {
    line = __LINE__; Tile<int8_t> v = load(x + arange(0, 4), arange(0, 4) < 2, 128);
    store(x + arange(0, 4), v);
  });
  expect_error([&] { k3(Grid(1), x8.data()); }, "does not fit in i8", line);
}

// ============================================================================ launches

TEST_CASE("errors: a DeviceBuffer passed to a launch on the CPU backend", "[errors]") {
  auto k = jit("err_device_buffer_on_cpu", [](Ptr<float> x, Tile<int32_t> n) { store(x + arange(0, 4), 1.0f, arange(0, 4) < n); });
  DeviceBuffer<float> gpu_memory;  // empty: no driver needed, but still device memory by type
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1).backend(Backend::CPU), gpu_memory, 4); }, "is a tle::DeviceBuffer (GPU memory)", line);
}

TEST_CASE("errors: a GPU kernel that needs more shared memory than a block has", "[errors]") {
  line = 0;
  auto k = jit("err_smem", [](Ptr<float> x, Constexpr<int> N) {
    Tile<float> v = load(x + arange(0, N));
    line = __LINE__; Tile<float> c = sort(v, 0);  // sorts stage keys, indices and elements in shared memory: 768 KB
    store(x + arange(0, N), c);
  });
  std::vector<float> big(65536);
  expect_error([&] { (void)k.ptx(90, 4, big.data(), 65536); }, "bytes of shared memory per program", line);
  // The sentence names the op that stages its tiles there.
  expect_error([&] { (void)k.ptx(90, 4, big.data(), 65536); },
               "(the largest user is this sort, which stages its tiles in shared memory); use smaller tiles", line);
}

TEST_CASE("errors: a GPU tile too large for registers is refused before code generation", "[errors]") {
  // Issue #18 item 2: a [4, 65536] f32 tile on 4 warps took 24 s in the driver's JIT (292 KB of
  // PTX, almost all spilled). Now: a UserError at the op, with the registers it needs and the
  // num_warps that would fit, before any LLVM code is generated.
  line = 0;
  auto k = jit("err_huge_tile", [](Ptr<float> x, Constexpr<int> R, Constexpr<int> C) {
    Tile<int32_t> offs = expand_dims(arange(0, R), 1) * C + expand_dims(arange(0, C), 0);
    line = __LINE__; Ptr<float> p = x + offs;
    store(p, load(p) * 2.0f);
  });
  std::vector<float> big(4);
  // 2048 elements per thread; the pointer tile takes two registers each
  expect_error([&] { (void)k.ptx(90, 4, big.data(), 4, 65536); },
               "a ptr<f32>[4,65536] tile needs 4096 32-bit registers per thread on 4 warps", line);
  expect_error([&] { (void)k.ptx(90, 4, big.data(), 4, 65536); },
               "even num_warps 32 would need about 512 per thread: process the tile in smaller chunks", line);
  // [1, 32768] on one warp: 16 warps would fit
  expect_error([&] { (void)k.ptx(90, Grid(1).with_warps(1), big.data(), 1, 32768); },
               "launch with num_warps 16 (Grid::with_warps; about 128 registers per thread)", line);
  // the same row on 16 warps compiles (128 elements per thread)
  CHECK_NOTHROW(k.ptx(90, Grid(1).with_warps(16), big.data(), 1, 32768));
}

TEST_CASE("errors: a constexpr value that its C++ type cannot hold", "[errors]") {
  auto k = jit("err_constexpr_range", [](Ptr<float> x, Constexpr<uint8_t> B) { store(x + arange(0, int(B)), 1.0f); });
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1), buf.data(), 300); }, "the value 300 does not fit in u8", line);
  line = __LINE__; expect_error([&] { k(Grid(1), buf.data(), -1); }, "the value -1 does not fit in u8", line);
  k(Grid(1), buf.data(), 8);
}

TEST_CASE("errors: a unary operator on a Tile that has no value reports the user's line", "[errors]") {
  line = 0;
  auto k = jit("err_unary_no_value", [](Ptr<float> x) {
    Tile<float> never_assigned;
    line = __LINE__; Tile<float> y = -never_assigned;
    store(x, y);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "has no value yet", line);
}

// A wrong argument count, a void* for a Ptr<T> and a raw-pointer parameter do not compile:
// tests/compile_fail/launch_checks.cpp.

TEST_CASE("errors: a pointer not aligned to its element size (every pointer, both backends)", "[errors]") {
  auto k = jit("err_misaligned", [](Ptr<float> x, Tile<int32_t> n) { store(x + arange(0, 4), 1.0f, arange(0, 4) < n); });
  float* odd = reinterpret_cast<float*>(reinterpret_cast<char*>(buf.data()) + 1);
  std::vector<double> d(4);
  auto kd = jit("err_misaligned_f64", [](Ptr<double> x) { store(x, 1.0); });
  double* half_off = reinterpret_cast<double*>(reinterpret_cast<char*>(d.data()) + 4);
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1), odd, 4); }, "is not aligned to the 4-byte size of f32", line);
  line = __LINE__; expect_error([&] { kd(Grid(1), half_off); }, "is not aligned to the 8-byte size of f64", line);
  // The check is the argument's, not the backend's: a GPU launch and Kernel::ptx refuse it too.
  line = __LINE__; expect_error([&] { k(Grid(1).backend(Backend::GPU), odd, 4); }, "not aligned", line);
  line = __LINE__; expect_error([&] { (void)k.ptx(90, 4, odd, 4); }, "not aligned", line);
  // An element address is fine, whatever its 16-byte alignment.
  k(Grid(1), buf.data() + 1, 4);
  CHECK(buf[1] == 1.0f);
}

TEST_CASE("errors: wrong pointer element type and non-pointers", "[errors]") {
  auto k = jit("err_ptr_type", [](Ptr<float> x, Tile<int32_t> n) { store(x + arange(0, 4), 1.0f, arange(0, 4) < n); });
  std::vector<double> d(4);
  std::vector<int32_t> i(4);
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1), d.data(), 4); }, "got a pointer to f64", line);
  line = __LINE__; expect_error([&] { k(Grid(1), i.data(), 4); }, "got a pointer to i32", line);
  line = __LINE__; expect_error([&] { k(Grid(1), 7, 4); }, "pass a pointer", line);
  line = __LINE__; expect_error([&] { k(Grid(1), buf.data(), buf.data()); }, "pass an integer", line);
}

TEST_CASE("errors: a float passed to an integer scalar parameter", "[errors]") {
  auto k = jit("err_float_to_int", [](Ptr<float> x, Tile<int32_t> n) { store(x + arange(0, 4), 1.0f, arange(0, 4) < n); });
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1), buf.data(), 1.5); }, "got a double; pass an integer", line);
  line = __LINE__; expect_error([&] { k(Grid(1), buf.data(), 2.0f); }, "got a float; pass an integer", line);
  line = __LINE__; expect_error([&] { k(Grid(1), buf.data(), f16(2.0)); }, "pass an integer", line);
  auto kc = jit("err_float_to_constexpr_int", [](Ptr<float> x, Constexpr<int> B) { store(x + arange(0, B), 1.0f); });
  line = __LINE__; expect_error([&] { kc(Grid(1), buf.data(), 4.0); }, "pass an integer value", line);
  auto kb = jit("err_constexpr_bool", [](Ptr<float> x, Constexpr<bool> B) { store(x, B ? 1.0f : 2.0f); });
  line = __LINE__; expect_error([&] { kb(Grid(1), buf.data(), 2); }, "pass true or false", line);
}

TEST_CASE("errors: an integer that does not fit its parameter", "[errors]") {
  auto k = jit("err_int_fit", [](Ptr<int8_t> x, Tile<int8_t> v) { store(x, v); });
  std::vector<int8_t> x8(1);
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1), x8.data(), 300); }, "the value 300 does not fit in i8", line);
  line = __LINE__; expect_error([&] { k(Grid(1), x8.data(), -129); }, "does not fit in i8", line);
  k(Grid(1), x8.data(), -128);
  CHECK(x8[0] == -128);
  auto ku = jit("err_uint_fit", [](Ptr<uint32_t> x, Tile<uint32_t> v) { store(x, v); });
  uint32_t u = 0;
  line = __LINE__; expect_error([&] { ku(Grid(1), &u, -1); }, "the value -1 does not fit in u32", line);
  line = __LINE__; expect_error([&] { ku(Grid(1), &u, int64_t(1) << 32); }, "does not fit in u32", line);
  auto ki = jit("err_i32_fit", [](Ptr<int32_t> x, Tile<int32_t> v) { store(x, v); });
  int32_t i = 0;
  line = __LINE__; expect_error([&] { ki(Grid(1), &i, uint64_t(1) << 31); }, "does not fit in i32", line);
  auto kb = jit("err_bool_fit", [](Ptr<bool> x, Tile<bool> v) { store(x, v); });
  bool b = false;
  line = __LINE__; expect_error([&] { kb(Grid(1), &b, 2); }, "does not fit in i1", line);
}

TEST_CASE("errors: launch grid beyond the limits", "[errors]") {
  auto k = jit("err_grid", [](Ptr<float> x) { store(x, 1.0f); });
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1, 65536, 1), buf.data()); }, "axis y is 65536, outside the limit 0..65535", line);
  line = __LINE__; expect_error([&] { k(Grid(1, 1, 65536), buf.data()); }, "axis z is 65536, outside the limit 0..65535", line);
  line = __LINE__; expect_error([&] { k(Grid(int64_t(1) << 31), buf.data()); }, "axis x is 2147483648, outside the limit 0..2147483647", line);
  line = __LINE__; expect_error([&] { k(Grid(1, -1), buf.data()); }, "axis y is -1", line);
}

TEST_CASE("errors: launch options outside their ranges name the Grid's line", "[errors]") {
  auto k = jit("err_options", [](Ptr<float> x) { store(x, 1.0f); });
  line = 0;
  line = __LINE__; expect_error([&] { k(Grid(1).with_warps(6), buf.data()); }, "num_warps 6 (Grid::with_warps)", line);
  line = __LINE__; expect_error([&] { k(Grid(1).with_stages(9), buf.data()); }, "num_stages 9 (Grid::with_stages)", line);
  for (int r : {-1, 1, 23, 256}) {
    INFO("maxnreg " << r);
    line = __LINE__; expect_error([&] { k(Grid(1).with_maxnreg(r), buf.data()); }, "(Grid::with_maxnreg): must be 0 (no limit) or a register count from 24 to 255", line);
    line = __LINE__; expect_error([&] { (void)k.ptx(90, Grid(1).with_maxnreg(r), buf.data()); }, "Grid::with_maxnreg", line);
  }
  for (int r : {0, 24, 255}) {  // the bounds themselves are accepted (the launch runs on the CPU: no effect there)
    buf[0] = 0.0f;
    k(Grid(1).with_maxnreg(r).backend(Backend::CPU), buf.data());
    CHECK(buf[0] == 1.0f);
  }
}

// ============================================================================ device control flow

TEST_CASE("errors: a tile used after the region that defined it ended", "[errors]") {
  line = 0;
  auto k = jit("err_stale_loop", [](Ptr<float> x, Tile<int32_t> n) {
    std::optional<Tile<float>> inner;  // created inside the loop, so never loop-carried
    for (auto i : range(0, n)) inner.emplace(load(x + i));
    line = __LINE__; store(x, *inner + 1.0f);
  });
  expect_error([&] { k(Grid(1), buf.data(), 4); }, "already ended", line);
  auto k2 = jit("err_stale_if", [](Ptr<float> x, Tile<int32_t> n) {
    std::optional<Tile<float>> inner;
    if_(n > 2, [&] { inner.emplace(load(x)); });
    line = __LINE__; store(x + 1, *inner);
  });
  expect_error([&] { k2(Grid(1), buf.data(), 4); }, "already ended", line);
}

TEST_CASE("errors: a loop's pipelining depth outside 0..8", "[errors]") {
  line = 0;
  auto k = jit("err_loop_stages", [](Ptr<float> x, Tile<int32_t> n) {
    line = __LINE__; for (auto i : range(0, n, 1, {.num_stages = stages})) store(x + i, 1.0f);
  });
  for (int s : {-1, 9}) {
    stages = s;
    expect_error([&] { k(Grid(1), buf.data(), 4); }, "range(..., {.num_stages = " + std::to_string(s) + "}): a loop's pipelining depth is 1 (off) to 8", line);
  }
  stages = 8;  // accepted; the CPU ignores it
  std::vector<float> x(4, 0.0f);
  k(Grid(1).backend(Backend::CPU), x.data(), 4);
  CHECK(x == std::vector<float>(4, 1.0f));
}

TEST_CASE("errors: break inside a device loop", "[errors]") {
  line = 0;
  auto k = jit("err_break", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> acc = 0.0f;
    line = __LINE__; for (auto i : range(0, n)) {
      acc = acc + load(x + i);
      break;
    }
    store(x, acc);
  });
  expect_error([&] { k(Grid(1), buf.data(), 4); }, "`break` or `return`", line);
  // Also when the break is the last thing the kernel does (reported at the end of tracing).
  auto k2 = jit("err_break_last", [](Ptr<float> x, Tile<int32_t> n) {
    line = __LINE__; for (auto i : range(0, n)) {
      store(x + i, 0.0f);
      break;
    }
  });
  expect_error([&] { k2(Grid(1), buf.data(), 4); }, "`break` or `return`", line);
}

TEST_CASE("errors: a loop-carried tile changing shape or type", "[errors]") {
  line = 0;
  auto k = jit("err_carried_shape", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> acc = zeros<float>({4});
    line = __LINE__; for (auto i : range(0, n)) {
      acc = zeros<float>({8}) + i.to<float>();
    }
    store(x + arange(0, 4), acc);
  });
  expect_error([&] { k(Grid(1), buf.data(), 4); }, "changes from", line);
  auto k2 = jit("err_carried_unset", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> acc;
    line = __LINE__; for (auto i : range(0, n)) {
      acc = load(x + i);
    }
    store(x, acc);
  });
  expect_error([&] { k2(Grid(1), buf.data(), 4); }, "no value before this device loop", line);
}

TEST_CASE("errors: if_ assigning a valueless tile in one branch only", "[errors]") {
  line = 0;
  auto k = jit("err_if_one_branch", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> t;
    line = __LINE__; if_(n > 2, [&] { t = load(x); });
    store(x + 1, t);
  });
  expect_error([&] { k(Grid(1), buf.data(), 4); }, "only one branch", line);
  auto k2 = jit("err_if_types", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> t = 0.0f;
    line = __LINE__; if_(n > 2, [&] { t = load(x); }, [&] { t = zeros<float>({4}); });
    store(x + 1, t);
  });
  expect_error([&] { k2(Grid(1), buf.data(), 4); }, "same type and shape", line);
  auto k3 = jit("err_if_cond", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> t = 0.0f;
    line = __LINE__; if_(arange(0, 4) < n, [&] { t = load(x); });
    store(x + 1, t);
  });
  expect_error([&] { k3(Grid(1), buf.data(), 4); }, "scalar bool condition", line);
}

TEST_CASE("errors: combine function returning a non-scalar", "[errors]") {
  line = 0;
  auto k = jit("err_combine_shape", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; Tile<float> r = reduce(v, 0, [](Tile<float> a, Tile<float> b) { return zeros<float>({4}) + a + b; });
    store(x, r);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "must return a scalar", line);
  auto k2 = jit("err_scan_combine_shape", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; Tile<float> r = associative_scan(v, 0, [](Tile<float> a, Tile<float> b) { return zeros<float>({2}) + a * b; });
    store(x + arange(0, 8), r);
  });
  expect_error([&] { k2(Grid(1), buf.data()); }, "must return a scalar", line);
  auto k3 = jit("err_combine_assigns", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    Tile<float> outside = 0.0f;
    line = __LINE__; Tile<float> r = reduce(v, 0, [&](Tile<float> a, Tile<float> b) { outside = a; return a + b; });
    store(x, r + outside);
  });
  expect_error([&] { k3(Grid(1), buf.data()); }, "must not assign to tiles declared outside", line);
}

TEST_CASE("errors: tuple reduce and scan with mismatched shapes, arity or dtypes", "[errors]") {
  line = 0;
  auto k = jit("err_tuple_shapes", [](Ptr<float> x) {
    Tile<float> a = load(x + arange(0, 8));
    Tile<float> b = load(x + arange(0, 4));
    line = __LINE__; auto [r, q] = reduce(std::tuple{a, b}, 0, [](auto l, auto) { return l; });
    store(x, r + q);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "must have one shape: operand 1 is f32[4], operand 0 is f32[8]", line);
  auto k2 = jit("err_tuple_arity", [](Ptr<float> x) {
    Tile<float> a = load(x + arange(0, 8));
    line = __LINE__; auto [r, q] = reduce(std::tuple{a, a}, 0, [](auto l, auto r) {
      auto [l0, l1] = l;
      auto [r0, r1] = r;
      return std::tuple{l0 + r0, l1 + r1, l0 * r1};
    });
    store(x, r + q);
  });
  expect_error([&] { k2(Grid(1), buf.data()); }, "returns 3 values, expected 2", line);
  auto k3 = jit("err_tuple_dtype", [](Ptr<float> x) {
    Tile<float> a = load(x + arange(0, 8));
    Tile<int32_t> i = arange(0, 8);
    line = __LINE__; auto [r, q] = associative_scan(std::tuple{a, i}, 0, [](auto l, auto r) {
      auto [l0, l1] = l;
      auto [r0, r1] = r;
      return std::tuple{l0 + r0, l0 * r1};  // the second value is f32, the operand i32
    });
    store(x + arange(0, 8), r + q);
  });
  expect_error([&] { k3(Grid(1), buf.data()); }, "must return value 1 (for operand 1) a scalar i32 tile, got f32",
               line);
  auto k4 = jit("err_tuple_scalar", [](Ptr<float> x) {
    Tile<float> a = load(x);
    line = __LINE__; auto [r] = associative_scan(std::tuple{a}, 0, [](auto l, auto) { return l; });
    store(x, r);
  });
  expect_error([&] { k4(Grid(1), buf.data()); }, "associative_scan: cannot scan a scalar", line);
}

TEST_CASE("errors: random numbers with a tile seed or 64-bit offsets", "[errors]") {
  line = 0;
  auto k = jit("err_rand_seed", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 8);
    line = __LINE__; Tile<float> r = rand(o, o);
    store(x + o, r);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "the seed must be a scalar", line);
  auto k2 = jit("err_rand_offsets", [](Ptr<float> x, Tile<int64_t> seed) {
    Tile<int32_t> o = arange(0, 8);
    line = __LINE__; Tile<float> r = randn(seed, cast<int64_t>(o));
    store(x + o, r);
  });
  expect_error([&] { k2(Grid(1), buf.data(), int64_t(1)); }, "offsets must be an int32_t or uint32_t tile", line);
}

// ============================================================================ memory hints, misc

TEST_CASE("errors: unknown or conflicting cache modifier and eviction policy", "[errors]") {
  line = 0;
  auto k = jit("err_cache", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; Tile<float> v = load(x + o, o < 2, 0.0f, MemHints{".zz", "", false});
    store(x + o, v);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "unknown cache modifier '.zz'", line);
  auto k2 = jit("err_evict", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; store(x + o, 1.0f, o < 2, MemHints{"", "evict_sometimes", false});
  });
  expect_error([&] { k2(Grid(1), buf.data()); }, "unknown eviction policy", line);
  auto k3 = jit("err_store_cache", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; store(x + o, 1.0f, o < 2, MemHints{".lu", "", false});
  });
  expect_error([&] { k3(Grid(1), buf.data()); }, "unknown cache modifier '.lu' for a store", line);
  auto k4 = jit("err_both_hints", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; Tile<float> v = load(x + o, o < 2, 0.0f, MemHints{".cg", "evict_last", false});
    store(x + o, v);
  });
  expect_error([&] { k4(Grid(1), buf.data()); }, "PTX ld takes one or the other", line);
  auto k5 = jit("err_volatile_hints", [](Ptr<float> x) {
    Tile<int32_t> o = arange(0, 4);
    line = __LINE__; Tile<float> v = load(x + o, o < 2, 0.0f, MemHints{"", "evict_first", true});
    store(x + o, v);
  });
  expect_error([&] { k5(Grid(1), buf.data()); }, "volatile access takes no cache modifier", line);
}

TEST_CASE("errors: tle operations outside tracing", "[errors]") {
  line = 0;
  line = __LINE__; expect_error([] { (void)arange(0, 4); }, "only run while a kernel is traced", line);
  line = __LINE__; expect_error([] { (void)zeros<float>({4}); }, "only run while a kernel is traced", line);
  line = __LINE__; expect_error([] { Tile<float> t = 1.0f; (void)t; }, "only run while a kernel is traced", line);
  line = __LINE__; expect_error([] { (void)program_id(0); }, "only run while a kernel is traced", line);
}

TEST_CASE("errors: other invalid requests", "[errors]") {
  line = 0;
  auto k = jit("err_unassigned", [](Ptr<float> x) {
    Tile<float> t;
    line = __LINE__; store(x, t + 1.0f);
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "has no value yet", line);
  auto k2 = jit("err_reshape", [](Ptr<float> x) {
    Tile<float> v = load(x + arange(0, 8));
    line = __LINE__; Tile<float> r = reshape(v, {3, 3});
    store(x, sum(sum(r, 0), 0));
  });
  expect_error([&] { k2(Grid(1), buf.data()); }, "changes the number of elements", line);
  auto k3 = jit("err_too_big", [](Ptr<float> x) {
    line = __LINE__; Tile<float> z = zeros<float>({2048, 1024});
    store(x, sum(sum(z, 0), 0));
  });
  expect_error([&] { k3(Grid(1), buf.data()); }, "more than 2^20 elements", line);
  auto k4 = jit("err_bitcast", [](Ptr<float> x) {
    Tile<float> v = load(x);
    line = __LINE__; Tile<int64_t> b = bitcast<int64_t>(v);
    store(x, b.to<float>());
  });
  expect_error([&] { k4(Grid(1), buf.data()); }, "same bit width", line);
  auto k5 = jit("err_program_id_axis", [](Ptr<float> x) {
    line = __LINE__; Tile<int32_t> p = program_id(3);
    store(x, p.to<float>());
  });
  expect_error([&] { k5(Grid(1), buf.data()); }, "axis must be 0, 1 or 2", line);
  auto k6 = jit("err_atomic_f16_and", [](Ptr<f16> x) {
    line = __LINE__; atomic_and(x, 1.0f);
  });
  std::vector<f16> h(1);
  expect_error([&] { k6(Grid(1), h.data()); }, "atomic and is not supported on f16 memory", line);
  auto k7 = jit("err_atomic_u8_add", [](Ptr<uint8_t> x) {
    line = __LINE__; atomic_add(x, 1);
  });
  std::vector<uint8_t> b8(1);
  expect_error([&] { k7(Grid(1), b8.data()); }, "atomic add is not supported on u8 memory", line);
}

// ============================================================================ Kernel::ptx, Kernel::ir

TEST_CASE("errors: a constexpr the GPU refuses (a pointer reshape of padded tiles) names the op and, in a note, the call",
          "[errors]") {
  line = 0;
  auto k = jit("err_block24", [](Ptr<float> x, Constexpr<int> BLOCK) {
    Ptr<float> p = x + expand_dims(arange(0, 3), 1) * BLOCK + expand_dims(arange(0, BLOCK), 0);
    line = __LINE__; Ptr<float> flat = reshape(p, {3 * BLOCK});
    store(flat, 1.0f);
  });
  const int call_line = __LINE__ + 2;
  errtest::expect_user_error(
      [&] { (void)k.ptx(90, 4, buf.data(), 24); },
      {"power-of-two", "test_errors.cpp:" + std::to_string(call_line) +
                           ": note: kernel err_block24(Ptr<f32>, Constexpr<integer>) was traced for this launch, "
                           "constexpr argument 2 = 24"},
      "test_errors.cpp", line);
}

TEST_CASE("errors: Kernel::ptx and Kernel::ir name the caller's line", "[errors]") {
  auto k = jit("errors_inspect", [](Ptr<float> x, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    store(x + o, load(x + o, o < n, 0.0f), o < n);
  });
  float* x = buf.data();
  line = 0;
  expect_error([&] { line = __LINE__; (void)k.ptx(75, 4, x, 64, 64); }, "needs sm_80 or newer", line);
  expect_error([&] { line = __LINE__; (void)k.ptx(90, 3, x, 64, 64); }, "num_warps 3", line);
  expect_error([&] { line = __LINE__; (void)k.ptx(90, 4, x, int64_t{1} << 40, 64); }, "does not fit in i32", line);
  expect_error([&] { line = __LINE__; (void)k.ir(false, 1.5f, 64, 64); }, "pass a pointer", line);
  // The Grid overload reports at the Grid's line.
  expect_error([&] { line = __LINE__; (void)k.ptx(90, Grid(1).with_warps(3), x, 64, 64); }, "num_warps 3", line);
}

// ============================================================================ tiles and launches across traces

namespace {
Tile<float> g_kept;                      // a Tile kept past its kernel's trace (issue 18, item 4)
std::function<void()> g_inner_launch;    // what a kernel's lambda launches while traced (item 5)
}  // namespace

TEST_CASE("errors: a Tile kept from one kernel's trace is a UserError where it is used again", "[errors]") {
  auto a = jit("err_keep_a", [](Ptr<float> x) {
    g_kept = load(x + arange(0, 4));
    store(x + arange(0, 4), g_kept);
  });
  a(Grid(1), buf.data());
  // In another kernel, through an operator, an op and a shape query.
  line = 0;
  auto b = jit("err_keep_b", [](Ptr<float> x) {
    line = __LINE__; Tile<float> y = g_kept + 1.0f;
    store(x + arange(0, 4), y);
  });
  expect_error([&] { b(Grid(1), buf.data()); }, "was made while tracing a kernel whose trace has ended", line);
  auto c = jit("err_keep_c", [](Ptr<float> x) {
    line = __LINE__; store(x + arange(0, 4), exp(g_kept));
  });
  expect_error([&] { c(Grid(1), buf.data()); }, "a Tile lives only inside the trace that made it", line);
  line = __LINE__; expect_error([&] { (void)g_kept.shape(); }, "whose trace has ended", line);
  // Assigned to a loop-carried Tile inside a device loop: reported at the loop.
  auto d = jit("err_keep_d", [](Ptr<float> x, Tile<int32_t> n) {
    Tile<float> acc = zeros<float>({4});
    line = __LINE__; for (auto i : range(0, n)) {
      (void)i;
      acc = g_kept;
    }
    store(x + arange(0, 4), acc);
  });
  expect_error([&] { d(Grid(1), buf.data(), 2); }, "a Tile assigned inside this device loop was made while tracing", line);
  // A second trace of the same kernel (another specialization) does not see the first one's tiles.
  auto e = jit("err_keep_e", [](Ptr<float> x, Constexpr<int> FIRST) {
    static Tile<float> first;
    if (FIRST) first = load(x + arange(0, 4));
    line = __LINE__; store(x + arange(0, 4), first * 2.0f);
  });
  e(Grid(1), buf.data(), 1);
  expect_error([&] { e(Grid(1), buf.data(), 0); }, "whose trace has ended", line);
  // Assigning a fresh value makes the Tile usable again in the trace that assigns it.
  auto f = jit("err_keep_f", [](Ptr<float> x) {
    g_kept = load(x + arange(0, 4));
    store(x + arange(0, 4), g_kept + 1.0f);
  });
  std::vector<float> v(4, 1.0f);
  f(Grid(1), v.data());
  CHECK(v == std::vector<float>(4, 2.0f));
}

TEST_CASE("errors: a kernel that launches a kernel while it is traced (itself included)", "[errors]") {
  static auto k = jit("err_self_launch", [](Ptr<float> x) {
    g_inner_launch();
    store(x, 1.0f);
  });
  static auto other = jit("err_other", [](Ptr<float> x) { store(x, 2.0f); });
  line = 0;
  // Itself: waited on its own compile lock before (a deadlock).
  g_inner_launch = [] { line = __LINE__; k(Grid(1), buf.data()); };
  expect_error([&] { k(Grid(1), buf.data()); }, "(a kernel launching itself)", line);
  g_inner_launch = [] { line = __LINE__; other(Grid(1), buf.data()); };
  expect_error([&] { k(Grid(1), buf.data()); }, "is launched inside the lambda of kernel 'err_self_launch' while it is traced", line);
  g_inner_launch = [] { line = __LINE__; (void)other.ir(true, buf.data()); };
  expect_error([&] { k(Grid(1), buf.data()); }, "cannot launch kernels", line);
  // Nothing was compiled, and the kernel works once its lambda stops launching.
  CHECK(k.num_compiled() == 0);
  g_inner_launch = [] {};
  std::vector<float> v(1, 0.0f);
  k(Grid(1), v.data());
  CHECK(v[0] == 1.0f);
}

TEST_CASE("errors: trans of a tile that is not 2-D names trans", "[errors]") {
  line = 0;
  auto k = jit("err_trans3", [](Ptr<float> x) {
    Tile<float> v = reshape(load(x + arange(0, 8)), {2, 2, 2});
    line = __LINE__; Tile<float> t = trans(v);
    store(x + arange(0, 8), reshape(t, {8}));
  });
  expect_error([&] { k(Grid(1), buf.data()); }, "trans: transposes a 2-D tile, got a f32[2,2,2] tile of rank 3", line);
}

TEST_CASE("errors: do_not_specialize names a parameter that has no specialization", "[errors]") {
  auto body = [](Ptr<float> x, Tile<float> s, Tile<int32_t> n, Constexpr<int> B) { store(x + arange(0, B), s, arange(0, B) < n); };
  line = __LINE__; expect_error([&] { auto k = jit("nospec_range", body, {.do_not_specialize = {4}}); }, "do_not_specialize: 4 is not a parameter index", line);
  line = __LINE__; expect_error([&] { auto k = jit("nospec_neg", body, {.do_not_specialize = {-1}}); }, "is not a parameter index", line);
  line = __LINE__; expect_error([&] { auto k = jit("nospec_const", body, {.do_not_specialize = {3}}); }, "a Constexpr is the specialization itself", line);
  line = __LINE__; expect_error([&] { auto k = jit("nospec_float", body, {.do_not_specialize = {1}}); }, "parameter 1 of kernel nospec_float(Ptr<f32>, Tile<f32>, Tile<i32>, Constexpr<integer>) is a Tile<f32>, which has no specialization", line);
  auto ok = jit("nospec_ok", body, {.do_not_specialize = {0, 2}});
  ok(Grid(1), buf.data(), 2.0f, 3, 4);
  CHECK(buf[2] == 2.0f);
}
