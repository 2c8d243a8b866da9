// tests/fuzz/test_fuzz.cpp - the differential fuzzer in CI (tag [fuzz]): a fixed budget of generated
// programs checked interpreter vs CPU backend (and metamorphic variants), plus tests of the
// generator, the comparison and the reducer themselves.
//
// Budget: TLE_FUZZ_COUNT programs (default 300) from seed TLE_FUZZ_SEED (default 1), on
// TLE_FUZZ_THREADS threads (default 2). A failure
// prints the seed, the failing stage and the program as a ready regression test; `tle_fuzz
// --seed S --reduce` shrinks it (docs/testing.md).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "fuzz/harness.hpp"
#include "ir/ir.hpp"

namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : dflt;
}

bool has_kind(const std::vector<fuzz::Stmt>& b, fuzz::Kind k) {
  for (auto& s : b)
    if (s.kind == k || has_kind(s.body, k) || has_kind(s.orelse, k)) return true;
  return false;
}

}  // namespace

TEST_CASE("fuzz: programs are reproducible from their seed and well typed", "[fuzz]") {
  for (uint64_t seed = 1000; seed < 1040; ++seed) {
    fuzz::Program a = fuzz::generate(seed), b = fuzz::generate(seed);
    INFO("seed " << seed);
    CHECK(fuzz::to_cpp(a, "t") == fuzz::to_cpp(b, "t"));
    auto f = fuzz::trace(a);
    CHECK_NOTHROW(tle::ir::verify(*f));
    CHECK(tle::ir::print(*f) == tle::ir::print(*fuzz::trace(b)));
  }
}

TEST_CASE("fuzz: generated programs cover the op families", "[fuzz]") {
  using K = fuzz::Kind;
  std::map<K, int> seen;
  std::function<void(const std::vector<fuzz::Stmt>&, int)> walk = [&](const std::vector<fuzz::Stmt>& b, int depth) {
    for (auto& s : b) {
      ++seen[s.kind];
      if (s.kind == K::For && depth >= 1) ++seen[static_cast<K>(100)];  // a nested loop
      walk(s.body, depth + (s.kind == K::For));
      walk(s.orelse, depth);
    }
  };
  for (uint64_t seed = 1; seed <= 100; ++seed) walk(fuzz::generate(seed).body, 0);
  for (K k : {K::Const, K::Arange, K::ProgramId, K::Binary, K::Compare, K::Unary, K::Fma, K::Where, K::Cast, K::Bitcast,
              K::BroadcastTo, K::ExpandDims, K::Reshape, K::Permute, K::Reduce, K::ReduceCombine, K::Cumsum,
              K::ScanCombine, K::Dot, K::Histogram, K::Hint, K::AddPtr, K::Load, K::Store, K::Atomic, K::AtomicCas, K::For,
              K::If, K::Assign, static_cast<K>(100)}) {
    INFO("statement kind " << int(k));
    CHECK(seen[k] > 0);
  }
}

TEST_CASE("fuzz: the comparison tells outputs apart, and NaN from NaN it does not", "[fuzz]") {
  fuzz::Program p;
  p.seed = 5;
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f32, 4, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i8, 4, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::Memory a(p), b(p);
  CHECK(fuzz::compare(p, a, b).empty());
  a.ptr<float>(0)[1] = std::numeric_limits<float>::quiet_NaN();
  b.ptr<float>(0)[1] = -std::numeric_limits<float>::quiet_NaN();
  CHECK(fuzz::compare(p, a, b).empty());
  b.ptr<float>(0)[2] = -0.0f;
  a.ptr<float>(0)[2] = 0.0f;
  CHECK(fuzz::compare(p, a, b).find("buffer 0") != std::string::npos);
  b.ptr<float>(0)[2] = 0.0f;
  b.ptr<int8_t>(1)[3] = 1;
  CHECK(fuzz::compare(p, a, b).find("buffer 1") != std::string::npos);
}

