// tests/test_tensor_descriptor.cpp - tle::TensorDescriptor (tle/tensor_descriptor.hpp): argument
// checks ([errors][descriptor]), block loads and stores against plain C++ references on ragged
// shapes on the default backend (CPU; TLE_BACKEND=interp for the interpreter) ([ops][descriptor]),
// the sm_90a PTX of TMA accesses assembled by ptxas ([ptx][descriptor]), and GPU runs on ragged
// shapes ([.gpu][descriptor], for the H200).
#include <catch2/catch.hpp>
#include <tle/tle.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "../examples/kernels.hpp"
#include "env_util.hpp"
#include "error_util.hpp"
#include "ir/builder.hpp"
#include "passes/pass.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"

using ptxtest::count_of;

using namespace tle;
using opstest::Buf;

namespace {

int g_line = 0;  // set by a kernel while it is traced: the line of the op that must fail

/// Row stride (elements) of a row of n elements of T padded to 16 bytes.
template <class T> int64_t padded(int64_t n) {
  const int64_t q = 16 / sizeof(T);
  return (n + q - 1) / q * q;
}

/// out = 2 * in + 1, block by block, through two descriptors (2-D).
auto copy2d = jit("desc_copy2d", [](TensorDescriptor<float, 2> in, TensorDescriptor<float, 2> out) {
  Tile<int32_t> i = program_id(0), j = program_id(1);
  auto bs = in.block_shape();
  Tile<float> t = in.load({i * int32_t(bs[0]), j * int32_t(bs[1])});
  out.store({i * int32_t(bs[0]), j * int32_t(bs[1])}, t * 2.0f + 1.0f);
});

/// The block of `in` at (r0, c0) (any integers, possibly out of range) written densely to out.
auto window = jit("desc_window", [](TensorDescriptor<float, 2> in, Ptr<float> out, Tile<int32_t> r0, Tile<int32_t> c0) {
  auto bs = in.block_shape();
  Tile<float> t = in.load({r0, c0});
  Tile<int32_t> r = expand_dims(arange(0, bs[0]), 1), c = expand_dims(arange(0, bs[1]), 0);
  store(out + r * int32_t(bs[1]) + c, t);
});

/// C = A @ B with every operand through a descriptor; K loop of BK blocks.
auto matmul = jit("desc_matmul", [](TensorDescriptor<float, 2> a, TensorDescriptor<float, 2> b,
                                    TensorDescriptor<float, 2> c, Tile<int32_t> K) {
  const int64_t BM = a.block_shape()[0], BK = a.block_shape()[1], BN = b.block_shape()[1];
  Tile<int32_t> m0 = program_id(0) * int32_t(BM), n0 = program_id(1) * int32_t(BN);
  Tile<float> acc = zeros<float>({BM, BN});
  for (auto k : range(0, K, int32_t(BK))) acc = dot(a.load({m0, k}), b.load({k, n0}), acc);
  c.store({m0, n0}, acc);
});

/// The same with bf16 operands (tensor cores on the GPU: wgmma on sm_90a) and an f32 result.
auto matmul_bf16 = jit("desc_matmul_bf16", [](TensorDescriptor<bf16, 2> a, TensorDescriptor<bf16, 2> b,
                                              TensorDescriptor<float, 2> c, Tile<int32_t> K) {
  const int64_t BM = a.block_shape()[0], BK = a.block_shape()[1], BN = b.block_shape()[1];
  Tile<int32_t> m0 = program_id(0) * int32_t(BM), n0 = program_id(1) * int32_t(BN);
  Tile<float> acc = zeros<float>({BM, BN});
  for (auto k : range(0, K, int32_t(BK))) acc = dot(a.load({m0, k}), b.load({k, n0}), acc);
  c.store({m0, n0}, acc);
});

/// C = A @ B (bf16 inputs, f32 accumulation in double here) on the host.
/// C = A @ B in double (A, B: any indexable of float or bf16; row strides lda, ldb, ldc), the
/// padding of C's rows left at `fill`.
template <class VA, class VB>
std::vector<float> ref_matmul(const VA& a, const VB& b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                              int64_t ldc, float fill) {
  std::vector<float> c(size_t(M * ldc), fill);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(float(a[size_t(i * lda + k)])) * double(float(b[size_t(k * ldb + j)]));
      c[size_t(i * ldc + j)] = float(acc);
    }
  return c;
}

template <class T> std::vector<T> ref_window(const Buf<T>& x, int64_t R, int64_t C, int64_t ld, int64_t r0, int64_t c0,
                                             int64_t BR, int64_t BC) {
  std::vector<T> w(size_t(BR * BC), T(0));
  for (int64_t i = 0; i < BR; ++i)
    for (int64_t j = 0; j < BC; ++j) {
      const int64_t r = r0 + i, c = c0 + j;
      if (r >= 0 && r < R && c >= 0 && c < C) w[size_t(i * BC + j)] = x[size_t(r * ld + c)];
    }
  return w;
}

}  // namespace

// ------------------------------------------------------------------------------------ errors

TEST_CASE("descriptor: argument checks name the problem at the line that builds it", "[errors][descriptor]") {
  Buf<float> x(4096, 1.f);
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 6> d(x.data(), {1, 1, 1, 1, 1, 4}, {4, 4, 4, 4, 4, 1}, {1, 1, 1, 1, 1, 4}); },
                             {"rank 6 is outside 1..5"}, "test_tensor_descriptor.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(x.data() + 1, {8, 8}, {8, 1}, {4, 4}); },
                             {"not 16-byte aligned"}, "test_tensor_descriptor.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(nullptr, {8, 8}, {8, 1}, {4, 4}); },
                             {"base pointer is null"}, "test_tensor_descriptor.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(x.data(), {8, 8}, {1, 8}, {4, 4}); },
                             {"innermost stride (dimension 1) is 8, but must be 1"}, "test_tensor_descriptor.cpp",
                             line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(x.data(), {8, 17}, {17, 1}, {4, 4}); },
                             {"stride 17 of dimension 0 is 68 bytes", "multiple of 16 bytes", "multiple of 4 elements"},
                             "test_tensor_descriptor.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(x.data(), {8, 8}, {8, 1}, {4, 512}); },
                             {"block shape {4, 512} has dimension 1 = 512, outside 1..256"}, "test_tensor_descriptor.cpp",
                             line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(x.data(), {8, 8}, {8, 1}, {0, 4}); },
                             {"dimension 0 = 0, outside 1..256"}, "test_tensor_descriptor.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<float, 2> d(x.data(), {0, 8}, {8, 1}, {4, 4}); },
                             {"shape {0, 8} has dimension 0 = 0"}, "test_tensor_descriptor.cpp", line);
  Buf<bool> flags(64, false);
  errtest::expect_user_error([&] { line = __LINE__; TensorDescriptor<bool, 1> d(flags.data(), {64}, {1}, {16}); },
                             {"element type i1 is not supported", "store bool as u8"}, "test_tensor_descriptor.cpp",
                             line);
}

