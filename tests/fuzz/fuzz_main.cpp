// tests/fuzz/fuzz_main.cpp - tle_fuzz: the differential fuzzer from the command line.
//
//   tle_fuzz [--seed S] [--count N] [--statements K] [--max-numel E] [--reduce] [--print] [--no-variants]
//   tle_fuzz --printer-check [--seed S] [--count N]
//   tle_fuzz --gpu-compile [--portable] [--seed S] [--count N] [--jobs J]
//   tle_fuzz --gpu [--seed S] [--count N] [--jobs J] [--cpu] [--out DIR] [--time-limit T] [--one-config]
//
// Checks programs S .. S+N-1 (fuzz::check: the interpreter against the CPU backend, with and
// without tle's passes, and the metamorphic variants) and prints one line per failure. --reduce
// shrinks each failing program and prints it as a regression test case for
// tests/fuzz/regressions.cpp; --print prints every program's C++ (no check). --printer-check
// prints a C++ file of printer checks (to_cpp(..., printer_check = true)), which CMake compiles
// into tle_fuzz_printed. --gpu-compile generates programs with power-of-two tiles (--portable:
// the GPU stage's programs) and compiles each for sm_90a (1, 4 and 8 warps) and assembles it with
// ptxas (fuzz::check_gpu_compile; no GPU needed), on --jobs threads.
//
// --gpu is the GPU stage (fuzz::check_device, docs/testing.md): portable programs, each run on the
// interpreter and through tle's launch path on the GPU backend at the configurations
// fuzz::device_configs picks (1, 4, 8 warps; pipelining depths for K loops), outputs compared
// (exact, math-function results within their ULP bound); --one-config runs each program at one of
// those configurations only (seed modulo their number: 3-5x more programs in the same time, every
// configuration still covered across seeds); --cpu adds the CPU backend at O3. One
// program in four has large tiles (tensor-core dots, K loops) unless --max-numel is given.
// Programs run on --jobs worker threads (default: the hardware threads), each with its own CUDA
// stream. Progress goes to stderr every 100 programs; the last line on stdout is
// `programs=N mismatches=M seeds=[a,b)`. Each failing program is written as C++ (to_cpp) to
// --out DIR (default fuzz-failures) as seed-<S>.cpp, with its stage and difference. --time-limit T
// stops starting programs after T seconds (the seeds run stay one range). Without a usable GPU
// (sm_80 or newer) it says why and exits 77 before running anything. The on-disk kernel cache and
// spill warnings are off (TLE_CACHE=0, TLE_QUIET=1) unless the environment sets them.
// --device-backend cpu runs the same stage on the CPU backend instead (a self-check of the stage
// on any machine); --plant-mismatch S corrupts seed S's launch outputs (a check of the reporting).
//
// Exit status: 0 when every program passed, 1 otherwise, 2 for a usage error, 3 when --time-limit
// stopped the run before --count programs (none failing), 77 (--gpu) when no usable GPU is present.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "fuzz/harness.hpp"

