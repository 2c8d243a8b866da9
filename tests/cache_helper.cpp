// tests/cache_helper.cpp - tle_cache_helper, the child process of the disk-cache attack tests
// (tests/test_cache_attack.cpp, [cache]). A separate small executable, started with posix_spawn,
// so that every child is a fresh process (the global disk cache reads TLE_CACHE_DIR once) and no
// child is a fork() of a process that runs LLVM's threads.
//
//   tle_cache_helper [options] run FIRST COUNT   launch the test kernel specialized for V = FIRST ..
//                                                FIRST+COUNT-1 (twice each) on the CPU backend,
//                                                check every element; print the cache statistics
//   tle_cache_helper [options] loop FIRST        the same for V = FIRST, FIRST+1, ... until killed
//   tle_cache_helper [options] key V             print the disk-cache key of specialization V
//   tle_cache_helper [options] put-loop DIR      DiskCache::put of multi-MB artifacts (keys k0..k15,
//                                                each artifact a function of its key) until killed
//   tle_cache_helper [options] raw-ptx           NVRTC PTX of a raw kernel (through the disk cache);
//                                                print its hash and the statistics
//   tle_cache_helper [options] mesh-timeout      a GPU mesh of 2 ranks on device 0 (timeout 0.5 s)
//                                                whose rank 0 waits on a flag nobody sets: print the
//                                                error Mesh::run throws (the trap's), exit 0
// Options: --fsize N (RLIMIT_FSIZE = N bytes), --ignore-sigxfsz, --as-nobody (when root: run as
// uid/gid 65534, for a read-only directory that root would write anyway).
// Exit status: 0 ok, 1 a wrong result (a wrong kernel), 2 usage, 3 a RuntimeError or another
// exception, 4 --as-nobody failed, 5 a UserError.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cache_artifact.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/launch.hpp"
#include "tle/raw.hpp"
#include "tle/tle.hpp"

using namespace tle;
using tle::detail::DiskCache;

namespace {

auto& kernel() {
  static auto k = jit("cache_attack", [](Ptr<int32_t> x, Ptr<int32_t> out, Tile<int32_t> n, Constexpr<int> V) {
    Tile<int32_t> i = program_id(0) * 64 + arange(0, 64);
    Tile<bool> m = i < n;
    store(out + i, load(x + i, m) * V + i, m);
  });
  return k;
}

/// Launches specialization v twice and checks out[i] == x[i] * v + i; false on a wrong element.
bool check(int v) {
  constexpr int n = 300;
  std::vector<int32_t> x(n), out(n);
  for (int i = 0; i < n; ++i) x[i] = 3 * i - 7;
  for (int rep = 0; rep < 2; ++rep) {
    std::fill(out.begin(), out.end(), -1);
    kernel()(Grid(cdiv(n, 64)).backend(Backend::CPU), x.data(), out.data(), n, v);
    for (int i = 0; i < n; ++i)
      if (out[i] != x[i] * v + i) {
        std::printf("WRONG V=%d out[%d]=%d expected %d\n", v, i, out[i], x[i] * v + i);
        return false;
      }
  }
  return true;
}

void print_stats() {
  DiskCache::Stats s = DiskCache::global().stats();
  std::printf("stats hits=%llu misses=%llu bad=%llu writes=%llu write_failures=%llu stale=%llu enabled=%d writable=%d\n",
              (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.bad_entries_removed,
              (unsigned long long)s.writes, (unsigned long long)s.write_failures,
              (unsigned long long)s.stale_temporaries_removed, DiskCache::global().enabled() ? 1 : 0,
              DiskCache::global().writable() ? 1 : 0);
}

using cachetest::artifact_for;

int run(int argc, char** argv) {
  int a = 1;
  for (; a < argc && std::strncmp(argv[a], "--", 2) == 0; ++a) {
    if (!std::strcmp(argv[a], "--fsize") && a + 1 < argc) {
      struct rlimit rl {};
      rl.rlim_cur = rl.rlim_max = std::strtoull(argv[++a], nullptr, 10);
      if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return 2;
    } else if (!std::strcmp(argv[a], "--ignore-sigxfsz")) {
      ::signal(SIGXFSZ, SIG_IGN);
    } else if (!std::strcmp(argv[a], "--as-nobody")) {
      if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 4;
    } else {
      return 2;
    }
  }
  if (a >= argc) return 2;
  const std::string mode = argv[a];
  auto arg = [&](int i) { return a + i < argc ? std::atoi(argv[a + i]) : -1; };
  if (mode == "mesh-timeout") {
    auto wait = tle::jit("mesh_wait_forever", [](tle::Ptr<uint64_t> f) { tle::signal_wait(f, 1); });
    tle::Mesh mesh = tle::Mesh::gpus({0, 0}, {.timeout_s = 0.5});
    auto flag = mesh.alloc_symmetric<uint64_t>(1);
    try {
      mesh.run([&](tle::Rank& r) {
        if (r.id() == 0) wait(tle::Grid(1), r.local(flag));
      });
    } catch (const tle::RuntimeError& e) {
      std::printf("mesh error: %s\n", e.what());
      return 0;
    }
    std::printf("no error\n");
    return 1;
  }
  if (mode == "run") {
    for (int v = arg(1); v < arg(1) + arg(2); ++v)
      if (!check(v)) return 1;
    print_stats();
    return 0;
  }
  if (mode == "loop") {
    for (int v = arg(1);; ++v)
      if (!check(v)) return 1;
  }
  if (mode == "key") {
    std::vector<int32_t> x(64), out(64);
    std::printf("%s", detail::cpu_cache_key(kernel().ir(true, x.data(), out.data(), 300, arg(1))).c_str());
    return 0;
  }
  if (mode == "put-loop" && a + 1 < argc) {
    DiskCache c(argv[a + 1]);
    std::vector<std::string> arts;
    for (int k = 0; k < 16; ++k) arts.push_back(artifact_for("k" + std::to_string(k)));
    for (unsigned i = 0;; ++i) c.put("k" + std::to_string(i % 16), arts[i % 16]);
  }
  if (mode == "raw-ptx") {
    auto k = raw_kernel<void(float*, int)>("cache_attack_raw", R"(
      extern "C" __global__ void cache_attack_raw(float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2.0f * y[i] + 1.0f;
      })");
    const std::string ptx = k.ptx(90);
    uint64_t h = 1469598103934665603ull;
    for (char c : ptx) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    std::printf("ptx %zu %016llx\n", ptx.size(), (unsigned long long)h);
    print_stats();
    return 0;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int rc = run(argc, argv);
    std::fflush(stdout);
    return rc;
  } catch (const RuntimeError& e) {
    std::printf("RuntimeError call=%s: %s\n", e.call().c_str(), e.what());
    std::fflush(stdout);
    return 3;
  } catch (const UserError& e) {
    std::printf("UserError: %s\n", e.what());
    std::fflush(stdout);
    return 5;
  } catch (const std::exception& e) {
    std::printf("exception: %s\n", e.what());
    std::fflush(stdout);
    return 3;
  }
}