TEST_CASE("descriptor: a launch checks the descriptor against the parameter", "[errors][descriptor]") {
  Buf<float> x(64, 1.f), y(64, 0.f);
  TensorDescriptor<float, 2> d2(x.data(), {8, 8}, {8, 1}, {8, 8});
  auto k1 = jit("desc_rank1", [](TensorDescriptor<float, 1> in, Ptr<float> out) {
    store(out + arange(0, 8), in.load({0}));
  });
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; k1(Grid(1), d2, y.data()); },
                             {"argument 1", "TensorDescriptor<f32, 1>", "got a TensorDescriptor<f32, 2>"},
                             "test_tensor_descriptor.cpp", line);
  errtest::expect_user_error([&] { line = __LINE__; k1(Grid(1), x.data(), y.data()); },
                             {"argument 1", "pass a tle::TensorDescriptor, not a pointer"}, "test_tensor_descriptor.cpp",
                             line);
  // A descriptor built in the kernel (a host object) cannot load.
  auto k2 = jit("desc_host_in_kernel", [](Ptr<float> out) {
    alignas(16) static float data[16];
    TensorDescriptor<float, 1> host(data, {16}, {1}, {16});
    g_line = __LINE__; store(out + arange(0, 16), host.load({0}));
  });
  errtest::expect_user_error([&] { k2(Grid(1), y.data()); }, {"host object", "kernel parameter"},
                             "test_tensor_descriptor.cpp", g_line);
}

TEST_CASE("descriptor: device memory is refused by host launches", "[errors][descriptor]") {
  // A kDLCUDA tensor (no driver needed: the address is never touched) described on the host.
  Buf<float> x(64), y(64);
  int64_t shape[2] = {8, 8};
  DLTensor t{};
  t.data = x.data();
  t.device = {kDLCUDA, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  auto d = make_tensor_descriptor<float, 2>(&t, {8, 8});
  CHECK(d.device_buffer());
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; window(Grid(1).backend(Backend::CPU), d, y.data(), 0, 0); },
                             {"argument 1 is a tle::TensorDescriptor of a DeviceBuffer or kDLCUDA tensor (GPU memory)", "CPU backend"}, "test_tensor_descriptor.cpp", line);
}

TEST_CASE("descriptor: make_tensor_descriptor checks the DLPack tensor", "[errors][descriptor]") {
  Buf<float> x(64, 1.f);
  int64_t shape[2] = {8, 8};
  DLTensor t{};
  t.data = x.data();
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  int line = 0;
  errtest::expect_user_error([&] { line = __LINE__; (void)make_tensor_descriptor<float, 1>(&t, {8}); },
                             {"the tensor has 2 dimensions, but the descriptor's Rank is 1"}, "test_tensor_descriptor.cpp",
                             line);
  errtest::expect_user_error([&] { line = __LINE__; (void)make_tensor_descriptor<int32_t, 2>(&t, {8, 8}); },
                             {"is not i32's"}, "test_tensor_descriptor.cpp", line);
  int64_t bad_strides[2] = {1, 8};  // column-major: innermost stride 8
  t.strides = bad_strides;
  errtest::expect_user_error([&] { line = __LINE__; (void)make_tensor_descriptor<float, 2>(&t, {8, 8}); },
                             {"innermost stride"}, "test_tensor_descriptor.cpp", line);
  t.strides = nullptr;
  auto d = make_tensor_descriptor<float, 2>(&t, {4, 8});
  CHECK((d.shape() == std::array<int64_t, 2>{8, 8}));
  CHECK((d.strides() == std::array<int64_t, 2>{8, 1}));
  CHECK(d.base() == x.data());
}

// ------------------------------------------------------------------------------------ CPU / interp

TEST_CASE("descriptor: a DLPack tensor with padded row strides", "[ops][descriptor]") {
  const int64_t R = 17, C = 9, ld = 12;
  Buf<float> x = opstest::random_buf<float>(size_t(R * ld), 21), y(size_t(R * ld), -3.f);
  int64_t shape[2] = {R, C}, strides[2] = {ld, 1};
  DLTensor tx{}, ty{};
  for (auto [t, p] : {std::pair{&tx, x.data()}, std::pair{&ty, y.data()}}) {
    t->data = p;
    t->device = {kDLCPU, 0};
    t->ndim = 2;
    t->dtype = {kDLFloat, 32, 1};
    t->shape = shape;
    t->strides = strides;
  }
  auto dx = make_tensor_descriptor<float, 2>(&tx, {8, 4}), dy = make_tensor_descriptor<float, 2>(&ty, {8, 4});
  copy2d(Grid(cdiv(R, 8), cdiv(C, 4)), dx, dy);
  std::vector<float> want(y.size(), -3.f);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) want[size_t(r * ld + c)] = x[size_t(r * ld + c)] * 2.0f + 1.0f;
  CHECK(opstest::diffs(y, want) == "");
}

TEST_CASE("descriptor: 2-D block round trip on ragged shapes, out-of-bounds stores dropped", "[ops][descriptor]") {
  struct S { int64_t R, C, BR, BC; };
  for (S s : {S{1, 1, 1, 4}, S{17, 17, 8, 16}, S{1001, 17, 64, 8}, S{17, 1001, 16, 128}, S{5, 3, 3, 5}}) {
    CAPTURE(s.R, s.C, s.BR, s.BC);
    const int64_t ld = padded<float>(s.C) + 4;  // a gap after each row: never written
    Buf<float> in = opstest::random_buf<float>(size_t(s.R * ld), 7);
    Buf<float> out(size_t(s.R * ld), -7.f);
    TensorDescriptor<float, 2> din(in.data(), {s.R, s.C}, {ld, 1}, {s.BR, s.BC});
    TensorDescriptor<float, 2> dout(out.data(), {s.R, s.C}, {ld, 1}, {s.BR, s.BC});
    copy2d(Grid(cdiv(s.R, s.BR), cdiv(s.C, s.BC)), din, dout);
    std::vector<float> want(out.size(), -7.f);
    for (int64_t r = 0; r < s.R; ++r)
      for (int64_t c = 0; c < s.C; ++c) want[size_t(r * ld + c)] = in[size_t(r * ld + c)] * 2.0f + 1.0f;
    CHECK(opstest::diffs(out, want) == "");
  }
}

TEST_CASE("descriptor: blocks at negative and past-the-end offsets read zeros", "[ops][descriptor]") {
  const int64_t R = 17, C = 13, ld = padded<float>(C);
  Buf<float> x = opstest::random_buf<float>(size_t(R * ld), 3);
  TensorDescriptor<float, 2> d(x.data(), {R, C}, {ld, 1}, {8, 16});
  struct O { int r0, c0; };
  for (O o : {O{0, 0}, O{-3, -5}, O{12, 10}, O{-8, 0}, O{17, 0}, O{16, 12}, O{-100, 1000}}) {
    CAPTURE(o.r0, o.c0);
    Buf<float> out(8 * 16, -1.f);
    window(Grid(1), d, out.data(), o.r0, o.c0);
    CHECK(opstest::diffs(out, ref_window(x, R, C, ld, o.r0, o.c0, 8, 16)) == "");
  }
}

