// src/runtime/autotune/tune_cache.cpp - the tuning cache: one text file per (kernel IR, tuning
// key, device, driver, tle version) under <cache dir>/tune/, named by the SHA-256 of that key, and
// the tuning database files of tle::tune_db_export / tune_db_import.
//
// Entry format (text, version 1; docs/autotune.md):
//   tle-tune 1
//   key <the full cache key>
//   kernel <autotune name>
//   ir <IR features, comma separated>
//   shape <key numbers, comma separated>
//   knobs <knob names, comma separated>
//   best <values in knob order, comma separated> <ms>
//   m <values> <ms>                (one line per measured config that ran; pruned ones omitted)
//   sum <SHA-256 of every line above, newlines included>
// Written atomically (temporary file in the same directory, then rename). An entry whose sum,
// header or syntax is wrong is ignored (one notice per process) and overwritten by the next tuning.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/autotune/tune.hpp"
#include "runtime/disk_cache.hpp"

namespace tle::tune {

namespace {
std::string join_nums(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
  return s;
}
std::string values_of(const Entry& e, const Config& c) {
  std::vector<int64_t> v;
  for (auto& k : e.knobs) v.push_back(c.get(k, 0));
  return join_nums(v);
}
bool parse_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end && *end == 0 && std::isfinite(v);
}
std::optional<Config> parse_config(const std::vector<std::string>& knobs, const std::string& s) {
  const auto parts = split(s, ',');
  if (parts.size() != knobs.size()) return std::nullopt;
  std::vector<std::pair<std::string, int64_t>> v;
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t x;
    if (!parse_i64(parts[i], x)) return std::nullopt;
    v.emplace_back(knobs[i], x);
  }
  return Config(std::move(v));
}
std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}
void notice_once(const std::string& msg) {
  static std::atomic<bool> said{false};
  if (said.exchange(true) || quiet()) return;
  std::fprintf(stderr, "tle: autotune: %s\n", msg.c_str());
}
}  // namespace

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t p = 0;
  for (;;) {
    const size_t e = s.find(sep, p);
    out.push_back(s.substr(p, e == std::string::npos ? std::string::npos : e - p));
    if (e == std::string::npos) return out;
    p = e + 1;
  }
}

bool parse_i64(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end && *end == 0;
}

bool quiet() {
  const char* q = std::getenv("TLE_QUIET");
  return q && std::strcmp(q, "1") == 0;
}

std::string serialize(const Entry& e) {
  std::string s = "tle-tune 1\n";
  s += "key " + one_line(e.key) + "\n";
  s += "kernel " + one_line(e.kernel) + "\n";
  std::string ir;
  for (size_t i = 0; i < e.ir.size(); ++i) ir += fmt::format("{}{:.9g}", i ? "," : "", e.ir[i]);
  s += "ir " + ir + "\n";
  s += "shape " + join_nums(e.key_numbers) + "\n";
  std::string knobs;
  for (size_t i = 0; i < e.knobs.size(); ++i) knobs += (i ? "," : "") + e.knobs[i];
  s += "knobs " + knobs + "\n";
  s += fmt::format("best {} {:.9g}\n", values_of(e, e.best), e.best_ms);
  for (auto& [c, ms] : e.measured)
    if (std::isfinite(ms)) s += fmt::format("m {} {:.9g}\n", values_of(e, c), ms);
  s += "sum " + detail::DiskCache::key_hash(s) + "\n";
  return s;
}

std::optional<Entry> parse(const std::string& text) {
  const size_t sum_at = text.rfind("sum ");
  if (sum_at == std::string::npos || (sum_at && text[sum_at - 1] != '\n')) return std::nullopt;
  if (text.substr(sum_at) != "sum " + detail::DiskCache::key_hash(text.substr(0, sum_at)) + "\n") return std::nullopt;
  Entry e;
  size_t pos = 0;
  std::string line;
  auto field = [&](const char* name, std::string& out) {
    if (!detail::next_line(text, pos, line)) return false;
    const std::string pre = std::string(name) + " ";
    if (line.compare(0, pre.size(), pre) != 0) return false;
    out = line.substr(pre.size());
    return true;
  };
  std::string ir, shape, knobs, best;
  if (!detail::next_line(text, pos, line) || line != "tle-tune 1") return std::nullopt;
  if (!field("key", e.key) || !field("kernel", e.kernel) || !field("ir", ir) || !field("shape", shape) ||
      !field("knobs", knobs) || !field("best", best))
    return std::nullopt;
  for (auto& f : split(ir, ',')) {
    double v;
    if (!parse_double(f, v)) return std::nullopt;
    e.ir.push_back(static_cast<float>(v));
  }
  for (auto& f : split(shape, ',')) {
    int64_t v;
    if (!parse_i64(f, v)) return std::nullopt;
    e.key_numbers.push_back(v);
  }
  e.knobs = split(knobs, ',');
  auto config_and_time = [&](const std::string& s, Config& c, double& ms) {
    const size_t sp = s.rfind(' ');
    if (sp == std::string::npos) return false;
    auto cfg = parse_config(e.knobs, s.substr(0, sp));
    if (!cfg || !parse_double(s.substr(sp + 1), ms)) return false;
    c = std::move(*cfg);
    return true;
  };
  if (!config_and_time(best, e.best, e.best_ms)) return std::nullopt;
  while (pos < sum_at) {
    if (!detail::next_line(text, pos, line) || line.compare(0, 2, "m ") != 0) return std::nullopt;
    Config c;
    double ms;
    if (!config_and_time(line.substr(2), c, ms)) return std::nullopt;
    e.measured.emplace_back(std::move(c), ms);
  }
  return e;
}

