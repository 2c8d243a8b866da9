// benchmarks/tune_study.cpp - the autotuner against exhaustive search, and the ranking model's
// transfer between shapes (issue #16, "Done when"), on three kernels of the examples.
//
//   tune_study [--kernels matmul,softmax,layernorm] [--shapes MxNxK,MxNxK] [--small] [--budget N]
//              [--csv FILE]
//
// matmul (bf16, ex::make_matmul*): the space (6 x 9 tile knobs, warps, stages, persistent or not,
// pointer loads or tensor descriptors, the grouped-order width GM, a register cap) has 5436 valid
// configs. For the first shape (A) and the second (B) it runs, each phase in its own fresh tuning
// cache directory (TLE_CACHE_DIR under a temporary directory, so no phase sees another's
// measurements unless said):
//   exhaustive  A: every config of the sub-space BK = 64, GM = 16, no register cap (224 configs,
//               the kind of list Triton's autotune measures), measured whole;
//   cold        A: the genetic search over the whole space with no stored measurements (no model);
//   cold        B: the same for B;
//   warm        B: the genetic search for B in the directory of "cold A" (its measurements train
//               the XGBoost ranking model before B's search starts).
// softmax (f32, ex::make_softmax_looped over LLM-vocabulary rows, A = 64x128256, B = 2048x128256)
// and layernorm (bf16, the persistent ex::make_layernorm, A = 16384x4096, B = 4096x4100): spaces
// of a few hundred configs (BLOCK or programs per SM, warps, the row loop's stages, a register
// cap), small enough to measure whole, so the phases are: exhaustive A, exhaustive B (the
// references), cold A, cold B, warm B (after cold A); the searches' budget is 5 % of the valid
// configs (--budget overrides).
// Reported per phase: configs measured, the best time, its ratio to the reference (matmul: A =
// the exhaustive sub-space's best, B = the best any phase of B found; row kernels: each shape's
// exhaustive best), the tuning wall time, and how many measurements the search needed before its
// first config within 3 % of that reference ("to 3 %"). The targets: the searched config
// within 3 % of the exhaustive best while measuring <= 5 % of the space, and "to 3 %" of warm B at
// least 3x below cold B.
//
// A search without stored measurements (cold) spends its budget; one ranked by the model (warm)
// stops once its local search stops finding configs more than 1 % faster
// (AutotuneOptions::patience), so its "measured" is what the transfer saves.
//
// --csv FILE writes every measurement (kernel, phase, order, config, ms; +inf for a pruned config)
// so search strategies can be replayed offline on the measured landscapes: benchmarks/tune_replay
// runs the tuner's search on the exhaustive phases over many seeds (tests/data holds a run).
//
// On the default backend (TLE_BACKEND=cpu or no GPU: the CPU backend; --small: tiny shapes (64^3
// and 96x64x128 with a 48-config budget for matmul), the CI smoke run of the study's logic, not
// its numbers).
#include <tle/autotune.hpp>
#include <tle/tle.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include "../examples/kernels.hpp"

using namespace tle;

