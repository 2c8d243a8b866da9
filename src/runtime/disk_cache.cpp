// src/runtime/disk_cache.cpp - zstd-compressed, checksummed, atomically written cache entries.
#include "runtime/disk_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

namespace tle::detail {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'E', 'C', 'A', 'C', 'H', '\x01'};
constexpr uint64_t kMaxEntryBytes = uint64_t(1) << 30;  // larger claims are corruption
constexpr int kLevel = 3;                               // zstd's default: fast, good on PTX

std::atomic<int> g_warnings{0};

void warn_once(const std::string& msg) {
  int expected = 0;
  if (g_warnings.compare_exchange_strong(expected, 1)) std::fprintf(stderr, "tle: warning: %s\n", msg.c_str());
}

std::string errno_text(const std::string& what, const std::string& path) {
  return fmt::format("{} {}: {}", what, path, std::strerror(errno));
}

bool read_all(int fd, std::string& out, uint64_t size) {
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const char* p, size_t size) {
  while (size) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= static_cast<size_t>(n);
  }
  return true;
}

void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

/// Random suffix for temporary files: unique across threads and processes.
std::string temp_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(::getpid()) << 32) ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id())};
  return fmt::format("{}-{:016x}", ::getpid(), rng());
}

/// Whether writing `size` bytes to a new file would exceed RLIMIT_FSIZE (ulimit -f) while SIGXFSZ
/// would kill the process: the kernel sends SIGXFSZ on such a write, whose default action ends
/// the process (with a core dump). With SIGXFSZ ignored the write fails with EFBIG instead, which
/// put() handles like any failed write (ENOSPC), so no check is needed then.
bool exceeds_file_size_limit(uint64_t size) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || size <= rl.rlim_cur) return false;
  struct sigaction sa {};
  if (::sigaction(SIGXFSZ, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN) return false;
  return true;
}

}  // namespace

DiskCache::DiskCache() = default;

DiskCache::DiskCache(std::string directory) : dir_(std::move(directory)) {
  if (dir_.empty()) {
    disable("no cache directory (set TLE_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    disable(fmt::format("cannot create {}: {}", dir_, ec.message()));
    return;
  }
  if (!std::filesystem::is_directory(dir_, ec)) {
    disable(fmt::format("{} is not a directory", dir_));
    return;
  }
  if (::access(dir_.c_str(), R_OK | X_OK) != 0) {
    disable(errno_text("cannot read", dir_));
    return;
  }
  enabled_.store(true);
  if (::access(dir_.c_str(), W_OK) != 0) {
    // A read-only cache (one shared, filled by someone else): its entries are still used.
    stop_writing(errno_text("cannot write to", dir_));
    return;
  }
  writable_.store(true);
  remove_stale_temporaries();
}

void DiskCache::disable(const std::string& why) {
  enabled_.store(false);
  writable_.store(false);
  warn_once(fmt::format("disk cache of compiled kernels disabled: {} (set TLE_CACHE_DIR to a writable "
                        "directory, or TLE_CACHE=0 to silence this)",
                        why));
}

void DiskCache::stop_writing(const std::string& why) {
  writable_.store(false);
  warn_once(fmt::format("disk cache of compiled kernels: {}; entries already in {} are still used, but this "
                        "process stores no new ones (set TLE_CACHE_DIR to a writable directory, or TLE_CACHE=0 "
                        "to silence this)",
                        why, dir_));
}

void DiskCache::remove_stale_temporaries() {
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return;
  const time_t now = ::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, ".tmp-", 5) != 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - st.st_mtime < kStaleTemporarySeconds) continue;  // maybe still being written
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) stale_removed_.fetch_add(1);
  }
  ::closedir(d);
}

bool DiskCache::disabled_by_env() {
  const char* v = std::getenv("TLE_CACHE");
  if (!v) return false;
  std::string s = v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "0" || s == "off" || s == "false" || s == "no";
}

