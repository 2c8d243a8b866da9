// src/interp/interp.hpp - the reference interpreter of the tile IR.
//
// Evaluates an ir::Function (traced, or after any passes) element by element, with the rules of
// docs/ir.md and docs/semantics.md and nothing else. Every element is held as its memory bit
// pattern, so loads, stores, selects, shape ops, bitcasts and carried values move bits unchanged
// (NaN payloads included, as on the backends); every arithmetic op decodes its operands into
// fold.hpp's canonical constants (constant_from_bits), applies the scalar folding function that
// constant folding uses (fold_binary, fold_unary, fold_compare, fold_fma, fold_cast) and encodes
// the result (constant_bits). It is slow and obviously right: the third oracle beside the CPU and
// GPU backends (the differential fuzzer in tests/fuzz/ compares them), and `TLE_BACKEND=interp`
// runs any kernel with it.
//
// Where docs/ir.md leaves an order to the backend, the interpreter takes the CPU backend's,
// which docs/ir.md names as the reference order:
//  - programs run one after another in linear id order pid = x + gx * (y + gy * z);
//  - lanes of a load, store or atomic are accessed in row-major order;
//  - reduce and scan combine elements from index 0 upward (a reverse scan from the last), the
//    first element being the initial state; Sum/Cumsum of f16/bf16 accumulate in f32 and round
//    each result once to the dtype; Max/Min/Argmax/Argmin as E02/E03;
//  - dot: acc[m][n] is converted to f32 (i32 for i8 inputs), then for k = 0, 1, ...
//    acc = acc + a[m][k] * b[k][n] with the product and the sum rounded separately in f32
//    (inputs converted exactly to f32; TF32 rounds each input to 10 mantissa bits first;
//    TF32x3 is computed as IEEE, as on the CPU backend); integer products and sums wrap in i32.
// The payload of a NaN that arithmetic makes is not specified (docs/semantics.md): here it is the
// quiet NaN fold.hpp's encoding gives.
#pragma once
#include <cstdint>
#include <functional>

#include "ir/ir.hpp"

namespace tle::interp {

struct Options {
  /// When set, called before every memory access (address, bytes, is_write); returning false
  /// makes run() throw RuntimeError("tle::interp") naming the op, the lane and the address,
  /// before the access. The fuzzer uses it to prove its programs stay inside their buffers.
  std::function<bool(uintptr_t addr, size_t bytes, bool write)> check_access;
  /// When set, run() throws RuntimeError("tle::interp") at the first access that races with
  /// another program's: a byte stored by one program (a plain store) and read, stored or updated
  /// atomically by another, or a byte updated atomically by one and read or stored plainly by
  /// another. Programs run concurrently on the GPU, so such a kernel's result depends on their
  /// order (docs/semantics.md); the interpreter runs them one after another and would hide it.
  /// The fuzzer sets it to prove its programs free of such races. Costs a hash-map entry per byte.
  bool detect_program_races = false;
};

/// Runs every program of the grid of `f` (gx * gy * gz programs; a 0 axis runs nothing), with
/// the kernel arguments laid out as for the CPU backend's entry point (backend/cpu/cpu_backend.hpp):
/// args[i] points at the storage of entry block argument i (a pointer argument: a `void*`
/// variable; a scalar: its value in the dtype's memory format, f16/bf16 as 16 bits, i1 as a
/// byte). Pointers are host addresses, read and written directly.
///
/// Throws UserError at the op for inline_asm and cuda_call (GPU-only code, as the CPU backend
/// does), RuntimeError("tle::interp") for a refused memory access (Options::check_access), an
/// access in the null page or one that faults (each access runs under the CPU backend's fault
/// guard, backend/cpu/program_guard.hpp: an unmapped address ends the launch, not the process) and
/// for IR that breaks docs/ir.md's rules (an op on a dtype it is not defined for, a missing
/// yield), naming the kernel, the op and its traced position.
void run(const ir::Function& f, void* const* args, const int64_t grid[3], const Options& opts = {});

}  // namespace tle::interp