namespace {

struct Phase {
  std::string name;
  TuneReport rep;
  double wall_s = 0;
  double ref_ms = 0;  // the reference it is compared with (filled in before the table)
};

/// Measurements before the first time within 3 % of `ref` (1-based), or -1 when none is.
int to_within(const TuneReport& r, double ref) {
  for (size_t i = 0; i < r.times.size(); ++i)
    if (std::isfinite(r.times[i].second) && r.times[i].second <= ref * 1.03) return int(i) + 1;
  return -1;
}

namespace fs = std::filesystem;

/// --csv: every measurement, one line each (the kernel being studied set by its study_ function).
struct Csv {
  std::FILE* f = nullptr;
  std::string kernel;
} csv;

/// Seconds the last timed_select took: a phase's tuning wall time (not its inputs' making).
double tuning_s = 0;

/// Calls `tuned.select(args...)` (the tuning), timing it into tuning_s; returns its report.
template <class Tuned, class... A> TuneReport timed_select(const Tuned& tuned, const A&... args) {
  const auto t0 = std::chrono::steady_clock::now();
  tuned.select(args...);
  tuning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return tuned.last_report();
}

/// One tuning: `tune(opts)` builds an autotuned kernel, selects for its shape and returns the
/// report; it runs in the tuning cache directory `dir`, measured whole (`exhaustive`) or searched
/// with `budget` measurements (0: the tuner's default).
Phase run_phase(const std::string& name, const fs::path& dir, bool exhaustive, uint64_t budget,
                const std::function<TuneReport(const AutotuneOptions&)>& tune) {
  ::setenv("TLE_CACHE_DIR", dir.string().c_str(), 1);
  AutotuneOptions opts;
  opts.backend = default_backend();
  opts.budget = exhaustive ? 0 : budget;
  opts.exhaustive_limit = exhaustive ? 100000 : 0;
  Phase p{name, tune(opts), 0, 0};
  p.wall_s = tuning_s;
  if (csv.f) {
    for (size_t i = 0; i < p.rep.times.size(); ++i)
      std::fprintf(csv.f, "%s,%s,%zu,%s,%.6g\n", csv.kernel.c_str(), p.name.c_str(), i + 1,
                   p.rep.times[i].first.str().c_str(), p.rep.times[i].second);
    std::fflush(csv.f);
  }
  std::printf("%-34s valid %6llu  measured %4d  pruned %4d  best %.4f ms  model %s  %.1f s  (%s)\n", p.name.c_str(),
              (unsigned long long)p.rep.valid, p.rep.measured, p.rep.pruned, p.rep.best_ms,
              p.rep.used_model ? "yes" : "no", p.wall_s, p.rep.best.str().c_str());
  std::fflush(stdout);
  return p;
}

void print_table(const std::string& title, const std::vector<Phase>& phases) {
  std::printf("\n%s\n\n| phase | measured | of valid | best | vs reference | to 3 %% | wall |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n",
              title.c_str());
  for (const Phase& p : phases)
    std::printf("| %s | %d | %.1f %% | %.4f ms | %.3fx | %d | %.1f s |\n", p.name.c_str(), p.rep.measured,
                100.0 * p.rep.measured / double(std::max<uint64_t>(1, p.rep.valid)), p.rep.best_ms,
                p.rep.best_ms / p.ref_ms, to_within(p.rep, p.ref_ms), p.wall_s);
  std::fflush(stdout);
}

/// Device memory on the GPU backend, host memory on the CPU backend, holding `host`.
template <class T> struct Buf {
  std::vector<T> host;
  DeviceBuffer<T> dev;
  explicit Buf(std::vector<T> h) : host(std::move(h)) {
    if (default_backend() == Backend::GPU) dev = DeviceBuffer<T>(host);
  }
  T* data() { return default_backend() == Backend::GPU ? dev.data() : host.data(); }
};

std::vector<float> ramp(size_t n, int mul, int mod, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int(i * mul % mod) - mod / 2) * scale;
  return v;
}

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16(v[i]);
  return out;
}

int sm_count() { return gpu_info() ? gpu_info()->num_sms : 4; }

// ------------------------------------------------------------------------------------ matmul

/// The whole space (5436 valid configs); `sub`: only BK = 64, GM = 16, maxnreg = 0.
Space matmul_space(bool sub) {
  Space s;
  s.values("BM", {64, 128, 256}).values("BN", {64, 128, 256});
  s.values("BK", sub ? std::vector<int64_t>{64} : std::vector<int64_t>{32, 64, 128});
  s.values("num_warps", {4, 8}).values("num_stages", {2, 3, 4, 5, 6}).values("persistent", {0, 1});
  s.values("tma", {0, 1});
  s.values("GM", sub ? std::vector<int64_t>{16} : std::vector<int64_t>{1, 8, 16});
  s.values("maxnreg", sub ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 128, 168});
  s.constraint("(BM + BN) * BK * stages * 2 bytes <= 227 KB", [](const Config& k) {
    return (k["BM"] + k["BN"]) * k["BK"] * k["num_stages"] * 2 <= 227 * 1024;
  });
  s.constraint("256-wide tiles on 8 warps", [](const Config& k) {
    return k["num_warps"] == 8 || (k["BM"] < 256 && k["BN"] < 256);
  });
  return s;
}