TEST_CASE("descriptor: 1-D and 3-D blocks, integer and half element types", "[ops][descriptor]") {
  // 1-D: i16, n = 1001, blocks of 64; out = in + 3
  auto k1 = jit("desc_1d", [](TensorDescriptor<int16_t, 1> in, TensorDescriptor<int16_t, 1> out) {
    Tile<int32_t> o = program_id(0) * 64;
    out.store({o}, in.load({o}) + int16_t(3));
  });
  for (int64_t n : {1, 17, 1001}) {
    CAPTURE(n);
    Buf<int16_t> in(static_cast<size_t>(n)), out(static_cast<size_t>(n) + 8, int16_t(-1));
    for (int64_t i = 0; i < n; ++i) in[size_t(i)] = int16_t(i * 7 - 500);
    k1(Grid(cdiv(n, 64)), TensorDescriptor<int16_t, 1>(in.data(), {n}, {1}, {64}),
       TensorDescriptor<int16_t, 1>(out.data(), {n}, {1}, {64}));
    std::vector<int16_t> want(out.size(), int16_t(-1));
    for (int64_t i = 0; i < n; ++i) want[size_t(i)] = int16_t(in[size_t(i)] + 3);
    CHECK(opstest::diffs(out, want) == "");
  }
  // 3-D: bf16 [D0, D1, D2] with padded strides, blocks [2, 4, 8]; copy
  auto k3 = jit("desc_3d", [](TensorDescriptor<bf16, 3> in, TensorDescriptor<bf16, 3> out) {
    Tile<int32_t> a = program_id(0) * 2, b = program_id(1) * 4, c = program_id(2) * 8;
    out.store({a, b, c}, in.load({a, b, c}));
  });
  const int64_t D0 = 3, D1 = 17, D2 = 9, s1 = padded<bf16>(D2), s0 = s1 * D1 + 8;
  Buf<bf16> in(size_t(D0 * s0)), out(size_t(D0 * s0), bf16(-2.0f));
  for (size_t i = 0; i < in.size(); ++i) in[i] = bf16(float(int(i % 251) - 125));
  k3(Grid(cdiv(D0, 2), cdiv(D1, 4), cdiv(D2, 8)), TensorDescriptor<bf16, 3>(in.data(), {D0, D1, D2}, {s0, s1, 1}, {2, 4, 8}),
     TensorDescriptor<bf16, 3>(out.data(), {D0, D1, D2}, {s0, s1, 1}, {2, 4, 8}));
  std::vector<bf16> want(out.size(), bf16(-2.0f));
  for (int64_t a = 0; a < D0; ++a)
    for (int64_t b = 0; b < D1; ++b)
      for (int64_t c = 0; c < D2; ++c) want[size_t(a * s0 + b * s1 + c)] = in[size_t(a * s0 + b * s1 + c)];
  CHECK(opstest::diffs(out, want) == "");
}

TEST_CASE("descriptor: matmul fed by descriptors on ragged shapes (zero-filled K tail)", "[ops][descriptor]") {
  struct S { int64_t M, N, K; };
  for (S s : {S{1, 1, 1}, S{17, 17, 17}, S{1, 17, 1001}, S{1001, 17, 17}, S{17, 1001, 33}}) {
    CAPTURE(s.M, s.N, s.K);
    const int64_t lda = padded<float>(s.K), ldb = padded<float>(s.N), ldc = padded<float>(s.N);
    Buf<float> a = opstest::random_buf<float>(size_t(s.M * lda), 11), b = opstest::random_buf<float>(size_t(s.K * ldb), 12);
    Buf<float> c(size_t(s.M * ldc), 99.f);
    const int64_t BM = 16, BN = 16, BK = 32;
    TensorDescriptor<float, 2> da(a.data(), {s.M, s.K}, {lda, 1}, {BM, BK});
    TensorDescriptor<float, 2> db(b.data(), {s.K, s.N}, {ldb, 1}, {BK, BN});
    TensorDescriptor<float, 2> dc(c.data(), {s.M, s.N}, {ldc, 1}, {BM, BN});
    matmul(Grid(cdiv(s.M, BM), cdiv(s.N, BN)), da, db, dc, int32_t(s.K));
    CHECK(opstest::diffs(c, ref_matmul(a, b, s.M, s.N, s.K, lda, ldb, ldc, 99.f), 1e-4, 1e-4) == "");
  }
}

TEST_CASE("descriptor: bf16 matmul fed by descriptors on ragged shapes", "[ops][descriptor]") {
  struct S { int64_t M, N, K; };
  for (S s : {S{1, 17, 1001}, S{17, 17, 17}, S{100, 33, 70}}) {
    CAPTURE(s.M, s.N, s.K);
    const int64_t lda = padded<bf16>(s.K), ldb = padded<bf16>(s.N), ldc = padded<float>(s.N);
    std::vector<bf16> ha(size_t(s.M * lda)), hb(size_t(s.K * ldb));
    for (size_t i = 0; i < ha.size(); ++i) ha[i] = bf16(float(int(i * 37 % 17) - 8) / 8.0f);
    for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16(float(int(i * 53 % 13) - 6) / 4.0f);
    Buf<bf16> a(ha), b(hb);
    Buf<float> c(size_t(s.M * ldc), 99.f);
    matmul_bf16(Grid(cdiv(s.M, 64), cdiv(s.N, 32)), TensorDescriptor<bf16, 2>(a.data(), {s.M, s.K}, {lda, 1}, {64, 32}),
                TensorDescriptor<bf16, 2>(b.data(), {s.K, s.N}, {ldb, 1}, {32, 32}),
                TensorDescriptor<float, 2>(c.data(), {s.M, s.N}, {ldc, 1}, {64, 32}), int32_t(s.K));
    CHECK(opstest::diffs(c, ref_matmul(ha, hb, s.M, s.N, s.K, lda, ldb, ldc, 99.f), 1e-5, 1e-4) == "");
  }
}

TEST_CASE("descriptor: the IR has desc ops, and the CPU pipeline expands them", "[ops][descriptor]") {
  Buf<float> x(64, 1.f), y(64);
  TensorDescriptor<float, 2> d(x.data(), {8, 8}, {8, 1}, {4, 8});
  TensorDescriptor<float, 2> e(y.data(), {8, 8}, {8, 1}, {4, 8});
  const std::string traced = copy2d.ir(false, d, e);
  CHECK_THAT(traced, Catch::Contains("desc_load"));
  CHECK_THAT(traced, Catch::Contains("desc_store"));
  CHECK_THAT(traced, Catch::Contains("{tensor_map}"));
  const std::string opt = copy2d.ir(true, d, e);
  CHECK_THAT(opt, !Catch::Contains("desc_load"));
  CHECK_THAT(opt, Catch::Contains("load"));
  // The block shape is part of the specialization: another block shape compiles again.
  const size_t before = copy2d.num_compiled();
  copy2d(Grid(2, 1), d, e);
  copy2d(Grid(2, 1), d, e);
  TensorDescriptor<float, 2> d2(x.data(), {8, 8}, {8, 1}, {8, 8}), e2(y.data(), {8, 8}, {8, 1}, {8, 8});
  copy2d(Grid(1, 1), d2, e2);
  CHECK(copy2d.num_compiled() == before + 2);
}

// ------------------------------------------------------------------------------------ PTX

