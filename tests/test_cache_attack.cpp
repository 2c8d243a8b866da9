// tests/test_cache_attack.cpp - the disk cache of compiled kernels under attack (issue #12 item 6),
// tag [cache]: many processes compiling the same kernels into one TLE_CACHE_DIR at once, writers
// killed with SIGKILL at random points, truncated entries, flipped bits, a full disk (RLIMIT_FSIZE,
// with SIGXFSZ ignored and not), a read-only directory, an uncreatable one, entries of another
// tle / LLVM / host, forged entries whose checksum is right but whose artifact is not. In every
// case the damage is detected, the entry rebuilt or the cache bypassed with at most one warning per
// process, nothing crashes, and every kernel computes the right numbers (each child process checks
// every element of every launch against a host reference).
//
// The children are tests/cache_helper.cpp (tle_cache_helper, next to tle_tests), started with
// posix_spawn by proctest::Child (helper_process.hpp): a fresh process each.
// The unit tests of DiskCache itself are in test_runtime.cpp.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache_artifact.hpp"
#include "file_util.hpp"
#include "helper_process.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/launch.hpp"

namespace fs = std::filesystem;
using proctest::Child;
using tle::detail::DiskCache;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tle-cache-attack-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
    ::chmod(path_.c_str(), 0755);  // a child running as nobody (--as-nobody) must reach the cache in it
  }
  ~TempDir() {
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(path_, ec))
      if (e.is_directory(ec)) ::chmod(e.path().c_str(), 0755);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Result {
  int status;
  std::string out;
  /// A counter of the child's "stats ..." line (hits, misses, bad, writes, write_failures, stale,
  /// enabled, writable); -1 when absent.
  long long stat(const std::string& name) const {
    size_t p = out.find("stats ");
    if (p == std::string::npos) return -1;
    p = out.find(" " + name + "=", p);
    if (p == std::string::npos) return -1;
    return std::atoll(out.c_str() + p + name.size() + 2);
  }
  int warnings() const {
    int n = 0;
    for (size_t p = out.find("tle: warning:"); p != std::string::npos; p = out.find("tle: warning:", p + 1)) ++n;
    return n;
  }
};

Result run(const std::vector<std::string>& args, const std::string& cache_dir,
           std::map<std::string, std::string> env = {}) {
  env["TLE_CACHE_DIR"] = cache_dir;
  env["TLE_BACKEND"] = "cpu";
  Child c(args, env);
  int st = c.finish();
  return {st, c.output()};
}

struct Files {
  std::vector<std::string> entries, temporaries, other;
};
Files list(const std::string& dir) {
  Files f;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".tlec") f.entries.push_back(e.path().string());
    else if (name.rfind(".tmp-", 0) == 0) f.temporaries.push_back(e.path().string());
    else f.other.push_back(e.path().string());
  }
  return f;
}

using filetest::read_file;
using filetest::write_file;

using cachetest::artifact_for;

