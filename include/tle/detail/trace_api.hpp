// tle/detail/trace_api.hpp - the boundary between the header-only front end (tle/tile.hpp) and
// libtle's tracer (src/frontend/). Not for users: everything here may change.
//
// Values cross the boundary as opaque `ir::Value*`. Every function that builds an op takes the
// user's SrcLoc and throws tle::UserError at it when the request is invalid.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tle/detail/enums.hpp"
#include "tle/dtype.hpp"
#include "tle/error.hpp"

namespace tle::ir { struct Value; }

namespace tle::detail {

using V = ir::Value*;
using ShapeVec = std::vector<int64_t>;

/// Every Tile handle is registered with the tracer while it lives, so that device loops and
/// if_ can turn assignments to handles into loop-carried values and if results (the mem2reg idea).
struct HandleBase {
  V v = nullptr;
  HandleBase* prev = nullptr;
  HandleBase* next = nullptr;
  bool attached = false;
};
/// Registers h with the current trace (nothing outside a trace, or if h is registered already).
/// When the trace ends, a handle still registered is detached and its value replaced by a stale
/// marker, so that using it later is a UserError, not a read of freed memory.
void attach(HandleBase* h) noexcept;
void detach(HandleBase* h) noexcept;

/// True while a kernel is being traced on this thread.
bool tracing() noexcept;

// ---- queries
/// The traced shape of v ([] for null); UserError at loc if v's trace has ended.
ShapeVec shape_of_value(V v, const SrcLoc& loc);
/// Throws UserError at loc if v is null (a default-constructed Tile never assigned) or belongs to
/// a trace that has ended (a Tile kept past its kernel's trace).
void require_value(V v, const SrcLoc& loc);

// ---- creation
V constant_int(DType t, int64_t value, const SrcLoc& loc);  // checks that value fits t
V constant_uint(DType t, uint64_t value, const SrcLoc& loc);
V constant_float(DType t, double value, const SrcLoc& loc);  // rounds once to t
V full(const ShapeVec& shape, V scalar, const SrcLoc& loc);
V arange(int64_t start, int64_t end, const SrcLoc& loc);
V program_id(int axis, const SrcLoc& loc);
V num_programs(int axis, const SrcLoc& loc);

// ---- elementwise (operands are broadcast numpy-style and cast to `compute`)
V convert(V x, DType to, const SrcLoc& loc);
V bitcast(V x, DType to, const SrcLoc& loc);
V binary(ir::BinaryOp op, V a, V b, DType compute, const SrcLoc& loc);
V compare(ir::CmpPred p, V a, V b, DType compute, const SrcLoc& loc);
V unary(ir::UnaryOp op, V x, const SrcLoc& loc);
V fma(V a, V b, V c, const SrcLoc& loc);
V select(V cond, V a, V b, DType compute, const SrcLoc& loc);
V addptr(V p, V offset, const SrcLoc& loc);
V hint(V x, int64_t multiple_of, int64_t max_contiguous, const SrcLoc& loc);
/// tle::inline_asm: PTX per element of args (broadcast to one shape, dtypes kept); checks the
/// constraints against the dtypes (src/ir/inline_asm.hpp).
V inline_asm(DType result, const std::string& asm_text, const std::string& constraints, std::vector<V> args,
             bool pure, int pack, const SrcLoc& loc);

// ---- shapes
V broadcast_to(V x, const ShapeVec& shape, const SrcLoc& loc);
V expand_dims(V x, int axis, const SrcLoc& loc);
V reshape(V x, const ShapeVec& shape, const SrcLoc& loc);
V permute(V x, const std::vector<int>& order, const SrcLoc& loc);
V trans(V x, const SrcLoc& loc);  // permute {1, 0} of a 2-D tile
/// Which sub-tile of the grid extract_tile / insert_tile address (tle::TileIndex): static when
/// `values` is empty (`ints`: one linear id, or with `multi` one index per dim), else dynamic
/// (`values`: one integer scalar, the linear id, or with `multi` one per dim).
struct SubTileIndex {
  std::vector<int64_t> ints;
  std::vector<V> values;
  bool multi = false;
};
/// The sub-tile of shape `sub` at `index` of x viewed as a grid of such sub-tiles (docs/semantics.md).
V extract_tile(V x, const SubTileIndex& index, const ShapeVec& sub, const SrcLoc& loc);
/// x with the sub-tile at `index` of the grid of sub's shape replaced by sub.
V insert_tile(V x, V sub, const SubTileIndex& index, const SrcLoc& loc);

// ---- memory
struct MemHints {
  std::string cache;  // "", loads ".ca" ".cg" ".cs" ".lu" ".cv", stores ".wb" ".cg" ".cs" ".wt"
  std::string evict;  // "", "evict_first", "evict_last", "evict_normal" (L1 eviction priority)
  bool is_volatile = false;
  bool is_async = false;  // loads only: may be issued early through cp.async (docs/semantics.md)
};
V load(V ptr, V mask, V other, const MemHints& hints, const SrcLoc& loc);
void store(V ptr, V value, V mask, const MemHints& hints, const SrcLoc& loc);
V atomic_rmw(ir::AtomicOp op, V ptr, V value, V mask, const SrcLoc& loc);
V atomic_cas(V ptr, V cmp, V value, const SrcLoc& loc);

// ---- TLE-Struct (tle/struct.hpp, docs/struct.md)
/// A program-private buffer of `numel` elements of `elem` (shared memory on the GPU) whose first
/// element is aligned to `align` bytes; `shape` is recorded for messages and dumps. Returns the
/// scalar pointer to its first element. UserError at loc inside a region, or when the program's
/// buffers would exceed 232448 bytes.
V local_alloc(DType elem, const ShapeVec& shape, int64_t numel, int64_t align, const SrcLoc& loc);
/// A barrier of the program: its memory accesses before it complete before any after it.
void barrier(const SrcLoc& loc);
/// An asynchronous copy *dst = mask ? *src : 0 per element (cp.async on the GPU): src global
/// pointers, dst pointers into one of the program's buffers, mask broadcast to their shape.
/// UserError at loc for other pointers, shapes that differ or a combine function around it.
void async_copy(V src, V dst, V mask, const SrcLoc& loc);
/// Closes the group of async copies issued since the last commit.
void async_commit(const SrcLoc& loc);
/// Waits until at most `pending` (0..255) committed groups are still in flight.
void async_wait(int64_t pending, const SrcLoc& loc);
/// n mbarriers in a new shared buffer (local_alloc of i64[n]), initialized for `count` arrive
/// statements per phase; returns the pointer to the first. UserError at loc inside a region.
V mbarrier_alloc(int64_t n, int64_t count, const SrcLoc& loc);
/// The program arrives on `bar` (a scalar ptr<i64> from mbarrier_alloc), announcing `tx` bytes.
void mbarrier_arrive(V bar, int64_t tx, const SrcLoc& loc);
/// Waits until the phase of parity `phase` (an integer scalar) of `bar` has completed.
void mbarrier_wait(V bar, V phase, const SrcLoc& loc);
/// The descriptor's block at `offsets` into the buffer view at `dst_base` (whose element
/// pointers, row-major over the block, are `dst_ptrs`), completing its bytes on `bar`; `swizzle`
/// (0, 32, 64, 128) is the view's TMA swizzle span. UserError at loc for a block TMA cannot move or
/// a view of another shape.
void tma_copy(const std::vector<V>& values, const std::vector<int64_t>& block, const std::vector<V>& offsets,
              V dst_base, V dst_ptrs, V bar, int64_t swizzle, const SrcLoc& loc);
/// A register layout for gpu::set_layout (tle/struct.hpp's layout types, flattened). `kind`:
/// "blocked" (size_per_thread, threads_per_warp, warps_per_cta, order: Triton's BlockedEncoding),
/// "mma" (version 2 or 3, warps_per_cta [wm, wn], instr_n: NvidiaMmaEncoding) or "dot_operand"
/// (op_idx, k_width, and its mma parent's version, warps_per_cta, instr_n: DotOperandEncoding);
/// sliced: that layout, of rank x's + 1, with dim slice_dim removed (SliceEncoding).
struct LayoutSpec {
  std::string kind = "blocked";
  bool sliced = false;
  int64_t slice_dim = 0;
  ShapeVec size_per_thread, threads_per_warp, warps_per_cta, order;
  int64_t version = 0, instr_n = 0, op_idx = 0, k_width = 0;
};
/// x, pinned on the GPU to the layout `spec`. UserError at loc for a scalar x or a malformed
/// layout (docs/struct.md, "Explicit layouts"); what depends on the compile (warps, target, the
/// padded shape) is checked by assign_layouts, also at loc.
V set_layout(V x, const LayoutSpec& spec, const SrcLoc& loc);

// ---- reductions, scans, dot
V reduce(V x, int axis, ir::ReduceKind kind, bool keepdims, const SrcLoc& loc);
/// A user combine over n operands: (left values, right values) -> n combined values; left holds the
/// lower indices (docs/semantics.md).
using CombineFn = std::function<std::vector<V>(const std::vector<V>& left, const std::vector<V>& right)>;
std::vector<V> reduce_combine(const std::vector<V>& xs, int axis, bool keepdims, const CombineFn& combine,
                              const SrcLoc& loc);
V scan(V x, int axis, bool reverse, const SrcLoc& loc);  // cumsum
std::vector<V> scan_combine(const std::vector<V>& xs, int axis, bool reverse, const CombineFn& combine,
                            const SrcLoc& loc);
V dot(V a, V b, V acc, ir::Precision precision, const SrcLoc& loc);
V histogram(V x, int64_t bins, V mask, const SrcLoc& loc);
V histogram_ranks(V x, int64_t bins, V mask, const SrcLoc& loc);
/// Stable sort of x along axis (docs/semantics.md, "Sorting"): the first k of the sorted elements
/// (k = 0: all) and their i32 indices in x, in *values and *indices.
void sort(V x, int axis, bool descending, int64_t k, V* values, V* indices, const SrcLoc& loc, const char* what);
/// result[i...] = x[i... with coordinate axis replaced by index[i...]] (0 where out of range).
V gather(V x, V index, int axis, const SrcLoc& loc);

// ---- structured control flow
/// Opens a device loop; returns its induction variable (dtype `index`).
/// num_stages: LoopOptions::num_stages (0: none; else recorded as the loop's `stages` attribute).
V for_begin(V lo, V hi, V step, DType index, const SrcLoc& loc, int num_stages = 0);
/// One role of warp_specialize: its warps (a power of two, 1 to 32), its setmaxnreg register
/// count (0: unchanged; else 24 to 256, a multiple of 8, for whole warpgroups), its body and the
/// position that made it.
struct RoleSpec {
  int64_t warps = 0, max_regs = 0;
  std::function<void()> body;
  SrcLoc loc;
};
/// Traces each role's body into its region of a warp_specialize op, the kernel's last statement.
/// UserError at loc (or the role's position) for a call inside a region, a second call, an empty
/// or malformed role list, a tile made before the call, and in a role: an assignment to a handle
/// declared outside it, a nested call.
void warp_specialize(const std::vector<RoleSpec>& roles, const SrcLoc& loc);
/// Closes the innermost device loop: handles assigned in the body become loop-carried values.
void for_end(const SrcLoc& loc);
/// The loop object died without closing (break, return, or an exception): drop the region and,
/// when no exception is in flight, remember an error for the end of tracing.
void for_abandon(bool exception_in_flight, const SrcLoc& loc);
/// Traces then_fn (and else_fn, may be empty) into an if op; assigned handles become results.
void if_else(V cond, const std::function<void()>& then_fn, const std::function<void()>& else_fn,
             const SrcLoc& loc);

// ---- launch boundary (src/runtime/kernel.cpp)

/// One kernel parameter as the lambda declares it.
struct ParamSpec {
  /// TensorDesc: a tle::TensorDescriptor<T, rank> (tle/tensor_descriptor.hpp).
  enum Kind : uint8_t { Pointer, Scalar, ConstexprInt, ConstexprFloat, ConstexprBool, TensorDesc } kind;
  DType dtype;  // Pointer, TensorDesc: element type; Scalar: its dtype
  bool specialize = true;  // false: JitOptions::do_not_specialize names it (set by kernel_create)
  int rank = 0;            // TensorDesc: number of dimensions
};
/// One host argument as the caller passed it.
struct HostArg {
  enum Kind : uint8_t { Pointer, Int, UInt, Float, Half, BFloat, Bool, TensorDesc } kind;
  DType pointee = DType::f32;  // Pointer, TensorDesc: element type of T* (void* gives ptr_untyped = true)
  bool untyped_pointer = false;
  bool device_buffer = false;  // Pointer: from a tle::DeviceBuffer (known device memory)
  const char* type_name = "";  // the C++ type, for messages
  union { const void* p; int64_t i; uint64_t u; double f; uint16_t h; bool b; };
  /// Pointer from a DLPack tensor (tle/dlpack.hpp); p is data + byte_offset. Checked against the
  /// parameter (dtype, alignment, data) when packing and against the backend (device) at launch.
  struct DLPackInfo {
    bool present = false;      // the argument was a DLTensor* / DLManagedTensor*
    bool null_tensor = false;  // the DLTensor* (or DLManagedTensor*) itself was null
    bool null_data = false;    // data is null but the tensor holds elements
    uint8_t code = 0, bits = 0;
    uint16_t lanes = 0;                 // DLDataType
    int32_t device_type = 0, device_id = 0;  // DLDevice
  } dl;
  /// TensorDesc (p is the base): shape, strides and block shape in elements, outermost first;
  /// checked when the descriptor was built (check_tensor_descriptor).
  struct DescInfo {
    int rank = 0;
    int64_t shape[5] = {}, strides[5] = {}, block[5] = {};
  } desc;
};
/// What the tracer hands the kernel's typed trampoline: per parameter a value (runtime args)
/// or the constexpr's value.
struct TraceParam {
  V value = nullptr;
  int64_t i = 0;
  double f = 0;
  /// TensorDesc: the IR arguments (tensor map, base, shape[rank], strides[rank]; the innermost
  /// stride is the constant 1) and the block shape.
  std::vector<V> values;
  std::vector<int64_t> block;
};
using TraceThunk = void (*)(const void* fn, const TraceParam* params);

struct Grid3 {
  int64_t x = 1, y = 1, z = 1;
};
/// Launch options from tle::Grid.
struct LaunchOptions {
  void* stream = nullptr;  // CUstream
  int num_warps = 4;
  int num_stages = 3;  // software-pipelining depth of K loops (1: off)
  int maxnreg = 0;     // registers per thread on the GPU (0: no limit)
  int backend = -1;  // -1: default_backend(); else a tle::Backend value
};

class KernelState;  // per tle::jit object: name, parameter specs, specialization cache
/// `do_not_specialize`: parameter indices (JitOptions); each must be an integer scalar or a pointer
/// parameter, else UserError at loc.
KernelState* kernel_create(const char* name, const std::vector<ParamSpec>& params, TraceThunk thunk,
                           const SrcLoc& loc, const std::vector<int>& do_not_specialize = {});
void kernel_destroy(KernelState* k) noexcept;
void kernel_launch(KernelState* k, const void* fn, const Grid3& grid, const LaunchOptions& opts,
                   const HostArg* args, size_t nargs, const SrcLoc& loc);
/// Traces, optimizes and compiles for the GPU (sm_<sm>, sm_90a for 90) without a device; returns
/// the PTX. Used by Kernel::ptx; of `opts` only num_warps, num_stages and maxnreg matter.
std::string kernel_ptx(KernelState* k, const void* fn, int sm, const LaunchOptions& opts, const HostArg* args,
                       size_t nargs, const SrcLoc& loc);
/// Traces (without compiling or running) and returns the IR after the pass pipeline, or right
/// after tracing when `optimized` is false. Used by tests and dumps.
std::string kernel_ir(KernelState* k, const void* fn, const HostArg* args, size_t nargs, bool optimized,
                      const SrcLoc& loc);
/// Number of specializations compiled so far for this kernel (tests use it to check caching).
size_t kernel_num_compiled(const KernelState* k) noexcept;
/// What the compiler made of a specialization (tle::KernelStats, filled by kernel_stats).
struct KernelStatsData {
  int backend = 0;        // a tle::Backend value
  int num_warps = 0;      // warps per program at launch
  int registers = 0;      // registers per thread
  int local_bytes = 0;    // local memory per thread (spills, stack)
  int shared_bytes = 0;   // dynamic shared memory per program
  std::string jit_log;    // the driver JIT's info log
  int conversions = 0, conversions_without_elimination = 0, conversions_through_shared = 0;  // KernelStats
  int64_t conversion_shared_bytes = 0;
  int barriers = 0;
  int loads_reordered = 0;
};
/// Checks the arguments and compiles the specialization a launch with them would use (through
/// the caches), without launching; its facts. Used by Kernel::stats.
KernelStatsData kernel_stats(KernelState* k, const void* fn, const LaunchOptions& opts, const HostArg* args,
                             size_t nargs, const SrcLoc& loc);

}  // namespace tle::detail
