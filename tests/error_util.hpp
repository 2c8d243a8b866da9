// tests/error_util.hpp - the check every user-error test makes: a tle::UserError with the expected
// message, raised at the test's own file and line (tests/test_errors.cpp, test_raw.cpp,
// test_dlpack.cpp, test_inline_asm.cpp).
#pragma once
#include <catch2/catch.hpp>
#include <tle/tle.hpp>

#include <string>
#include <vector>

namespace errtest {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Runs f, which must throw tle::UserError whose message contains every phrase, at a file whose
/// path ends with `file` and at `line` (read after f ran: kernels set it while tracing); what()
/// must say "<file>:<line>: error: ".
template <class F>
void expect_user_error(F&& f, const std::vector<std::string>& phrases, const char* file, const int& line) {
  bool thrown = false;
  try {
    f();
  } catch (const tle::UserError& e) {
    thrown = true;
    INFO("what(): " << e.what());
    for (const auto& p : phrases) CHECK_THAT(e.message(), Catch::Contains(p));
    CHECK(ends_with(e.file(), file));
    CHECK(line != 0);
    CHECK(e.line() == unsigned(line));
    CHECK_THAT(std::string(e.what()), Catch::Contains(":" + std::to_string(line) + ": error: "));
  }
  CHECK(thrown);
}

}  // namespace errtest
