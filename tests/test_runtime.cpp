// tests/test_runtime.cpp - the CUDA runtime layer (driver loading, backend choice, device memory,
// streams, modules) and the disk cache of compiled artifacts.
//
// [runtime] runs everywhere; on a machine without a driver it checks the CPU fallback. [.gpu]
// (hidden) needs a GPU: run `tle_tests "[.gpu]"` on the GPU machine. Tests that need a fresh
// process (environment read once per process, a sticky CUDA error) re-execute this binary on a
// hidden test case ([.runtime_child]) and check its exit status.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "env_util.hpp"
#include "file_util.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/module.hpp"
#include "runtime/disk_cache.hpp"
#include "support/llvm_guard.hpp"
#include "tle/device.hpp"
#include "tle/error.hpp"
#include "tle/tle.hpp"
#include "../examples/kernels.hpp"

using namespace tle;
namespace fs = std::filesystem;
using tle::detail::DiskCache;

namespace {

using envtest::EnvVar;

/// A fresh directory under /tmp, removed with its contents at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tle-rt-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using filetest::read_file;
using filetest::write_file;

/// The artifact every test process stores under `key`: a function of the key alone, of a length
/// between 1 and ~24 KB, compressible but not trivially so.
std::string artifact_for(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (char c : key) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::string s = "// artifact of " + key + "\n";
  size_t n = 1 + h % 24000;
  while (s.size() < n) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    s += (h % 4 == 0) ? std::string(1, static_cast<char>(h >> 56)) : "ld.global.f32 %f1, [%rd5];\n";
  }
  s.resize(n);
  return s;
}

