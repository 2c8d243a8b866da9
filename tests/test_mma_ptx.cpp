// tests/test_mma_ptx.cpp - dot on tensor cores without a GPU: f16/bf16 matmul kernels
// (tests/gpu_kernels.hpp) compiled with Kernel::ptx must contain mma.sync.aligned.m16n8k16 (as many
// per K-loop iteration as the warp tiles need) and assemble with ptxas for sm_90a and sm_80; dots
// that do not qualify (f32, i8) must not use it. Tag [ptx]; assembling is skipped with a warning
// when ptxas is absent ($TLE_PTXAS, /usr/local/cuda/bin/ptxas, PATH). GPU results: tests/test_gpu.cpp.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "gpu_kernels.hpp"

using namespace tle;
namespace fs = std::filesystem;

namespace {

std::string ptxas_path() {
  if (const char* p = std::getenv("TLE_PTXAS"); p && *p) return p;
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return "/usr/local/cuda/bin/ptxas";
  if (std::system("command -v ptxas >/dev/null 2>&1") == 0) return "ptxas";
  return {};
}

template <class T> T* fake_ptr() { return reinterpret_cast<T*>(uintptr_t{0x20000}); }  // 16-byte aligned

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// Assembles `ptx` for `arch` (e.g. "sm_90a"); a failure is a failed check with ptxas' log.
void assemble(const std::string& what, const std::string& ptx, const std::string& arch) {
  static const std::string ptxas = ptxas_path();
  if (ptxas.empty()) {
    WARN("ptxas not found ($TLE_PTXAS, /usr/local/cuda/bin/ptxas, PATH): " << what << " not assembled");
    return;
  }
  std::string dir_tmpl = (fs::temp_directory_path() / "tle-mma-XXXXXX").string();
  REQUIRE(::mkdtemp(dir_tmpl.data()) != nullptr);
  const fs::path dir = dir_tmpl;
  std::ofstream(dir / "k.ptx") << ptx;
  const std::string cmd = ptxas + " -arch=" + arch + " " + (dir / "k.ptx").string() + " -o " +
                          (dir / "k.cubin").string() + " > " + (dir / "log").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream in(dir / "log");
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    FAIL_CHECK("ptxas -arch=" << arch << " failed on " << what << ":\n" << log.substr(0, 4000));
  } else {
    CHECK(fs::file_size(dir / "k.cubin") > 0);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

/// Compiles the matmul kernel for T with tiles BM x BN x BK and `warps` warps for sm_90a and sm_80;
/// checks the mma.sync count per loop iteration (a multiple of `per_iter`, LLVM may unroll) and
/// assembles.
template <class T> void check_mma_matmul(const char* dtype, int bm, int bn, int bk, int warps, size_t per_iter) {
  auto k = gk::matmul<T>();
  const std::string what = std::string("matmul ") + dtype + " " + std::to_string(bm) + "x" + std::to_string(bn) + "x" +
                           std::to_string(bk) + " w" + std::to_string(warps);
  const std::string instr = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + dtype + "." + dtype + ".f32";
  for (int sm : {90, 80}) {
    const std::string arch = sm == 90 ? "sm_90a" : "sm_80";
    INFO(what << " for " << arch);
    std::string ptx;
    REQUIRE_NOTHROW(ptx = k.ptx(sm, warps, fake_ptr<T>(), fake_ptr<T>(), fake_ptr<float>(), 1000, 1000, 1000, bm, bn, bk));
    CHECK(ptx.find(".target " + arch) != std::string::npos);
    const size_t n = count_of(ptx, "mma.sync.aligned.m16n8k16");
    CHECK(n >= per_iter);
    CHECK(n % per_iter == 0);
    CHECK(count_of(ptx, instr) == n);
    assemble(what, ptx, arch);
  }
}

}  // namespace

TEST_CASE("mma ptx: bf16 and f16 matmuls use mma.sync m16n8k16", "[ptx]") {
  // 64x64 over 4 warps: warps {2, 2}, each warp 2 x 4 tiles of 16x8, K 32 = 2 k16 steps: 16 per iteration.
  check_mma_matmul<bf16>("bf16", 64, 64, 32, 4, 16);
  check_mma_matmul<f16>("f16", 64, 64, 32, 4, 16);
  // 128x128 over 8 warps: warps {2, 4}, each warp 4 x 4 tiles, 2 k16 steps: 32 per iteration.
  check_mma_matmul<bf16>("bf16", 128, 128, 32, 8, 32);
  check_mma_matmul<f16>("f16", 128, 128, 32, 8, 32);
  // 32x16 over 2 warps: warps {2, 1}, each warp 1 x 2 tiles, 1 k16 step: 2 per iteration.
  check_mma_matmul<bf16>("bf16", 32, 16, 16, 2, 2);
}

TEST_CASE("mma ptx: f32 and i8 dots do not use mma.sync", "[ptx]") {
  auto kf = gk::matmul<float>();
  std::string ptx = kf.ptx(90, 4, fake_ptr<float>(), fake_ptr<float>(), fake_ptr<float>(), 1000, 1000, 1000, 64, 64, 32);
  CHECK(ptx.find("mma.sync") == std::string::npos);
  auto ki = gk::matmul<int8_t>();
  ptx = ki.ptx(90, 4, fake_ptr<int8_t>(), fake_ptr<int8_t>(), fake_ptr<int32_t>(), 1000, 1000, 1000, 64, 64, 32);
  CHECK(ptx.find("mma.sync") == std::string::npos);
  // bf16 with a K tile of 8: no k16 step, the shared-memory path.
  auto kb = gk::matmul<bf16>();
  ptx = kb.ptx(90, 4, fake_ptr<bf16>(), fake_ptr<bf16>(), fake_ptr<float>(), 1000, 1000, 1000, 64, 64, 8);
  CHECK(ptx.find("mma.sync") == std::string::npos);
}