/// Waits (at most 20 s) until `dir` holds an entry: a writer started before is then running.
void wait_for_entry(const std::string& dir) {
  for (int i = 0; i < 2000 && list(dir).entries.empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

#define CHECK_CHILD_OK(r)        \
  do {                           \
    INFO("child output:\n" << (r).out); \
    REQUIRE((r).status == 0);    \
  } while (0)

}  // namespace

TEST_CASE("cache attack: 8 processes compile the same kernels into one directory at once", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";  // created by the racing children
  std::vector<std::unique_ptr<Child>> kids;
  for (int p = 0; p < 8; ++p)
    kids.push_back(std::make_unique<Child>(std::vector<std::string>{"run", "0", "4"},
                                           std::map<std::string, std::string>{{"TLE_CACHE_DIR", dir}, {"TLE_BACKEND", "cpu"}}));
  long long writes = 0, hits = 0;
  for (auto& k : kids) {
    Result r{k->finish(), k->output()};
    CHECK_CHILD_OK(r);  // every element of every launch right
    CHECK(r.stat("bad") == 0);  // nobody saw a torn or foreign entry
    CHECK(r.warnings() == 0);
    writes += r.stat("writes");
    hits += r.stat("hits");
  }
  CHECK(writes + hits == 8 * 4);  // each of the 4 specializations: compiled and written, or read
  Files f = list(dir);
  CHECK(f.entries.size() == 4);  // one entry per specialization, however many wrote it
  CHECK(f.temporaries.empty());
  CHECK(f.other.empty());
  Result again = run({"run", "0", "4"}, dir);
  CHECK_CHILD_OK(again);
  CHECK(again.stat("hits") == 4);
  CHECK(again.stat("misses") == 0);
}

TEST_CASE("cache attack: writers killed with SIGKILL at random points leave no bad entry", "[cache]") {
  TempDir tmp;
  std::mt19937 rng(12);  // seeded: the same delays every run
  SECTION("kernel compiles (the global cache of a process launching kernels)") {
    const std::string dir = tmp.path() + "/cache";
    for (int round = 0; round < 4; ++round) {
      Child w({"loop", "100"}, {{"TLE_CACHE_DIR", dir}, {"TLE_BACKEND", "cpu"}});
      wait_for_entry(dir);  // the writer is past its start-up, compiling and storing
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
      w.kill9();
      const int st = w.finish();
      INFO("writer output:\n" << w.output());
      CHECK(st == 128 + SIGKILL);  // it was still writing (no wrong result made it exit)
    }
    // Whatever the writers left is either a whole entry or nothing: the reader finds no bad entry
    // and computes the right numbers with every specialization the writers may have stored.
    Result r = run({"run", "100", "8"}, dir);
    CHECK_CHILD_OK(r);
    CHECK(r.stat("bad") == 0);
    CHECK(r.stat("hits") >= 1);  // the writers did store entries before they died
    CHECK(r.warnings() == 0);
  }
  SECTION("large entries (killed mid-write far more often)") {
    const std::string dir = tmp.path() + "/big";
    const char* rounds_env = std::getenv("TLE_CACHE_KILL_ROUNDS");
    const int rounds = rounds_env ? std::atoi(rounds_env) : 24;
    std::vector<std::string> arts;
    for (int k = 0; k < 16; ++k) arts.push_back(artifact_for("k" + std::to_string(k)));
    DiskCache c(dir);
    int killed = 0, wrong = 0;
    for (int round = 0; round < rounds; ++round) {
      Child w({"put-loop", dir}, {});
      wait_for_entry(dir);
      // Read while the writer writes (a reader must never see a partial entry), for a random
      // time, then kill the writer wherever it is.
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 150);
      do {
        for (int k = 0; k < 16; ++k)
          if (std::optional<std::string> got = c.get("k" + std::to_string(k))) wrong += *got != arts[k];
      } while (std::chrono::steady_clock::now() < until);
      w.kill9();
      killed += w.finish() == 128 + SIGKILL;
    }
    CHECK(killed == rounds);
    CHECK(wrong == 0);
    int present = 0;
    for (int k = 0; k < 16; ++k) {
      const std::string key = "k" + std::to_string(k);
      std::optional<std::string> got = c.get(key);
      if (got) {
        ++present;
        CHECK(*got == arts[k]);  // never a partial or mixed artifact
      }
    }
    CHECK(present >= 1);
    CHECK(c.stats().bad_entries_removed == 0);  // rename is atomic: no torn entry ever appears
    // (With put() writing the entry in place instead of renaming a temporary file, this fails:
    // the reads during the writes find torn entries; see docs/testing.md.)
    // The killed writers' temporary files: young ones are left alone (they may be in use) ...
    Files f = list(dir);
    CHECK(f.other.empty());
    const size_t temps = f.temporaries.size();
    CHECK(DiskCache(dir).stats().stale_temporaries_removed == 0);
    CHECK(list(dir).temporaries.size() == temps);
    // ... and once they are older than kStaleTemporarySeconds, the next process removes them.
    for (auto& t : f.temporaries)
      fs::last_write_time(t, fs::file_time_type::clock::now() - std::chrono::seconds(DiskCache::kStaleTemporarySeconds + 5));
    DiskCache later(dir);
    CHECK(later.stats().stale_temporaries_removed == temps);
    CHECK(list(dir).temporaries.empty());
    INFO(temps << " temporary files were left by the killed writers");
    SUCCEED();
  }
}