/// Runs this test binary on one hidden test case, with `env` applied on top of ours, and returns
/// its exit status (0: the case ran and passed).
int run_child(const std::string& test_name, const std::vector<std::pair<std::string, const char*>>& env) {
  std::fflush(stdout), std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    for (auto& [k, v] : env) {
      if (v) ::setenv(k.c_str(), v, 1);
      else ::unsetenv(k.c_str());
    }
    std::string self = fs::read_symlink("/proc/self/exe").string();
    // -w NoTests: fail if the name matched nothing, so a typo cannot pass silently.
    const char* argv[] = {self.c_str(), test_name.c_str(), "-w", "NoTests", nullptr};
    ::execv(self.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// ================================================================ driver and backend choice

TEST_CASE("runtime: an LLVM fatal error in a guarded compile step is returned, not an exit", "[runtime]") {
  using tle::support::catch_llvm_fatal_errors;
  using tle::support::report_llvm_fatal_error;
  // Without the guard, llvm::report_fatal_error would end this process (fuzzer seed 805 did so
  // from NVPTX instruction selection); under it, the reason comes back.
  auto r = catch_llvm_fatal_errors([] { report_llvm_fatal_error("Cannot select: planted"); });
  REQUIRE(r.has_value());
  CHECK(*r == "Cannot select: planted");
  // nothing reported: nullopt; exceptions pass through and leave no guard behind
  CHECK_FALSE(catch_llvm_fatal_errors([] {}).has_value());
  CHECK_THROWS_AS(catch_llvm_fatal_errors([] { throw std::runtime_error("x"); }), std::runtime_error);
  // nested guards: the innermost gets the error, the outer one continues normally
  std::optional<std::string> inner;
  auto outer = catch_llvm_fatal_errors([&] { inner = catch_llvm_fatal_errors([] { report_llvm_fatal_error("in"); }); });
  CHECK_FALSE(outer.has_value());
  REQUIRE(inner.has_value());
  CHECK(*inner == "in");
  auto after = catch_llvm_fatal_errors([] { report_llvm_fatal_error("again"); });
  REQUIRE(after.has_value());
  CHECK(*after == "again");
  // other threads have their own guards
  std::optional<std::string> t1, t2;
  std::thread a([&] { t1 = catch_llvm_fatal_errors([] { report_llvm_fatal_error("thread 1"); }); });
  std::thread b([&] { t2 = catch_llvm_fatal_errors([] {}); });
  a.join();
  b.join();
  CHECK(t1 == std::optional<std::string>("thread 1"));
  CHECK_FALSE(t2.has_value());
  // LLVM still compiles kernels afterwards (CPU object code and PTX)
  auto k = tle::jit("after_fatal", [](tle::Ptr<float> x) { tle::store(x + tle::arange(0, 16), 2.0f); });
  std::vector<float> v(16, 0.f);
  k(tle::Grid(1).backend(tle::Backend::CPU), v.data());
  CHECK(v[15] == 2.0f);
  CHECK(k.ptx(90, 4, v.data()).find(".entry") != std::string::npos);
}

TEST_CASE("runtime: a missing driver library is reported, never thrown", "[runtime]") {
  cuda::DriverLoad l = cuda::load_driver("/nonexistent/libcuda.so.1");
  CHECK(l.driver == nullptr);
  CHECK(contains(l.error, "/nonexistent/libcuda.so.1"));
  CHECK(contains(l.error, "cannot open"));
}

TEST_CASE("runtime: CudaGraph::capture of the legacy default stream is a UserError at the call", "[runtime]") {
  // Checked before the driver is needed, so the same message on every machine.
  Stream legacy = Stream::wrap(nullptr);
  bool ran = false;
  int line = __LINE__ + 2;
  try {
    CudaGraph g = CudaGraph::capture(legacy, [&] { ran = true; });
    FAIL("capturing the legacy stream must throw");
  } catch (const UserError& e) {
    CHECK(contains(e.file(), "test_runtime.cpp"));
    CHECK(e.line() == unsigned(line));
    CHECK(contains(e.message(), "legacy default stream"));
  }
  CHECK(!ran);
}

TEST_CASE("runtime: the process-wide driver and default_backend agree", "[runtime]") {
  EnvVar backend("TLE_BACKEND", nullptr);
  const cuda::Driver* d = cuda::driver();
  if (!d) {
    // The development machine: no driver, so everything falls back to the CPU.
    CHECK(default_backend() == Backend::CPU);
    CHECK(!cuda::driver_error().empty());
    CHECK(!gpu_info().has_value());
    CHECK_NOTHROW(synchronize());
    CHECK_THROWS_AS(cuda::require_driver("cuMemAlloc"), RuntimeError);
    CHECK_THROWS_WITH(cuda::require_driver("cuMemAlloc"), Catch::Contains("no CUDA driver"));
    CHECK_THROWS_WITH(cuda::ensure_context(), Catch::Contains("no CUDA driver"));
  } else {
    CHECK(default_backend() == Backend::GPU);
    CHECK(cuda::driver_error().empty());
    CHECK(d->device_count >= 1);
    CHECK(d->version >= 12000);
    CHECK(gpu_info().has_value());
  }
  CHECK(!gpu_info(-1).has_value());
  CHECK(!gpu_info(1 << 20).has_value());
  CHECK(std::string(backend_name(Backend::CPU)) == "cpu");
  CHECK(std::string(backend_name(Backend::GPU)) == "gpu");
  CHECK(std::string(backend_name(Backend::Interp)) == "interp");
}

TEST_CASE("runtime: TLE_BACKEND selects the backend", "[runtime]") {
  using cuda::select_backend;
  CHECK(select_backend(nullptr, false, "x") == Backend::CPU);
  CHECK(select_backend(nullptr, true, "") == Backend::GPU);
  CHECK(select_backend("", true, "") == Backend::GPU);
  CHECK(select_backend("cpu", true, "") == Backend::CPU);
  CHECK(select_backend("CPU", false, "x") == Backend::CPU);
  CHECK(select_backend("gpu", true, "") == Backend::GPU);
  CHECK(select_backend("Gpu", true, "") == Backend::GPU);
  CHECK(select_backend("interp", true, "") == Backend::Interp);
  CHECK(select_backend("INTERP", false, "x") == Backend::Interp);
  try {
    select_backend("gpu", false, "cannot open libcuda.so.1: no such file");
    FAIL("TLE_BACKEND=gpu without a GPU must throw");
  } catch (const RuntimeError& e) {
    CHECK(e.call() == "TLE_BACKEND");
    CHECK(contains(e.what(), "TLE_BACKEND=gpu"));
    CHECK(contains(e.what(), "no GPU can be used"));
    CHECK(contains(e.what(), "cannot open libcuda.so.1: no such file"));
  }
  CHECK_THROWS_AS(select_backend("tpu", true, ""), UserError);
  CHECK_THROWS_WITH(select_backend("tpu", true, ""), Catch::Contains("'tpu'") && Catch::Contains("cpu, gpu or interp"));

  // Through the environment, in this process (the driver is probed once; the variable every call).
  {
    EnvVar b("TLE_BACKEND", "cpu");
    CHECK(default_backend() == Backend::CPU);
  }
  if (!cuda::driver()) {
    EnvVar b("TLE_BACKEND", "gpu");
    CHECK_THROWS_AS(default_backend(), RuntimeError);
    CHECK_THROWS_WITH(default_backend(), Catch::Contains("no GPU can be used"));
  }
}

// Run in a fresh process by the test below, with TLE_LIBCUDA=/nonexistent/libcuda.so.1.
TEST_CASE("runtime child: TLE_LIBCUDA names a missing file", "[.runtime_child]") {
  REQUIRE(std::string(std::getenv("TLE_LIBCUDA")) == "/nonexistent/libcuda.so.1");
  CHECK(cuda::libcuda_path() == "/nonexistent/libcuda.so.1");
  CHECK(cuda::driver() == nullptr);
  CHECK(contains(cuda::driver_error(), "/nonexistent/libcuda.so.1"));
  CHECK(!gpu_info().has_value());
  const char* forced = std::getenv("TLE_BACKEND");
  if (!forced) {
    CHECK(default_backend() == Backend::CPU);
  } else {
    REQUIRE(std::string(forced) == "gpu");
    try {
      default_backend();
      FAIL("TLE_BACKEND=gpu with a missing driver must throw");
    } catch (const RuntimeError& e) {
      CHECK(contains(e.what(), "TLE_BACKEND=gpu, but no GPU can be used"));
      CHECK(contains(e.what(), "/nonexistent/libcuda.so.1"));
    }
    CHECK_THROWS_AS(DeviceBuffer<float>(16), RuntimeError);
  }
}

TEST_CASE("runtime: TLE_LIBCUDA pointing at a missing file falls back to the CPU", "[runtime]") {
  // A fresh process, since the driver is probed once per process. On a GPU machine this is the
  // real test that the variable is honoured.
  CHECK(run_child("runtime child: TLE_LIBCUDA names a missing file",
                  {{"TLE_LIBCUDA", "/nonexistent/libcuda.so.1"}, {"TLE_BACKEND", nullptr}}) == 0);
  CHECK(run_child("runtime child: TLE_LIBCUDA names a missing file",
                  {{"TLE_LIBCUDA", "/nonexistent/libcuda.so.1"}, {"TLE_BACKEND", "gpu"}}) == 0);
}

TEST_CASE("runtime: GPU objects without a driver throw RuntimeError, size mistakes are UserErrors", "[runtime]") {
  if (!cuda::driver()) {
    CHECK_THROWS_WITH(DeviceBuffer<float>(16), Catch::Contains("cuMemAlloc") && Catch::Contains("no CUDA driver"));
    CHECK_THROWS_AS(Stream(), RuntimeError);
    Stream borrowed = Stream::wrap(nullptr);
    CHECK(!borrowed.owned());
    CHECK_THROWS_AS(borrowed.synchronize(), RuntimeError);
    CHECK_THROWS_AS(cuda::GpuModule::load_ptx(".version 8.0\n"), RuntimeError);
  }
  // An empty buffer needs no driver; its size checks do not either.
  DeviceBuffer<float> empty;
  CHECK(empty.size() == 0);
  CHECK(empty.data() == nullptr);
  std::vector<float> host(3, 1.0f);
  CHECK_NOTHROW(empty.copy_from_host(host.data(), 0));
  CHECK_NOTHROW(empty.fill_zero());
  CHECK(empty.to_host().empty());
  int line = __LINE__ + 2;
  try {
    empty.copy_from_host(host.data(), 3);
    FAIL("a size mismatch must throw");
  } catch (const UserError& e) {
    CHECK(contains(e.file(), "test_runtime.cpp"));
    CHECK(e.line() == unsigned(line));
    CHECK(contains(e.message(), "copy_from_host"));
    CHECK(contains(e.message(), "3 elements given, but the buffer holds 0"));
  }
  line = __LINE__ + 2;
  try {
    empty.copy_to_host(host.data(), 3);
    FAIL("a size mismatch must throw");
  } catch (const UserError& e) {
    CHECK(e.line() == unsigned(line));
    CHECK(contains(e.message(), "copy_to_host"));
  }
  line = __LINE__ + 2;
  try {
    DeviceBuffer<double> huge(SIZE_MAX / 4);
    FAIL("an impossible size must throw");
  } catch (const UserError& e) {
    CHECK(e.line() == unsigned(line));
    CHECK(contains(e.message(), "too large"));
  }
}

TEST_CASE("runtime: ManagedBuffer is the portable buffer: host memory without a driver, managed with one",
          "[runtime]") {
  ManagedBuffer<float> x(1000, 1.5f), y(1000);
  CHECK(x.managed() == (cuda::driver() != nullptr));
  CHECK(reinterpret_cast<uintptr_t>(x.data()) % 256 == 0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  // The same host code launches on the default backend, whatever the machine has.
  auto scale = jit("managed_scale", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n) {
    Tile<int32_t> o = program_id(0) * 256 + arange(0, 256);
    store(y + o, load(x + o, o < n) * 2.0f, o < n);
  });
  scale(Grid(cdiv(1000, 256)), x, y, 1000);
  tle::synchronize();
  for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == 2.0f * float(i));
  // Moves carry the memory and its kind; reset frees it.
  ManagedBuffer<float> z = std::move(y);
  CHECK(y.empty());
  CHECK(z.size() == 1000);
  CHECK(z.managed() == x.managed());
  CHECK(z[999] == 1998.0f);
  z.reset();
  CHECK(z.empty());
}

TEST_CASE("gpu: ManagedBuffer is managed memory where a driver is present, the same code runs on both backends",
          "[.gpu]") {
  REQUIRE(cuda::driver() != nullptr);
  ManagedBuffer<float> x(1000, 1.5f), y(1000);
  CHECK(x.managed());
  CUmemorytype type{};
  cuda::check(cuda::driver()->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                    static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(x.data()))),
              "cuPointerGetAttribute");
  CHECK((type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED));
  auto twice = jit("managed_twice", [](Ptr<float> x, Ptr<float> y, Tile<int32_t> n) {
    Tile<int32_t> o = program_id(0) * 256 + arange(0, 256);
    store(y + o, load(x + o, o < n) * 2.0f, o < n);
  });
  for (Backend b : {Backend::GPU, Backend::CPU}) {
    std::fill(y.begin(), y.end(), 0.0f);
    twice(Grid(cdiv(1000, 256)).backend(b), x, y, 1000);
    tle::synchronize();
    CHECK(y[0] == 3.0f);
    CHECK(y[999] == 3.0f);
  }
}

