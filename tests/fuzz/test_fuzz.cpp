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
#include <bit>
#include <cmath>
#include <functional>
#include <map>
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

/// A reduce or scan over two tiles at once (the tuple form, program.hpp).
bool has_tuple_combine(const std::vector<fuzz::Stmt>& b) {
  for (auto& s : b)
    if (((s.kind == fuzz::Kind::ReduceCombine || s.kind == fuzz::Kind::ScanCombine) && s.args.size() == 2) ||
        has_tuple_combine(s.body) || has_tuple_combine(s.orelse))
      return true;
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
  std::map<std::string, int> features;  // the TLE-Lite and fp8 features, each form
  const fuzz::Program* prog = nullptr;
  auto fp8 = [&](int v) { return v >= 0 && tle::is_fp8(prog->vars.at(static_cast<size_t>(v)).dtype); };
  std::function<void(const std::vector<fuzz::Stmt>&, int)> walk = [&](const std::vector<fuzz::Stmt>& b, int depth) {
    for (auto& s : b) {
      ++seen[s.kind];
      if (s.kind == K::For && depth >= 1) ++seen[static_cast<K>(100)];  // a nested loop
      if (s.kind == K::Load && s.is_async) ++features["async load"];
      if (s.kind == K::ExtractTile || s.kind == K::InsertTile) ++features["sub-tile index form " + std::to_string(s.op)];
      if ((s.kind == K::ExtractTile || s.kind == K::InsertTile) && fp8(s.result)) ++features["sub-tile of fp8"];
      if (s.kind == K::Load && fp8(s.result)) ++features["fp8 load"];
      if (s.kind == K::Store && fp8(s.args[1])) ++features["fp8 store"];
      if (s.kind == K::Cast && fp8(s.result)) ++features["cast to fp8"];
      if (s.kind == K::Cast && fp8(s.args[0])) ++features["cast from fp8"];
      if (s.kind == K::Where && fp8(s.result)) ++features["fp8 where"];
      if (s.kind == K::Bitcast && (fp8(s.result) || fp8(s.args[0]))) ++features["fp8 bitcast"];
      if (s.kind == K::Dot && fp8(s.args[0])) ++features["fp8 dot"];
      walk(s.body, depth + (s.kind == K::For));
      walk(s.orelse, depth);
    }
  };
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const fuzz::Program p = fuzz::generate(seed);
    prog = &p;
    walk(p.body, 0);
  }
  for (K k : {K::Const, K::Arange, K::ProgramId, K::Binary, K::Compare, K::Unary, K::Fma, K::Where, K::Cast, K::Bitcast,
              K::BroadcastTo, K::ExpandDims, K::Reshape, K::Permute, K::Reduce, K::ReduceCombine, K::Cumsum,
              K::ScanCombine, K::Dot, K::Histogram, K::Sort, K::Gather, K::Hint, K::AddPtr, K::Load, K::Store,
              K::Atomic, K::AtomicCas, K::For, K::If, K::Assign, K::ExtractTile, K::InsertTile, K::LocalAlloc,
              K::Copy, K::CopyCommit, K::CopyWait,
              static_cast<K>(100)}) {
    INFO("statement kind " << int(k));
    CHECK(seen[k] > 0);
  }
  for (const char* f : {"async load", "sub-tile index form 0", "sub-tile index form 1", "sub-tile index form 2",
                        "sub-tile index form 3", "sub-tile of fp8", "fp8 load", "fp8 store", "cast to fp8",
                        "cast from fp8", "fp8 where", "fp8 bitcast", "fp8 dot"}) {
    INFO(f);
    CHECK(features[f] > 0);
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
  // Ragged programs (the generator's default) compile too: pad_shapes pads them, and what it still
  // refuses (a reshape of pointer tiles that moves padded positions) is reported as such.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    fuzz::Outcome r = fuzz::check_gpu_compile(fuzz::generate(seed), 4, "");
    INFO("ragged seed " << seed << ": " << r.stage << ": " << r.detail);
    if (!r.ok) {
      CHECK(r.stage == "gpu-compile");
      CHECK_THAT(r.detail, Catch::Contains("padded"));
    }
  }
}

