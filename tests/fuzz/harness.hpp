// tests/fuzz/harness.hpp - differential runs of fuzz programs (issue #12): the same program and
// inputs on the reference interpreter (src/interp) and the CPU backend, plus metamorphic variants
// that must give bit-identical outputs; and a reducer that shrinks a failing program.
//
// Equality: integers and bools bit for bit; floats bit for bit, except that any NaN equals any
// NaN (payloads are not specified: src/interp/interp.hpp). No tolerance is needed: math functions
// (exp, log, sin, pow, ...) are the same libm calls in the interpreter (through fold.cpp) and in
// the CPU backend's code, so they agree exactly on one machine (docs/testing.md).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/program.hpp"
#include "tle/device.hpp"

namespace fuzz {

/// The buffers of a program in host memory (64-byte aligned), with their contents before a launch
/// (fill rules: Buffer::Fill, from the program's seed).
class Memory {
 public:
  explicit Memory(const Program& p);
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  ~Memory();
  void* data(int buffer) const { return bufs_.at(static_cast<size_t>(buffer)).p; }
  size_t bytes(int buffer) const { return bufs_.at(static_cast<size_t>(buffer)).bytes; }
  template <class T> T* ptr(int buffer) const { return static_cast<T*>(data(buffer)); }
  /// True when [addr, addr + n) lies inside one buffer.
  bool contains(uintptr_t addr, size_t n) const;
  /// The kernel argument slots (CPU entry point layout: one 8-byte slot per parameter) and
  /// pointers to them.
  std::vector<void*> args(const Program& p);

 private:
  struct Buf {
    void* p = nullptr;
    size_t bytes = 0;
  };
  std::vector<Buf> bufs_;
  std::vector<uint64_t> slots_;
};

/// "" when every buffer of a and b is equal (integers bitwise, floats bitwise or both NaN), else
/// the first differing element of each differing buffer.
std::string compare(const Program& p, const Memory& a, const Memory& b);

/// Runs f (p traced, optimized or not) on the interpreter, with every access checked to be inside
/// one of m's buffers (a RuntimeError otherwise: a generator bug).
void run_interp(const Program& p, const tle::ir::Function& f, Memory& m);
/// Compiles f with the CPU backend (LLVM's O3 pipeline, or none for opt_level 0) and runs it on m.
void run_cpu(const Program& p, const tle::ir::Function& f, Memory& m, int opt_level = 3);

/// The result of check(): ok, or the stage that failed and what happened.
struct Outcome {
  bool ok = true;
  std::string stage;   ///< "trace", "interp", "passes", "cpu", "cpu-O0", "swap", "dead-branch", "opaque"
  std::string detail;  ///< the exception or the output difference
  std::string variant_of;  ///< for a variant stage: which program failed (to_cpp of it reproduces)
  bool same_failure(const Outcome& o) const { return !ok && !o.ok && stage == o.stage; }
};

struct CheckOptions {
  bool unoptimized_cpu = true;  ///< also the CPU backend at O0: the traced IR, no tle or LLVM IR passes
  bool variants = true;         ///< the three metamorphic variants
  /// Of the four checks above (cpu-O0, swap, dead-branch, opaque) only the one the
  /// program's seed picks (seed % 4): one extra compile per program instead of four (CI budget).
  bool one_extra = false;
};

/// The differential check of one program: the interpreter on the traced IR is the reference;
/// the interpreter after the pass pipeline ("passes"), the CPU backend after it at O3 ("cpu") and
/// the CPU backend at O0 on the traced IR ("cpu-O0") must equal it; so must the CPU backend on each variant
/// (swap_commutative, add_dead_branch, opaque_constants). The first difference is the outcome.
Outcome check(const Program& p, const CheckOptions& o = {});
/// Compile-only check of the GPU backend (no GPU needed): trace, pass pipeline, gpu::compile for
/// sm_90a with `num_warps` warps, then `ptxas -arch=sm_90a` (the executable `ptxas`; empty: no
/// assembly). Stages "gpu-compile" (an exception) and "ptxas" (PTX that does not assemble). p must
/// come from generate() with GenOptions::pow2 (the GPU backend refuses other tile shapes).
Outcome check_gpu_compile(const Program& p, int num_warps, const std::string& ptxas);

/// The program a failing outcome's stage ran (p itself, or the variant).
Program failing_program(const Program& p, const Outcome& o);

/// Shrinks p while `fails` stays true: deletes statements (a deleted definition becomes a
/// constant of its type), unwraps loops and branches, shrinks the grid, drops unused buffers.
Program reduce(const Program& p, const std::function<bool(const Program&)>& fails);

/// Runs `launch(backend, memory)` with Backend::Interp and Backend::CPU on fresh memory each and
/// returns compare() of the outputs ("" when they agree). Regression tests (regressions.cpp) use it
/// through expect_backends_agree.
std::string backends_agree(const Program& p, const std::function<void(tle::Backend, Memory&)>& launch);
/// Runs `launch(Backend::Interp, memory)` (the printed kernel of p) and the interpreter on
/// trace(p), each on fresh memory; compare() of the two ("" when the printed kernel is p).
std::string printed_matches(const Program& p, const std::function<void(tle::Backend, Memory&)>& launch);

}  // namespace fuzz