// Run in a fresh process by the test below, with TLE_CACHE_DIR set and TLE_TEST_EXPECT=cold|warm.
TEST_CASE("runtime child: CPU kernels go through the disk cache", "[.runtime_child]") {
  const std::string expect = std::getenv("TLE_TEST_EXPECT");
  const DiskCache::Stats before = DiskCache::global().stats();
  REQUIRE(DiskCache::global().enabled());
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 0.5f), c(64 * 64, 0.0f);
  // Two kernel objects with the same code: the second is a hit even in the cold process, and
  // loads the same object a second time into the JIT.
  for (int i = 0; i < 2; ++i) {
    auto mm = ex::make_matmul<float, float>();
    std::fill(c.begin(), c.end(), 0.0f);
    mm(Grid(2, 2).backend(Backend::CPU), a.data(), b.data(), c.data(), 64, 64, 64, 32, 32, 16);
    REQUIRE(c[0] == 32.0f);
    REQUIRE(c[64 * 64 - 1] == 32.0f);
  }
  const DiskCache::Stats after = DiskCache::global().stats();
  if (expect == "cold") {
    CHECK(after.misses - before.misses == 1);
    CHECK(after.writes - before.writes == 1);
    CHECK(after.hits - before.hits == 1);
  } else {
    REQUIRE(expect == "warm");
    CHECK(after.hits - before.hits == 2);
    CHECK(after.misses - before.misses == 0);
    CHECK(after.writes - before.writes == 0);
  }
}

