// tests/test_mesh.cpp - the device mesh (include/tle/mesh.hpp, docs/mesh.md): rank queries,
// remote loads / stores / atomics into symmetric memory, signals, distributed_barrier, on meshes of
// 1 to 8 ranks with ragged sizes ([mesh]: simulated ranks on the CPU by default; with
// TLE_TEST_BACKEND=gpu every rank on GPU 0, each with its own stream; with interp, the reference
// interpreter), the user errors at the user's line, the timeout of a wait nobody answers, and the
// PTX of the primitives (assembled by ptxas).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "error_util.hpp"
#include "helper_process.hpp"
#include "ops_util.hpp"
#include "ptxas_util.hpp"
#include "tle/ops/all_gather_gemm.hpp"
#include "tle/ops/gemm_reduce_scatter.hpp"

using namespace tle;

namespace {

/// A mesh of n ranks on the test backend: simulated on the CPU, or n ranks on GPU 0.
Mesh test_mesh(int n, MeshOptions o = {}) {
  if (opstest::gpu_mode()) return Mesh::gpus(std::vector<int>(static_cast<size_t>(n), 0), o);
  return Mesh::cpu(n, o);
}

template <class T> std::vector<T> read(const SymmetricBuffer<T>& b, int rank) {
  std::vector<T> h(b.size());
  b.copy_to_host(rank, h.data(), h.size());
  return h;
}

/// out[0:2] = (shard_id, num_shards) on each rank.
auto rank_query = [](Ptr<int32_t> out) {
  store(out, shard_id());
  store(out + 1, num_shards());
};

/// Ring: rank r stores x (its n values) into rank r+1's `recv` with remote stores, then signals
/// rank r+1's flag of this program (value epoch); every rank waits for its own flag and copies
/// recv into out. BLOCK elements per program, a flag per program.
auto ring_kernel = [](Ptr<float> x, Ptr<float> recv, Ptr<float> out, Ptr<uint64_t> flags, Tile<int32_t> n,
                      Tile<uint64_t> epoch, Constexpr<int> BLOCK, Constexpr<bool> EQ) {
  Tile<int32_t> pid = program_id(0);
  Tile<int32_t> offs = pid * BLOCK + arange(0, BLOCK);
  Tile<bool> m = offs < n;
  Tile<int32_t> next = (shard_id() + 1) % num_shards();
  store(remote(recv, next) + offs, load(x + offs, m, 0.0f), m);
  signal(flags + pid, epoch, next);
  signal_wait(flags + pid, epoch, EQ ? ir::WaitCmp::Eq : ir::WaitCmp::Ge);
  store(out + offs, load(recv + offs, m, 0.0f) * 2.0f, m);
};

/// All-gather: every rank stores its n values into slot `shard_id` of every rank's `all`, adds 1
/// to every rank's counter, waits for num_shards * epoch arrivals and sums what arrived.
auto gather_kernel = [](Ptr<int32_t> mine, Ptr<int32_t> all, Ptr<uint64_t> counter, Ptr<int64_t> total,
                        Tile<int32_t> n, Tile<uint64_t> epoch, Constexpr<int> BLOCK) {
  Tile<int32_t> offs = arange(0, BLOCK);
  Tile<int32_t> me = shard_id();
  for (auto q : range(0, num_shards())) {
    for (auto c0 : range(0, n, BLOCK)) {
      Tile<bool> m = c0 + offs < n;
      store(remote(all, q) + me * n + c0 + offs, load(mine + c0 + offs, m, 0), m);
    }
    signal(counter, uint64_t{1}, q, ir::SignalOp::Add);
  }
  signal_wait(counter, epoch * cast<uint64_t>(num_shards()));
  Tile<int64_t> s = zeros<int64_t>({});
  for (auto c0 : range(0, num_shards() * n, BLOCK)) {
    Tile<bool> m = c0 + offs < num_shards() * n;
    s = s + sum(cast<int64_t>(load(all + c0 + offs, m, 0)), 0);
  }
  store(total, s);
};

/// Every program of every rank adds (rank + 1) to rank 0's counter with a remote atomic, meets the
/// others at a distributed_barrier, then program 0 of each rank reads rank 0's counter remotely.
auto atomic_barrier_kernel = [](Ptr<int64_t> counter, Ptr<int64_t> seen) {
  atomic_add(remote(counter, 0), cast<int64_t>(shard_id()) + 1);
  distributed_barrier();
  store(seen + program_id(0), load(remote(counter, 0)));
};

/// Phases: each program writes `round` into its slot of its rank's `slots`, barrier, reads the slot
/// of the same program on rank (r + 1) into seen[round], barrier (so the next round's write does
/// not overtake a peer's read).
auto phase_kernel = [](Ptr<int32_t> slots, Ptr<int32_t> seen, Tile<int32_t> rounds) {
  Tile<int32_t> pid = program_id(0);
  Tile<int32_t> next = (shard_id() + 1) % num_shards();
  for (auto r : range(0, rounds)) {
    store(slots + pid, r * 100 + shard_id());
    distributed_barrier();
    store(seen + pid * rounds + r, load(remote(slots, next) + pid));
    distributed_barrier();
  }
};

}  // namespace