TEST_CASE("fuzz: generated programs with ragged tiles compile for the GPU (pad_shapes) and assemble", "[fuzz][ptx]") {
  // Any tile dims (3, 5, 24, ...): pad_shapes pads them; the only refusals allowed are the ones it
  // documents (UserErrors that say the dim is padded), and those must stay rare.
  const std::string ptxas = ::access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : "";
  if (ptxas.empty()) WARN("ptxas not found at /usr/local/cuda/bin/ptxas: compiled to PTX only");
  fuzz::GenOptions g;
  int refused = 0, ragged = 0;
  const int count = static_cast<int>(env_int("TLE_FUZZ_RAGGED_COUNT", 60));
  for (uint64_t seed = 1; seed <= uint64_t(count); ++seed) {
    g.max_numel = seed % 2 ? 4096 : 96;
    fuzz::Program p = fuzz::generate(seed, g);
    bool odd = false;
    for (auto& v : p.vars)
      for (int64_t d : v.shape) odd = odd || (d & (d - 1)) != 0;
    ragged += odd;
    fuzz::Outcome o = fuzz::check_gpu_compile(p, 4, ptxas);
    INFO("seed " << seed << ": " << o.stage << ": " << o.detail);
    if (!o.ok && o.stage == "gpu-compile" && o.detail.find("padded") != std::string::npos) {
      ++refused;
      continue;
    }
    CHECK(o.ok);
  }
  WARN(count << " programs, " << ragged << " with ragged tiles, " << refused << " refused");
  CHECK(ragged >= count / 2);  // the generator did make ragged tiles
  CHECK(refused <= count / 10);
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

// ---- the GPU stage (docs/testing.md, "The GPU stage"): portable programs

namespace {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// What a portable program must keep to (GenOptions::portable): power-of-two tiles, combines
/// exact in any order, no float sum/cumsum, float dots on loads of small integers with an
/// accumulator that is a small integer constant, and math functions only as leaves stored into a
/// buffer with a ULP bound. "" when p does, else the first violation.
std::string portable_violation(const fuzz::Program& p) {
  using K = fuzz::Kind;
  using B = tle::ir::BinaryOp;
  using U = tle::ir::UnaryOp;
  std::map<int, const fuzz::Stmt*> def;
  std::map<int, std::vector<const fuzz::Stmt*>> users;
  std::function<void(const std::vector<fuzz::Stmt>&)> index = [&](const std::vector<fuzz::Stmt>& b) {
    for (auto& s : b) {
      if (s.result >= 0 && s.kind != K::Assign) def[s.result] = &s;
      for (int a : s.args)
        if (a >= 0) users[a].push_back(&s);
      index(s.body);
      index(s.orelse);
    }
  };
  index(p.body);
  for (size_t v = 0; v < p.vars.size(); ++v)
    for (int64_t d : p.vars[v].shape)
      if (!is_pow2(d)) return "variable " + std::to_string(v) + " has a dimension " + std::to_string(d);
  auto buffer_of_ptr = [&](int ptr) -> const fuzz::Buffer* {
    for (int guard = 0; guard < 8 && ptr >= 0; ++guard) {
      for (auto& pa : p.params)
        if (pa.var == ptr && pa.buffer >= 0) return &p.buffers[static_cast<size_t>(pa.buffer)];
      auto it = def.find(ptr);
      if (it == def.end() || it->second->kind != K::AddPtr) return nullptr;
      ptr = it->second->args[0];
    }
    return nullptr;
  };
  auto small_int_load = [&](int v) {
    auto it = def.find(v);
    if (it == def.end() || it->second->kind != K::Load) return false;
    const fuzz::Buffer* b = buffer_of_ptr(it->second->args[0]);
    return b && b->fill == fuzz::Buffer::Index && b->lo >= -4 && b->hi <= 4;
  };
  std::string bad;
  std::function<void(const std::vector<fuzz::Stmt>&)> walk = [&](const std::vector<fuzz::Stmt>& b) {
    for (auto& s : b) {
      if (!bad.empty()) return;
      const tle::DType d = s.args.empty() || s.args[0] < 0 ? tle::DType::i32 : p.vars[static_cast<size_t>(s.args[0])].dtype;
      const bool fl = tle::is_float(d);
      const std::string at = "statement kind " + std::to_string(int(s.kind)) + " -> v" + std::to_string(s.result) + ": ";
      if ((s.kind == K::Reduce && s.op == int(tle::ir::ReduceKind::Sum) && fl) || (s.kind == K::Cumsum && fl))
        bad = at + "a float sum";
      if (s.kind == K::ReduceCombine || s.kind == K::ScanCombine) {
        if (fl && s.op != int(B::Max) && s.op != int(B::Min)) bad = at + "a float combine other than max/min";
        if (fl && (s.a == 1 || s.a == 2)) bad = at + "a where-select combine on floats";
        if (s.a == 3 && s.op != int(B::And) && s.op != int(B::Or) && s.op != int(B::Max) && s.op != int(B::Min) &&
            s.op != int(B::Xor))
          bad = at + "(p op q) op p with an op for which it is not associative";
        if (s.args.size() == 2 && (fl || (s.a != 4 && s.a != 5)))
          bad = at + "a tuple combine that is not an integer one";
      }
      if (s.kind == K::Atomic && s.op == int(tle::ir::AtomicOp::Add) && s.result >= 0 &&
          p.vars[static_cast<size_t>(s.result)].dtype == tle::DType::f32)
        bad = at + "an f32 atomic_add (the GPU's atom.add.f32 flushes subnormals)";
      if (s.kind == K::Dot && d != tle::DType::i8) {
        if (!small_int_load(s.args[0]) || !small_int_load(s.args[1])) bad = at + "a float dot of other than small integers";
        if (s.args.size() > 2 && s.args[2] >= 0) {
          auto it = def.find(s.args[2]);
          // the accumulator: a small integer constant, never -0.0 (in a K loop, the carried one)
          const fuzz::Stmt* c = it != def.end() && it->second->kind == K::Const ? it->second : nullptr;
          const double v = c ? c->lit.f : 0;
          const bool ok = c && c->lit.is_float && std::floor(v) == v && std::abs(v) <= 4 && !(v == 0 && std::signbit(v));
          if (!ok) bad = at + "a float dot whose accumulator is not a small integer constant";
        }
      }
      const bool math = (s.kind == K::Unary && fl &&
                         (s.op == int(U::Exp) || s.op == int(U::Exp2) || s.op == int(U::Log) || s.op == int(U::Log2) ||
                          s.op == int(U::Sin) || s.op == int(U::Cos) || s.op == int(U::Tanh) || s.op == int(U::Erf))) ||
                        (s.kind == K::Binary && s.op == int(B::Pow));
      if (math) {
        auto& u = users[s.result];
        const fuzz::Buffer* to = u.size() == 1 && u[0]->kind == K::Store ? buffer_of_ptr(u[0]->args[0]) : nullptr;
        if (!to || to->ulp <= 0) bad = at + "a math function result that is not only stored into a ULP-bounded buffer";
      }
      walk(s.body);
      walk(s.orelse);
    }
  };
  walk(p.body);
  return bad;
}

}  // namespace

TEST_CASE("fuzz: portable programs keep to what the GPU reproduces exactly", "[fuzz]") {
  fuzz::GenOptions g;
  g.portable = true;
  int math = 0, dots = 0, combines = 0, tuples = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    g.max_numel = seed % 4 == 0 ? 4096 : 96;
    fuzz::Program p = fuzz::generate(seed, g);
    INFO("seed " << seed << "\n" << fuzz::to_cpp(p, "t"));
    CHECK(portable_violation(p) == "");
    for (auto& b : p.buffers) math += b.ulp > 0;
    dots += has_kind(p.body, fuzz::Kind::Dot);
    combines += has_kind(p.body, fuzz::Kind::ReduceCombine) || has_kind(p.body, fuzz::Kind::ScanCombine);
    tuples += has_tuple_combine(p.body);
  }
  // The families that needed care still occur.
  CHECK(math > 20);
  CHECK(dots > 20);
  CHECK(combines > 20);
  CHECK(tuples > 5);
  // The check itself sees a violation: the default generator makes float sums and 3-wide tiles.
  int violations = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) violations += portable_violation(fuzz::generate(seed)) != "";
  CHECK(violations > 10);
}

