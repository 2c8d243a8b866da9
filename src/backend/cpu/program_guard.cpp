// src/backend/cpu/program_guard.cpp - see program_guard.hpp.
#include "backend/cpu/program_guard.hpp"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include <unistd.h>

namespace tle::cpu::detail {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

/// One run_programs() call in progress on this thread.
struct Guard {
  sigjmp_buf jump;
  volatile int64_t pid = -1;
  volatile int signal = 0;
  const void* volatile address = nullptr;
  const char* volatile message = nullptr;
};

thread_local Guard* t_guard = nullptr;
struct sigaction g_previous[NSIG];  // the dispositions before tle's handler

void on_fault(int sig, siginfo_t* info, void* uctx) {
  if (Guard* g = t_guard) {
    t_guard = nullptr;
    g->signal = sig;
    g->address = info ? info->si_addr : nullptr;
    siglongjmp(g->jump, 1);
  }
  // Not a kernel's fault: what was there before tle's handler decides.
  const struct sigaction& prev = g_previous[sig];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uctx);
    return;
  }
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  // Default action: reinstall it; a fault repeats when the instruction re-executes, a signal sent
  // with kill() is raised again.
  sigaction(sig, &prev, nullptr);
  if (!info || info->si_code <= 0) raise(sig);
}

bool is_ours(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_fault; }

/// Makes on_fault the handler of kSignals, keeping what it replaces in g_previous. Checked at
/// every launch (one sigaction call): a handler installed after tle's (a test framework's, say)
/// is wrapped again, so kernels' faults stay reported and the others still reach it.
void ensure_handler() {
  struct sigaction cur;
  if (sigaction(SIGSEGV, nullptr, &cur) == 0 && is_ours(cur)) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) {
    if (sigaction(sig, nullptr, &cur) != 0 || is_ours(cur)) continue;
    g_previous[sig] = cur;
    sigaction(sig, &sa, nullptr);
  }
}

/// An alternate signal stack for this thread, if it has none, so that the handler runs after a
/// stack overflow. Removed again when the thread ends.
struct AltStack {
  std::unique_ptr<char[]> mem;
  size_t size = 0;
  AltStack() {
    stack_t cur;
    if (sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;  // the thread has one
    long min = sysconf(_SC_SIGSTKSZ);
    size = static_cast<size_t>(min > 0 ? min : 0) + 64 * 1024;
    mem.reset(new char[size]);
    stack_t st{};
    st.ss_sp = mem.get();
    st.ss_size = size;
    if (sigaltstack(&st, nullptr) != 0) mem.reset();
  }
  ~AltStack() {
    if (!mem) return;
    stack_t st{};
    st.ss_flags = SS_DISABLE;
    sigaltstack(&st, nullptr);
  }
};

/// This thread's scratch arena: grows to the largest request, kept for the thread's life.
struct Arena {
  void* p = nullptr;
  uint64_t size = 0;
  ~Arena() { std::free(p); }
  void* get(uint64_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > size) {
      std::free(p);
      p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      size = p ? bytes : 0;
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
};

/// Kept out of line: sigsetjmp's frame holds no C++ object with a destructor.
[[gnu::noinline]] bool run_in(Guard& g, void (*run)(void*, void*, volatile int64_t*), void* ctx, void* scratch) {
  if (sigsetjmp(g.jump, 1) != 0) return false;
  t_guard = &g;
  run(ctx, scratch, &g.pid);
  t_guard = nullptr;
  return true;
}

/// The copy of guarded_copy, out of line so that sigsetjmp's frame holds nothing but it. The
/// signal mask is not saved (that would be a system call per access); the fault path unblocks the
/// signal itself, which the kernel blocked while the handler ran.
[[gnu::noinline]] bool copy_in(Guard& g, void* dst, const void* src, size_t n) {
  if (sigsetjmp(g.jump, 0) != 0) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, g.signal);
    pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
    return false;
  }
  t_guard = &g;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, src, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return true;
}

}  // namespace

void install_fault_handler() { ensure_handler(); }

bool guarded_copy(void* dst, const void* src, size_t n, ProgramFault* fault) {
  Guard g;
  if (copy_in(g, dst, src, n)) return true;
  if (fault) *fault = ProgramFault{g.signal, g.address, -1};
  return false;
}

std::optional<ProgramFault> run_programs(void (*run)(void* ctx, void* scratch, volatile int64_t* current_pid),
                                         void* ctx, uint64_t scratch_bytes) {
  ensure_handler();
  thread_local AltStack alt;
  thread_local Arena arena;
  void* scratch = arena.get(scratch_bytes);
  Guard g;
  if (run_in(g, run, ctx, scratch)) return std::nullopt;
  return ProgramFault{g.signal, g.address, g.pid, g.message};
}

void stop_program(const char* message) {
  thread_local char text[1024];
  Guard* g = t_guard;
  if (!g) std::abort();
  std::snprintf(text, sizeof text, "%s", message);
  t_guard = nullptr;
  g->signal = 0;
  g->message = text;
  siglongjmp(g->jump, 1);
}

const char* signal_description(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error: a misaligned or unbacked memory access)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    case SIGILL: return "SIGILL (illegal instruction)";
    default: return "a signal";
  }
}

}  // namespace tle::cpu::detail