/// The examples' four matmul forms at one grouped-order width.
template <int GM> struct MatmulKernels {
  decltype(ex::make_matmul<bf16, bf16, GM>()) plain = ex::make_matmul<bf16, bf16, GM>();
  decltype(ex::make_matmul_persistent<bf16, bf16, GM>()) persistent = ex::make_matmul_persistent<bf16, bf16, GM>();
  decltype(ex::make_matmul_tma<bf16, bf16, GM>()) tma = ex::make_matmul_tma<bf16, bf16, GM>();
  decltype(ex::make_matmul_tma_persistent<bf16, bf16, GM>()) tma_persistent =
      ex::make_matmul_tma_persistent<bf16, bf16, GM>();

  void launch(const Config& k, Grid g, const bf16* a, const bf16* b, bf16* c, int M, int N, int K) {
    const int BM = int(k["BM"]), BN = int(k["BN"]), BK = int(k["BK"]);
    if (k["tma"]) {
      TensorDescriptor<bf16, 2> da(a, {M, K}, {K, 1}, {BM, BK}), db(b, {K, N}, {N, 1}, {BK, BN});
      if (k["persistent"]) tma_persistent(g, da, db, c, M, N, K);
      else tma(g, da, db, c, M, N, K);
    } else if (k["persistent"]) {
      persistent(g, a, b, c, M, N, K, BM, BN, BK);
    } else {
      plain(g, a, b, c, M, N, K, BM, BN, BK);
    }
  }
};

struct MmShape {
  int M, N, K;
  std::string str() const { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }
};

std::vector<MmShape> parse_shapes(const std::string& s) {
  std::vector<MmShape> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    MmShape sh{};
    if (std::sscanf(s.substr(at, end - at).c_str(), "%dx%dx%d", &sh.M, &sh.N, &sh.K) != 3) {
      std::fprintf(stderr, "tune_study: bad shape '%s' (MxNxK)\n", s.substr(at, end - at).c_str());
      std::exit(2);
    }
    out.push_back(sh);
    at = end + 1;
  }
  return out;
}

void study_matmul(const MmShape& A, const MmShape& B, uint64_t budget, const fs::path& root) {
  csv.kernel = "matmul bf16";
  MatmulKernels<1> k1;
  MatmulKernels<8> k8;
  MatmulKernels<16> k16;
  auto tune = [&](const MmShape& s, bool sub) {
    return [&, s, sub](const AutotuneOptions& opts) {
      Buf<bf16> a(to_bf16(ramp(size_t(s.M) * s.K, 37, 17, 1.0f / 8))), b(to_bf16(ramp(size_t(s.K) * s.N, 53, 13, 1.0f / 4))),
          c{std::vector<bf16>(size_t(s.M) * s.N)};
      auto tuned = autotune(
          "tune_study matmul", matmul_space(sub),
          [](const bf16*, const bf16*, bf16*, int M, int N, int K) { return TuneKey().add("M", M).add("N", N).add("K", K); },
          [&](const Config& k, const bf16* pa, const bf16* pb, bf16* pc, int M, int N, int K) {
            const int BM = int(k["BM"]), BN = int(k["BN"]);
            const int64_t blocks = cdiv(M, BM) * cdiv(N, BN);
            Grid g = k["persistent"] ? Grid(std::min<int64_t>(blocks, sm_count())) : Grid(cdiv(M, BM), cdiv(N, BN));
            g.with_warps(int(k["num_warps"])).with_stages(int(k["num_stages"])).with_maxnreg(int(k["maxnreg"]));
            g.stream = k.stream;
            if (k["GM"] == 1) k1.launch(k, g, pa, pb, pc, M, N, K);
            else if (k["GM"] == 8) k8.launch(k, g, pa, pb, pc, M, N, K);
            else k16.launch(k, g, pa, pb, pc, M, N, K);
          },
          opts);
      return timed_select(tuned, a.data(), b.data(), c.data(), s.M, s.N, s.K);
    };
  };
  std::vector<Phase> ph;
  ph.push_back(run_phase("exhaustive sub-space " + A.str(), root / "mm-exhaustive", true, 0, tune(A, true)));
  ph.push_back(run_phase("cold search " + A.str(), root / "mm-a", false, budget, tune(A, false)));
  ph.push_back(run_phase("cold search " + B.str(), root / "mm-b", false, budget, tune(B, false)));
  ph.push_back(run_phase("warm search (after A) " + B.str(), root / "mm-a", false, budget, tune(B, false)));
  const double ref_b = std::min(ph[2].rep.best_ms, ph[3].rep.best_ms);
  for (size_t i = 0; i < ph.size(); ++i) ph[i].ref_ms = i < 2 ? ph[0].rep.best_ms : ref_b;
  print_table("matmul bf16 (reference: A = the exhaustive sub-space's best; B = the best of B's two searches)", ph);
}

// ------------------------------------------------------------------------------ row kernels

