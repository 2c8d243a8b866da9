// src/passes/pointer_origin.hpp - where a pointer tile may point: into which of the program's
// shared buffers (local_alloc), or elsewhere (kernel arguments: global memory).
#pragma once
#include <set>
#include <vector>

#include "ir/ir.hpp"

namespace tle::passes {

/// The buffers a pointer value may address. `allocs`: local_alloc ops some element may come from;
/// `global`: some element may come from a kernel argument (global memory); `unknown`: some element
/// comes from where the analysis cannot follow (a pointer loaded from memory, an op it does not
/// know), so it may point anywhere, into every buffer included.
struct PointerOrigin {
  std::set<const ir::Op*> allocs;
  bool global = false;
  /// The kernel arguments (indices of the entry block's arguments) it derives from.
  std::set<unsigned> args;
  bool unknown = false;
  /// May address a shared buffer.
  bool shared() const { return unknown || !allocs.empty(); }
};

/// Follows `p` back through addptr, the shape ops (broadcast, expand_dims, reshape, permute,
/// hint, convert_layout, set_layout, extract_tile, insert_tile), select, the carried values of `for`
/// (initial and yielded values) and the results of `if` (both branches' yields) to the
/// local_alloc ops and kernel arguments it derives from. Constants (a null pointer) add nothing.
/// Inside a loop the tracer is still building (no yield yet), a carried value's origin is its
/// initial value's.
PointerOrigin pointer_origin(const ir::Value* p);

/// The pointer operands through which op may write memory: a store's or an atomic's pointers,
/// an async_copy's or a tma_copy's destination, every pointer given to inline asm or a CUDA call.
std::vector<const ir::Value*> written_pointers(const ir::Op& op);

/// True when the function allocates a shared buffer (local_alloc anywhere in it).
bool has_local_alloc(const ir::Function& f);

}  // namespace tle::passes
