// src/backend/cpu/program_guard.hpp - running a CPU kernel's programs so that a fault inside them
// (a load from a bad address, say) is reported, not fatal, and giving each thread the scratch
// arena its programs' large tiles live in.
//
// Faults: SIGSEGV, SIGBUS, SIGFPE and SIGILL get one process-wide handler (installed on first use,
// SA_ONSTACK, each thread that runs programs gets an alternate signal stack so that a stack
// overflow is caught too). While a thread runs programs under run_programs(), a fault on it
// jumps back out of the JIT code (siglongjmp, as LLVM's CrashRecoveryContext does) and is returned
// with the signal, the faulting address and the program that was running; on any other thread,
// or outside run_programs(), the handler hands the signal to the disposition installed before tle's
// (a handler, or the default action), so the host program's own crash handling still works. A
// handler the host installs after tle's replaces it, and then faults in kernels are the host's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

namespace tle::cpu::detail {

/// A program stopped by a signal.
struct ProgramFault {
  int signal = 0;
  const void* address = nullptr;  // siginfo's si_addr: the faulting memory address (or instruction)
  int64_t pid = -1;               // linear program id that was running
  /// Set (signal 0) when the program stopped itself through stop_program: why.
  const char* message = nullptr;
};

/// Calls run(ctx, scratch, current_pid), where `scratch` is this thread's arena of at least
/// `scratch_bytes` bytes (64-byte aligned; null when 0) and `current_pid` is the slot the programs
/// write their linear id to before each runs. Returns the fault if a program faulted, after which
/// the remaining programs of this call did not run. Not reentrant on one thread.
std::optional<ProgramFault> run_programs(void (*run)(void* ctx, void* scratch, volatile int64_t* current_pid),
                                         void* ctx, uint64_t scratch_bytes);

/// Stops the program running on this thread under run_programs(), which returns a ProgramFault
/// with signal 0 and `message` (copied into a buffer of this thread that lives until its next
/// stop). For runtime helpers the JIT code calls (a signal_wait that timed out): their frames
/// must hold no object with a destructor. Aborts when no program runs on this thread.
[[noreturn]] void stop_program(const char* message);

/// Installs the fault handler (run_programs does it itself; guarded_copy needs it done first).
void install_fault_handler();

/// Copies `n` bytes from `src` to `dst` under the fault guard: false, with `*fault` filled (pid
/// -1), when an access faulted, and then nothing is left half-done but the copied bytes. For the
/// interpreter, whose loads and stores are C++ code: a fault there must not leave its frames by
/// siglongjmp (their objects would leak), so each access is guarded by itself. The fault handler
/// must be installed (install_fault_handler). Not reentrant on one thread; not inside run_programs.
bool guarded_copy(void* dst, const void* src, size_t n, ProgramFault* fault);

/// "SIGSEGV (invalid memory access)", "SIGBUS (...)", ...
const char* signal_description(int signal);

}  // namespace tle::cpu::detail