TEST_CASE("mesh: shard_id and num_shards on meshes of 1 to 8 ranks", "[mesh]") {
  auto k = jit("mesh_rank_query", rank_query);
  for (int n : {1, 2, 3, 8}) {
    Mesh mesh = test_mesh(n);
    auto out = mesh.alloc_symmetric<int32_t>(2);
    mesh.run([&](Rank& r) { k(Grid(1), r.local(out)); });
    for (int r = 0; r < n; ++r) {
      INFO("ranks " << n << ", rank " << r);
      CHECK(read(out, r) == std::vector<int32_t>{r, n});
    }
  }
}

TEST_CASE("mesh: ring exchange with remote stores and per-program signals", "[mesh]") {
  auto k = jit("mesh_ring", ring_kernel);
  for (int ranks : {2, 3}) {
    for (int n : {1, 17, 1001}) {
      Mesh mesh = test_mesh(ranks);
      const int block = 128;
      const int programs = (n + block - 1) / block;
      auto x = mesh.alloc_symmetric<float>(n);
      auto recv = mesh.alloc_symmetric<float>(n);
      auto out = mesh.alloc_symmetric<float>(n);
      auto flags = mesh.alloc_symmetric<uint64_t>(programs);
      for (int r = 0; r < ranks; ++r) {
        std::vector<float> h(n);
        for (int i = 0; i < n; ++i) h[i] = static_cast<float>(r * 10000 + i);
        x.copy_from_host(r, h.data(), h.size());
      }
      for (uint64_t epoch : {1, 2}) {  // flags count up: a second exchange waits for the new value
        mesh.run([&](Rank& r) {
          k(Grid(programs), r.local(x), r.local(recv), r.local(out), r.local(flags), n, epoch, block, epoch == 2);
        });
        for (int r = 0; r < ranks; ++r) {
          const int from = (r + ranks - 1) % ranks;
          std::vector<float> want(n);
          for (int i = 0; i < n; ++i) want[i] = 2.0f * static_cast<float>(from * 10000 + i);
          INFO("ranks " << ranks << ", n " << n << ", rank " << r << ", epoch " << epoch);
          CHECK(read(out, r) == want);
        }
      }
    }
  }
}