TEST_CASE("descriptor: sm_90a PTX moves TMA blocks with cp.async.bulk.tensor and assembles", "[ptx][descriptor]") {
  alignas(16) static float fake[16];
  TensorDescriptor<float, 2> d(fake, {1000, 1000}, {1000, 1}, {64, 32});
  {  // TLE_TMA=0 turns the TMA lowering off (gpu::Options::tma): plain masked accesses
    envtest::EnvVar off("TLE_TMA", "0");
    CHECK_THAT(copy2d.ptx(90, 4, d, d), !Catch::Contains("cp.async.bulk.tensor"));
  }
  envtest::EnvVar tma("TLE_TMA", "1");
  std::string ptx = copy2d.ptx(90, 4, d, d);
  CHECK_THAT(ptx, Catch::Contains("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"));
  CHECK_THAT(ptx, Catch::Contains("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"));
  CHECK_THAT(ptx, Catch::Contains("mbarrier.try_wait.parity"));
  CHECK_THAT(ptx, Catch::Contains("mbarrier.arrive.expect_tx"));
  CHECK_THAT(ptx, Catch::Contains(".align 64 .b8"));
  CHECK_THAT(ptx, Catch::Contains("[128]"));
  // grid_constant: the instruction takes the parameter's own address (cvta.param), not a copy's
  CHECK_THAT(ptx, Catch::Contains("cvta.param"));
  CHECK_THAT(ptx, !Catch::Contains("__local_depot"));
  ptxtest::assemble("descriptor copy sm_90a", ptx);
  // Blocks TMA cannot take (a non-power-of-two dim; an innermost row under 16 bytes) and sm_80:
  // ordinary loads and stores.
  TensorDescriptor<float, 2> odd(fake, {1000, 1000}, {1000, 1}, {17, 32});
  std::string p2 = copy2d.ptx(90, 4, odd, odd);
  CHECK_THAT(p2, !Catch::Contains("cp.async.bulk.tensor"));
  ptxtest::assemble("descriptor copy, odd block", p2);
  TensorDescriptor<float, 2> narrow(fake, {1000, 1000}, {1000, 1}, {16, 2});
  CHECK_THAT(copy2d.ptx(90, 4, narrow, narrow), !Catch::Contains("cp.async.bulk.tensor"));
  std::string p80 = copy2d.ptx(80, 4, d, d);
  CHECK_THAT(p80, !Catch::Contains("cp.async.bulk.tensor"));
  ptxtest::assemble("descriptor copy sm_80", p80, "sm_80");
  // A tensor whose rows are not whole 16-byte chunks (1001 f32): TMA would write past them.
  TensorDescriptor<float, 2> ragged(fake, {1000, 1001}, {1004, 1}, {64, 32});
  CHECK_THAT(copy2d.ptx(90, 4, ragged, ragged), !Catch::Contains("cp.async.bulk.tensor"));
  // An innermost offset not known to be a multiple of 16 bytes (a runtime column 5 or -5; -4 and
  // 16 are specialized as multiples of 4 and 16): a box TMA may not start there.
  TensorDescriptor<float, 2> w(fake, {1000, 1000}, {1000, 1}, {8, 16});
  CHECK_THAT(window.ptx(90, 4, w, fake, 3, 16), Catch::Contains("cp.async.bulk.tensor"));
  CHECK_THAT(window.ptx(90, 4, w, fake, 3, -4), Catch::Contains("cp.async.bulk.tensor"));
  CHECK_THAT(window.ptx(90, 4, w, fake, 3, 5), !Catch::Contains("cp.async.bulk.tensor"));
  CHECK_THAT(window.ptx(90, 4, w, fake, 3, -5), !Catch::Contains("cp.async.bulk.tensor"));
  // 1-D, 3-D and the K loop of a matmul
  TensorDescriptor<float, 2> ma(fake, {1000, 1000}, {1000, 1}, {64, 32}), mb(fake, {1000, 1000}, {1000, 1}, {32, 64}),
      mc(fake, {1000, 1000}, {1000, 1}, {64, 64});
  std::string pm = matmul.ptx(90, 4, ma, mb, mc, 1000);
  CHECK_THAT(pm, Catch::Contains("cp.async.bulk.tensor.2d"));
  ptxtest::assemble("descriptor matmul sm_90a", pm);
  // bf16 operands: wgmma reads the TMA-loaded blocks (through the tile's registers)
  alignas(16) static bf16 fh[16];
  TensorDescriptor<bf16, 2> ha(fh, {1000, 1000}, {1000, 1}, {64, 32}), hb(fh, {1000, 1000}, {1000, 1}, {32, 64});
  std::string pw = matmul_bf16.ptx(90, 4, ha, hb, mc, 1000);
  CHECK_THAT(pw, Catch::Contains("cp.async.bulk.tensor.2d.shared::cluster"));
  CHECK_THAT(pw, Catch::Contains("wgmma.mma_async"));
  ptxtest::assemble("descriptor bf16 matmul sm_90a", pw);
  // the [.gpu] case's configuration: 128 x 64 blocks, 8 warps
  TensorDescriptor<bf16, 2> ha8(fh, {1000, 1000}, {1000, 1}, {128, 64}), hb8(fh, {1000, 1000}, {1000, 1}, {64, 64});
  TensorDescriptor<float, 2> hc8(fake, {1000, 1000}, {1000, 1}, {128, 64});
  std::string p8 = matmul_bf16.ptx(90, 8, ha8, hb8, hc8, 1000);
  CHECK_THAT(p8, Catch::Contains("wgmma.mma_async"));
  ptxtest::assemble("descriptor bf16 matmul sm_90a, 8 warps", p8);
  auto k3 = jit("desc_3d_ptx", [](TensorDescriptor<bf16, 3> in, TensorDescriptor<bf16, 3> out) {
    out.store({0, program_id(0) * 4, 0}, in.load({0, program_id(0) * 4, 0}));
  });
  alignas(16) static bf16 fb[16];
  TensorDescriptor<bf16, 3> d3(fb, {4, 100, 64}, {6400, 64, 1}, {2, 4, 16});
  std::string p3 = k3.ptx(90, 4, d3, d3);
  CHECK_THAT(p3, Catch::Contains("cp.async.bulk.tensor.3d"));
  ptxtest::assemble("descriptor 3-D sm_90a", p3);
}

/// The first block of A and B loaded before the K loop, the rest in it: a descriptor read both in
/// and outside the loop (its tensor map cannot be both swizzled and not), so none of its loads is
/// pipelined by TMA.
static auto matmul_split = jit("desc_matmul_split", [](TensorDescriptor<bf16, 2> a, TensorDescriptor<bf16, 2> b,
                                                Ptr<float> c, Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K) {
  const int32_t BM = int32_t(a.block_shape()[0]), BK = int32_t(a.block_shape()[1]), BN = int32_t(b.block_shape()[1]);
  Tile<int32_t> m0 = program_id(0) * BM, n0 = program_id(1) * BN;
  Tile<float> acc = dot(a.load({m0, 0}), b.load({0, n0}), zeros<float>({BM, BN}));
  for (auto k : range(BK, K, BK)) acc = dot(a.load({m0, k}), b.load({k, n0}), acc);
  Tile<int32_t> rm = m0 + arange(0, BM), rn = n0 + arange(0, BN);
  store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
});

/// A peeled first block and a loop over one descriptor whose blocks feed no dot (a sum): its
/// loop loads are not pipelined for wgmma, so the peeled load keeps TMA too.
static auto sum_peeled = jit("desc_sum_peeled", [](TensorDescriptor<bf16, 2> x, Ptr<float> o, Tile<int32_t> R) {
  Tile<float> acc = cast<float>(x.load({program_id(0) * 64, 0}));
  for (auto r : range(64, R, 64)) acc = acc + cast<float>(x.load({program_id(0) * 64 + r, 0}));
  Tile<int32_t> rm = arange(0, 64), rd = arange(0, 64);
  store(o + expand_dims(rm, 1) * 64 + expand_dims(rd, 0), acc);
});

/// The overlapped attention loop's shape with a reduction that has a combine function (max, along
/// AXIS of the score tile) while the next block's q k^T is in flight: the wait comes before the
/// reduction, not inside its generated loops.
template <int AXIS> auto combine_under_wgmma() {
  return jit(AXIS == 0 ? "desc_combine_ax0" : "desc_combine_ax1", [](TensorDescriptor<bf16, 2> q, TensorDescriptor<bf16, 2> k,
                                                                      TensorDescriptor<bf16, 2> v, Ptr<float> o,
                                                                      Tile<int32_t> S) {
    const int32_t BM = int32_t(q.block_shape()[0]), D = int32_t(q.block_shape()[1]), BN = int32_t(k.block_shape()[0]);
    Tile<int32_t> row0 = program_id(1) * S;
    Tile<bf16> tq = q.load({row0, 0});
    Tile<float> acc = zeros<float>({BM, D}), s = zeros<float>({BM, BN}), tot = zeros<float>({AXIS == 0 ? BN : BM});
    for (auto n0 : range(0, S, BN)) {
      Tile<float> s_next = dot(tq, trans(k.load({row0 + n0 + BN, 0})));
      tot = tot + reduce(s, AXIS, [](Tile<float> a, Tile<float> b) { return maximum(a, b); });
      acc = dot(cast<bf16>(s), v.load({row0 + n0, 0}), acc);
      s = s_next;
    }
    Tile<int32_t> rm = arange(0, BM), rd = arange(0, D);
    store(o + expand_dims(rm, 1) * D + expand_dims(rd, 0), acc + expand_dims(sum(tot, 0), 0));
  });
}