TEST_CASE("fuzz: portable programs compile for the GPU and assemble (no GPU needed)", "[fuzz][ptx]") {
  // TLE_FUZZ_PTX_COUNT portable programs (default 40; tle_fuzz --gpu-compile --portable runs
  // more), one in four with large tiles, for sm_90a at 1, 4 or 8 warps by seed.
  const std::string ptxas = ::access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : "";
  if (ptxas.empty()) WARN("ptxas not found at /usr/local/cuda/bin/ptxas: compiled to PTX only");
  fuzz::GenOptions g;
  g.portable = true;
  const int64_t count = env_int("TLE_FUZZ_PTX_COUNT", 40);
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(count); ++seed) {
    g.max_numel = seed % 4 == 0 ? 4096 : 96;
    const int warps = seed % 3 == 0 ? 1 : seed % 3 == 1 ? 4 : 8;
    fuzz::Outcome o = fuzz::check_gpu_compile(fuzz::generate(seed, g), warps, ptxas);
    INFO("seed " << seed << " (tle_fuzz --gpu-compile --portable --seed " << seed << "): " << o.stage << ": " << o.detail);
    CHECK(o.ok);
  }
}

TEST_CASE("fuzz: ulp distances and the ULP-bounded comparison", "[fuzz]") {
  using tle::DType;
  auto f32 = [](float x) { return static_cast<uint64_t>(std::bit_cast<uint32_t>(x)); };
  CHECK(fuzz::ulp_distance(DType::f32, f32(1.0f), f32(std::nextafter(1.0f, 2.0f))) == 1);
  CHECK(fuzz::ulp_distance(DType::f32, f32(0.0f), f32(-0.0f)) == 0);
  CHECK(fuzz::ulp_distance(DType::f32, f32(-1e-45f), f32(1e-45f)) == 2);
  CHECK(fuzz::ulp_distance(DType::f32, f32(3.4028235e38f), f32(INFINITY)) == 1);
  CHECK(fuzz::ulp_distance(DType::f32, f32(NAN), f32(1.0f)) == -1);
  CHECK(fuzz::ulp_distance(DType::f32, f32(NAN), f32(-NAN)) == 0);
  CHECK(fuzz::ulp_distance(DType::f16, 0x3C00, 0x3C03) == 3);  // 1.0 and 3 f16 ulps above
  CHECK(fuzz::ulp_distance(DType::f64, std::bit_cast<uint64_t>(-1.0), std::bit_cast<uint64_t>(1.0)) ==
        2 * static_cast<int64_t>(std::bit_cast<uint64_t>(1.0)));
  CHECK(fuzz::ulp_distance(DType::f64, std::bit_cast<uint64_t>(-HUGE_VAL), std::bit_cast<uint64_t>(HUGE_VAL)) ==
        std::numeric_limits<int64_t>::max());  // (saturates)

  fuzz::Program p;
  p.seed = 9;
  p.buffers.push_back({fuzz::Buffer::Out, DType::f32, 4, fuzz::Buffer::Sentinel, 0, 0, 4});  // math results, 4 ulp
  p.buffers.push_back({fuzz::Buffer::Out, DType::f32, 4, fuzz::Buffer::Sentinel, 0, 0, 0});  // exact
  fuzz::Memory a(p), b(p);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) a.ptr<float>(i)[k] = b.ptr<float>(i)[k] = 1.5f;
  float x = 1.5f;
  for (int k = 0; k < 4; ++k) x = std::nextafter(x, 2.0f);
  b.ptr<float>(0)[1] = x;  // 4 ulp: within the bound
  CHECK(fuzz::compare(p, a, b, true).empty());
  CHECK(!fuzz::compare(p, a, b).empty());  // exact comparison (interpreter vs CPU): a difference
  b.ptr<float>(0)[1] = std::nextafter(x, 2.0f);  // 5 ulp
  CHECK_THAT(fuzz::compare(p, a, b, true), Catch::Contains("5 ulp apart"));
  b.ptr<float>(0)[1] = 1.5f;
  b.ptr<float>(0)[2] = NAN;  // NaN against a number: never within a bound
  CHECK(!fuzz::compare(p, a, b, true).empty());
  b.ptr<float>(0)[2] = 1.5f;
  b.ptr<float>(1)[3] = std::nextafter(1.5f, 2.0f);  // 1 ulp in an exact buffer
  CHECK_THAT(fuzz::compare(p, a, b, true), Catch::Contains("buffer 1"));
}