TEST_CASE("runtime: CPU object code is cached on disk and reused by a new process", "[runtime]") {
  TempDir dir;
  auto entries = [&] {
    size_t n = 0;
    for (auto& e : fs::directory_iterator(dir.path())) n += e.path().extension() == ".tlec";
    return n;
  };
  const char* name = "runtime child: CPU kernels go through the disk cache";
  CHECK(run_child(name, {{"TLE_CACHE_DIR", dir.path().c_str()}, {"TLE_CACHE", nullptr}, {"TLE_TEST_EXPECT", "cold"}}) == 0);
  CHECK(entries() == 1);
  CHECK(run_child(name, {{"TLE_CACHE_DIR", dir.path().c_str()}, {"TLE_CACHE", nullptr}, {"TLE_TEST_EXPECT", "warm"}}) == 0);
  CHECK(entries() == 1);
  // A corrupt entry is a miss (the cache's own checks), compiled and stored again.
  for (auto& e : fs::directory_iterator(dir.path())) {
    std::string bytes = read_file(e.path().string());
    bytes[bytes.size() / 2] ^= 0x5a;
    write_file(e.path().string(), bytes);
  }
  CHECK(run_child(name, {{"TLE_CACHE_DIR", dir.path().c_str()}, {"TLE_CACHE", nullptr}, {"TLE_TEST_EXPECT", "cold"}}) == 0);
  CHECK(entries() == 1);
}

// ================================================================ failure dumps

TEST_CASE("runtime: write_dump makes a fresh directory per failure", "[runtime]") {
  TempDir tmp;
  EnvVar dump("TLE_DUMP_DIR", (tmp.path() + "/dumps").c_str());
  std::string err;
  std::string a = cuda::write_dump({{"kernel.ptx", ".version 8.0\n"}, {"kernel.ttir", "tt.func"}}, &err);
  REQUIRE(!a.empty());
  CHECK(err.empty());
  CHECK(a.rfind(tmp.path() + "/dumps/tle-dump-" + std::to_string(::getpid()) + "-", 0) == 0);
  CHECK(read_file(a + "/kernel.ptx") == ".version 8.0\n");
  CHECK(read_file(a + "/kernel.ttir") == "tt.func");
  std::string b = cuda::write_dump({{"../escape", "x"}}, &err);
  REQUIRE(!b.empty());
  CHECK(a != b);
  CHECK(fs::exists(b + "/.._escape"));  // '/' in a name cannot leave the directory
  {
    EnvVar bad("TLE_DUMP_DIR", "/proc/version/dumps");  // under a regular file: cannot be created
    CHECK(cuda::write_dump({{"x", "y"}}, &err).empty());
    CHECK(contains(err, "/proc/version/dumps"));
  }
}

// ================================================================ disk cache

TEST_CASE("disk cache: miss, hit, overwrite, binary and empty artifacts", "[runtime]") {
  TempDir tmp;
  DiskCache c(tmp.path() + "/cache");  // created on demand
  REQUIRE(c.enabled());
  CHECK(c.directory() == tmp.path() + "/cache");
  CHECK(!c.get("kernel A").has_value());
  CHECK(c.stats().misses == 1);

  c.put("kernel A", "ptx of A");
  CHECK(c.get("kernel A") == std::optional<std::string>("ptx of A"));
  CHECK(!c.get("kernel B").has_value());
  c.put("kernel A", "new ptx of A");
  CHECK(c.get("kernel A") == std::optional<std::string>("new ptx of A"));

  std::string binary("\0\x01\xff\x7f cubin \0\0", 14);
  c.put("binary", binary);
  CHECK(c.get("binary") == std::optional<std::string>(binary));
  c.put("empty", "");
  CHECK(c.get("empty") == std::optional<std::string>(""));
  std::string big = artifact_for("big") + std::string(1 << 20, 'x') + artifact_for("big2");
  c.put("big", big);
  CHECK(c.get("big") == std::optional<std::string>(big));
  CHECK(fs::file_size(c.entry_path("big")) < big.size() / 4);  // compressed

  // Keys are whole texts: a key that is a prefix of another is a different entry.
  c.put("kernel", "short key");
  CHECK(c.get("kernel") == std::optional<std::string>("short key"));
  CHECK(c.get("kernel A") == std::optional<std::string>("new ptx of A"));

  // Another cache object on the same directory (another process, in effect) sees the entries.
  DiskCache again(tmp.path() + "/cache");
  CHECK(again.get("binary") == std::optional<std::string>(binary));
  // No temporary files are left behind.
  for (auto& e : fs::directory_iterator(tmp.path() + "/cache"))
    CHECK(e.path().extension() == ".tlec");
  CHECK(c.stats().bad_entries_removed == 0);
}

