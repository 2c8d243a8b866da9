// Compile latency on the CPU backend: trace + optimize + LLVM O3 + object code + ORC JIT of the
// softmax kernel, cold (a new kernel object in a process with the disk cache off, TLE_CACHE=0, so
// nothing is cached), from the disk cache (a new kernel object whose object code an earlier compile
// stored), and from the in-memory specialization cache (the whole host path of a launch that hits
// the cache, on a 1-program grid). The CPU part is forced with Grid(...).backend(Backend::CPU), so
// it runs on GPU machines too.
//
// When tle::default_backend() is the GPU, also: the first GPU compile (trace + passes + NVPTX +
// driver PTX JIT; a cold compile when the disk cache is empty or off), a new kernel object whose
// PTX comes from the disk cache (trace + passes + module load), and the host cost of a cached,
// asynchronous launch (enqueue only).
//
// Then the autotuner's cache (docs/autotune.md): a row sum tuned over BLOCK on the default backend
// stores its config; a second process (this program run again with --tune-hit, as a user's next
// process would start) times its first call of the same tuned kernel: the tuning cache lookup,
// the kernel's compile or disk-cache load, and one launch (synchronized). Skipped with TLE_CACHE=0.
#include <spawn.h>

#include <tle/autotune.hpp>
#include <tle/tle.hpp>

#include "../examples/kernels.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace tle;
using clk = std::chrono::steady_clock;

static auto make_softmax() { return ex::make_softmax(); }

/// TLE_CACHE=0 (or off/false/no) in this process's environment.
static bool disk_cache_disabled() {
  const char* c = std::getenv("TLE_CACHE");
  if (!c) return false;
  std::string v(c);
  return v == "0" || v == "off" || v == "false" || v == "no";
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// A row sum over BLOCK-wide chunks and its tuning space (BLOCK 32..1024), for the tuning cache.
static auto tuned_rowsum() {
  static auto k = jit("compile_latency_rowsum", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> cols, Constexpr<int> BLOCK) {
    Tile<int32_t> row = program_id(0);
    Tile<float> acc = zeros<float>({BLOCK});
    for (auto c0 : range(0, cols, BLOCK)) {
      Tile<int32_t> c = c0 + arange(0, BLOCK);
      acc = acc + load(x + row * cols + c, c < cols, 0.0f);
    }
    store(out + row, sum(acc, 0));
  });
  Space space;
  space.pow2("BLOCK", 32, 1024).values("num_warps", {4});
  AutotuneOptions opts;
  opts.backend = default_backend();
  return autotune(
      "compile_latency rowsum", space,
      [](const float*, float*, int, int cols) { return TuneKey().add("cols", pow2_bucket(cols)); },
      [](const Config& c, const float* x, float* out, int rows, int cols) {
        k(c.grid(rows), x, out, cols, int(c["BLOCK"]));
      },
      opts);
}

/// One call of the tuned row sum on 64 x 1000 ones (synchronized); its report; checks the sums.
static TuneReport run_tuned_rowsum(double& ms, bool& ok) {
  const int rows = 64, cols = 1000;
  ManagedBuffer<float> x(size_t(rows) * cols), out(rows);
  std::fill(x.data(), x.data() + x.size(), 1.0f);
  synchronize();
  auto tuned = tuned_rowsum();
  auto a = clk::now();
  tuned(x.data(), out.data(), rows, cols);
  synchronize();
  ms = std::chrono::duration<double, std::milli>(clk::now() - a).count();
  ok = true;
  for (int r = 0; r < rows; ++r) ok &= out.data()[r] == float(cols);
  return tuned.last_report();
}

/// The --tune-hit child: the first call of the tuned row sum in a fresh process, after one launch of
/// another kernel (so that starting the backend - the CPU JIT, the CUDA context - is not counted).
static int tune_hit_child() {
  {
    ManagedBuffer<float> x(1024), y(1024);
    std::fill(x.data(), x.data() + x.size(), 1.0f);
    synchronize();
    make_softmax()(Grid(1), x.data(), y.data(), 16, 16);
    synchronize();
  }
  double ms = 0;
  bool ok = false;
  const TuneReport r = run_tuned_rowsum(ms, ok);
  std::printf("compile_latency autotune (%s backend): a fresh process's first call of a kernel tuned by an earlier "
              "process: %.2f ms, of which %.2f ms to find the config (a trace for the cache key, the tuning cache "
              "entry), then the kernel's load from the disk cache and one launch (backend already started; config %s "
              "%s)%s\n",
              default_backend() == Backend::GPU ? "GPU" : "CPU", ms, r.lookup_ms, r.best.str().c_str(),
              r.from_cache ? "from the tuning cache" : "NOT from the tuning cache", ok ? "" : "  [WRONG RESULT]");
  std::printf("{\"case\":\"compile_latency_autotune_cache_hit\",\"backend\":\"%s\",\"first_call_ms\":%.3f,"
              "\"lookup_ms\":%.3f,\"from_cache\":%s}\n",
              default_backend() == Backend::GPU ? "gpu" : "cpu", ms, r.lookup_ms, r.from_cache ? "true" : "false");
  std::fflush(stdout);
  return ok && r.from_cache ? 0 : 1;
}