TEST_CASE("cache attack: truncated, emptied and bit-flipped entries are rebuilt silently", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path();
  Result cold = run({"run", "0", "4"}, dir);
  CHECK_CHILD_OK(cold);
  CHECK(cold.stat("writes") == 4);
  Files f = list(dir);
  REQUIRE(f.entries.size() == 4);
  std::mt19937 rng(34);
  {
    std::string e0 = read_file(f.entries[0]);
    write_file(f.entries[0], e0.substr(0, e0.size() / 2));  // truncated
    write_file(f.entries[1], "");                          // emptied
    std::string e2 = read_file(f.entries[2]);
    const size_t bit = 8 * 8 + rng() % (8 * (e2.size() - 8));  // a random bit after the magic
    e2[bit / 8] = static_cast<char>(e2[bit / 8] ^ (1 << (bit % 8)));
    write_file(f.entries[2], e2);
    std::string e3 = read_file(f.entries[3]);
    e3[e3.size() - 1] = static_cast<char>(e3[e3.size() - 1] ^ 0x10);  // the checksum itself
    write_file(f.entries[3], e3);
  }
  Result r = run({"run", "0", "4"}, dir);
  CHECK_CHILD_OK(r);  // right numbers from all four specializations
  CHECK(r.stat("bad") == 4);
  CHECK(r.stat("hits") == 0);
  CHECK(r.stat("writes") == 4);  // rebuilt and stored again
  CHECK(r.warnings() == 0);      // a damaged entry is a miss, not something to warn about
  Result warm = run({"run", "0", "4"}, dir);
  CHECK_CHILD_OK(warm);
  CHECK(warm.stat("hits") == 4);
  CHECK(warm.stat("bad") == 0);

  {
    // Random bits all over one entry, one at a time; each time the child must compute the right
    // numbers (a damaged entry is a miss) and never report a hit from a damaged file.
    Files g = list(dir);
    const std::string good = read_file(g.entries[0]);
    for (int t = 0; t < 4; ++t) {
      std::string bad = good;
      const size_t bit = rng() % (8 * bad.size());
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      write_file(g.entries[0], bad);
      Result x = run({"run", "0", "4"}, dir);
      INFO("bit " << bit << " of " << 8 * good.size());
      CHECK_CHILD_OK(x);
      CHECK(x.stat("hits") + x.stat("bad") == 4);  // the damaged one: bad (or, if a flip is harmless, a hit)
      write_file(g.entries[0], good);
    }
  }
}

TEST_CASE("cache attack: a full disk (RLIMIT_FSIZE) bypasses the cache with one warning, leaving no file",
          "[cache]") {
  TempDir tmp;
  SECTION("SIGXFSZ ignored: the writes fail with EFBIG") {
    Result r = run({"--fsize", "64", "--ignore-sigxfsz", "run", "0", "4"}, tmp.path());
    CHECK_CHILD_OK(r);
    CHECK(r.warnings() == 1);  // one, though four kernels were compiled
    CHECK(r.out.find("File too large") != std::string::npos);
    CHECK(r.stat("write_failures") == 1);  // after the first failure the process stops writing
    CHECK(r.stat("writes") == 0);
  }
  SECTION("SIGXFSZ at its default (terminate): tle checks the limit instead of being killed") {
    Result r = run({"--fsize", "64", "run", "0", "4"}, tmp.path());
    CHECK_CHILD_OK(r);  // not 128 + SIGXFSZ
    CHECK(r.warnings() == 1);
    CHECK(r.out.find("RLIMIT_FSIZE") != std::string::npos);
    CHECK(r.stat("writes") == 0);
  }
  Files f = list(tmp.path());
  CHECK(f.entries.empty());
  CHECK(f.temporaries.empty());  // the partly written temporary file is removed
  // With room again, the same directory works.
  Result ok = run({"run", "0", "2"}, tmp.path());
  CHECK_CHILD_OK(ok);
  CHECK(ok.stat("writes") == 2);
  CHECK(ok.warnings() == 0);
}

TEST_CASE("cache attack: a read-only cache directory is read, not written, with one warning", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/ro";
  Result fill = run({"run", "0", "2"}, dir);
  CHECK_CHILD_OK(fill);
  REQUIRE(list(dir).entries.size() == 2);
  REQUIRE(::chmod(dir.c_str(), 0555) == 0);
  // Root writes into a 0555 directory anyway: the child then runs as nobody.
  Result r = run({"--as-nobody", "run", "0", "4"}, dir);
  if (r.status == 4) {
    WARN("could not run the child as uid 65534; the read-only case was not checked");
    return;
  }
  CHECK_CHILD_OK(r);
  CHECK(r.stat("hits") == 2);    // the entries that are there are used
  CHECK(r.stat("misses") == 2);  // the others compiled ...
  CHECK(r.stat("writes") == 0);  // ... and not stored
  CHECK(r.stat("writable") == 0);
  CHECK(r.warnings() == 1);
  CHECK(list(dir).entries.size() == 2);
  CHECK(list(dir).temporaries.empty());
}