/// A through a descriptor, B through masked pointer loads (a B whose rows are not 16-byte aligned
/// cannot have a descriptor): one K loop with a TMA load and a cp.async load. With CLEAR, C's
/// block is zeroed before the loop (a store there: the loop is not warp-specialized).
static auto matmul_mixed = jit("desc_matmul_mixed", [](TensorDescriptor<bf16, 2> a, Ptr<bf16> b, Ptr<float> c,
                                                       Tile<int32_t> M, Tile<int32_t> N, Tile<int32_t> K,
                                                       Constexpr<int> BN, Constexpr<bool> CLEAR) {
  const int32_t BM = int32_t(a.block_shape()[0]), BK = int32_t(a.block_shape()[1]);
  Tile<int32_t> m0 = program_id(0) * BM, rn = program_id(1) * BN + arange(0, BN), rk = arange(0, BK);
  Tile<float> acc = zeros<float>({BM, BN});
  Tile<int32_t> rm = m0 + arange(0, BM);
  if (CLEAR) store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
  for (auto k : range(0, K, BK)) {
    Tile<int32_t> kk = k + rk;
    Tile<bf16> tb = load(b + expand_dims(kk, 1) * N + expand_dims(rn, 0),
                         expand_dims(kk < K, 1) & expand_dims(rn < N, 0));
    acc = dot(a.load({m0, k}), tb, acc);
  }
  store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc, expand_dims(rm < M, 1) & expand_dims(rn < N, 0));
});

