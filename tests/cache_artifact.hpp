// tests/cache_artifact.hpp - the artifact the disk-cache attack tests store under a key: shared by
// the helper process that writes it (cache_helper.cpp) and the test that checks what it reads
// back (test_cache_attack.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace cachetest {

/// What put-loop stores under `key`: a function of the key alone, ~1 to 3 MB, poorly
/// compressible, so that writes take long enough to be killed in the middle.
inline std::string artifact_for(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (char c : key) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::string s = "artifact of " + key + "\n";
  const size_t n = (1u << 20) + h % (2u << 20);
  s.reserve(n);
  while (s.size() < n) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    s.push_back(static_cast<char>(h >> 56));
  }
  return s;
}

}  // namespace cachetest
