// src/backend/cpu/cpu_backend.hpp - the CPU backend: tile IR -> host LLVM IR -> O3 -> ORC JIT, and
// a launcher that runs the grid of programs on a process-wide thread pool.
//
// Lowering model: every tile value is an array in the kernel's stack frame (one element per tile
// element, row-major), every op a loop over its elements, which LLVM's vectorizers see as plain
// loops; values with one element, and splats (constants, broadcast scalars), are SSA registers.
// Masked lanes of load/store/atomics are never accessed.
//
// Supported: every op of src/ir/ops.def, every dtype of tle/dtype.hpp with the arithmetic rules of
// docs/ir.md (f16/bf16 computed in f32 and rounded once per op; float->int casts saturate; integer
// div/rem never trap). Reduce Sum / Scan Cumsum on f16/bf16 accumulate in f32 and round each
// result once; Dot precision TF32x3 is computed like IEEE (fp32 products and sums).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ir/ir.hpp"

namespace tle::cpu {

/// The generated entry point. `args[i]` points at the storage of kernel argument i (entry block
/// argument i): for a ptr argument a `void*` variable (so args[i] is effectively `void**`); for a
/// scalar the value in its dtype's memory format (f16/bf16 as uint16 bits, i1 as one byte 0/1).
/// `grid` holds the grid size on axes 0..2 (each >= 1). The function runs the programs whose linear
/// id pid = x + gx*(y + gy*z) is in [pid_begin, pid_end), one after another, each first storing
/// its pid to *current_pid. `scratch` is the arena of the tiles that do not fit the stack budget
/// (CompiledKernel::scratch_bytes, 64-byte aligned; may be null when that is 0), reused by every
/// program of the call.
using EntryFn = void (*)(void* const* args, const int64_t* grid /*[3]*/, int64_t pid_begin, int64_t pid_end,
                         void* scratch, volatile int64_t* current_pid);

/// A JIT-compiled kernel. Copies share the code; it is freed from the JIT with the last copy.
struct CompiledKernel {
  EntryFn entry = nullptr;
  std::string name;                 // the unique JIT symbol of `entry`
  std::string kernel;               // the tile kernel's name (messages)
  uint64_t scratch_bytes = 0;       // per-thread arena each program needs
  std::shared_ptr<void> resources;  // keeps the JIT code alive (an ORC resource tracker)
};

/// Lowers `f`, optimizes it (O3, host CPU) and JITs it into the process-wide LLJIT. Thread-safe.
/// Throws tle::RuntimeError naming the failing step ("tle::cpu::lower", "llvm::verifyModule",
/// "LLJIT::addIRModule", ...) with LLVM's message; InternalError on malformed IR.
std::shared_ptr<CompiledKernel> compile(const ir::Function& f);

/// Host LLVM IR text of `f` after lowering, optimized (O3, as compile() does) or not.
std::string llvm_ir_text(const ir::Function& f, bool optimized);

/// Runs every program of the grid (linear pid = x + gx*(y + gy*z); program_id(axis) is decomposed
/// from it) on the process-wide thread pool, blocking until all are done. A grid with any 0 axis
/// is a no-op; a negative axis, or an axis or a total beyond what i32 program ids allow, throws
/// tle::RuntimeError. Exceptions never escape worker threads (they are rethrown here).
/// A program that faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL; program_guard.hpp) stops the launch:
/// tle::RuntimeError naming the kernel, the program (x, y, z), the signal and the address, and
/// `launched_at` when known; programs not started yet do not run, and the process lives on.
void launch(const CompiledKernel& k, void* const* args, const int64_t grid[3], const SrcLoc& launched_at = {});

}  // namespace tle::cpu