std::string DiskCache::directory_from_env() {
  if (const char* d = std::getenv("TLE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tle";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tle";
  return {};
}

std::unique_ptr<DiskCache> DiskCache::from_env() {
  if (disabled_by_env()) return std::make_unique<DiskCache>();
  return std::make_unique<DiskCache>(directory_from_env());
}

DiskCache& DiskCache::global() {
  static std::unique_ptr<DiskCache> cache = from_env();
  return *cache;
}

std::string DiskCache::key_hash(const std::string& key) {
  auto digest = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()));
  std::string hex;
  hex.reserve(64);
  for (uint8_t b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

std::string DiskCache::entry_path(const std::string& key) const {
  return fmt::format("{}/{}.tlec", dir_, key_hash(key));
}

DiskCache::Stats DiskCache::stats() const {
  return {hits_.load(), misses_.load(), bad_.load(), writes_.load(), write_failures_.load(), stale_removed_.load()};
}

int DiskCache::warnings_printed() { return g_warnings.load(); }

std::optional<std::string> DiskCache::get(const std::string& key) {
  if (!enabled()) return std::nullopt;
  const std::string path = entry_path(key);
  // O_NONBLOCK: a FIFO put where an entry belongs must not block the open (it is then refused as
  // not a regular file); it has no effect on reading regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    misses_.fetch_add(1);
    return std::nullopt;
  }
  struct stat st {};
  std::string file;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_size) <= kMaxEntryBytes &&
            read_all(fd, file, static_cast<uint64_t>(st.st_size));
  ::close(fd);

  // Validates the entry; returns the artifact, or nullopt for a bad entry.
  auto decode = [&]() -> std::optional<std::string> {
    if (!ok || file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
    const char* frame = file.data() + sizeof kMagic;
    size_t frame_size = file.size() - sizeof kMagic;
    unsigned long long content = ZSTD_getFrameContentSize(frame, frame_size);
    if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN || content > kMaxEntryBytes ||
        content < 8)
      return std::nullopt;
    // The frame must fill the rest of the file exactly: catches truncation and trailing bytes.
    size_t compressed = ZSTD_findFrameCompressedSize(frame, frame_size);
    if (ZSTD_isError(compressed) || compressed != frame_size) return std::nullopt;
    std::string plain(content, '\0');
    size_t n = ZSTD_decompress(plain.data(), plain.size(), frame, frame_size);  // verifies the checksum
    if (ZSTD_isError(n) || n != content) return std::nullopt;
    uint64_t key_len = get_u64(plain.data());
    if (key_len > content - 8 || key_len != key.size() || std::memcmp(plain.data() + 8, key.data(), key.size()) != 0)
      return std::nullopt;
    return plain.substr(8 + key_len);
  };
  if (std::optional<std::string> artifact = decode()) {
    hits_.fetch_add(1);
    return artifact;
  }
  // A bad entry: remove it, unless another process has meanwhile renamed a new one into place.
  struct stat now {};
  // (In a read-only directory the unlink fails: the entry stays, and is a miss every time.)
  if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev && !S_ISDIR(now.st_mode))
    ::unlink(path.c_str());
  bad_.fetch_add(1);
  misses_.fetch_add(1);
  return std::nullopt;
}

void DiskCache::put(const std::string& key, std::string_view bytes) {
  if (!writable()) return;
  if (bytes.size() + key.size() + 8 > kMaxEntryBytes) return;  // too large to be read back
  std::string plain;
  plain.reserve(8 + key.size() + bytes.size());
  put_u64(plain, key.size());
  plain += key;
  plain.append(bytes.data(), bytes.size());

  std::string entry(sizeof kMagic + ZSTD_compressBound(plain.size()), '\0');
  std::memcpy(entry.data(), kMagic, sizeof kMagic);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) return;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kLevel);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  size_t n = ZSTD_compress2(cctx, entry.data() + sizeof kMagic, entry.size() - sizeof kMagic, plain.data(), plain.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) {
    write_failures_.fetch_add(1);
    return;
  }
  entry.resize(sizeof kMagic + n);
  if (exceeds_file_size_limit(entry.size())) {
    write_failures_.fetch_add(1);
    stop_writing(fmt::format("an entry of {} bytes exceeds the file size limit (RLIMIT_FSIZE, ulimit -f)", entry.size()));
    return;
  }

  const std::string path = entry_path(key);
  const std::string tmp = fmt::format("{}/.tmp-{}", dir_, temp_suffix());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    write_failures_.fetch_add(1);
    stop_writing(errno_text("cannot create", tmp));
    return;
  }
  bool ok = write_all(fd, entry.data(), entry.size());  // no fsync: see disk_cache.hpp
  std::string why = ok ? "" : errno_text("cannot write", tmp);
  ok = (::close(fd) == 0) && ok;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    why = errno_text("cannot rename into", path);
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    write_failures_.fetch_add(1);
    stop_writing(why.empty() ? errno_text("cannot write", tmp) : why);
    return;
  }
  writes_.fetch_add(1);
}

}  // namespace tle::detail
