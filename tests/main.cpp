// tests/main.cpp - Catch2's main, plus the test backend switch (TLE_TEST_BACKEND, see ops_util.hpp):
// in gpu mode every launch without .backend(...) goes to the GPU (TLE_BACKEND=gpu) and waits for its
// kernel (TLE_LAUNCH_BLOCKING=1), so that the numerical tests read results right after a launch.
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops_util.hpp"

int main(int argc, char** argv) {
  const char* mode = std::getenv("TLE_TEST_BACKEND");
  const bool interp = mode && (std::strcmp(mode, "interp") == 0 || std::strcmp(mode, "INTERP") == 0);
  if (mode && *mode && std::strcmp(mode, "cpu") != 0 && std::strcmp(mode, "CPU") != 0 && !opstest::gpu_mode() &&
      !interp) {
    std::fprintf(stderr, "tle_tests: TLE_TEST_BACKEND=%s: expected cpu, gpu or interp\n", mode);
    return 2;
  }
  // interp: launches without .backend(...) run on the reference interpreter (host memory, as on
  // the CPU), so the numerical tests check it against their references.
  if (interp) ::setenv("TLE_BACKEND", "interp", 1);
  if (opstest::gpu_mode()) {
    ::setenv("TLE_BACKEND", "gpu", 1);
    ::setenv("TLE_LAUNCH_BLOCKING", "1", 1);  // results are read on the host right after each launch
    try {
      if (tle::default_backend() != tle::Backend::GPU) throw tle::RuntimeError("default_backend", "not the GPU");
      auto info = tle::gpu_info();
      if (!info) throw tle::RuntimeError("gpu_info", "no device 0");
      std::fprintf(stderr, "tle_tests: TLE_TEST_BACKEND=gpu: kernels run on %s (sm_%d), managed memory\n",
                   info->name.c_str(), info->sm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tle_tests: TLE_TEST_BACKEND=gpu needs a usable CUDA driver and GPU: %s\n", e.what());
      return 2;
    }
  }
  return Catch::Session().run(argc, argv);
}