TEST_CASE("mesh: all-gather with remote stores and a counting signal", "[mesh]") {
  auto k = jit("mesh_gather", gather_kernel);
  for (int ranks : {1, 2, 4}) {
    const int n = 1001;
    Mesh mesh = test_mesh(ranks);
    auto mine = mesh.alloc_symmetric<int32_t>(n);
    auto all = mesh.alloc_symmetric<int32_t>(static_cast<size_t>(ranks) * n);
    auto counter = mesh.alloc_symmetric<uint64_t>(1);
    auto total = mesh.alloc_symmetric<int64_t>(1);
    int64_t want = 0;
    for (int r = 0; r < ranks; ++r) {
      std::vector<int32_t> h(n);
      for (int i = 0; i < n; ++i) want += h[i] = r * 7 + i % 13;
      mine.copy_from_host(r, h.data(), h.size());
    }
    for (uint64_t epoch : {1, 2}) {
      mesh.run([&](Rank& r) {
        k(Grid(1), r.local(mine), r.local(all), r.local(counter), r.local(total), n, epoch, 256);
      });
      for (int r = 0; r < ranks; ++r) {
        INFO("ranks " << ranks << ", rank " << r << ", epoch " << epoch);
        CHECK(read(total, r) == std::vector<int64_t>{want});
        CHECK(read(counter, r) == std::vector<uint64_t>{epoch * ranks});
      }
    }
  }
}

TEST_CASE("mesh: remote atomics and distributed_barrier over several programs", "[mesh]") {
  auto k = jit("mesh_atomic_barrier", atomic_barrier_kernel);
  for (int ranks : {2, 5}) {
    const int programs = 7;
    Mesh mesh = test_mesh(ranks);
    auto counter = mesh.alloc_symmetric<int64_t>(1);
    auto seen = mesh.alloc_symmetric<int64_t>(programs);
    mesh.run([&](Rank& r) { k(Grid(programs), r.local(counter), r.local(seen)); });
    // Each program of rank q adds q + 1; program p reads after the programs with id p of every
    // rank arrived, so it sees at least their sum, at most everything.
    const int64_t per_program = int64_t(ranks) * (ranks + 1) / 2;
    CHECK(read(counter, 0) == std::vector<int64_t>{per_program * programs});
    for (int r = 0; r < ranks; ++r) {
      std::vector<int64_t> s = read(seen, r);
      for (int p = 0; p < programs; ++p) {
        INFO("ranks " << ranks << ", rank " << r << ", program " << p << ": saw " << s[p]);
        // Host ranks run their programs in order: at program p's barrier every rank's programs
        // 0..p have added (without the barrier, a rank running ahead would see less).
        CHECK(s[p] >= (opstest::gpu_mode() ? 1 : p + 1) * per_program);
        CHECK(s[p] <= per_program * programs);
      }
    }
  }
}

TEST_CASE("mesh: distributed_barrier separates the phases of a loop, across launches", "[mesh]") {
  auto k = jit("mesh_phases", phase_kernel);
  const int ranks = 3, programs = 4, rounds = 5;
  Mesh mesh = test_mesh(ranks);
  auto slots = mesh.alloc_symmetric<int32_t>(programs);
  auto seen = mesh.alloc_symmetric<int32_t>(programs * rounds);
  for (int launch = 0; launch < 2; ++launch) {  // the barrier's generations continue across launches
    mesh.run([&](Rank& r) { k(Grid(programs), r.local(slots), r.local(seen), rounds); });
    for (int r = 0; r < ranks; ++r) {
      std::vector<int32_t> want;
      for (int p = 0; p < programs; ++p)
        for (int i = 0; i < rounds; ++i) want.push_back(i * 100 + (r + 1) % ranks);
      INFO("rank " << r << ", launch " << launch);
      CHECK(read(seen, r) == want);
    }
  }
}