TEST_CASE("fuzz: the reducer keeps the failure and drops the rest", "[fuzz]") {
  // A stand-in failure: "the program has a dot whose result is stored".
  uint64_t seed = 1;
  fuzz::Program p;
  for (;; ++seed) {
    p = fuzz::generate(seed);
    if (has_kind(p.body, fuzz::Kind::Dot)) break;
  }
  auto fails = [](const fuzz::Program& q) {
    return has_kind(q.body, fuzz::Kind::Dot) && has_kind(q.body, fuzz::Kind::Store) && fuzz::check(q, {false, false}).ok;
  };
  REQUIRE(fails(p));
  fuzz::Program r = fuzz::reduce(p, fails);
  CHECK(fails(r));
  CHECK(fuzz::count_statements(r.body) < fuzz::count_statements(p.body));
  CHECK(fuzz::count_statements(r.body) <= 12);
  CHECK(r.programs() == 1);
}

TEST_CASE("fuzz: generated programs compile for the GPU and assemble (no GPU needed)", "[fuzz][ptx]") {
  // A small budget of the compile-only GPU check (tle_fuzz --gpu-compile runs more): power-of-two
  // programs, large tiles included (tensor-core dots in K loops), for sm_90a with 4 warps.
  const std::string ptxas = ::access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : "";
  if (ptxas.empty()) WARN("ptxas not found at /usr/local/cuda/bin/ptxas: compiled to PTX only");
  fuzz::GenOptions g;
  g.pow2 = true;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    g.max_numel = seed % 2 ? 4096 : 96;
    fuzz::Outcome o = fuzz::check_gpu_compile(fuzz::generate(seed, g), 4, ptxas);
    INFO("seed " << seed << " (tle_fuzz --gpu-compile --seed " << seed << "): " << o.stage << ": " << o.detail);
    CHECK(o.ok);
  }
  // The check reports what the GPU backend refuses: a program with a 3-wide tile.
  fuzz::Program odd;
  for (uint64_t seed = 1;; ++seed) {
    odd = fuzz::generate(seed);
    if (!fuzz::check_gpu_compile(odd, 4, "").ok) break;
  }
  fuzz::Outcome o = fuzz::check_gpu_compile(odd, 4, "");
  CHECK(o.stage == "gpu-compile");
  CHECK_THAT(o.detail, Catch::Contains("power-of-two"));
}

TEST_CASE("fuzz: interpreter vs CPU backend on generated programs (CI budget)", "[fuzz]") {
  // Two workers (CI machines have 2 cores); every program gets the main checks and one of the
  // four extra ones (CheckOptions::one_extra), so the budget is about two compiles per program.
  const int64_t count = env_int("TLE_FUZZ_COUNT", 300);
  const uint64_t first = static_cast<uint64_t>(env_int("TLE_FUZZ_SEED", 1));
  const int workers = static_cast<int>(env_int("TLE_FUZZ_THREADS", 2));
  fuzz::CheckOptions opt;
  opt.one_extra = true;
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<std::pair<uint64_t, fuzz::Outcome>> failures;
  auto work = [&] {
    for (int64_t i; (i = next++) < count;) {
      const uint64_t seed = first + static_cast<uint64_t>(i);
      fuzz::Outcome o = fuzz::check(fuzz::generate(seed), opt);
      if (o.ok) continue;
      std::lock_guard<std::mutex> lk(mu);
      failures.emplace_back(seed, o);
    }
  };
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w) ts.emplace_back(work);
  for (auto& t : ts) t.join();
  for (auto& [seed, o] : failures) {
    fuzz::Program q = fuzz::failing_program(fuzz::generate(seed), o);
    FAIL_CHECK("seed " << seed << ": stage " << o.stage << ": " << o.detail << "\n"
                       << "reduce it with: tle_fuzz --seed " << seed << " --reduce\n"
                       << fuzz::to_cpp(q, "fuzz regression: seed " + std::to_string(seed)));
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN(count << " programs (seeds " << first << ".." << first + static_cast<uint64_t>(count) - 1 << ") in " << s
             << " s on " << workers << " threads, " << failures.size() << " failing");
  CHECK(failures.empty());
}
