// tests/fuzz/harness.hpp - differential runs of fuzz programs (issue #12): the same program and
// inputs on the reference interpreter (src/interp) and the CPU backend, plus metamorphic variants
// that must give bit-identical outputs; and a reducer that shrinks a failing program.
//
// Equality: integers and bools bit for bit; floats bit for bit, except that any NaN equals any
// NaN (payloads are not specified: src/interp/interp.hpp). No tolerance is needed: math functions
// (exp, log, sin, pow, ...) are the same libm calls in the interpreter (through fold.cpp) and in
// the CPU backend's code, so they agree exactly on one machine (docs/testing.md).
//
// The GPU stage (check_device) runs portable programs (GenOptions::portable) through tle's launch
// path on the GPU backend at several num_warps / num_stages. The same equality holds there, except
// in the buffers of math-function results (Buffer::ulp > 0), where libdevice may differ from the
// host's libm by the buffer's ULP bound.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/program.hpp"
#include "tle/detail/trace_api.hpp"
#include "tle/device.hpp"

namespace fuzz {

/// The buffers of a program in host memory (64-byte aligned), with their contents before a launch
/// (fill rules: Buffer::Fill, from the program's seed).
class Memory {
 public:
  /// managed: CUDA managed memory (tle::detail::managed_alloc), for launches on the GPU.
  explicit Memory(const Program& p, bool managed = false);
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
  bool managed_ = false;
};

/// "" when every buffer of a and b is equal (integers bitwise, floats bitwise or both NaN), else
/// the first differing element of each differing buffer. With `ulp_bounds`, a buffer with
/// Buffer::ulp > 0 may differ by up to that many units in the last place per element (ulp_distance;
/// NaN still equals only NaN).
std::string compare(const Program& p, const Memory& a, const Memory& b, bool ulp_bounds = false);
/// The distance of two floats of dtype d (their bits) in units in the last place: how many
/// representable values lie between them, +0.0 and -0.0 counting as one value and infinities as
/// the neighbours of the largest finite values (saturating at INT64_MAX). -1 when exactly one is
/// NaN; 0 when both are.
int64_t ulp_distance(DType d, uint64_t a, uint64_t b);

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

// ---- the GPU stage (issue #12): portable programs, the interpreter against the GPU backend

/// One launch configuration: warps per program and software-pipelining depth of K loops.
struct DeviceConfig {
  int num_warps = 4;
  int num_stages = 3;
};
/// What the GPU stage runs p with: 1, 4 and 8 warps at the default depth 3, and when p has a loop
/// that loads (a K loop, which the GPU pipelines) also depth 1 (no pipelining) at 4 warps and
/// depth 2 at 8.
std::vector<DeviceConfig> device_configs(const Program& p);

/// The TraceThunk of p as a kernel (`fn` is the Program): traces p's statements with the
/// launch's parameter values, as trace() does (trace.cpp).
void trace_thunk(const void* program, const tle::detail::TraceParam* params);

/// Launches p on m through tle's launch path, as a tle::jit kernel with p's parameters would be
/// (tle::detail::kernel_create / kernel_launch: argument packing and checks, specialization,
/// trace, pass pipeline, compile, launch), on `backend` with config c; on the GPU on `stream` (a
/// CUstream; null: the legacy default stream), then waits for the stream, so a fault is a
/// RuntimeError here. On the GPU m must be managed memory. `kernel` is the kernel object to use
/// (kernel_create'd for p); null: a fresh one for this launch.
void run_launch(const Program& p, Memory& m, tle::Backend backend, const DeviceConfig& c, void* stream = nullptr,
                tle::detail::KernelState* kernel = nullptr);

struct DeviceCheckOptions {
  tle::Backend backend = tle::Backend::GPU;  ///< CPU: the same stage on the CPU backend (self-checks)
  void* stream = nullptr;                    ///< CUstream of the launches
  bool cpu = false;                          ///< also the CPU backend at O3, compared exactly (stage "cpu")
  /// Test hook: called on each configuration's outputs before the comparison (tle_fuzz
  /// --plant-mismatch uses it to check the reporting).
  std::function<void(Memory&)> after_launch;
  /// Also the program wrapped in gpu::warp_specialize roles (in_roles), launched once more
  /// (stage "<backend> roles <idle>+<warps>").
  bool roles = true;
};
/// The GPU stage of one portable program: the interpreter on the traced IR is the reference; p
/// launched on o.backend with each config (one kernel object, so one specialization per config)
/// must equal it (compare with ULP bounds). Stages "trace", "interp", "cpu", and "gpu w<W> s<S>"
/// ("cpu w<W> s<S>" on the CPU backend), "gpu roles <idle>+<warps>" for an exception (compile,
/// launch, fault) or a difference.
Outcome check_device(const Program& p, const std::vector<DeviceConfig>& configs, const DeviceCheckOptions& o = {});
/// The GPU stage for a printed kernel (to_cpp(..., gpu = true), regression.hpp; p holds only the
/// buffers): runs `launch(Backend::Interp, memory, {})` as the reference, then
/// `launch(Backend::GPU, managed memory, c)` for each config, waiting for the GPU after each;
/// compare() with ULP bounds of the first that differs, prefixed with its config ("" when all agree).
std::string gpu_agrees(const Program& p, const std::vector<DeviceConfig>& configs,
                       const std::function<void(tle::Backend, Memory&, DeviceConfig)>& launch);

}  // namespace fuzz