TEST_CASE("fuzz: the GPU stage's launch path and comparison, run on the CPU backend", "[fuzz]") {
  // check_device with Backend::CPU: the same kernel objects, argument packing, launches and
  // ULP-bounded comparison as on the GPU, with the CPU backend standing in for it.
  fuzz::GenOptions g;
  g.portable = true;
  fuzz::DeviceCheckOptions o;
  o.backend = tle::Backend::CPU;
  int looped = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    fuzz::Program p = fuzz::generate(seed, g);
    auto configs = fuzz::device_configs(p);
    CHECK(configs.size() >= 3);
    looped += configs.size() > 3;
    fuzz::Outcome r = fuzz::check_device(p, configs, o);
    INFO("seed " << seed << " (tle_fuzz --gpu --device-backend cpu --seed " << seed << " --count 1): " << r.stage << ": " << r.detail);
    CHECK(r.ok);
  }
  CHECK(looped > 0);
  // A wrong result of the stand-in is reported with the configuration that gave it.
  fuzz::Program p = fuzz::generate(7, g);
  int launches = 0;
  o.after_launch = [&](fuzz::Memory& m) {
    if (++launches < 2) return;
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (p.buffers[b].role == fuzz::Buffer::Out) {
        static_cast<unsigned char*>(m.data(static_cast<int>(b)))[tle::byte_size(p.buffers[b].dtype) - 1] ^= 0x40;
        return;
      }
  };
  fuzz::Outcome r = fuzz::check_device(p, {{1, 3}, {4, 3}, {8, 3}}, o);
  CHECK(!r.ok);
  CHECK(r.stage == "cpu w4 s3");
  CHECK_THAT(r.detail, Catch::Contains("differ"));
}

