// tests/file_util.hpp - whole-file reads and writes for tests that inspect or damage files (the
// disk cache's entries).
#pragma once
#include <fstream>
#include <iterator>
#include <string>

namespace filetest {

/// The bytes of the file at `path` (empty when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Replaces the file at `path` with `bytes`.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace filetest
