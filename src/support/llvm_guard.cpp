// src/support/llvm_guard.cpp - see llvm_guard.hpp.
#include "support/llvm_guard.hpp"

#include <llvm/ADT/Twine.h>
#include <llvm/Support/ErrorHandling.h>

#include <csetjmp>
#include <cstdio>
#include <mutex>

namespace tle::support {
namespace {

struct Guard {
  sigjmp_buf jump;
  std::string reason;
  Guard* outer = nullptr;
};
thread_local Guard* t_guard = nullptr;

void on_fatal_error(void*, const char* reason, bool) {
  if (Guard* g = t_guard) {
    g->reason = reason ? reason : "(no reason given)";
    t_guard = g->outer;
    siglongjmp(g->jump, 1);
  }
  std::fprintf(stderr, "LLVM ERROR: %s\n", reason ? reason : "");
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] { llvm::install_fatal_error_handler(&on_fatal_error, nullptr); });
}

}  // namespace

std::optional<std::string> catch_llvm_fatal_errors(const std::function<void()>& fn) {
  install_handler();
  Guard g;
  g.outer = t_guard;
  if (sigsetjmp(g.jump, 0) != 0) return std::move(g.reason);  // t_guard was restored by the handler
  t_guard = &g;
  try {
    fn();
  } catch (...) {
    t_guard = g.outer;
    throw;
  }
  t_guard = g.outer;
  return std::nullopt;
}

void report_llvm_fatal_error(const char* reason) { llvm::report_fatal_error(reason, false); }

}  // namespace tle::support
