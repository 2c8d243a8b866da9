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

int main() {
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
  return ok ? 0 : 1;
}
