// src/backend/cpu/cpu_backend.hpp - the CPU backend: tile IR -> host LLVM IR -> O3 -> object code
// -> ORC JIT, and a launcher that runs the grid of programs on a process-wide thread pool. The
// runtime caches the object code on disk (src/runtime/kernel.cpp) as it caches PTX.
//
// Lowering model: every tile value is an array in the kernel's stack frame (one element per tile
// element, row-major; beyond 256 KiB per program the largest arrays live in a per-thread scratch
// arena instead), every op a loop over its elements, which LLVM's vectorizers see as plain
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
  std::string name;                 // the JIT symbol of `entry` (in the kernel's own JITDylib)
  std::string kernel;               // the tile kernel's name (messages)
  uint64_t scratch_bytes = 0;       // per-thread arena each program needs
  std::shared_ptr<void> resources;  // keeps the JIT code alive (its JITDylib)
};

/// A kernel compiled to relocatable object code for this host (what the disk cache stores).
struct Object {
  std::string symbol;          // the entry point's name in the object
  uint64_t scratch_bytes = 0;  // CompiledKernel::scratch_bytes
  std::string bytes;           // the object file (ELF on Linux)
};

/// Lowers `f`, optimizes it (O3 without loop unrolling, for the host CPU and its features;
/// opt_level 0 skips LLVM's IR passes, to test the lowering as written: tests/fuzz) and emits
/// object code. Thread-safe, and compiles run in parallel. Throws tle::RuntimeError naming the
/// failing step ("tle::cpu::lower", "llvm::verifyModule", ...) with LLVM's message;
/// InternalError on malformed IR.
Object compile_object(const ir::Function& f, int opt_level = 3);
/// Links `o` (from compile_object, in this process or an earlier one of the same build on the same
/// host_target()) into the process-wide LLJIT, in a JITDylib of its own, so the same object may be
/// loaded several times. Thread-safe. RuntimeError ("LLJIT::addObjectFile", ...) on failure.
std::shared_ptr<CompiledKernel> load(const Object& o, const std::string& kernel_name);
/// load(compile_object(f, opt_level), f.name).
std::shared_ptr<CompiledKernel> compile(const ir::Function& f, int opt_level = 3);
/// The host the objects are compiled for: target triple, CPU and CPU features (a disk-cache key
/// must hold it: an object for another CPU may use instructions this one lacks).
const std::string& host_target();

/// Host LLVM IR text of `f` after lowering, optimized (O3, as compile() does) or not.
std::string llvm_ir_text(const ir::Function& f, bool optimized);

/// Runs every program of the grid (linear pid = x + gx*(y + gy*z); program_id(axis) is decomposed
/// from it) on the process-wide thread pool, blocking until all are done. A grid with any 0 axis
/// is a no-op; a negative axis, or an axis or a total beyond what i32 program ids allow, throws
/// tle::RuntimeError. Exceptions never escape worker threads (they are rethrown here).
/// A program that faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL; program_guard.hpp) stops the launch:
/// tle::RuntimeError naming the kernel, the program (x, y, z), the signal and the address, and
/// `launched_at` when known; programs not started yet do not run, and the process lives on.
/// `in_order`: run every program on the calling thread in linear-id order instead of spreading
/// them over the thread pool (a device-mesh kernel, whose programs wait for other ranks' programs
/// that their own threads run: tle/mesh.hpp).
void launch(const CompiledKernel& k, void* const* args, const int64_t grid[3], const SrcLoc& launched_at = {},
            bool in_order = false);

}  // namespace tle::cpu