TEST_CASE("mesh: a wait nobody answers times out with an error naming the flag", "[mesh]") {
  SKIP_ON_GPU("a timed-out wait traps, which ends the GPU context of every later test");
  auto k = jit("mesh_wait_forever", [](Ptr<uint64_t> flag) { signal_wait(flag, 1); });
  Mesh mesh = test_mesh(2, {.timeout_s = 0.2});
  auto flag = mesh.alloc_symmetric<uint64_t>(1);
  try {
    mesh.run([&](Rank& r) {
      if (r.id() == 0) k(Grid(1), r.local(flag));
    });
    FAIL("no error");
  } catch (const RuntimeError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("signal_wait timed out"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("waiting for >= 1"));
  }
  // A barrier only rank 0 reached times out too; the failed run resets the barrier's counters, so
  // the next run's barriers line up again (else rank 0 would wait forever, rank 1 pass early).
  auto barrier = jit("mesh_barrier_once", [](Ptr<int32_t> out) {
    distributed_barrier();
    store(out, shard_id() + 1);
  });
  auto out = mesh.alloc_symmetric<int32_t>(1);
  CHECK_THROWS_WITH(mesh.run([&](Rank& r) {
                      if (r.id() == 0) barrier(Grid(1), r.local(out));
                    }),
                    Catch::Contains("signal_wait timed out"));
  for (int run = 0; run < 2; ++run) {
    mesh.run([&](Rank& r) { barrier(Grid(1), r.local(out)); });
    CHECK(read(out, 1) == std::vector<int32_t>{2});
  }
}

TEST_CASE("mesh: user errors name the user's line", "[mesh][errors]") {
  using errtest::expect_user_error;
  int line = 0;
  auto k = jit("mesh_rank_query", rank_query);
  std::vector<int32_t> host(2);
  expect_user_error([&] { line = __LINE__; k(Grid(1).backend(Backend::CPU), host.data()); },
                    {"uses the device mesh", "launched outside a mesh", "Mesh::run"}, __FILE__, line);
  expect_user_error([&] { line = __LINE__; Mesh::cpu(0); }, {"1 to 64 ranks"}, __FILE__, line);
  Mesh mesh = Mesh::cpu(2, {.symmetric_bytes = 4 << 20});
  expect_user_error([&] { line = __LINE__; (void)mesh.alloc_symmetric<float>(2 << 20); },
                    {"do not fit", "symmetric_bytes"}, __FILE__, line);
  auto b = mesh.alloc_symmetric<float>(10);
  std::vector<float> h(9);
  expect_user_error([&] { line = __LINE__; b.copy_from_host(0, h.data(), h.size()); },
                    {"9 elements given for a buffer of 10"}, __FILE__, line);
  expect_user_error([&] { line = __LINE__; (void)b.local(2); }, {"rank 2 is not in the mesh of 2 ranks"}, __FILE__,
                    line);
  expect_user_error(
      [&] {
        mesh.run([&](Rank&) {
          line = __LINE__; mesh.run([](Rank&) {});
        });
      },
      {"Mesh::run inside Mesh::run"}, __FILE__, line);
  auto vec_flag = jit("mesh_vector_flag", [](Ptr<uint64_t> f) {
    signal(f + arange(0, 4), 1, 0);
  });
  const int sig_line = __LINE__ - 2;
  auto f = mesh.alloc_symmetric<uint64_t>(4);
  expect_user_error([&] { mesh.run([&](Rank& r) { vec_flag(Grid(1), r.local(f)); }); },
                    {"signal: the flag must be one pointer"}, __FILE__, sig_line);
  // remote() of a pointer that is not the launching rank's symmetric memory (a plain host
  // buffer, or another rank's copy) would address no rank's copy: refused at the launch.
  auto ring = jit("mesh_ring", ring_kernel);
  auto sym = mesh.alloc_symmetric<float>(4);
  auto fl = mesh.alloc_symmetric<uint64_t>(1);
  std::vector<float> plain(4);
  for (int wrong = 0; wrong < 2; ++wrong)
    expect_user_error(
        [&] {
          mesh.run([&](Rank& r) {
            float* recv = wrong == 0 ? plain.data() : sym.local(1 - r.id());
            line = __LINE__; ring(Grid(1), r.local(sym), recv, r.local(sym), r.local(fl), 4, uint64_t{1}, 128, false);
          });
        },
        {"remote() at", "is not in rank 0's symmetric memory", "Rank::local"}, __FILE__, line);
  // A loop-carried pointer that the body re-assigns from another argument: the launch checks
  // that argument too (the origin is taken when the trace ends, with the loop's yield).
  auto carried = jit("mesh_remote_carried", [](Ptr<float> sym, Ptr<float> other, Tile<int32_t> n) {
    Ptr<float> p = sym;
    for (auto i : range(0, n)) {
      store(remote(p, 0) + i, cast<float>(i));
      p = other;
    }
  });
  expect_user_error(
      [&] {
        mesh.run([&](Rank& r) {
          line = __LINE__; carried(Grid(1), r.local(sym), plain.data(), 2);
        });
      },
      {"remote() at", "is not in rank 0's symmetric memory"}, __FILE__, line);
  mesh.run([&](Rank& r) { carried(Grid(1), r.local(sym), r.local(sym), 2); });  // both symmetric: runs
  // A loop abandoned by an exception the kernel catches: what remote() noted in it is dropped
  // with the loop (the trace goes on and must not reach the deleted values).
  auto abandoned = jit("mesh_remote_abandoned", [](Ptr<float> s, Tile<int32_t> n) {
    try {
      for (auto i : range(0, n)) {
        store(remote(s + i, 0), cast<float>(i));  // s + i: a value of the loop, deleted with it
        throw std::runtime_error("the kernel gives up on this loop");
      }
    } catch (const std::runtime_error&) {
    }
    store(s, 5.0f);
  });
  mesh.run([&](Rank& r) { abandoned(Grid(1), r.local(sym), 2); });
  CHECK(read(sym, 0).at(0) == 5.0f);
  auto barrier = jit("mesh_barrier_grid", [](Ptr<uint64_t>) { distributed_barrier(); });
  expect_user_error(
      [&] {
        mesh.run([&](Rank& r) {
          line = __LINE__; barrier(Grid(70000), r.local(f));
        });
      },
      {"distributed_barrier with a grid of 70000x1x1", "65536"}, __FILE__, line);
}