TEST_CASE("cache attack: an uncreatable cache directory (under a regular file) disables it with one warning",
          "[cache]") {
  TempDir tmp;
  write_file(tmp.path() + "/file", "x");
  Result r = run({"run", "0", "3"}, tmp.path() + "/file/cache");
  CHECK_CHILD_OK(r);
  CHECK(r.warnings() == 1);
  CHECK(r.out.find("cannot create") != std::string::npos);
  CHECK(r.stat("enabled") == 0);
  CHECK(r.stat("misses") == 0);  // not even looked up
  // An entry path occupied by a FIFO must not block the reader (open would wait for a writer).
  const std::string dir = tmp.path() + "/fifo";
  Result key = run({"key", "7"}, dir);
  CHECK_CHILD_OK(key);
  fs::create_directories(dir);
  REQUIRE(::mkfifo(DiskCache(dir).entry_path(key.out).c_str(), 0644) == 0);
  Result f = run({"run", "7", "1"}, dir);
  CHECK_CHILD_OK(f);
  CHECK(f.stat("bad") == 1);
  CHECK(f.stat("writes") == 1);  // the FIFO was removed and a real entry written
}

TEST_CASE("cache attack: the key holds the tle, LLVM and host versions, and another version's entry is never used",
          "[cache]") {
  const std::string k = tle::detail::cpu_cache_key("IR TEXT");
  const std::string version = tle::detail::tle_build_version();
  CHECK(version.size() > 10);  // the release and a hash of the sources
  CHECK(k.find("\ntle " + version + "\n") != std::string::npos);
  CHECK(k.find("\nllvm 19.") != std::string::npos);
  CHECK(k.find("\nhost x86_64") != std::string::npos);
  CHECK(k.find("IR TEXT") != std::string::npos);
  const std::string g = tle::detail::gpu_cache_key("IR TEXT", "sm_90a", 85, 13000, 8, 3, 0, true, true, false);
  for (const char* part : {"\nllvm 19.", "\ndriver 13000\n", "\ntarget sm_90a ptx85\n", "\nnum_warps 8\n", "\nnum_stages 3\n",
                           "\nmaxnreg 0\n", "\nwarp_specialize 1\n", "\ntma 1\n", "\nreorder_loads 0\n"})
    CHECK(g.find(part) != std::string::npos);
  CHECK(g.find("\ntle " + version + "\n") != std::string::npos);

  TempDir tmp;
  const std::string dir = tmp.path();
  // The child's own key for specialization V=3 (the printed IR after the passes, as a launch has it).
  Result key3 = run({"key", "3"}, dir), key5 = run({"key", "5"}, dir);
  CHECK_CHILD_OK(key3);
  CHECK_CHILD_OK(key5);
  Result cold = run({"run", "5", "1"}, dir);  // stores V=5's object
  CHECK_CHILD_OK(cold);
  DiskCache c(dir);
  std::optional<std::string> obj5 = c.get(key5.out);
  REQUIRE(obj5.has_value());  // the printed key is the one the launch used

  // V=5's object (a wrong kernel for V=3), stored as another build would store V=3's: under V=3's
  // key with another tle version, LLVM version or host. Each is a different key, hence a different
  // entry, and never read by this build; copied over V=3's own entry file it fails the key check.
  auto replace_line = [](std::string key, const std::string& prefix, const std::string& line) {
    size_t p = key.find("\n" + prefix);
    REQUIRE(p != std::string::npos);
    size_t e = key.find('\n', p + 1);
    return key.replace(p + 1, e - p - 1, line);
  };
  int round = 0;
  for (auto [prefix, line] : {std::pair{"tle ", "tle 0.0.9 0123456789abcdef"}, std::pair{"llvm ", "llvm 18.1.8"},
                              std::pair{"host ", "host x86_64-pc-linux-gnu znver9 +avx1024"}}) {
    INFO("another " << prefix);
    const std::string other = replace_line(key3.out, prefix, line);
    REQUIRE(other != key3.out);
    c.put(other, *obj5);
    Result r = run({"run", "3", "1"}, dir);
    CHECK_CHILD_OK(r);  // right numbers for V=3
    CHECK(r.stat("hits") == (round == 0 ? 0 : 1));  // V=3's own entry (after the first round)
    fs::remove(c.entry_path(key3.out));
    fs::copy_file(c.entry_path(other), c.entry_path(key3.out));  // the foreign entry at our path
    Result r2 = run({"run", "3", "1"}, dir);
    CHECK_CHILD_OK(r2);
    CHECK(r2.stat("bad") == 1);  // the key stored in it differs: removed, rebuilt
    CHECK(r2.stat("writes") == 1);
    ++round;
  }
}

