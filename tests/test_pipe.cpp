// tests/test_pipe.cpp - TLE-Lite's pipe (include/tle/pipe.hpp; docs/struct.md, "Pipes"): a TMA
// writer and a reader role, a cp.async + store writer with two fields and two readers, capacity 1
// to 4 over ragged trip counts ([ops][struct]: the CPU backend runs them on the interpreter, roles
// interleaved; mirrored on the GPU), the user errors at the user's line, and the PTX (mbarrier
// waits and arrivals, assembled by ptxas).
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "error_util.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"
#include "struct_util.hpp"

using namespace tle;
using namespace opstest;
using namespace structtest;

namespace {

/// out[0:N] = column sums of x [R, N] (f32): a writer role of WW warps moves blocks of 8 rows by
/// TMA (rows past R arrive as zeros) through a pipe of CAP slots; a reader role of 4 warps adds
/// them up. TX_FIRST: the writer announces the bytes (commit) before issuing the copy.
auto tma_pipe_kernel = [](TensorDescriptor<float, 2> xd, Ptr<float> out, Tile<int32_t> R, Constexpr<int> N,
                          Constexpr<int> CAP, Constexpr<bool> TX_FIRST, Constexpr<int> WW) {
  auto buf = gpu::alloc<float>({CAP, 8, N});
  auto p = pipe(CAP, buf);
  Tile<int32_t> blocks = (R + 7) / 8;
  gpu::warp_specialize({
      gpu::Role(WW, [&] {
        auto w = p.writer();
        for (auto b : range(0, blocks)) {
          auto slot = w.acquire(b);
          if (TX_FIRST) w.commit(b, p.slot_bytes());
          gpu::copy(xd, {b * 8, Tile<int32_t>(0)}, slot.get<0>(), slot.ready);
          if (!TX_FIRST) w.commit(b, 8 * N * 4);
        }
      }),
      gpu::Role(4, [&] {
        auto r = p.reader();
        Tile<float> acc = zeros<float>({8, N});
        for (auto b : range(0, blocks)) {
          acc = acc + r.wait(b).get<0>().load();
          r.release(b);
        }
        store(out + arange(0, N), sum(acc, 0));
      }),
  });
};

/// Two fields filled by two transports, read by two readers: the writer copies block b of x [R, 32]
/// (8 rows, cp.async, rows past R zero-filled) into field 0 and stores each row's weight
/// (row % 3 + 1) into field 1 through local_ptr; both readers (4 warps each) add up weight * x per
/// column, reader k into out[32 k : 32 k + 32].
auto mixed_pipe_kernel = [](Ptr<float> x, Ptr<float> out, Tile<int32_t> R, Constexpr<int> CAP) {
  auto rows_buf = gpu::alloc<float>({CAP, 8, 32});
  auto weights = gpu::alloc<int32_t>({CAP, 8});
  auto p = pipe(CAP, std::tuple{rows_buf, weights}, {.readers = 2});
  Tile<int32_t> blocks = (R + 7) / 8;
  auto reader = [&](int k) {
    return [&, k] {
      auto r = p.reader();
      Tile<float> acc = zeros<float>({8, 32});
      for (auto b : range(0, blocks)) {
        auto slot = r.wait(b);
        Tile<float> wgt = cast<float>(slot.get<1>().load());
        acc = acc + slot.get<0>().load() * expand_dims(wgt, 1);
        r.release(b);
      }
      store(out + k * 32 + arange(0, 32), sum(acc, 0));
    };
  };
  gpu::warp_specialize({
      gpu::Role(1, [&] {
        auto w = p.writer();
        Tile<int32_t> rr = expand_dims(arange(0, 8), 1), c = expand_dims(arange(0, 32), 0);
        for (auto b : range(0, blocks)) {
          auto slot = w.acquire(b);
          Tile<int32_t> row = b * 8 + rr;
          gpu::copy(x + row * 32 + c, slot.get<0>(), row < R);
          gpu::commit_group();
          store(gpu::local_ptr(slot.get<1>()), (b * 8 + arange(0, 8)) % 3 + 1);
          gpu::wait_group(0);
          w.commit(b);
        }
      }),
      gpu::Role(4, reader(0)),
      gpu::Role(4, reader(1)),
  });
};

}  // namespace

TEST_CASE("ops: pipe: a TMA writer role and a reader role, capacity 1 to 4, ragged trip counts", "[ops][struct]") {
  auto k = jit("pipe_tma", tma_pipe_kernel);
  for (auto [R, cap] : {std::pair{1000, 3}, std::pair{1, 2}, std::pair{37, 1}, std::pair{129, 4}})
    for (bool tx_first : {false, true}) {
      const int writer_warps = tx_first ? 4 : 1;
      INFO("R " << R << " capacity " << cap << " writer warps " << writer_warps
                << (tx_first ? " bytes announced first" : ""));
      Buf<float> x(size_t(R) * 32), out(size_t(32));
      for (size_t i = 0; i < x.size(); ++i) x[i] = hashed(i);
      TensorDescriptor<float, 2> xd(x.data(), {R, 32}, {32, 1}, {8, 32});
      k(Grid(1), xd, out.data(), R, 32, cap, tx_first, writer_warps);
      CHECK(diffs(all(out), column_sums_of(x, R, 32)) == "");
    }
}