TEST_CASE("mesh: hidden arguments in the IR and the primitives' PTX", "[mesh][ptx]") {
  auto k = jit("mesh_ring", ring_kernel);
  std::vector<float> h(4);
  std::vector<uint64_t> fl(1);
  const std::string ir = k.ir(false, h.data(), h.data(), h.data(), fl.data(), 4, uint64_t{1}, 128, false);
  CHECK_THAT(ir, Catch::Contains("{mesh}"));
  CHECK_THAT(ir, Catch::Contains("signal_wait"));
  std::string ptx = k.ptx(90, 4, h.data(), h.data(), h.data(), fl.data(), 4, uint64_t{1}, 128, false);
  const std::string eq_ptx = k.ptx(90, 4, h.data(), h.data(), h.data(), fl.data(), 4, uint64_t{1}, 128, true);
  CHECK_THAT(eq_ptx, Catch::Contains("setp.eq.u64"));
  CHECK_THAT(ptx, Catch::Contains("setp.ge.u64"));
  CHECK_THAT(ptx, Catch::Contains("fence.acq_rel.sys"));
  CHECK_THAT(ptx, Catch::Contains("st.relaxed.sys.u64"));
  CHECK_THAT(ptx, Catch::Contains("ld.acquire.sys.u64"));
  CHECK_THAT(ptx, Catch::Contains("%globaltimer"));
  auto g = jit("mesh_gather", gather_kernel);
  std::vector<int32_t> hi(4);
  std::vector<int64_t> t(1);
  const std::string gptx = g.ptx(90, 4, hi.data(), hi.data(), fl.data(), t.data(), 4, uint64_t{1}, 256);
  CHECK_THAT(gptx, Catch::Contains("red.relaxed.sys.add.u64"));
  auto ph = jit("mesh_phases", phase_kernel);  // two barriers: the wait's block-scoped labels twice
  const std::string pptx = ph.ptx(90, 4, hi.data(), hi.data(), 5);
  const std::string ptxas = ptxtest::ptxas_path();
  if (ptxas.empty()) {
    WARN("no ptxas: PTX not assembled");
    return;
  }
  for (const std::string& p : {ptx, eq_ptx, gptx, pptx}) {
    ptxtest::PtxasRun run = ptxtest::run_ptxas(ptxas, p, "sm_90a", "");
    INFO(run.log);
    CHECK(run.status == 0);
  }
}