TEST_CASE("disk cache: entry names are SHA-256 of the key, entries start with the magic", "[runtime]") {
  CHECK(DiskCache::key_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(DiskCache::key_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  TempDir tmp;
  DiskCache c(tmp.path());
  c.put("abc", "x");
  CHECK(c.entry_path("abc") == tmp.path() + "/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.tlec");
  std::string f = read_file(c.entry_path("abc"));
  REQUIRE(f.size() > 8);
  CHECK(f.substr(0, 8) == std::string("TLECACH\x01", 8));
  CHECK(static_cast<unsigned char>(f[8]) == 0x28);  // a zstd frame follows (magic 28 b5 2f fd)
  CHECK(static_cast<unsigned char>(f[11]) == 0xfd);
}

TEST_CASE("disk cache: a different key in the entry file (a hash collision) is a miss", "[runtime]") {
  TempDir tmp;
  DiskCache c(tmp.path());
  c.put("key A", "artifact A");
  // Simulate a collision: the file key B hashes to holds key A's entry.
  fs::copy_file(c.entry_path("key A"), c.entry_path("key B"));
  CHECK(!c.get("key B").has_value());
  CHECK(!fs::exists(c.entry_path("key B")));  // removed
  CHECK(c.stats().bad_entries_removed == 1);
  CHECK(c.get("key A") == std::optional<std::string>("artifact A"));
  c.put("key B", "artifact B");
  CHECK(c.get("key B") == std::optional<std::string>("artifact B"));
}

TEST_CASE("disk cache: a corrupt byte makes a miss and removes the entry", "[runtime]") {
  TempDir tmp;
  DiskCache c(tmp.path());
  const std::string art = artifact_for("corrupt me") + artifact_for("more");
  c.put("k", art);
  const std::string path = c.entry_path("k");
  const std::string good = read_file(path);
  REQUIRE(good.size() > 64);

  SECTION("a byte in the middle") {
    std::string bad = good;
    bad[bad.size() / 2] ^= 0x5a;
    write_file(path, bad);
    CHECK(!c.get("k").has_value());
    CHECK(!fs::exists(path));
    CHECK(c.stats().bad_entries_removed == 1);
  }
  SECTION("the magic") {
    std::string bad = good;
    bad[7] = '\x02';  // a future format version
    write_file(path, bad);
    CHECK(!c.get("k").has_value());
    CHECK(!fs::exists(path));
  }
  SECTION("the content checksum (last 4 bytes)") {
    std::string bad = good;
    bad[bad.size() - 2] ^= 1;
    write_file(path, bad);
    CHECK(!c.get("k").has_value());
    CHECK(!fs::exists(path));
  }
  SECTION("every single byte of a small entry: a miss or exactly the right bytes") {
    c.put("small", "tiny artifact");
    const std::string small_path = c.entry_path("small");
    const std::string small = read_file(small_path);
    int misses = 0;
    for (size_t i = 0; i < small.size(); ++i) {
      for (unsigned char flip : {0x01, 0x80, 0xff}) {
        std::string bad = small;
        bad[i] = static_cast<char>(bad[i] ^ flip);
        write_file(small_path, bad);
        std::optional<std::string> got = c.get("small");
        if (got) {
          CHECK(*got == "tiny artifact");  // e.g. a flip in an unused header bit
        } else {
          ++misses;
          CHECK(!fs::exists(small_path));
        }
      }
    }
    CHECK(misses > static_cast<int>(small.size()));  // nearly every flip is detected
  }
  // Afterwards the cache works again for the same key.
  c.put("k", art);
  CHECK(c.get("k") == std::optional<std::string>(art));
}

TEST_CASE("disk cache: truncated entries and trailing bytes are misses", "[runtime]") {
  TempDir tmp;
  DiskCache c(tmp.path());
  const std::string art = artifact_for("truncate me");
  c.put("k", art);
  const std::string path = c.entry_path("k");
  const std::string good = read_file(path);
  for (size_t len : {size_t(0), size_t(4), size_t(8), size_t(9), size_t(13), good.size() / 2, good.size() - 4,
                     good.size() - 1}) {
    INFO("truncated to " << len << " of " << good.size() << " bytes");
    write_file(path, good.substr(0, len));
    CHECK(!c.get("k").has_value());
    CHECK(!fs::exists(path));
  }
  write_file(path, good + "junk");
  CHECK(!c.get("k").has_value());
  CHECK(!fs::exists(path));
  write_file(path, good);
  CHECK(c.get("k") == std::optional<std::string>(art));
  // A directory where the entry should be is a miss too, not a crash.
  fs::remove(path);
  fs::create_directory(path);
  CHECK(!c.get("k").has_value());
}

TEST_CASE("disk cache: concurrent processes writing the same and different keys", "[runtime]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/shared";
  constexpr int kProcs = 3, kRounds = 50;
  std::vector<pid_t> kids;
  std::fflush(stdout), std::fflush(stderr);
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The child: no Catch2 here; the exit status reports the first wrong read.
      DiskCache c(dir);
      if (!c.enabled()) ::_exit(3);
      for (int r = 0; r < kRounds; ++r) {
        std::string same = "shared key " + std::to_string(r % 7);
        std::string mine = "process " + std::to_string(p) + " key " + std::to_string(r);
        c.put(same, artifact_for(same));
        c.put(mine, artifact_for(mine));
        // Read the shared keys, our own, and other processes' (maybe not written yet).
        std::vector<std::string> keys = {same, mine, "shared key " + std::to_string((r + 3) % 7)};
        for (int q = 0; q < kProcs; ++q) keys.push_back("process " + std::to_string(q) + " key " + std::to_string(r));
        for (const std::string& k : keys) {
          std::optional<std::string> got = c.get(k);
          if (got && *got != artifact_for(k)) ::_exit(1);  // a wrong artifact: the one real failure
        }
        if (!c.get(mine)) ::_exit(2);  // what we wrote ourselves is there (nobody deletes good entries)
      }
      ::_exit(c.stats().bad_entries_removed == 0 ? 0 : 4);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("child exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status)));
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  DiskCache c(dir);
  for (int r = 0; r < 7; ++r) {
    std::string k = "shared key " + std::to_string(r);
    CHECK(c.get(k) == std::optional<std::string>(artifact_for(k)));
  }
  for (int p = 0; p < kProcs; ++p)
    for (int r = 0; r < kRounds; ++r) {
      std::string k = "process " + std::to_string(p) + " key " + std::to_string(r);
      CHECK(c.get(k) == std::optional<std::string>(artifact_for(k)));
    }
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    CHECK(e.path().extension() == ".tlec");  // no temporary file is left behind
    ++files;
  }
  CHECK(files == 7 + kProcs * kRounds);
}

TEST_CASE("disk cache: an unusable directory disables the cache without throwing", "[runtime]") {
  TempDir tmp;
  write_file(tmp.path() + "/a-file", "x");
  std::optional<DiskCache> c;
  REQUIRE_NOTHROW(c.emplace(tmp.path() + "/a-file/cache"));  // a regular file in the path
  CHECK(!c->enabled());
  CHECK_NOTHROW(c->put("k", "v"));
  CHECK(!c->get("k").has_value());
  DiskCache also(tmp.path() + "/a-file");  // a file, not a directory
  CHECK(!also.enabled());
  CHECK(DiskCache::warnings_printed() == 1);  // one warning per process, however many failures
  DiskCache none("");
  CHECK(!none.enabled());

  if (::geteuid() != 0) {  // root writes anywhere: a read-only directory only stops other users
    fs::create_directory(tmp.path() + "/ro");
    ::chmod((tmp.path() + "/ro").c_str(), 0555);
    DiskCache ro(tmp.path() + "/ro");
    CHECK(ro.enabled());  // read (a shared cache filled by someone else) ...
    CHECK(!ro.writable());  // ... but not written
    ::chmod((tmp.path() + "/ro").c_str(), 0755);
  }

  // A directory that disappears after the cache was opened: put fails quietly and stops writing.
  DiskCache gone(tmp.path() + "/gone");
  REQUIRE(gone.writable());
  fs::remove_all(tmp.path() + "/gone");
  CHECK_NOTHROW(gone.put("k", "v"));
  CHECK(!gone.writable());
  CHECK_NOTHROW(gone.put("k2", "v"));
  CHECK(gone.stats().write_failures == 1);  // no second attempt
  CHECK(!gone.get("k").has_value());
}

TEST_CASE("disk cache: TLE_CACHE, TLE_CACHE_DIR, XDG_CACHE_HOME and HOME choose the directory", "[runtime]") {
  TempDir tmp;
  {
    EnvVar off("TLE_CACHE", "0");
    EnvVar dir("TLE_CACHE_DIR", tmp.path().c_str());
    CHECK(DiskCache::disabled_by_env());
    auto c = DiskCache::from_env();
    CHECK(!c->enabled());
    c->put("k", "v");
    CHECK(!c->get("k").has_value());
    CHECK(fs::is_empty(tmp.path()));  // nothing written
  }
  {
    EnvVar off("TLE_CACHE", "OFF");
    CHECK(DiskCache::disabled_by_env());
  }
  {
    EnvVar on("TLE_CACHE", "1");
    EnvVar dir("TLE_CACHE_DIR", (tmp.path() + "/explicit").c_str());
    CHECK(!DiskCache::disabled_by_env());
    auto c = DiskCache::from_env();
    CHECK(c->enabled());
    CHECK(c->directory() == tmp.path() + "/explicit");
    c->put("k", "v");
    CHECK(c->get("k") == std::optional<std::string>("v"));
  }
  {
    EnvVar on("TLE_CACHE", nullptr);
    EnvVar dir("TLE_CACHE_DIR", nullptr);
    EnvVar xdg("XDG_CACHE_HOME", (tmp.path() + "/xdg").c_str());
    CHECK(DiskCache::directory_from_env() == tmp.path() + "/xdg/tle");
    EnvVar no_xdg("XDG_CACHE_HOME", nullptr);
    EnvVar home("HOME", (tmp.path() + "/home").c_str());
    CHECK(DiskCache::directory_from_env() == tmp.path() + "/home/.cache/tle");
    EnvVar no_home("HOME", nullptr);
    CHECK(DiskCache::directory_from_env().empty());
  }
}

// ================================================================ GPU (hidden: run with "[.gpu]")

namespace {

// c[i] = a[i] + b[i] for i < n, one element per thread; and reverse_smem: out[i] = i reversed
// through n words of dynamic shared memory. Hand-written for sm_90 (checked with ptxas).
const char* kVaddPtx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry vadd(
    .param .u64 a,
    .param .u64 b,
    .param .u64 c,
    .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mul.wide.u32 %rd4, %r5, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    add.s64 %rd7, %rd3, %rd4;
    ld.global.f32 %f1, [%rd5];
    ld.global.f32 %f2, [%rd6];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd7], %f3;
DONE:
    ret;
}

.extern .shared .align 16 .b8 dsmem[];
.visible .entry reverse_smem(
    .param .u64 out,
    .param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r9, dsmem;
    mov.u32 %r4, %r2;
FILL:
    setp.ge.u32 %p1, %r4, %r1;
    @%p1 bra FILLED;
    shl.b32 %r5, %r4, 2;
    add.u32 %r6, %r9, %r5;
    st.shared.u32 [%r6], %r4;
    add.u32 %r4, %r4, %r3;
    bra FILL;
FILLED:
    bar.sync 0;
    mov.u32 %r4, %r2;
COPY:
    setp.ge.u32 %p2, %r4, %r1;
    @%p2 bra END;
    sub.u32 %r5, %r1, 1;
    sub.u32 %r5, %r5, %r4;
    shl.b32 %r5, %r5, 2;
    add.u32 %r6, %r9, %r5;
    ld.shared.u32 %r7, [%r6];
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r7;
    add.u32 %r4, %r4, %r3;
    bra COPY;
END:
    ret;
}
)PTX";

// A kernel that traps: its failure surfaces at the next synchronization.
const char* kTrapPtx = R"PTX(
.version 8.0
.target sm_90
.address_size 64
.visible .entry boom()
{
    trap;
    ret;
}
)PTX";

}  // namespace

