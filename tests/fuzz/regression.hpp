// tests/fuzz/regression.hpp - the checks printed fuzz programs call (fuzz::to_cpp): Catch2
// assertions over harness.hpp's comparisons. Included by regressions.cpp and by the printer check
// that CMake generates (tle_fuzz --printer-check).
#pragma once
#include <catch2/catch.hpp>
#include <tle/tle.hpp>

#include <limits>

#include "fuzz/harness.hpp"

namespace fuzz {

/// Runs launch() on the interpreter and the CPU backend on fresh copies of p's buffers, and
/// requires equal outputs.
inline void expect_backends_agree(const Program& p, const std::function<void(tle::Backend, Memory&)>& launch) {
  std::string diff = backends_agree(p, launch);
  INFO(diff);
  REQUIRE(diff.empty());
}

/// Requires the printed kernel (launch) to compute what trace(p) does, and both backends to agree.
inline void expect_printed_matches(const Program& p, const std::function<void(tle::Backend, Memory&)>& launch) {
  std::string diff = printed_matches(p, launch);
  INFO("the printed kernel differs from the program it was printed from: " << diff);
  REQUIRE(diff.empty());
  expect_backends_agree(p, launch);
}

/// Runs launch() on the interpreter and on the GPU at each config (gpu_agrees) and requires equal
/// outputs (math-function results within their ULP bound). Without a usable GPU the case is
/// skipped with a warning, as other [.gpu] cases are.
inline void expect_gpu_agrees(const Program& p, const std::vector<DeviceConfig>& configs,
                              const std::function<void(tle::Backend, Memory&, DeviceConfig)>& launch) {
  if (!tle::gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  std::string diff = gpu_agrees(p, configs, launch);
  INFO(diff);
  REQUIRE(diff.empty());
}

}  // namespace fuzz