/// Tunes the row sum here (storing the config), then runs this program with --tune-hit.
static bool tune_latency(const char* self) {
  double ms = 0;
  bool ok = false;
  const TuneReport r = run_tuned_rowsum(ms, ok);
  std::printf("compile_latency autotune: tuning the row sum measured %d configs in %.1f ms%s\n", r.measured, ms,
              r.from_cache ? " (it was already in the tuning cache)" : "");
  std::fflush(stdout);
  char arg[] = "--tune-hit";
  char* argv[] = {const_cast<char*>(self), arg, nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, self, nullptr, nullptr, argv, environ) != 0) {
    std::printf("compile_latency autotune: cannot start %s --tune-hit\n", self);
    return false;
  }
  int status = 1;
  return ok && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool gpu_latency() {
  DeviceBuffer<float> x(1024), y(1024);
  std::vector<float> ones(1024, 1.0f);
  x.copy_from_host(ones);
  auto ms_since = [](clk::time_point a) { return std::chrono::duration<double, std::milli>(clk::now() - a).count(); };
  auto t0 = clk::now();
  {
    auto k = make_softmax();
    k(Grid(1), x, y, 1024, 1024);
    synchronize();
  }
  double first = ms_since(t0);
  std::vector<double> disk;
  for (int i = 0; i < 10; ++i) {
    auto k = make_softmax();
    auto a = clk::now();
    k(Grid(1), x, y, 1024, 1024);
    synchronize();
    disk.push_back(ms_since(a));
  }
  auto k = make_softmax();
  k(Grid(1), x, y, 16, 16);
  synchronize();
  std::vector<double> hit;
  for (int i = 0; i < 20000; ++i) {
    auto a = clk::now();
    k(Grid(1), x, y, 16, 16);
    hit.push_back(ms_since(a) * 1000);
    if (i % 1000 == 999) synchronize();
  }
  synchronize();
  bool ok = std::fabs(y.to_host()[0] - 1.0f / 16) < 1e-6f;
  std::printf("compile_latency softmax (GPU backend): first %.2f ms (cold unless the disk cache had it), "
              "new kernel object from the disk cache %.2f ms (median of 10), cached asynchronous launch %.2f us "
              "(median of 20000, host side)%s\n",
              first, median(disk), median(hit), ok ? "" : "  [WRONG RESULT]");
  std::printf("{\"case\":\"compile_latency_softmax_gpu\",\"first_ms\":%.3f,\"disk_hit_ms\":%.3f,\"cached_launch_us\":%.3f}\n",
              first, median(disk), median(hit));
  return ok;
}

/// The CPU part: first compile in the process, a new kernel object (median of 20), and a launch
/// that hits the in-memory cache. With TLE_CACHE=0 a new kernel object compiles cold; with the
/// disk cache it loads the object code stored by the first compile.
static bool cpu_latency(bool disk_cache) {
  std::vector<float> x(1024, 1.0f), y(1024);
  // The first compile in a process also creates the JIT; report it on its own.
  auto t0 = clk::now();
  {
    auto k = make_softmax();
    k(Grid(1).backend(Backend::CPU), x.data(), y.data(), 1024, 1024);
  }
  double first = std::chrono::duration<double, std::milli>(clk::now() - t0).count();

  std::vector<double> again;
  for (int i = 0; i < 20; ++i) {
    auto k = make_softmax();
    auto a = clk::now();
    k(Grid(1).backend(Backend::CPU), x.data(), y.data(), 1024, 1024);
    again.push_back(std::chrono::duration<double, std::milli>(clk::now() - a).count());
  }
  if (disk_cache) {
    std::printf("compile_latency softmax (CPU backend, disk cache on): new kernel object from the disk cache %.2f ms "
                "(median of 20)\n",
                median(again));
    std::printf("{\"case\":\"compile_latency_softmax_cpu_disk\",\"disk_hit_ms\":%.3f}\n", median(again));
    return true;
  }

  auto k = make_softmax();
  k(Grid(1).backend(Backend::CPU), x.data(), y.data(), 16, 16);
  std::vector<double> hit;
  for (int i = 0; i < 20000; ++i) {
    auto a = clk::now();
    k(Grid(1).backend(Backend::CPU), x.data(), y.data(), 16, 16);
    hit.push_back(std::chrono::duration<double, std::micro>(clk::now() - a).count());
  }
  bool ok = std::fabs(y[0] - 1.0f / 16) < 1e-6f;
  std::printf("compile_latency softmax (CPU backend): first in process %.2f ms, cold %.2f ms (median of 20), "
              "cached launch %.2f us (median of 20000, 1 program of 16 elements)%s\n",
              first, median(again), median(hit), ok ? "" : "  [WRONG RESULT]");
  std::printf("{\"case\":\"compile_latency_softmax_cpu\",\"first_ms\":%.3f,\"cold_ms\":%.3f,\"cached_launch_us\":%.3f}\n",
              first, median(again), median(hit));
  return ok;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--tune-hit") return tune_hit_child();
  // Cold CPU compiles in a child process with the disk cache off (TLE_CACHE is read once per
  // process), forked before tle starts any thread; then the same with the disk cache, here.
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    setenv("TLE_CACHE", "0", 1);
    bool ok = cpu_latency(false);
    std::fflush(stdout);
    _exit(ok ? 0 : 1);
  }
  int status = 1;
  bool ok = child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!disk_cache_disabled()) ok &= cpu_latency(true);
  if (default_backend() == Backend::GPU) ok &= gpu_latency();
  if (!disk_cache_disabled()) ok &= tune_latency("/proc/self/exe");
  return ok ? 0 : 1;
}