TEST_CASE("fuzz: interpreter vs GPU on portable programs", "[.gpu][fuzz-gpu]") {
  // The GPU stage in the device run's test pass (tle_fuzz --gpu runs the 10,000): TLE_FUZZ_GPU_COUNT
  // programs (default 300) on TLE_FUZZ_THREADS threads (default 8), each with its own stream.
  if (!tle::gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  const int64_t count = env_int("TLE_FUZZ_GPU_COUNT", 300);
  const int workers = static_cast<int>(env_int("TLE_FUZZ_THREADS", 8));
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<std::pair<uint64_t, fuzz::Outcome>> failures;
  auto t0 = std::chrono::steady_clock::now();
  auto work = [&] {
    tle::Stream stream(true);
    fuzz::DeviceCheckOptions o;
    o.stream = stream.handle();
    for (int64_t i; (i = next++) < count;) {
      const uint64_t seed = 1 + static_cast<uint64_t>(i);
      fuzz::GenOptions g;
      g.portable = true;
      g.max_numel = seed % 4 == 0 ? 4096 : 96;
      fuzz::Program p = fuzz::generate(seed, g);
      fuzz::Outcome r = fuzz::check_device(p, fuzz::device_configs(p), o);
      if (r.ok) continue;
      std::lock_guard<std::mutex> lk(mu);
      failures.emplace_back(seed, r);
    }
  };
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w) ts.emplace_back(work);
  for (auto& t : ts) t.join();
  for (auto& [seed, r] : failures)
    FAIL_CHECK("seed " << seed << ": stage " << r.stage << ": " << r.detail << "\nreproduce: tle_fuzz --gpu --seed " << seed
                       << " --count 1");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN(count << " portable programs interpreter vs GPU in " << s << " s on " << workers << " threads, "
             << failures.size() << " failing");
  CHECK(failures.empty());
}