namespace {
/// The elements of got [rows, cols] (row-major) off want(row, col) by more than 1e-2 (1 + |want|);
/// the first three are reported.
template <class T, class F> int mismatches(const std::vector<T>& got, int rows, int cols, F want) {
  int bad = 0;
  for (int row = 0; row < rows && bad < 3; ++row)
    for (int col = 0; col < cols && bad < 3; ++col) {
      const double w = want(row, col), g = double(float(got[static_cast<size_t>(row) * cols + col]));
      if (std::abs(g - w) > 1e-2 * (1 + std::abs(w))) {
        ++bad;
        UNSCOPED_INFO("c[" << row << ", " << col << "] = " << g << ", want " << w);
      }
    }
  return bad;
}

/// C = all_gather(A) @ B on `ranks` ranks for shards of m x k, B k x n, three calls (the epochs);
/// each rank's A and B differ, checked against a double-precision product of the values as T.
template <class T> void check_all_gather_gemm(int ranks, int m, int n, int k) {
  Mesh mesh = test_mesh(ranks);
  ops::AllGatherGemm<T> ag(mesh, m, n, k);
  auto a = mesh.alloc_symmetric<T>(static_cast<size_t>(m) * k);
  auto b = mesh.alloc_symmetric<T>(static_cast<size_t>(k) * n);
  auto c = mesh.alloc_symmetric<T>(static_cast<size_t>(ranks) * m * n);
  for (int call = 0; call < 3; ++call) {
    std::vector<std::vector<T>> ha(ranks), hb(ranks);
    for (int r = 0; r < ranks; ++r) {
      ha[r].resize(static_cast<size_t>(m) * k);
      hb[r].resize(static_cast<size_t>(k) * n);
      for (size_t i = 0; i < ha[r].size(); ++i) ha[r][i] = T(float(int((i * 7 + r * 3 + call) % 17) - 8) / 8.0f);
      for (size_t i = 0; i < hb[r].size(); ++i) hb[r][i] = T(float(int((i * 5 + r + 2 * call) % 13) - 6) / 4.0f);
      a.copy_from_host(r, ha[r].data(), ha[r].size());
      b.copy_from_host(r, hb[r].data(), hb[r].size());
    }
    mesh.run([&](Rank& r) { ag(r, r.local(a), r.local(b), r.local(c)); });
    // The call number (epoch) is a kernel argument left out of the specialization: no compile
    // after the first call.
    static size_t compiled_after_first = 0;
    if (call == 0) compiled_after_first = ops::detail::all_gather_gemm_kernel<T>().num_compiled();
    CHECK(ops::detail::all_gather_gemm_kernel<T>().num_compiled() == compiled_after_first);
    for (int r = 0; r < ranks; ++r) {
      INFO("ranks " << ranks << ", call " << call << ", rank " << r);
      CHECK(mismatches(read(c, r), ranks * m, n, [&](int row, int col) {
              double want = 0;
              for (int i = 0; i < k; ++i)
                want += double(float(ha[row / m][static_cast<size_t>(row % m) * k + i])) *
                        double(float(hb[r][static_cast<size_t>(i) * n + col]));
              return want;
            }) == 0);
    }
  }
}
}  // namespace

TEST_CASE("ops: all_gather_gemm over ragged shards, repeated calls", "[mesh][ops_library]") {
  check_all_gather_gemm<bf16>(2, 17, 33, 40);
  check_all_gather_gemm<bf16>(3, 130, 129, 72);
  check_all_gather_gemm<float>(2, 1, 200, 3);
}