TEST_CASE("cache attack: forged entries (right checksum and key, bad artifact) are recompiled", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path();
  Result key = run({"key", "9"}, dir);
  CHECK_CHILD_OK(key);
  Result cold = run({"run", "9", "1"}, dir);
  CHECK_CHILD_OK(cold);
  DiskCache c(dir);
  const std::optional<std::string> good = c.get(key.out);
  REQUIRE(good.has_value());
  REQUIRE(good->rfind("TLECPU1\n", 0) == 0);
  // The artifact: "TLECPU1\n" symbol "\n" scratch_bytes "\n" object code.
  const size_t sym_end = good->find('\n', 8), scratch_end = good->find('\n', sym_end + 1);
  const std::string symbol = good->substr(8, sym_end - 8), object = good->substr(scratch_end + 1);
  std::mt19937 rng(56);
  std::string noise(object.size(), '\0');
  for (char& ch : noise) ch = static_cast<char>(rng());
  const std::vector<std::pair<const char*, std::string>> forged = {
      {"garbage object", "TLECPU1\n" + symbol + "\n0\n" + noise},
      {"ELF header, garbage after", "TLECPU1\n" + symbol + "\n0\n" + object.substr(0, 64) + noise.substr(64)},
      {"object truncated", "TLECPU1\n" + symbol + "\n0\n" + object.substr(0, object.size() / 2)},
      {"no object", "TLECPU1\n" + symbol + "\n0\n"},
      {"symbol absent from the object", "TLECPU1\ntle_not_there\n0\n" + object},
      {"absurd scratch size", "TLECPU1\n" + symbol + "\n1152921504606846976\n" + object},
      {"scratch not a number", "TLECPU1\n" + symbol + "\nlots\n" + object},
      {"another artifact kind", "TLEGPU2\n" + symbol + "\n0\n4\n\n.version 8.5\n"},
      {"empty", ""},
  };
  for (auto& [what, bytes] : forged) {
    INFO(what);
    c.put(key.out, bytes);
    Result r = run({"run", "9", "1"}, dir);
    CHECK_CHILD_OK(r);  // right numbers: recompiled, not run from the forged entry
    CHECK(r.stat("writes") == 1);  // and the entry replaced by a good one
    CHECK(c.get(key.out) == good);
  }
}

TEST_CASE("cache attack: the NVRTC PTX of raw kernels through a damaged cache (no GPU needed)", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path();
  Result cold = run({"raw-ptx"}, dir);
  if (cold.status == 3 && cold.out.find("nvrtc") != std::string::npos) {
    WARN("NVRTC is not usable here; the raw-kernel PTX cache was not checked:\n" << cold.out);
    return;
  }
  CHECK_CHILD_OK(cold);
  CHECK(cold.stat("writes") == 1);
  const std::string ptx_line = cold.out.substr(0, cold.out.find('\n'));
  REQUIRE(ptx_line.rfind("ptx ", 0) == 0);
  Files f = list(dir);
  REQUIRE(f.entries.size() == 1);
  std::string e = read_file(f.entries[0]);
  e[e.size() / 2] = static_cast<char>(e[e.size() / 2] ^ 0x04);
  write_file(f.entries[0], e);
  Result r = run({"raw-ptx"}, dir);
  CHECK_CHILD_OK(r);
  CHECK(r.out.substr(0, r.out.find('\n')) == ptx_line);  // the same PTX, compiled again
  CHECK(r.stat("bad") == 1);
  CHECK(r.stat("writes") == 1);
  Result warm = run({"raw-ptx"}, dir);
  CHECK_CHILD_OK(warm);
  CHECK(warm.out.substr(0, warm.out.find('\n')) == ptx_line);
  CHECK(warm.stat("hits") == 1);
}
