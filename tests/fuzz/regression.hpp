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

}  // namespace fuzz