TEST_CASE("gpu: driver, device facts and backend", "[.gpu]") {
  REQUIRE(cuda::driver() != nullptr);
  EnvVar backend("TLE_BACKEND", nullptr);
  CHECK(default_backend() == Backend::GPU);
  std::optional<DeviceInfo> info = gpu_info();
  REQUIRE(info.has_value());
  CHECK(!info->name.empty());
  CHECK(info->sm >= 70);
  CHECK(info->sm == info->cc_major * 10 + info->cc_minor);
  CHECK(info->num_sms > 0);
  CHECK(info->warp_size == 32);
  CHECK(info->max_threads_per_block == 1024);
  CHECK(info->shared_mem_per_block == 48 * 1024);
  CHECK(info->shared_mem_per_block_optin > 48 * 1024);
  CHECK(info->total_memory_bytes > (size_t(1) << 30));
  CHECK(info->driver_version == cuda::driver()->version);
  if (info->sm >= 90) CHECK(info->cluster_launch);
  CHECK(cuda::ensure_context() != nullptr);
  CHECK(cuda::ensure_context() == cuda::ensure_context());
  CHECK_NOTHROW(synchronize());
}

TEST_CASE("gpu: DeviceBuffer round trip, fill_zero, device copy, moves and size errors", "[.gpu]") {
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * static_cast<float>(i) - 3.0f;
  DeviceBuffer<float> a(host.size());
  CHECK(a.size() == 1000);
  CHECK(a.bytes() == 4000);
  CHECK(a.data() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a.data()) % 256 == 0);
  a.copy_from_host(host.data(), host.size());
  std::vector<float> back(host.size(), -1.0f);
  a.copy_to_host(back.data(), back.size());
  CHECK(back == host);
  CHECK(a.to_host() == host);

  // The pointer is device memory of the current context.
  CUmemorytype type{};
  cuda::check(cuda::driver()->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a.device_ptr()),
              "cuPointerGetAttribute");
  CHECK(type == CU_MEMORYTYPE_DEVICE);

  DeviceBuffer<float> b(host.size());
  b.copy_from(a);
  CHECK(b.to_host() == host);
  b.fill_zero();
  CHECK(b.to_host() == std::vector<float>(host.size(), 0.0f));
  DeviceBuffer<uint8_t> odd(7);  // a size not a multiple of 4 takes the byte memset
  odd.copy_from_host(std::vector<uint8_t>(7, 0xab));
  odd.fill_zero();
  CHECK(odd.to_host() == std::vector<uint8_t>(7, 0));

  DeviceBuffer<float> from_vec(host);
  CHECK(from_vec.to_host() == host);

  float* p = a.data();
  DeviceBuffer<float> moved(std::move(a));
  CHECK(moved.data() == p);
  CHECK(a.data() == nullptr);
  CHECK(a.size() == 0);
  a = std::move(moved);
  CHECK(a.data() == p);
  CHECK(a.to_host() == host);

  int line = __LINE__ + 2;
  try {
    a.copy_from_host(host.data(), 999);
    FAIL("a size mismatch must throw");
  } catch (const UserError& e) {
    CHECK(contains(e.file(), "test_runtime.cpp"));
    CHECK(e.line() == unsigned(line));
    CHECK(contains(e.message(), "999 elements given, but the buffer holds 1000"));
  }
  CHECK_THROWS_AS(b.copy_from(DeviceBuffer<float>(3)), UserError);
  // More than the device has: the driver's error, named.
  CHECK_THROWS_WITH(DeviceBuffer<char>(size_t(1) << 50),
                    Catch::Contains("cuMemAlloc") && Catch::Contains("CUDA_ERROR_OUT_OF_MEMORY"));
  synchronize();
}

