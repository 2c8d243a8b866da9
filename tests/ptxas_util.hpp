// tests/ptxas_util.hpp - assembling generated PTX with ptxas in tests (no GPU needed).
#pragma once
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace ptxtest {

/// ptxas from $TLE_PTXAS, /usr/local/cuda/bin/ptxas or PATH; empty when there is none.
inline std::string ptxas_path() {
  if (const char* p = std::getenv("TLE_PTXAS"); p && *p) return p;
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return "/usr/local/cuda/bin/ptxas";
  if (std::system("command -v ptxas >/dev/null 2>&1") == 0) return "ptxas";
  return {};
}

struct PtxasRun {
  int status = 0;
  std::string log;  // ptxas' stdout and stderr
};

/// Runs `ptxas -arch=<arch> <flags>` on `ptx` in a fresh temporary directory (removed after);
/// `ptxas` must be non-empty.
inline PtxasRun run_ptxas(const std::string& ptxas, const std::string& ptx, const std::string& arch,
                          const std::string& flags) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "tle-ptx-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  std::ofstream(dir / "k.ptx") << ptx;
  const std::string cmd = ptxas + " -arch=" + arch + " " + flags + " " + (dir / "k.ptx").string() + " -o " +
                          (dir / "k.cubin").string() + " > " + (dir / "log").string() + " 2>&1";
  PtxasRun r;
  r.status = std::system(cmd.c_str());
  std::ifstream in(dir / "log");
  r.log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (r.status == 0) CHECK(fs::file_size(dir / "k.cubin") > 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

/// Assembles `ptx` with `ptxas -arch=<arch>`; a failure is a failed check carrying ptxas' log and
/// the start of the PTX. Without ptxas the check is skipped with a warning.
inline void assemble(const std::string& what, const std::string& ptx, const std::string& arch = "sm_90a") {
  static const std::string ptxas = ptxas_path();
  if (ptxas.empty()) {
    WARN("ptxas not found ($TLE_PTXAS, /usr/local/cuda/bin/ptxas, PATH): " << what << " not assembled");
    return;
  }
  PtxasRun r = run_ptxas(ptxas, ptx, arch, "");
  if (r.status != 0)
    FAIL_CHECK("ptxas -arch=" << arch << " failed on " << what << " (status " << r.status << "):\n"
                              << r.log.substr(0, 4000) << "\n--- PTX (first 3000 chars) ---\n"
                              << ptx.substr(0, 3000));
}

/// The log of `ptxas -v -arch=<arch>` on `ptx`; nullopt with a warning when there is no ptxas
/// (`missing` set), nullopt with a failed check when it fails.
inline std::optional<std::string> verbose_log(const std::string& what, const std::string& ptx, const std::string& arch,
                                              bool& missing) {
  static const std::string ptxas = ptxas_path();
  missing = ptxas.empty();
  if (missing) {
    WARN("ptxas not found: " << what << " not inspected");
    return std::nullopt;
  }
  PtxasRun r = run_ptxas(ptxas, ptx, arch, "-v");
  if (r.status != 0) {
    FAIL_CHECK("ptxas -v -arch=" << arch << " on " << what << " (status " << r.status << "):\n" << r.log);
    return std::nullopt;
  }
  return r.log;
}

/// The registers per thread ptxas gives the one entry of `ptx` ("Used N registers" of ptxas -v);
/// -1 (with a warning) without ptxas, 0 (a failed check) when it fails or says nothing.
inline int registers(const std::string& what, const std::string& ptx, const std::string& arch = "sm_90a") {
  bool missing = false;
  const std::optional<std::string> log = verbose_log(what, ptx, arch, missing);
  if (!log) return missing ? -1 : 0;
  const size_t at = log->find("Used ");
  if (at == std::string::npos) {
    FAIL_CHECK("ptxas -v -arch=" << arch << " on " << what << " reports no registers:\n" << *log);
    return 0;
  }
  return std::atoi(log->c_str() + at + 5);
}

/// The spill-store bytes ptxas reports for `ptx` ("N bytes spill stores" of ptxas -v, summed over
/// its entries); -1 (with a warning) without ptxas, 0 (a failed check) when it fails.
inline int spill_store_bytes(const std::string& what, const std::string& ptx, const std::string& arch = "sm_90a") {
  bool missing = false;
  const std::optional<std::string> log = verbose_log(what, ptx, arch, missing);
  if (!log) return missing ? -1 : 0;
  int total = 0;
  const std::string key = " bytes spill stores";
  for (size_t at = log->find(key); at != std::string::npos; at = log->find(key, at + 1)) {
    size_t b = at;
    while (b > 0 && std::isdigit(static_cast<unsigned char>((*log)[b - 1]))) --b;
    total += std::atoi(log->c_str() + b);
  }
  return total;
}

/// How many times `what` occurs in `text` (non-overlapping), e.g. an instruction in a PTX listing.
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace ptxtest