namespace {

constexpr int kNoGpu = 77;  // the conventional "skipped" status (automake, ctest SKIP_RETURN_CODE)

/// Why the GPU stage cannot run here ("" when it can): no driver, no device, or older than sm_80.
std::string why_no_gpu() {
  try {
    auto info = tle::gpu_info();
    if (!info) {
      // gpu_info says only "no"; a managed allocation says why (the driver's load error).
      void* p = tle::detail::managed_alloc(64);
      tle::detail::managed_free(p);
      return "no CUDA device";
    }
    if (info->sm < 80) return "the GPU is sm_" + std::to_string(info->sm) + "; tle's GPU backend needs sm_80 or newer";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  int64_t count = 1;
  bool do_reduce = false, print = false, printer_check = false, gpu_compile = false, gpu = false, with_cpu = false, one_config = false;
  bool numel_given = false;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double time_limit = 0;
  std::string out_dir = "fuzz-failures";
  tle::Backend device_backend = tle::Backend::GPU;
  std::optional<uint64_t> plant;
  fuzz::GenOptions gen;
  fuzz::CheckOptions chk;
  auto usage = [] {
    std::fprintf(stderr,
                 "usage: tle_fuzz [--seed S] [--count N] [--statements K] [--max-numel E] [--reduce] [--print] "
                 "[--no-variants] [--printer-check] [--gpu-compile [--portable]] [--jobs J]\n"
                 "       tle_fuzz --gpu [--seed S] [--count N] [--jobs J] [--cpu] [--out DIR] [--time-limit T] "
                 "[--one-config] [--device-backend gpu|cpu] [--plant-mismatch S]\n");
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tle_fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seed") seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--count") count = std::strtoll(next(), nullptr, 10);
    else if (a == "--statements") gen.statements = std::atoi(next());
    else if (a == "--max-numel") gen.max_numel = std::atoll(next()), numel_given = true;
    else if (a == "--reduce") do_reduce = true;
    else if (a == "--print") print = true;
    else if (a == "--printer-check") printer_check = true;
    else if (a == "--gpu-compile") gpu_compile = true, gen.pow2 = true;
    else if (a == "--portable") gen.portable = true;
    else if (a == "--gpu") gpu = true, gen.portable = true;
    else if (a == "--cpu") with_cpu = true;
    else if (a == "--one-config") one_config = true;
    else if (a == "--jobs") jobs = std::max(1, std::atoi(next()));
    else if (a == "--time-limit") time_limit = std::atof(next());
    else if (a == "--out") out_dir = next();
    else if (a == "--plant-mismatch") plant = std::strtoull(next(), nullptr, 10);
    else if (a == "--device-backend") {
      std::string b = next();
      if (b == "gpu") device_backend = tle::Backend::GPU;
      else if (b == "cpu") device_backend = tle::Backend::CPU;
      else return usage();
    } else if (a == "--no-variants") chk.variants = false;
    else return usage();
  }
  if (count < 0) return usage();
  if (printer_check) {
    std::cout << "// Generated by tle_fuzz --printer-check --seed " << seed << " --count " << count
              << ": each test compiles a printed program and\n// requires it to compute what the generator's "
                 "program does (tests/fuzz/regression.hpp).\n#include \"fuzz/regression.hpp\"\n\n";
    for (int64_t k = 0; k < count; ++k) {
      const uint64_t s = seed + static_cast<uint64_t>(k);
      std::cout << fuzz::to_cpp(fuzz::generate(s, gen), "fuzz printer: seed " + std::to_string(s), {}, true) << "\n";
    }
    return 0;
  }
  // The generator options of a seed: portable programs (--gpu, --gpu-compile --portable) have
  // large tiles (K loops, tensor-core dots) one program in four, unless --max-numel fixes the size.
  auto gen_for = [&](uint64_t s) {
    fuzz::GenOptions g = gen;
    if (gen.portable && !numel_given) g.max_numel = s % 4 == 0 ? 4096 : 96;
    return g;
  };

  if (gpu || gpu_compile) {
    // ---- the GPU stage / compile-only check, on a pool of worker threads
    if (gpu && device_backend == tle::Backend::GPU) {
      if (std::string why = why_no_gpu(); !why.empty()) {
        std::fprintf(stderr, "tle_fuzz: --gpu: no usable GPU, nothing run (exit status %d = skipped): %s\n", kNoGpu,
                     why.c_str());
        return kNoGpu;
      }
      ::setenv("TLE_CACHE", "0", 0);  // 10,000 programs x 5 configurations are no cache's business
      ::setenv("TLE_QUIET", "1", 0);
      auto info = tle::gpu_info();
      std::fprintf(stderr, "tle_fuzz: --gpu on %s (sm_%d), %d jobs\n", info->name.c_str(), info->sm, jobs);
    }
    if (gpu) {
      std::error_code ec;
      std::filesystem::create_directories(out_dir, ec);
      if (ec) {
        std::fprintf(stderr, "tle_fuzz: cannot create --out %s: %s\n", out_dir.c_str(), ec.message().c_str());
        return 2;
      }
    }
    const std::string ptxas = ::access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : "ptxas";
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<int64_t> next{0}, done{0}, failures{0};
    std::atomic<bool> stop{false};
    std::string stop_reason;
    std::mutex mu;
    auto report = [&](uint64_t s, const fuzz::Program& p, const fuzz::Outcome& o) {
      std::lock_guard<std::mutex> lk(mu);
      ++failures;
      std::string where;
      if (gpu) {
        const std::string file = out_dir + "/seed-" + std::to_string(s) + ".cpp";
        std::ofstream f(file);
        // A GPU configuration's failure as a [.gpu] test case on the GPU; the others (trace,
        // interp, cpu) as the interpreter-vs-CPU test case.
        const bool on_device = o.stage.rfind("gpu ", 0) == 0;
        f << fuzz::to_cpp(p, "fuzz gpu: seed " + std::to_string(s),
                          "tle_fuzz --gpu --seed " + std::to_string(s) + " --count 1: stage " + o.stage + "\n" + o.detail,
                          false, on_device);
        where = f ? " (program: " + file + ")" : " (could not write " + file + ")";
      }
      std::cout << "seed " << s << ": " << o.stage << ": " << o.detail << where << std::endl;
    };
    auto worker = [&] {
      std::optional<tle::Stream> stream;
      fuzz::DeviceCheckOptions dopt;
      dopt.backend = device_backend;
      dopt.cpu = with_cpu;
      if (gpu && device_backend == tle::Backend::GPU) {
        try {
          stream.emplace(true);
          dopt.stream = stream->handle();
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lk(mu);
          if (!stop.exchange(true)) stop_reason = std::string("cannot create a CUDA stream: ") + e.what();
          return;
        }
      }
      for (;;) {
        if (stop) return;
        if (time_limit > 0 && seconds_since(t0) > time_limit) {
          std::lock_guard<std::mutex> lk(mu);
          if (!stop.exchange(true)) stop_reason = "the time limit (" + std::to_string(time_limit) + " s) was reached";
          return;
        }
        const int64_t k = next++;
        if (k >= count) return;
        const uint64_t s = seed + static_cast<uint64_t>(k);
        fuzz::Program p = fuzz::generate(s, gen_for(s));
        fuzz::Outcome o;
        if (gpu) {
          if (plant && *plant == s)
            dopt.after_launch = [&](fuzz::Memory& m) {
              for (size_t b = 0; b < p.buffers.size(); ++b)
                if (p.buffers[b].role == fuzz::Buffer::Out && m.bytes(static_cast<int>(b)) > 0) {
                  // An exponent bit of element 0 (its top byte): a NaN becomes a number too.
                  const int top = tle::byte_size(p.buffers[b].dtype) - 1;
                  static_cast<unsigned char*>(m.data(static_cast<int>(b)))[top] ^= 0x40;
                  return;
                }
            };
          else dopt.after_launch = nullptr;
          auto configs = fuzz::device_configs(p);
          if (one_config) configs = {configs[s % configs.size()]};
          o = fuzz::check_device(p, configs, dopt);
        } else {
          for (int w : {1, 4, 8})
            if (o.ok) o = fuzz::check_gpu_compile(p, w, ptxas);
        }
        if (!o.ok) {
          report(s, p, o);
          // A fault leaves the CUDA context unusable: every later launch would fail too.
          if (gpu && device_backend == tle::Backend::GPU) {
            try {
              tle::synchronize();
            } catch (const std::exception& e) {
              std::lock_guard<std::mutex> lk(mu);
              if (!stop.exchange(true))
                stop_reason = "the CUDA context is unusable after seed " + std::to_string(s) + ": " + e.what() +
                              (jobs > 1 ? " (a fault poisons the context for every job: the faulting program is one of "
                                          "the seeds reported; run each again with --count 1 --jobs 1)"
                                        : "");
            }
          }
        }
        const int64_t d = ++done;
        if (d % 100 == 0) {
          std::lock_guard<std::mutex> lk(mu);
          std::fprintf(stderr, "tle_fuzz: %lld programs, %lld mismatches, %.1f s\n", static_cast<long long>(d),
                       static_cast<long long>(failures.load()), seconds_since(t0));
        }
      }
    };
    std::vector<std::thread> ts;
    for (int j = 0; j < jobs; ++j) ts.emplace_back(worker);
    for (auto& t : ts) t.join();
    // Every claimed index ran to the end, so the programs run are the first `ran` seeds.
    const int64_t ran = std::min(next.load(), count);
    if (!stop_reason.empty()) std::fprintf(stderr, "tle_fuzz: stopped early: %s\n", stop_reason.c_str());
    std::fprintf(stderr, "tle_fuzz: %lld programs in %.1f s on %d jobs\n", static_cast<long long>(ran), seconds_since(t0),
                 jobs);
    std::cout << "programs=" << ran << " mismatches=" << failures.load() << " seeds=[" << seed << ","
              << seed + static_cast<uint64_t>(ran) << ")" << std::endl;
    const bool broken = stop_reason.rfind("the CUDA context", 0) == 0 || stop_reason.rfind("cannot create", 0) == 0;
    if (failures.load() || broken) return 1;
    return ran < count ? 3 : 0;  // the time limit came first: fewer programs than asked for
  }

  int64_t failures = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < count; ++k) {
    const uint64_t s = seed + static_cast<uint64_t>(k);
    fuzz::Program p = fuzz::generate(s, gen);
    if (print) {
      std::cout << fuzz::to_cpp(p, "fuzz program: seed " + std::to_string(s)) << "\n";
      continue;
    }
    if (k > 0 && k % 100 == 0)
      std::cerr << "tle_fuzz: " << k << " programs checked, " << failures << " failing, " << seconds_since(t0) << " s\n";
    fuzz::Outcome o = fuzz::check(p, chk);
    if (o.ok) continue;
    ++failures;
    std::cout << "seed " << s << ": " << o.stage << ": " << o.detail << std::endl;
    if (!do_reduce) continue;
    fuzz::Program q = fuzz::failing_program(p, o);
    fuzz::CheckOptions plain = chk;
    plain.variants = false;
    fuzz::Outcome oq = fuzz::check(q, plain);
    if (oq.ok) {
      std::cout << "  (the variant alone passes: not reduced)\n" << fuzz::to_cpp(q, "fuzz regression: seed " + std::to_string(s)) << std::endl;
      continue;
    }
    fuzz::Program r = fuzz::reduce(q, [&](const fuzz::Program& c) { return fuzz::check(c, plain).same_failure(oq); });
    fuzz::Outcome orr = fuzz::check(r, plain);
    std::cout << fuzz::to_cpp(r, "fuzz regression: seed " + std::to_string(s),
                              "tle_fuzz --seed " + std::to_string(s) + " --reduce: stage " + orr.stage + "\n" + orr.detail)
              << std::endl;
  }
  if (!print)
    std::cerr << "tle_fuzz: " << count << " programs (seeds " << seed << ".." << seed + static_cast<uint64_t>(count) - 1
              << "), " << failures << " failing, " << seconds_since(t0) << " s\n";
  return failures ? 1 : 0;
}