TEST_CASE("gpu: PTX loaded through module.cpp runs, dynamic shared memory above 48 KB", "[.gpu]") {
  auto module = cuda::GpuModule::load_ptx(kVaddPtx);
  REQUIRE(module->handle() != nullptr);
  cuda::GpuKernel vadd(module, "vadd");
  CHECK(vadd.name() == "vadd");
  CHECK(vadd.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS) > 0);

  constexpr unsigned n = 100003;
  std::vector<float> x(n), y(n);
  for (unsigned i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 0.25f * static_cast<float>(i % 97);
  DeviceBuffer<float> dx(x), dy(y), dz(n);
  Stream stream;
  CHECK(stream.owned());
  CHECK(stream.handle() != nullptr);
  CUdeviceptr px = dx.device_ptr(), py = dy.device_ptr(), pz = dz.device_ptr();
  unsigned count = n;
  void* params[] = {&px, &py, &pz, &count};
  vadd.launch({(n + 255) / 256}, {256}, 0, static_cast<CUstream>(stream.handle()), params);
  stream.synchronize();
  std::vector<float> z = dz.to_host();
  bool all = true;
  for (unsigned i = 0; i < n; ++i) all = all && z[i] == x[i] + y[i];
  CHECK(all);

  // The same function through a borrowed stream (the caller's), and the legacy default stream.
  Stream borrowed = Stream::wrap(stream.handle());
  CHECK(!borrowed.owned());
  dz.fill_zero();
  vadd.launch({(n + 255) / 256}, {256}, 0, static_cast<CUstream>(borrowed.handle()), params);
  borrowed.synchronize();
  CHECK(dz.to_host()[n - 1] == x[n - 1] + y[n - 1]);
  vadd.launch({(n + 255) / 256}, {256}, 0, nullptr, params);
  synchronize();

  // 64 KB of dynamic shared memory needs the opt-in, which launch() makes.
  cuda::GpuKernel rev(module, "reverse_smem");
  constexpr unsigned words = 16384;
  DeviceBuffer<uint32_t> out(words);
  CUdeviceptr pout = out.device_ptr();
  unsigned nw = words;
  void* rparams[] = {&pout, &nw};
  rev.launch({1}, {256}, words * 4, nullptr, rparams);
  synchronize();
  std::vector<uint32_t> r = out.to_host();
  bool reversed = true;
  for (unsigned i = 0; i < words; ++i) reversed = reversed && r[i] == words - 1 - i;
  CHECK(reversed);
  CHECK(rev.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) >= int(words * 4));

  // Beyond the device's limit: the attribute call fails, naming the kernel.
  size_t too_much = gpu_info()->shared_mem_per_block_optin + 4096;
  CHECK_THROWS_WITH(rev.launch({1}, {256}, too_much, nullptr, rparams),
                    Catch::Contains("cuFuncSetAttribute") && Catch::Contains("reverse_smem"));
  // A block too large: the launch fails, naming the kernel and the dimensions.
  CHECK_THROWS_WITH(vadd.launch({1}, {2048}, 0, nullptr, params),
                    Catch::Contains("cuLaunchKernel") && Catch::Contains("'vadd'") && Catch::Contains("block 2048x1x1"));
  synchronize();  // a rejected launch leaves the context usable

  CHECK_THROWS_WITH(cuda::GpuKernel(module, "no_such_kernel"),
                    Catch::Contains("cuModuleGetFunction") && Catch::Contains("no_such_kernel"));
  // GpuKernel::from_ptx, and the module lives as long as a kernel made from it.
  cuda::GpuKernel k2 = cuda::GpuKernel::from_ptx(kVaddPtx, "vadd");
  std::weak_ptr<cuda::GpuModule> weak = k2.module();
  {
    cuda::GpuKernel copy = k2;
    k2 = cuda::GpuKernel(module, "vadd");
    CHECK(!weak.expired());
  }
  CHECK(weak.expired());
}