TEST_CASE("descriptor: a K loop with a TMA load and a cp.async load (warp-specialized and not)", "[ptx][descriptor]") {
  alignas(16) static bf16 fh[16];
  alignas(16) static float fc[16];
  envtest::EnvVar tma("TLE_TMA", "1");
  TensorDescriptor<bf16, 2> da(fh, {4096, 4096}, {4096, 1}, {128, 64});
  for (int warps : {4, 8}) {
    for (bool clear : {false, true}) {
      INFO("warps " << warps << " clear " << clear);
      Grid g(32, 32);
      g.with_warps(warps).with_stages(3);
      const std::string ptx = matmul_mixed.ptx(90, g, da, fh, fc, 4096, 4096, 4096, 128, clear);
      CHECK(count_of(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") >= 1);
      CHECK(count_of(ptx, "cp.async.cg.shared.global") >= 1);
      CHECK(count_of(ptx, "wgmma.mma_async") >= 1);
      const bool ws = ptx.find(".reqntid " + std::to_string(32 * (warps + 4)) + ", 1, 1") != std::string::npos;
      if (ws) {  // the producer warpgroup's cp.async arrivals complete full[s]; the TMA thread adds bytes
        CHECK(count_of(ptx, "mbarrier.expect_tx.shared::cta.b64") >= 1);
        CHECK(count_of(ptx, "cp.async.mbarrier.arrive.noinc") >= 1);
      } else {  // thread 0 arrives with the bytes; the copies complete through wait_group
        CHECK(count_of(ptx, "mbarrier.arrive.expect_tx.shared::cta.b64") >= 1);
        CHECK(count_of(ptx, "cp.async.wait_group") >= 1);
      }
      CHECK(ws == !clear);
      ptxtest::assemble("mixed TMA / cp.async matmul", ptx, "sm_90a");
    }
  }
}

TEST_CASE("descriptor: a K loop's TMA loads are pipelined into wgmma's swizzled buffers", "[ptx][descriptor]") {
  alignas(16) static bf16 fh[16];
  alignas(16) static float fc[16];
  envtest::EnvVar tma("TLE_TMA", "1");
  auto mm = ex::make_matmul_tma<bf16, float>();
  auto mmp = ex::make_matmul_tma_persistent<bf16, float>();
  struct C { int64_t BM, BN, BK; int warps, stages; };
  for (C c : {C{128, 256, 64, 8, 4}, C{128, 128, 64, 4, 3}, C{64, 64, 32, 4, 2}, C{128, 64, 64, 4, 5}}) {
    for (bool persistent : {false, true}) {
      INFO(c.BM << "x" << c.BN << "x" << c.BK << " warps " << c.warps << " stages " << c.stages << " persistent "
                << persistent);
      TensorDescriptor<bf16, 2> da(fh, {4096, 4096}, {4096, 1}, {c.BM, c.BK}), db(fh, {4096, 4096}, {4096, 1}, {c.BK, c.BN});
      Grid g(32, 16);
      g.with_warps(c.warps).with_stages(c.stages);
      const std::string ptx = persistent ? mmp.ptx(90, g, da, db, fc, 4096, 4096, 4096) : mm.ptx(90, g, da, db, fc, 4096, 4096, 4096);
      // one box per 64-column (128-byte) block of each operand, issued by one thread; no cp.async
      const size_t boxes = size_t(c.BK / std::min<int64_t>(c.BK, 64) + c.BN / std::min<int64_t>(c.BN, 64));
      CHECK(count_of(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") >= boxes);
      CHECK(count_of(ptx, "mbarrier.arrive.expect_tx.shared::cta.b64") >= 1);
      CHECK(count_of(ptx, "cp.async.cg.shared.global") == 0);
      CHECK(count_of(ptx, "cp.async.ca.shared.global") == 0);
      CHECK(count_of(ptx, "cp.async.wait_group") == 0);
      CHECK(count_of(ptx, "wgmma.mma_async") >= 1);
      CHECK(count_of(ptx, "mbarrier.inval") >= 1);
      if (!persistent) {  // warp-specialized: a producer warpgroup of which one thread issues the boxes
        CHECK(ptx.find(".reqntid " + std::to_string(32 * (c.warps + 4)) + ", 1, 1") != std::string::npos);
        CHECK(count_of(ptx, "cp.async.mbarrier.arrive") == 0);
        // one proxy fence before the loop (earlier generic accesses of the buffers); none per
        // iteration: TMA and wgmma are both the async proxy
        CHECK(count_of(ptx, "fence.proxy.async") == 1);
      } else {  // a K loop inside the tile loop is not warp-specialized: thread 0 issues, bar.sync
        CHECK(ptx.find(".reqntid " + std::to_string(32 * c.warps) + ", 1, 1") != std::string::npos);
      }
      ptxtest::assemble("pipelined TMA matmul", ptx, "sm_90a");
      CHECK(ptxtest::spill_store_bytes("pipelined TMA matmul", ptx) <= 0);  // issue #11: no spills
    }
  }
  // Attention on descriptors: k (transposed) and v pipelined by TMA, q one TMA block before the
  // loop; 4 warps are warp-specialized (a TMA producer thread), 8 are not (two dots per iteration).
  auto attn = ex::make_attention_tma<bf16>();
  for (auto [bm, bn, warps] : std::vector<std::tuple<int64_t, int64_t, int>>{{64, 64, 4}, {128, 64, 8}, {128, 128, 8}}) {
    INFO("attention BM " << bm << " BN " << bn << " warps " << warps);
    TensorDescriptor<bf16, 2> q(fh, {8 * 4096, 128}, {128, 1}, {bm, 128}), kv(fh, {8 * 4096, 128}, {128, 1}, {bn, 128});
    Grid g(64, 8);
    g.with_warps(warps).with_stages(3);
    const std::string ptx = attn.ptx(90, g, q, kv, kv, fh, 4096, 0.1f, true);
    CHECK(count_of(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") >= 5);
    CHECK(count_of(ptx, "cp.async.cg.shared.global") == 0);
    CHECK(count_of(ptx, "wgmma.mma_async") >= 2);
    CHECK(ptx.find(".reqntid " + std::to_string(32 * (warps == 4 ? 8 : warps)) + ", 1, 1") != std::string::npos);
    ptxtest::assemble("pipelined TMA attention", ptx, "sm_90a");
  }
  // The overlapped form (make_attention_tma<T, true>): the next block's q k^T is issued before the
  // softmax and its wgmma waited for only at the end of the iteration, so the softmax's exp2s sit
  // between that wgmma's commit and the next wait_group, and ptxas keeps the wgmmas asynchronous
  // (C7514: an accumulator read before its wait serializes them all). No spills at BN = 64; at
  // BN = 128 q (32 registers, wgmma's A), two score tiles and acc need more than 255 registers.
  // With 4 stages acc's dot also stays in flight into the next iteration (carried_dots: waited
  // for where it is scaled, the loop copying 2 iterations ahead), still without serialization.
  auto attn_ov = ex::make_attention_tma<bf16, true>();
  for (auto [bm, bn, stages] : std::vector<std::tuple<int64_t, int64_t, int>>{{128, 64, 3}, {128, 64, 4}, {128, 128, 3}}) {
    INFO("overlapped attention BM " << bm << " BN " << bn << " stages " << stages);
    TensorDescriptor<bf16, 2> q(fh, {8 * 4096, 128}, {128, 1}, {bm, 128}), kv(fh, {8 * 4096, 128}, {128, 1}, {bn, 128});
    Grid g(64, 8);
    g.with_warps(8).with_stages(stages);
    for (bool causal : {false, true}) {
      const std::string ptx = attn_ov.ptx(90, g, q, kv, kv, fh, 4096, 0.1f, causal);
      ptxtest::assemble("overlapped TMA attention", ptx, "sm_90a");
      bool no_ptxas = false;
      if (auto log = ptxtest::verbose_log("overlapped TMA attention", ptx, "sm_90a", no_ptxas)) {
        CHECK(log->find("C7514") == std::string::npos);
        if (bn == 64) CHECK(log->find("serialized") == std::string::npos);
      }
      if (bn == 64) CHECK(ptxtest::spill_store_bytes("overlapped TMA attention", ptx) <= 0);
      // The loop's last wgmma group (p v): waited for before the back-edge with 3 stages; with 4
      // the branch comes first (the next iteration waits where it scales acc).
      const size_t pv = ptx.rfind("wgmma.commit_group");
      const size_t wait_after = ptx.find("wgmma.wait_group", pv), branch_after = ptx.find("bra", pv);
      CHECK((stages == 4) == (branch_after < wait_after));
      // in the loop (after the prologue's wgmmas and their wait): commit, then ex2 before the wait
      const size_t first_wait = ptx.find("wgmma.wait_group");
      REQUIRE(first_wait != std::string::npos);
      const size_t commit = ptx.find("wgmma.commit_group", first_wait);
      REQUIRE(commit != std::string::npos);
      const size_t next_wait = ptx.find("wgmma.wait_group", commit);
      const size_t ex2 = ptx.find("ex2.approx", commit);
      CHECK(ex2 < next_wait);
    }
  }
  // A descriptor also read before the loop (a peeled first iteration): that read goes through
  // pointers, the loop's blocks are pipelined by TMA into wgmma's buffers.
  TensorDescriptor<bf16, 2> da(fh, {4096, 4096}, {4096, 1}, {128, 64}), db(fh, {4096, 4096}, {4096, 1}, {64, 128});
  const std::string split = matmul_split.ptx(90, 4, da, db, fc, 4096, 4096, 4096);
  CHECK(count_of(split, "cp.async.bulk.tensor.2d") >= 2);
  CHECK(count_of(split, "wgmma.mma_async") >= 2);
  ptxtest::assemble("split matmul", split, "sm_90a");
  // ... but only where the loop's loads can be pipelined for wgmma: a summing loop's cannot, and
  // the peeled load stays a TMA load (one before the loop, one in it)
  TensorDescriptor<bf16, 2> dx(fh, {4096, 64}, {64, 1}, {64, 64});
  Grid g4(64);
  g4.with_warps(4).with_stages(3);
  CHECK(count_of(sum_peeled.ptx(90, g4, dx, fc, 4096), "cp.async.bulk.tensor.2d") >= 2);
  // A reduction with a combine function under a pending wgmma compiles (the wait before it)
  TensorDescriptor<bf16, 2> d64(fh, {8 * 4096, 64}, {64, 1}, {64, 64});
  Grid g48(64, 8);
  g48.with_warps(4).with_stages(3);
  ptxtest::assemble("combine reduce under a wgmma, axis 0", combine_under_wgmma<0>().ptx(90, g48, d64, d64, d64, fc, 4096), "sm_90a");
  ptxtest::assemble("combine reduce under a wgmma, axis 1", combine_under_wgmma<1>().ptx(90, g48, d64, d64, d64, fc, 4096), "sm_90a");
}

TEST_CASE("descriptor: the TMA matmul example on ragged shapes (CPU: expanded masked loads)", "[ops][descriptor]") {
  auto mm = ex::make_matmul_tma<bf16, float>();
  struct S { int64_t M, N, K; };
  for (S s : {S{1, 8, 8}, S{17, 24, 40}, S{100, 72, 136}}) {
    CAPTURE(s.M, s.N, s.K);
    std::vector<bf16> ha(size_t(s.M * s.K)), hb(size_t(s.K * s.N));
    for (size_t i = 0; i < ha.size(); ++i) ha[i] = bf16(float(int(i * 37 % 17) - 8) / 8.0f);
    for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16(float(int(i * 53 % 13) - 6) / 4.0f);
    Buf<bf16> a(ha), b(hb);
    Buf<float> c(size_t(s.M * s.N), 99.f);
    mm(Grid(cdiv(s.M, 32), cdiv(s.N, 32)), TensorDescriptor<bf16, 2>(a.data(), {s.M, s.K}, {s.K, 1}, {32, 16}),
       TensorDescriptor<bf16, 2>(b.data(), {s.K, s.N}, {s.N, 1}, {16, 32}), c.data(), int32_t(s.M), int32_t(s.N),
       int32_t(s.K));
    CHECK(opstest::diffs(c, ref_matmul(ha, hb, s.M, s.N, s.K, s.K, s.N, s.N, 99.f), 1e-5, 1e-4) == "");
  }
}

TEST_CASE("descriptor: which blocks TMA takes (tma_block_ok)", "[ptx][descriptor]") {
  using tle::passes::tma_block_ok;
  CHECK(tma_block_ok(DType::f32, {64, 32}));
  CHECK(tma_block_ok(DType::f32, {1, 4}));          // a 16-byte row
  CHECK(!tma_block_ok(DType::f32, {1, 2}));         // an 8-byte row
  CHECK(tma_block_ok(DType::u8, {16}));
  CHECK(!tma_block_ok(DType::u8, {8}));
  CHECK(!tma_block_ok(DType::f32, {17, 32}));       // not a power of two
  CHECK(tma_block_ok(DType::bf16, {128, 256}));     // 64 KiB
  CHECK(!tma_block_ok(DType::bf16, {256, 256}));    // 128 KiB: plain accesses
  CHECK(!tma_block_ok(DType::i1, {64}));
  CHECK(tma_block_ok(DType::f64, {2, 2, 2, 2, 2}));
  CHECK(!tma_block_ok(DType::f64, {2, 2, 2, 2, 2, 2}));
}

TEST_CASE("descriptor: the verifier checks desc_load and desc_store operands", "[ir][descriptor]") {
  // A rank-2 desc_load built by hand: map, base, 2 shapes, 2 strides, 2 offsets.
  auto build = [](DType offset_dtype, DType block_dtype, int64_t block_rank, bool store) {
    auto f = std::make_unique<ir::Function>();
    f->name = "k";
    ir::Builder b(&f->entry());
    std::vector<ir::Value*> ops;
    ops.push_back(f->entry().add_arg(ir::scalar_type(DType::ptr, DType::u8)));
    ops.push_back(f->entry().add_arg(ir::scalar_type(DType::ptr, DType::f32)));
    for (int i = 0; i < 4; ++i) ops.push_back(f->entry().add_arg(ir::scalar_type(DType::i64)));
    for (int i = 0; i < 2; ++i) ops.push_back(f->entry().add_arg(ir::scalar_type(offset_dtype)));
    ir::Type blk = ir::scalar_type(block_dtype).with_shape(block_rank == 2 ? ir::Shape{8, 4} : ir::Shape{32});
    if (store) ops.push_back(b.constant(blk, 0.0));
    b.create(store ? ir::OpKind::DescStore : ir::OpKind::DescLoad, ops,
             store ? std::vector<ir::Type>{} : std::vector<ir::Type>{blk}, {{"rank", int64_t(2)}});
    return f;
  };
  CHECK_NOTHROW(ir::verify(*build(DType::i32, DType::f32, 2, false)));
  CHECK_NOTHROW(ir::verify(*build(DType::i32, DType::f32, 2, true)));
  CHECK_THROWS_WITH(ir::verify(*build(DType::i64, DType::f32, 2, false)), Catch::Contains("offsets must be i32 scalars"));
  CHECK_THROWS_WITH(ir::verify(*build(DType::i32, DType::f16, 2, true)),
                    Catch::Contains("the block's dtype is not the base's pointee"));
  CHECK_THROWS_WITH(ir::verify(*build(DType::i32, DType::f32, 1, false)),
                    Catch::Contains("the block's rank is not the descriptor's"));
}

// ------------------------------------------------------------------------------------ GPU

TEST_CASE("gpu: descriptor copies and matmul on ragged shapes (TMA on sm_90)", "[.gpu][descriptor]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  struct S { int64_t R, C, BR, BC; };
  for (S s : {S{1, 1, 1, 4}, S{17, 17, 16, 16}, S{1001, 17, 64, 8}, S{17, 1001, 16, 128}, S{1001, 1001, 17, 32}}) {
    CAPTURE(s.R, s.C, s.BR, s.BC);
    const int64_t ld = padded<float>(s.C) + 4;
    Buf<float> in = opstest::random_buf<float>(size_t(s.R * ld), 5);
    std::vector<float> init(size_t(s.R * ld), -7.f);
    DeviceBuffer<float> din(std::vector<float>(in.data(), in.data() + in.size())), dout(init);
    copy2d(Grid(cdiv(s.R, s.BR), cdiv(s.C, s.BC)).backend(Backend::GPU),
           TensorDescriptor<float, 2>(din, {s.R, s.C}, {ld, 1}, {s.BR, s.BC}),
           TensorDescriptor<float, 2>(dout, {s.R, s.C}, {ld, 1}, {s.BR, s.BC}));
    std::vector<float> got(init.size());
    dout.copy_to_host(got.data(), got.size());
    std::vector<float> want(init.size(), -7.f);
    for (int64_t r = 0; r < s.R; ++r)
      for (int64_t c = 0; c < s.C; ++c) want[size_t(r * ld + c)] = in[size_t(r * ld + c)] * 2.0f + 1.0f;
    CHECK(opstest::diffs(got, want) == "");
  }
  // out-of-range windows read zeros
  const int64_t R = 17, C = 13, ld = padded<float>(C);
  Buf<float> x = opstest::random_buf<float>(size_t(R * ld), 3);
  DeviceBuffer<float> dx(std::vector<float>(x.data(), x.data() + x.size()));
  DeviceBuffer<float> dw(size_t(8 * 16));
  for (auto [r0, c0] : {std::pair{0, 0}, std::pair{-3, -5}, std::pair{12, 10}, std::pair{17, 0}}) {
    CAPTURE(r0, c0);
    window(Grid(1).backend(Backend::GPU), TensorDescriptor<float, 2>(dx, {R, C}, {ld, 1}, {8, 16}), dw, r0, c0);
    std::vector<float> got(8 * 16);
    dw.copy_to_host(got.data(), got.size());
    CHECK(opstest::diffs(got, ref_window(x, R, C, ld, r0, c0, 8, 16)) == "");
  }
  struct M { int64_t M, N, K; };
  for (M s : {M{1, 1, 1}, M{17, 17, 17}, M{1, 17, 1001}, M{1001, 17, 64}, M{64, 1000, 1000}}) {
    CAPTURE(s.M, s.N, s.K);
    const int64_t lda = padded<float>(s.K), ldb = padded<float>(s.N), ldc = padded<float>(s.N);
    Buf<float> a = opstest::random_buf<float>(size_t(s.M * lda), 11), b = opstest::random_buf<float>(size_t(s.K * ldb), 12);
    DeviceBuffer<float> da(std::vector<float>(a.data(), a.data() + a.size()));
    DeviceBuffer<float> db(std::vector<float>(b.data(), b.data() + b.size()));
    DeviceBuffer<float> dc(std::vector<float>(size_t(s.M * ldc), 99.f));
    const int64_t BM = 64, BN = 32, BK = 32;
    matmul(Grid(cdiv(s.M, BM), cdiv(s.N, BN)).backend(Backend::GPU),
           TensorDescriptor<float, 2>(da, {s.M, s.K}, {lda, 1}, {BM, BK}),
           TensorDescriptor<float, 2>(db, {s.K, s.N}, {ldb, 1}, {BK, BN}),
           TensorDescriptor<float, 2>(dc, {s.M, s.N}, {ldc, 1}, {BM, BN}), int32_t(s.K));
    std::vector<float> got(size_t(s.M * ldc));
    dc.copy_to_host(got.data(), got.size());
    CHECK(opstest::diffs(got, ref_matmul(a, b, s.M, s.N, s.K, lda, ldb, ldc, 99.f), 1e-3, 1e-3) == "");
  }
  // bf16 operands: TMA loads feeding wgmma (sm_90a), warps 4 and 8
  for (M s : {M{1, 17, 1001}, M{17, 17, 17}, M{1000, 1000, 1000}, M{4097, 64, 65}}) {
    for (int warps : {4, 8}) {
      CAPTURE(s.M, s.N, s.K, warps);
      const int64_t lda = padded<bf16>(s.K), ldb = padded<bf16>(s.N), ldc = padded<float>(s.N);
      std::vector<bf16> ha(size_t(s.M * lda)), hb(size_t(s.K * ldb));
      for (size_t i = 0; i < ha.size(); ++i) ha[i] = bf16(float(int(i * 37 % 17) - 8) / 8.0f);
      for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16(float(int(i * 53 % 13) - 6) / 4.0f);
      DeviceBuffer<bf16> da(ha), db(hb);
      DeviceBuffer<float> dc(std::vector<float>(size_t(s.M * ldc), 99.f));
      matmul_bf16(Grid(cdiv(s.M, 128), cdiv(s.N, 64)).with_warps(warps).backend(Backend::GPU),
                  TensorDescriptor<bf16, 2>(da, {s.M, s.K}, {lda, 1}, {128, 64}),
                  TensorDescriptor<bf16, 2>(db, {s.K, s.N}, {ldb, 1}, {64, 64}),
                  TensorDescriptor<float, 2>(dc, {s.M, s.N}, {ldc, 1}, {128, 64}), int32_t(s.K));
      std::vector<float> got(size_t(s.M * ldc));
      dc.copy_to_host(got.data(), got.size());
      CHECK(opstest::diffs(got, ref_matmul(ha, hb, s.M, s.N, s.K, lda, ldb, ldc, 99.f), 1e-5, 1e-3) == "");
    }
  }
}

TEST_CASE("gpu: the TMA matmul example (pipelined TMA into wgmma) on ragged shapes, stages 2-5", "[.gpu][descriptor]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  envtest::EnvVar tma("TLE_TMA", "1");
  auto mm = ex::make_matmul_tma<bf16, float>();
  auto mmp = ex::make_matmul_tma_persistent<bf16, float>();
  struct S { int64_t M, N, K; };
  struct C { int64_t BM, BN, BK; int warps, stages; };
  for (S s : {S{1, 64, 64}, S{17, 136, 72}, S{1000, 1000, 1000}, S{4097, 72, 4104}}) {
    std::vector<bf16> ha(size_t(s.M * s.K)), hb(size_t(s.K * s.N));
    for (size_t i = 0; i < ha.size(); ++i) ha[i] = bf16(float(int(i * 37 % 17) - 8) / 8.0f);
    for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16(float(int(i * 53 % 13) - 6) / 4.0f);
    const std::vector<float> want = ref_matmul(ha, hb, s.M, s.N, s.K, s.K, s.N, s.N, 99.f);
    DeviceBuffer<bf16> da(ha), db(hb);
    for (C c : {C{128, 256, 64, 8, 4}, C{128, 128, 64, 4, 3}, C{64, 64, 32, 4, 2}, C{128, 64, 64, 4, 5}}) {
      for (bool persistent : {false, true}) {
        CAPTURE(s.M, s.N, s.K, c.BM, c.BN, c.BK, c.warps, c.stages, persistent);
        DeviceBuffer<float> dc(std::vector<float>(size_t(s.M * s.N), 99.f));
        TensorDescriptor<bf16, 2> ta(da, {s.M, s.K}, {s.K, 1}, {c.BM, c.BK}), tb(db, {s.K, s.N}, {s.N, 1}, {c.BK, c.BN});
        const int64_t blocks = cdiv(s.M, c.BM) * cdiv(s.N, c.BN);
        Grid g = persistent ? Grid(std::max<int64_t>(1, blocks / 3)) : Grid(cdiv(s.M, c.BM), cdiv(s.N, c.BN));
        g.with_warps(c.warps).with_stages(c.stages).backend(Backend::GPU);
        if (persistent) mmp(g, ta, tb, dc, int32_t(s.M), int32_t(s.N), int32_t(s.K));
        else mm(g, ta, tb, dc, int32_t(s.M), int32_t(s.N), int32_t(s.K));
        std::vector<float> got(size_t(s.M * s.N));
        dc.copy_to_host(got.data(), got.size());
        CHECK(opstest::diffs(got, want, 1e-5, 1e-3) == "");
      }
    }
  }
  // A descriptor read in and outside the K loop (no pipelined TMA)
  const int64_t M = 300, N = 200, K = 520;
  std::vector<bf16> ha(size_t(M * K)), hb(size_t(K * N));
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = bf16(float(int(i * 37 % 17) - 8) / 8.0f);
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16(float(int(i * 53 % 13) - 6) / 4.0f);
  DeviceBuffer<bf16> da(ha), db(hb);
  DeviceBuffer<float> dc(size_t(M * N));
  matmul_split(Grid(cdiv(M, 128), cdiv(N, 64)).backend(Backend::GPU),
               TensorDescriptor<bf16, 2>(da, {M, K}, {K, 1}, {128, 64}), TensorDescriptor<bf16, 2>(db, {K, N}, {N, 1}, {64, 64}),
               dc, int32_t(M), int32_t(N), int32_t(K));
  std::vector<float> got(size_t(M * N));
  dc.copy_to_host(got.data(), got.size());
  CHECK(opstest::diffs(got, ref_matmul(ha, hb, M, N, K, K, N, N, 0.f), 1e-5, 1e-3) == "");
}

TEST_CASE("gpu: a K loop with a TMA load (A) and a cp.async load (B, rows not 16-byte aligned)", "[.gpu][descriptor]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  for (auto [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{17, 100, 72}, {1000, 1001, 1000}}) {
    std::vector<bf16> ha(size_t(M * K)), hb(size_t(K * N));
    for (size_t i = 0; i < ha.size(); ++i) ha[i] = bf16(float(int(i * 37 % 17) - 8) / 8.0f);
    for (size_t i = 0; i < hb.size(); ++i) hb[i] = bf16(float(int(i * 53 % 13) - 6) / 4.0f);
    const std::vector<float> want = ref_matmul(ha, hb, M, N, K, K, N, N, 0.f);
    DeviceBuffer<bf16> da(ha), db(hb);
    for (int warps : {4, 8})
      for (int stages : {2, 4})
        for (bool clear : {false, true}) {
        CAPTURE(M, N, K, warps, stages, clear);
        DeviceBuffer<float> dc(size_t(M * N));
        Grid g(cdiv(M, 128), cdiv(N, 128));
        g.with_warps(warps).with_stages(stages).backend(Backend::GPU);
        matmul_mixed(g, TensorDescriptor<bf16, 2>(da, {M, K}, {K, 1}, {128, 64}), db, dc, int32_t(M), int32_t(N),
                     int32_t(K), 128, clear);
        std::vector<float> got(size_t(M * N));
        dc.copy_to_host(got.data(), got.size());
        CHECK(opstest::diffs(got, want, 1e-5, 1e-3) == "");
      }
  }
}

TEST_CASE("gpu: TMA windows at negative and past-the-end offsets of a 16-byte-aligned tensor", "[.gpu][descriptor]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  // C = 16 f32: the innermost extent is whole 16-byte chunks, so these blocks move by TMA (with
  // TLE_TMA=1), including boxes that start before the tensor (tiled TMA takes signed coordinates).
  const int64_t R = 17, C = 16, ld = C;
  Buf<float> x = opstest::random_buf<float>(size_t(R * ld), 3);
  DeviceBuffer<float> dx(std::vector<float>(x.data(), x.data() + x.size()));
  DeviceBuffer<float> dw(size_t(8 * 16));
  for (auto [r0, c0] : {std::pair{0, 0}, std::pair{-3, -4}, std::pair{-3, -5}, std::pair{12, 10}, std::pair{17, 0}}) {
    CAPTURE(r0, c0);
    window(Grid(1).backend(Backend::GPU), TensorDescriptor<float, 2>(dx, {R, C}, {ld, 1}, {8, 16}), dw, r0, c0);
    std::vector<float> got(8 * 16);
    dw.copy_to_host(got.data(), got.size());
    CHECK(opstest::diffs(got, ref_window(x, R, C, ld, r0, c0, 8, 16)) == "");
  }
}
