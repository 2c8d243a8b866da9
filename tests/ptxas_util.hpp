// tests/ptxas_util.hpp - assembling generated PTX with ptxas in tests (no GPU needed).
#pragma once
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ptxtest {

/// ptxas from $TLE_PTXAS, /usr/local/cuda/bin/ptxas or PATH; empty when there is none.
inline std::string ptxas_path() {
  if (const char* p = std::getenv("TLE_PTXAS"); p && *p) return p;
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return "/usr/local/cuda/bin/ptxas";
  if (std::system("command -v ptxas >/dev/null 2>&1") == 0) return "ptxas";
  return {};
}

/// Assembles `ptx` with `ptxas -arch=<arch>`; a failure is a failed check carrying ptxas' log and
/// the start of the PTX. Without ptxas the check is skipped with a warning.
inline void assemble(const std::string& what, const std::string& ptx, const std::string& arch = "sm_90a") {
  namespace fs = std::filesystem;
  static const std::string ptxas = ptxas_path();
  if (ptxas.empty()) {
    WARN("ptxas not found ($TLE_PTXAS, /usr/local/cuda/bin/ptxas, PATH): " << what << " not assembled");
    return;
  }
  std::string tmpl = (fs::temp_directory_path() / "tle-ptx-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  std::ofstream(dir / "k.ptx") << ptx;
  const std::string cmd = ptxas + " -arch=" + arch + " " + (dir / "k.ptx").string() + " -o " +
                          (dir / "k.cubin").string() + " > " + (dir / "log").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream in(dir / "log");
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    FAIL_CHECK("ptxas -arch=" << arch << " failed on " << what << " (status " << rc << "):\n"
                              << log.substr(0, 4000) << "\n--- PTX (first 3000 chars) ---\n"
                              << ptx.substr(0, 3000));
  } else {
    CHECK(fs::file_size(dir / "k.cubin") > 0);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace ptxtest