TEST_CASE("gpu: bad PTX throws RuntimeError with the JIT log and a dump directory", "[.gpu]") {
  TempDir tmp;
  EnvVar dump("TLE_DUMP_DIR", tmp.path().c_str());
  std::string bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken()\n{\n"
                    "    .reg .b32 %r<2>;\n    add.u32 %r1, %r1, %undefined_register;\n    ret;\n}\n";
  try {
    cuda::GpuModule::load_ptx(bad, {{"kernel.ttir", "tile ir text"}, {"kernel.ll", "llvm ir text"}});
    FAIL("bad PTX must throw");
  } catch (const RuntimeError& e) {
    CHECK(e.call() == "cuModuleLoadDataEx");
    CHECK(contains(e.what(), "CUDA_ERROR_INVALID_PTX"));
    CHECK(!e.log().empty());
    CHECK(contains(e.log(), "undefined_register"));
    CHECK(contains(e.what(), e.log()));
    std::string what = e.what();
    size_t at = what.find("dumped to ");
    REQUIRE(at != std::string::npos);
    std::string dir = what.substr(at + 10, what.find('\n', at) - at - 10);
    INFO(dir);
    CHECK(dir.rfind(tmp.path() + "/tle-dump-", 0) == 0);
    REQUIRE(fs::is_directory(dir));
    CHECK(read_file(dir + "/kernel.ptx") == bad);
    CHECK(contains(read_file(dir + "/jit.log"), "undefined_register"));
    CHECK(read_file(dir + "/kernel.ttir") == "tile ir text");
    CHECK(read_file(dir + "/kernel.ll") == "llvm ir text");
  }
  // A bad cubin is dumped too.
  try {
    cuda::GpuModule::load_cubin(std::string("\x7f" "ELF not really", 15));
    FAIL("a bad cubin must throw");
  } catch (const RuntimeError& e) {
    CHECK(e.call() == "cuModuleLoadDataEx");
    CHECK(contains(e.what(), "loading a cubin failed, dumped to " + tmp.path()));
  }
  // The context is still usable.
  CHECK_NOTHROW(cuda::GpuModule::load_ptx(kVaddPtx));
  synchronize();
}

// Run in a fresh process by the test below: a trapping kernel poisons its context for good.
TEST_CASE("runtime child: an asynchronous fault surfaces at synchronize", "[.runtime_child]") {
  cuda::GpuKernel boom = cuda::GpuKernel::from_ptx(kTrapPtx, "boom");
  boom.launch({1}, {32}, 0, nullptr, nullptr);
  try {
    synchronize();
    FAIL("a trapping kernel must be reported");
  } catch (const RuntimeError& e) {
    CHECK(e.call() == "cuCtxSynchronize");
    CHECK(contains(e.what(), "CUDA_ERROR_"));
  }
}

TEST_CASE("gpu: an asynchronous kernel fault is a RuntimeError at synchronize", "[.gpu]") {
  CHECK(run_child("runtime child: an asynchronous fault surfaces at synchronize", {}) == 0);
}

TEST_CASE("runtime: next_power_of_2 as Triton's, with its range checked", "[runtime]") {
  static_assert(tle::next_power_of_2(1) == 1 && tle::next_power_of_2(2) == 2 && tle::next_power_of_2(3) == 4);
  CHECK(tle::next_power_of_2(0) == 0);  // as triton.next_power_of_2(0)
  CHECK(tle::next_power_of_2(1000) == 1024);
  CHECK(tle::next_power_of_2(1024) == 1024);
  CHECK(tle::next_power_of_2(1025) == 2048);
  CHECK(tle::next_power_of_2(int64_t(1) << 31) == int64_t(1) << 31);
  CHECK(tle::next_power_of_2((int64_t(1) << 31) - 1) == int64_t(1) << 31);
  CHECK(tle::next_power_of_2((int64_t(1) << 31) + 1) == int64_t(1) << 32);
  CHECK(tle::next_power_of_2(int64_t(1) << 62) == int64_t(1) << 62);
  for (int64_t bad : {int64_t(-1), (int64_t(1) << 62) + 1, INT64_MAX}) {
    CAPTURE(bad);
    int line = 0;
    try {
      line = __LINE__; (void)tle::next_power_of_2(bad);
      FAIL("no UserError");
    } catch (const tle::UserError& e) {
      CHECK(e.line() == unsigned(line));
      CHECK_THAT(e.message(), Catch::Contains("outside [0, 2^62]"));
    }
  }
}
