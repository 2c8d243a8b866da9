// src/runtime/disk_cache.hpp - the on-disk cache of compiled artifacts (PTX, cubin bytes, CPU
// object code).
//
// The caller supplies the key as text that determines the artifact completely: printed IR,
// target, options and versions. The key is hashed with SHA-256 (LLVM's implementation, already
// linked into libtle) to name the entry file, <dir>/<64 hex digits>.tlec. SHA-256 was chosen over
// a pair of 64-bit non-cryptographic hashes because it costs nothing extra here (keys are a few KB
// against compiles of milliseconds) and makes accidental collisions a non-issue; even so the full
// key is stored in each entry and compared on read, so a collision would be a miss, never a wrong
// kernel.
//
// Entry format (version 1):
//   bytes 0..7   magic "TLECACH" followed by the format version byte 0x01
//   bytes 8..    one zstd frame, with its content size and content checksum (XXH64), holding
//                  u64 (little endian) key length | key bytes | artifact bytes
// Entries are written atomically: a temporary file in the same directory (.tmp-PID-RANDOM) is
// written and renamed over the entry, so concurrent processes see either no entry or a whole one,
// and a writer killed mid-write (kill -9, a crash) leaves only its temporary file, which the next
// process to open the cache removes once it is older than kStaleTemporarySeconds. A bad entry
// (wrong magic, truncated, failed decompression or checksum, different key, not a regular file) is
// removed and reported as a miss, never as an error. There is no fsync: a cache entry need not survive a power loss (one
// torn by it fails its checksum and is rebuilt), and the two fsyncs per entry (file, directory)
// added 0.25 ms median, 3 ms worst, to each cold compile on the H200 host (ext4, 2026-11-29).
//
// Environment: TLE_CACHE=0 (or off/false/no) disables the cache; TLE_CACHE_DIR names its
// directory, else $XDG_CACHE_HOME/tle, else $HOME/.cache/tle. A directory that cannot be created
// or read disables the cache; one that can be read but not written (a shared cache filled by
// someone else) is read, and nothing is stored. A write that fails (a full disk, ENOSPC; a file
// size limit, EFBIG or RLIMIT_FSIZE - checked before writing when SIGXFSZ would kill the process;
// a directory removed meanwhile) leaves no file behind and stops this process's writes. Each of
// these prints one warning on stderr per process, at most (never one per launch).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tle::detail {

class DiskCache {
 public:
  /// Counters since construction (for tests and TLE statistics).
  struct Stats {
    uint64_t hits = 0, misses = 0, bad_entries_removed = 0, writes = 0, write_failures = 0;
    uint64_t stale_temporaries_removed = 0;
  };
  /// Temporary files older than this are left by a writer that died: the constructor removes them.
  static constexpr long kStaleTemporarySeconds = 600;

  /// A disabled cache: get() always misses, put() does nothing.
  DiskCache();
  /// A cache in `directory`, created (with parents) if missing. If it cannot be created or read,
  /// the cache is disabled; if it cannot be written, it is read only (one warning to stderr per
  /// process, at most). Removes stale temporary files. Never throws.
  explicit DiskCache(std::string directory);
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  /// A cache configured by the environment as read now (see the top of this file).
  static std::unique_ptr<DiskCache> from_env();
  /// The process-wide cache, configured from the environment on first use.
  static DiskCache& global();
  /// The directory the environment selects (TLE_CACHE_DIR, $XDG_CACHE_HOME/tle, $HOME/.cache/tle),
  /// or "" when none can be determined. Ignores TLE_CACHE.
  static std::string directory_from_env();
  /// Whether TLE_CACHE disables the cache.
  static bool disabled_by_env();

  /// The artifact stored under `key`, or nullopt on a miss (no entry, a bad entry - which is
  /// removed - or a disabled cache). Thread- and process-safe; never throws.
  std::optional<std::string> get(const std::string& key);
  /// Stores `bytes` under `key`, replacing any entry. Thread- and process-safe. A failure to write
  /// stops this process's writes (reads go on; one warning at most); never throws.
  void put(const std::string& key, std::string_view bytes);

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// Whether put() still writes (enabled, the directory writable, no write has failed).
  bool writable() const { return writable_.load(std::memory_order_relaxed); }
  const std::string& directory() const { return dir_; }
  /// The entry file for `key` (whether or not it exists).
  std::string entry_path(const std::string& key) const;
  /// Lower-case hex SHA-256 of `key` (64 characters): the entry's file name without ".tlec".
  static std::string key_hash(const std::string& key);
  Stats stats() const;
  /// How many warnings the disk cache has printed in this process (at most 1).
  static int warnings_printed();

 private:
  void disable(const std::string& why);
  void stop_writing(const std::string& why);
  void remove_stale_temporaries();
  std::string dir_;
  std::atomic<bool> enabled_{false}, writable_{false};
  std::atomic<uint64_t> hits_{0}, misses_{0}, bad_{0}, writes_{0}, write_failures_{0}, stale_removed_{0};
};

/// For parsing the text headers of cached entries: the line of `s` starting at `pos` (without its
/// '\n') into `out`, and `pos` past it; false, changing nothing, when no '\n' follows `pos`.
inline bool next_line(const std::string& s, size_t& pos, std::string& out) {
  const size_t e = s.find('\n', pos);
  if (e == std::string::npos) return false;
  out = s.substr(pos, e - pos);
  pos = e + 1;
  return true;
}

}  // namespace tle::detail
