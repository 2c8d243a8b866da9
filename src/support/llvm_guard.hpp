// src/support/llvm_guard.hpp - LLVM's fatal errors as return values instead of process exits.
//
// LLVM reports some failures by llvm::report_fatal_error, which calls the installed fatal-error
// handler and then exits or aborts the process: an instruction-selection failure of the NVPTX
// back end ("Cannot select", as fuzzer seed 805 found) would end the host program. tle installs one
// process-wide handler (on first use; LLVM is linked into libtle privately, so the handler is
// libtle's own). While a thread runs code under catch_llvm_fatal_errors, a fatal error on that
// thread jumps back out (siglongjmp, as LLVM's own CrashRecoveryContext does) and the guard returns
// LLVM's reason; anywhere else the handler prints "LLVM ERROR: <reason>" as LLVM does and returns,
// and LLVM ends the process as before.
//
// The jump skips the destructors of everything the guarded code had on its stack: it leaks that
// memory. So the guarded code must hold no lock and own nothing but memory (tle guards the
// optimization and code-generation steps of one kernel's private LLVMContext, then throws).
// llvm_unreachable and failed assertions abort without calling the handler and are not caught.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace tle::support {

/// Runs fn(). Returns nullopt when it returns (exceptions it throws propagate), or LLVM's reason
/// when LLVM reports a fatal error on this thread while it runs. Nests (the innermost guard gets
/// the error).
std::optional<std::string> catch_llvm_fatal_errors(const std::function<void()>& fn);

/// llvm::report_fatal_error(reason, false): for the guard's tests (tests do not link LLVM). Takes a
/// C string: a std::string argument would be one more object the jump back leaks.
[[noreturn]] void report_llvm_fatal_error(const char* reason);

}  // namespace tle::support