TEST_CASE("ops: pipe: two fields by cp.async and stores, two readers", "[ops][struct]") {
  auto k = jit("pipe_mixed", mixed_pipe_kernel);
  for (auto [R, cap] : {std::pair{1000, 2}, std::pair{5, 3}, std::pair{17, 1}}) {
    INFO("R " << R << " capacity " << cap);
    Buf<float> x(size_t(R) * 32), out(size_t(64));
    for (size_t i = 0; i < x.size(); ++i) x[i] = hashed(i);
    k(Grid(1), x.data(), out.data(), R, cap);
    std::vector<float> want(64, 0.0f);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 32; ++c) {
        const float v = float(r % 3 + 1) * x[size_t(r) * 32 + c];
        want[c] += v, want[32 + c] += v;
      }
    CHECK(diffs(all(out), want) == "");
  }
}

namespace {
int line = 0;
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases) {
  errtest::expect_user_error(f, phrases, "test_pipe.cpp", line);
}
}  // namespace

TEST_CASE("errors: pipe: capacity, readers and fields checked at the user's line", "[errors][struct]") {
  Buf<float> o(size_t(64));
  auto run = [&](auto body) { jit("pipe_err", body)(Grid(1), o.data()); };
  expect_error([&] { run([](Ptr<float>) {
    auto b = gpu::alloc<float>({2, 8, 32});
    line = __LINE__; pipe(3, b);
  }); }, {"field 0's leading dim is 2, not the capacity 3", "{3, ...}"});
  expect_error([&] { run([](Ptr<float>) {
    auto b = gpu::alloc<float>({2, 8, 32});
    line = __LINE__; pipe(0, b);
  }); }, {"capacity 0 is outside 1..1024"});
  expect_error([&] { run([](Ptr<float>) {
    auto b = gpu::alloc<float>({2, 8, 32});
    line = __LINE__; pipe(2, b, {.readers = 0});
  }); }, {"readers 0 is outside 1..32"});
  expect_error([&] { run([](Ptr<float>) {
    auto a = gpu::alloc<float>({2, 8, 32});
    auto b = gpu::alloc<int32_t>({2});
    line = __LINE__; pipe(2, std::tuple{a, b});
  }); }, {"field 1 has rank 1", "rank 2 or more"});
  expect_error([&] { run([](Ptr<float>) {
    auto b = gpu::alloc<bf16>({2, 64}, gpu::scope::shared, gpu::SharedLayout::swizzled(8, 1, 8));
    line = __LINE__; pipe(2, b);
  }); }, {"field 0 has rank 2", "swizzled", "rank 3 or more"});
  expect_error([&] { run([](Ptr<float>) {
    auto b = gpu::alloc<float>({2, 8, 32});
    auto p = pipe(2, b);
    gpu::warp_specialize({gpu::Role(1, [&] {
      line = __LINE__; p.writer().acquire(arange(0, 4));
    })});
  }); }, {"iteration must be a scalar"});
}

TEST_CASE("errors: pipe: TMA into a slot whose bytes no commit announces", "[errors][struct]") {
  static std::vector<float> host(size_t(64) * 32);
  TensorDescriptor<float, 2> xd(host.data(), {64, 32}, {32, 1}, {8, 32});
  Buf<float> o(size_t(32));
  auto k = jit("pipe_no_tx", [](TensorDescriptor<float, 2> d, Ptr<float> out) {
    auto b = gpu::alloc<float>({2, 8, 32});
    auto p = pipe(2, b);
    gpu::warp_specialize({gpu::Role(1, [&] {
                            auto w = p.writer();
                            auto slot = w.acquire(0);
                            line = __LINE__; gpu::copy(d, {0, 0}, slot.get<0>(), slot.ready);
                            w.commit(0);  // no bytes announced
                          }),
                          gpu::Role(4, [&] {
                            auto r = p.reader();
                            store(out + arange(0, 32), sum(r.wait(0).get<0>().load(), 0));
                            r.release(0);
                          })});
  });
  expect_error([&] { k(Grid(1), xd, o.data()); }, {"no gpu::arrive_expect_tx announces bytes", "commit(i, bytes)"});
}

TEST_CASE("ptx: a pipe is mbarrier waits and arrivals, TMA completing on the slot's", "[ptx][struct]") {
  auto k = jit("pipe_tma", tma_pipe_kernel);
  static std::vector<float> host(size_t(64) * 32);
  TensorDescriptor<float, 2> xd(host.data(), {64, 32}, {32, 1}, {8, 32});
  const std::string ptx = k.ptx(90, Grid(1), xd, fake<float>(), 64, 32, 3, false, 1);
  CHECK(ptxtest::count_of(ptx, "mbarrier.try_wait.parity") >= 2);   // acquire and wait
  CHECK(ptxtest::count_of(ptx, "mbarrier.arrive.expect_tx") >= 1);  // commit with bytes
  CHECK(ptxtest::count_of(ptx, "cp.async.bulk.tensor") >= 1);
  ptxtest::assemble("pipe tma", ptx, "sm_90a");
  auto m = jit("pipe_mixed", mixed_pipe_kernel);
  const std::string ptx2 = m.ptx(90, Grid(1), fake<float>(), fake<float>(), 64, 2);
  CHECK(ptxtest::count_of(ptx2, "cp.async.ca.shared.global") + ptxtest::count_of(ptx2, "cp.async.cg.shared.global") >= 1);
  ptxtest::assemble("pipe mixed", ptx2, "sm_90a");
}