struct RowShape {
  int rows, cols;
  std::string str() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

/// Warps such that a row tile of `block` elements gives each thread 1 to 64 of them.
bool row_warps_fit(int64_t block, int64_t warps) { return 32 * warps <= block && block <= 64 * 32 * warps; }

/// Softmax over long rows (ex::make_softmax_looped): the chunk BLOCK, warps, the loops' stages
/// (1 = not pipelined) and a register cap; 192 valid configs (each its own compile: the
/// exhaustive phases must fit a device call).
Space softmax_space() {
  Space s;
  s.values("BLOCK", {1024, 2048, 4096, 8192, 16384}).values("num_warps", {1, 2, 4, 8, 16, 32});
  s.values("stages", {1, 2, 3, 4}).values("maxnreg", {0, 128});
  s.constraint("1 to 64 elements of BLOCK a thread",
               [](const Config& k) { return row_warps_fit(k["BLOCK"], k["num_warps"]); });
  return s;
}

/// The persistent layernorm (ex::make_layernorm, BLOCK = the row padded to a power of two):
/// warps, the row loop's stages, programs per SM (0: one program per row) and a register cap.
Space layernorm_space(int block) {
  Space s;
  s.values("num_warps", {1, 2, 4, 8, 16, 32}).values("stages", {1, 2, 3, 4});
  s.values("programs_per_sm", {0, 1, 2, 3, 4, 6, 8}).values("maxnreg", {0, 64, 96, 128});
  s.constraint("1 to 64 elements of the row a thread", [block](const Config& k) { return row_warps_fit(block, k["num_warps"]); });
  return s;
}

/// Exhaustive A and B (the references), cold A, cold B, warm B after cold A; each search's budget
/// 5 % of the valid configs unless `budget` says.
void study_rows(const std::string& kernel, const RowShape& A, const RowShape& B, uint64_t budget, const fs::path& root,
                const std::function<uint64_t(const RowShape&)>& valid,
                const std::function<TuneReport(const RowShape&, const AutotuneOptions&)>& tune) {
  csv.kernel = kernel;
  auto t = [&](const RowShape& s) { return [&, s](const AutotuneOptions& o) { return tune(s, o); }; };
  auto b = [&](const RowShape& s) { return budget ? budget : std::max<uint64_t>(1, valid(s) / 20); };
  std::vector<Phase> ph;
  ph.push_back(run_phase("exhaustive " + A.str(), root / (kernel + "-exhaustive-a"), true, 0, t(A)));
  ph.push_back(run_phase("exhaustive " + B.str(), root / (kernel + "-exhaustive-b"), true, 0, t(B)));
  ph.push_back(run_phase("cold search " + A.str(), root / (kernel + "-a"), false, b(A), t(A)));
  ph.push_back(run_phase("cold search " + B.str(), root / (kernel + "-b"), false, b(B), t(B)));
  ph.push_back(run_phase("warm search (after A) " + B.str(), root / (kernel + "-a"), false, b(B), t(B)));
  for (size_t i = 0; i < ph.size(); ++i) ph[i].ref_ms = (i == 0 || i == 2 ? ph[0] : ph[1]).rep.best_ms;
  print_table(kernel + " (reference: each shape's exhaustive best)", ph);
}

void study_softmax(const RowShape& A, const RowShape& B, uint64_t budget, const fs::path& root) {
  auto s1 = ex::make_softmax_looped<1>();
  auto s2 = ex::make_softmax_looped<2>();
  auto s3 = ex::make_softmax_looped<3>();
  auto s4 = ex::make_softmax_looped<4>();
  study_rows(
      "softmax f32", A, B, budget, root, [](const RowShape&) { return softmax_space().enumerate().size(); },
      [&](const RowShape& s, const AutotuneOptions& opts) {
        Buf<float> x(ramp(size_t(s.rows) * s.cols, 7919, 1009, 1.0f / 64)), y{std::vector<float>(size_t(s.rows) * s.cols)};
        auto tuned = autotune(
            "tune_study softmax_looped", softmax_space(),
            [](const float*, float*, int rows, int cols) { return TuneKey().add("rows", rows).add("cols", cols); },
            [&](const Config& k, const float* px, float* py, int rows, int cols) {
              Grid g(rows);
              g.with_warps(int(k["num_warps"])).with_maxnreg(int(k["maxnreg"]));
              g.stream = k.stream;
              const int BLOCK = int(k["BLOCK"]);
              switch (k["stages"]) {
                case 1: s1(g, px, py, cols, BLOCK); break;
                case 2: s2(g, px, py, cols, BLOCK); break;
                case 3: s3(g, px, py, cols, BLOCK); break;
                default: s4(g, px, py, cols, BLOCK); break;
              }
            },
            opts);
        return timed_select(tuned, x.data(), y.data(), s.rows, s.cols);
      });
}

void study_layernorm(const RowShape& A, const RowShape& B, uint64_t budget, const fs::path& root) {
  auto l1 = ex::make_layernorm<bf16, 1>();
  auto l2 = ex::make_layernorm<bf16, 2>();
  auto l3 = ex::make_layernorm<bf16, 3>();
  auto l4 = ex::make_layernorm<bf16, 4>();
  study_rows(
      "layernorm bf16", A, B, budget, root,
      [](const RowShape& s) { return layernorm_space(int(next_power_of_2(s.cols))).enumerate().size(); },
      [&](const RowShape& s, const AutotuneOptions& opts) {
        const size_t n = size_t(s.rows) * s.cols;
        Buf<bf16> x(to_bf16(ramp(n, 7919, 1009, 1.0f / 256))), y{std::vector<bf16>(n)};
        Buf<float> w(ramp(size_t(s.cols), 31, 11, 1.0f / 16)), bias(ramp(size_t(s.cols), 17, 7, 1.0f / 8));
        const int BLOCK = int(next_power_of_2(s.cols));
        auto tuned = autotune(
            "tune_study layernorm", layernorm_space(BLOCK),
            [](const bf16*, bf16*, int rows, int cols) { return TuneKey().add("rows", rows).add("cols", cols); },
            [&](const Config& k, const bf16* px, bf16* py, int rows, int cols) {
              const int64_t per_sm = k["programs_per_sm"];
              Grid g(per_sm ? std::min<int64_t>(rows, per_sm * sm_count()) : rows);
              g.with_warps(int(k["num_warps"])).with_maxnreg(int(k["maxnreg"]));
              g.stream = k.stream;
              const float eps = 1e-5f;
              switch (k["stages"]) {
                case 1: l1(g, px, py, w.data(), bias.data(), rows, cols, eps, BLOCK); break;
                case 2: l2(g, px, py, w.data(), bias.data(), rows, cols, eps, BLOCK); break;
                case 3: l3(g, px, py, w.data(), bias.data(), rows, cols, eps, BLOCK); break;
                default: l4(g, px, py, w.data(), bias.data(), rows, cols, eps, BLOCK); break;
              }
            },
            opts);
        return timed_select(tuned, x.data(), y.data(), s.rows, s.cols);
      });
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<MmShape> shapes = {{8192, 8192, 8192}, {4096, 7168, 2048}};
  std::string kernels = "matmul,softmax,layernorm";
  bool small = false;
  uint64_t budget = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shapes" && i + 1 < argc) shapes = parse_shapes(argv[++i]);
    else if (a == "--kernels" && i + 1 < argc) kernels = argv[++i];
    else if (a == "--small") small = true;
    else if (a == "--budget" && i + 1 < argc) budget = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--csv" && i + 1 < argc) {
      csv.f = std::fopen(argv[++i], "w");
      if (!csv.f) {
        std::fprintf(stderr, "tune_study: cannot write %s\n", argv[i]);
        return 2;
      }
      std::fprintf(csv.f, "kernel,phase,order,config,ms\n");
    } else {
      std::fprintf(stderr,
                   "usage: %s [--kernels matmul,softmax,layernorm] [--shapes MxNxK,MxNxK] [--small] [--budget N] "
                   "[--csv FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (shapes.size() != 2) {
    std::fprintf(stderr, "tune_study: give two matmul shapes (A, then B)\n");
    return 2;
  }
  auto wanted = [&](const std::string& k) { return ("," + kernels + ",").find("," + k + ",") != std::string::npos; };
  const fs::path root = fs::temp_directory_path() / ("tle-tune-study-" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::printf("tune_study on %s\n", backend_name(default_backend()));
  if (wanted("matmul")) {
    if (small) study_matmul({64, 64, 64}, {96, 64, 128}, budget ? budget : 48, root);
    else study_matmul(shapes[0], shapes[1], budget, root);
  }
  if (wanted("softmax")) {
    if (small) study_softmax({3, 1000}, {5, 4100}, budget, root);
    else study_softmax({64, 128256}, {2048, 128256}, budget, root);
  }
  if (wanted("layernorm")) {
    if (small) study_layernorm({17, 1000}, {5, 129}, budget, root);
    else study_layernorm({16384, 4096}, {4096, 4100}, budget, root);
  }
  if (csv.f) std::fclose(csv.f);
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