std::string tune_directory() {
  if (detail::DiskCache::disabled_by_env()) return "";
  const std::string d = detail::DiskCache::directory_from_env();
  return d.empty() ? "" : d + "/tune";
}

namespace {
std::string entry_file(const std::string& dir, const std::string& key) {
  return dir + "/" + detail::DiskCache::key_hash(key) + ".tune";
}
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
bool make_dirs(const std::string& dir) {
  for (size_t p = 1; p <= dir.size(); ++p)
    if (p == dir.size() || dir[p] == '/') {
      const std::string d = dir.substr(0, p);
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  return true;
}
/// Writes bytes to path through a temporary file in its directory and a rename.
bool write_atomic(const std::string& dir, const std::string& path, const std::string& bytes) {
  if (!make_dirs(dir)) return false;
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}/.tmp-{}-{}-{}", dir, ::getpid(), counter++, std::random_device{}());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = ::close(fd) == 0 && done == bytes.size() && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}
}  // namespace

std::optional<Entry> load(const std::string& dir, const std::string& key) {
  if (dir.empty()) return std::nullopt;
  const std::string path = entry_file(dir, key);
  auto text = read_file(path);
  if (!text) return std::nullopt;
  auto e = parse(*text);
  if (!e) {
    notice_once(fmt::format("ignoring the damaged tuning cache entry {} (it is retuned and rewritten)", path));
    return std::nullopt;
  }
  if (e->key != one_line(key)) return std::nullopt;  // a hash collision: a miss
  return e;
}

bool store(const std::string& dir, const Entry& e) {
  if (dir.empty()) return false;
  if (write_atomic(dir, entry_file(dir, e.key), serialize(e))) return true;
  notice_once(fmt::format("cannot write the tuning cache in {} ({}); tuned configs are kept in memory only", dir,
                          std::strerror(errno)));
  return false;
}

std::vector<Entry> load_all(const std::string& dir) {
  std::vector<Entry> out;
  if (dir.empty()) return out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  std::vector<std::string> names;
  while (dirent* de = ::readdir(d)) {
    const std::string n = de->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".tune") == 0) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());  // deterministic training data
  for (auto& n : names)
    if (auto text = read_file(dir + "/" + n))
      if (auto e = parse(*text)) out.push_back(std::move(*e));
  return out;
}

}  // namespace tle::tune

namespace tle {

size_t tune_db_export(const std::string& path) {
  const auto entries = tune::load_all(tune::tune_directory());
  std::string db = "tle-tune-db 1\n";
  for (auto& e : entries) {
    const std::string s = tune::serialize(e);
    db += fmt::format("entry {}\n", s.size()) + s;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !f.write(db.data(), static_cast<std::streamsize>(db.size())) || !f.flush())
    throw RuntimeError("tle::tune_db_export", fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  return entries.size();
}

size_t tune_db_import(const std::string& path) {
  auto text = tune::read_file(path);
  if (!text) throw RuntimeError("tle::tune_db_import", fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  size_t pos = 0;
  std::string line;
  if (!detail::next_line(*text, pos, line) || line != "tle-tune-db 1")
    throw RuntimeError("tle::tune_db_import", fmt::format("{} is not a tle tuning database (no 'tle-tune-db 1' "
                                                          "header); write one with tle::tune_db_export",
                                                          path));
  const std::string dir = tune::tune_directory();
  if (dir.empty())
    throw RuntimeError("tle::tune_db_import", "the tuning cache is disabled (TLE_CACHE=0) or has no directory "
                                              "(set TLE_CACHE_DIR)");
  size_t n = 0, bad = 0;
  while (detail::next_line(*text, pos, line)) {
    int64_t len = -1;
    if (line.compare(0, 6, "entry ") != 0 || !tune::parse_i64(line.substr(6), len) || len < 0 ||
        pos + static_cast<size_t>(len) > text->size()) {
      ++bad;
      break;  // the framing is lost: nothing after this is trustworthy
    }
    auto e = tune::parse(text->substr(pos, static_cast<size_t>(len)));
    pos += static_cast<size_t>(len);
    if (!e) {
      ++bad;
      continue;
    }
    n += tune::store(dir, *e);
  }
  if (bad) std::fprintf(stderr, "tle: autotune: %zu damaged entr%s of %s skipped\n", bad, bad == 1 ? "y" : "ies",
                        path.c_str());
  return n;
}

}  // namespace tle