TEST_CASE("mesh: loads of a loop holding a signal_wait are not pipelined, even hinted", "[mesh][ptx]") {
  // x's blocks in a hinted loop qualify for cp.async pipelining (pipe_vec); a wait in the body
  // must keep every load behind it.
  auto k = jit("mesh_hinted_wait", [](Ptr<float> x, Ptr<uint64_t> flags, Ptr<float> out, Tile<int32_t> n,
                                      Constexpr<bool> WAIT) {
    Tile<float> acc = zeros<float>({256});
    for (auto i : range(0, n, 1, {.num_stages = 3})) {
      if (WAIT) signal_wait(flags + i, 1);
      acc = acc + load(x + i * 256 + arange(0, 256));
    }
    store(out + arange(0, 256), acc);
  });
  std::vector<float> h(256);
  std::vector<uint64_t> f(1);
  CHECK_THAT(k.ptx(90, 4, h.data(), f.data(), h.data(), 8, false), Catch::Contains("cp.async"));
  const std::string ptx = k.ptx(90, 4, h.data(), f.data(), h.data(), 8, true);
  CHECK_THAT(ptx, !Catch::Contains("cp.async"));
  CHECK_THAT(ptx, Catch::Contains("ld.acquire.sys.u64"));
}

namespace {
/// C_r = rows [r m, (r + 1) m) of sum_q A_q @ B_q on `ranks` ranks, three calls (the epochs),
/// checked against a double-precision sum.
template <class T> void check_gemm_reduce_scatter(int ranks, int m, int n, int k) {
  Mesh mesh = test_mesh(ranks);
  ops::GemmReduceScatter<T> rs(mesh, m, n, k);
  auto a = mesh.alloc_symmetric<T>(static_cast<size_t>(ranks) * m * k);
  auto b = mesh.alloc_symmetric<T>(static_cast<size_t>(k) * n);
  auto c = mesh.alloc_symmetric<T>(static_cast<size_t>(m) * n);
  for (int call = 0; call < 3; ++call) {
    std::vector<std::vector<T>> ha(ranks), hb(ranks);
    for (int r = 0; r < ranks; ++r) {
      ha[r].resize(static_cast<size_t>(ranks) * m * k);
      hb[r].resize(static_cast<size_t>(k) * n);
      for (size_t i = 0; i < ha[r].size(); ++i) ha[r][i] = T(float(int((i * 3 + r * 5 + call) % 11) - 5) / 4.0f);
      for (size_t i = 0; i < hb[r].size(); ++i) hb[r][i] = T(float(int((i * 7 + r + call) % 9) - 4) / 2.0f);
      a.copy_from_host(r, ha[r].data(), ha[r].size());
      b.copy_from_host(r, hb[r].data(), hb[r].size());
    }
    mesh.run([&](Rank& r) { rs(r, r.local(a), r.local(b), r.local(c)); });
    for (int r = 0; r < ranks; ++r) {
      INFO("ranks " << ranks << ", call " << call << ", rank " << r);
      CHECK(mismatches(read(c, r), m, n, [&](int row, int col) {
              double want = 0;
              for (int q = 0; q < ranks; ++q)
                for (int i = 0; i < k; ++i)
                  want += double(float(ha[q][static_cast<size_t>(r * m + row) * k + i])) *
                          double(float(hb[q][static_cast<size_t>(i) * n + col]));
              return want;
            }) == 0);
    }
  }
}
}  // namespace

TEST_CASE("ops: gemm_reduce_scatter over ragged shards, repeated calls", "[mesh][ops_library]") {
  check_gemm_reduce_scatter<bf16>(2, 17, 33, 40);
  check_gemm_reduce_scatter<bf16>(3, 130, 129, 72);
  check_gemm_reduce_scatter<float>(2, 1, 200, 3);
}

TEST_CASE("mesh gpu: a wait nobody answers traps after the timeout, and Mesh::run throws", "[.gpu]") {
  // In a child process: the trap ends its CUDA context. The GPU mesh's other primitives run in
  // [mesh] with TLE_TEST_BACKEND=gpu.
  proctest::Child child({"mesh-timeout"}, {});
  const int status = child.finish();
  INFO(child.output());
  CHECK(status == 0);
  CHECK_THAT(child.output(), Catch::Contains("mesh error:"));
}
