// src/backend/cpu/lower.hpp - internals of the tile IR -> LLVM IR lowering (CPU backend).
//
// One entry point, lower_function. The Lowerer keeps, for every IR value, a Tile: either a pointer
// to a [numel x T] array in the kernel body's frame (allocas live in the entry block; the largest
// move to a per-thread scratch arena when they exceed kStackArrayBudget), or a
// `splat` SSA value when every element is the same (constants, broadcast scalars) or the value has
// a single element. Ops are loops over elements; op families are lowered in separate files:
//   lower.cpp             function/entry, storage helpers, shape ops, for/if
//   lower_elementwise.cpp constants, binary/unary/cmp/select/fma, casts and f16/bf16 rounding
//   lower_memory.cpp      addptr, load, store, atomics
//   lower_reduce.cpp      reduce, scan, dot, histogram
//   lower_sort.cpp        sort (through the runtime helper kSortLines), gather
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "backend/common/scalar_emitter.hpp"
#include "ir/ir.hpp"

namespace tle::cpu::detail {

/// Tile arrays of a program live in its stack frame up to this many bytes in all; beyond it the
/// largest ones move to the launcher's per-thread scratch arena (EntryFn's `scratch`), so that a
/// tile of any size the language allows (2^20 elements) runs on threads with small stacks.
inline constexpr uint64_t kStackArrayBudget = 256 * 1024;
/// Alignment of each array in the scratch arena (and of the arena itself).
inline constexpr uint64_t kScratchAlign = 64;

struct Lowered {
  llvm::Function* entry;
  uint64_t scratch_bytes;  // the arena a program needs (0: none)
};
/// Lowers `f` into `m`: an internal body function plus the external entry `symbol` with the
/// EntryFn signature of cpu_backend.hpp. Throws RuntimeError("tle::cpu::lower", ...) on IR it
/// cannot lower.
Lowered lower_function(const ir::Function& f, llvm::Module& m, const std::string& symbol);

/// Names of the C helpers the generated code may call (defined in runtime_helpers.cpp and
/// registered in the JIT as absolute symbols).
inline constexpr const char* kI64ToBf16 = "tle_cpu_i64_to_bf16";
inline constexpr const char* kU64ToBf16 = "tle_cpu_u64_to_bf16";
/// void (const void* keys, i32 key_bits (32/64), i64 outer, i64 n, i64 inner, i64 k, i32* perm,
/// i32* scratch): per line of keys [outer, n, inner], the indices 0..n-1 stably sorted by ascending
/// unsigned key; the first k into perm [outer, k, inner]. scratch holds 2n indices.
inline constexpr const char* kSortLines = "tle_cpu_sort_lines";


struct Tile {
  llvm::Value* ptr = nullptr;    // array storage, or null
  llvm::Value* splat = nullptr;  // the value of every element, or null
};

using ElemFn = std::function<llvm::Value*(llvm::Value* idx)>;

class Lowerer : public backend::ScalarEmitter {
 public:
  Lowerer(const ir::Function& f, llvm::Module& m);
  llvm::Function* run(const std::string& symbol);

  // ---- infrastructure (lower.cpp)
  const ir::Function& fn_ir;
  llvm::Function* body = nullptr;
  llvm::BasicBlock* alloca_bb = nullptr;
  std::unordered_map<const ir::Value*, Tile> tiles;
  llvm::Value* pid[3] = {};
  llvm::Value* nprog[3] = {};
  uint64_t scratch_bytes = 0;  // set by move_large_arrays_to_scratch

  [[noreturn]] void fail(const ir::Op& op, const std::string& msg) const override;
  llvm::Value* i64c(int64_t v) { return B.getInt64(static_cast<uint64_t>(v)); }
  /// An array of n elements in the frame (entry block).
  llvm::Value* alloc(llvm::Type* elem, int64_t n, const llvm::Twine& name = "", uint64_t align = 64);
  /// After lowering: while the frame's arrays exceed kStackArrayBudget, moves the largest into
  /// the scratch arena (`scratch`, the body's last argument), setting scratch_bytes.
  void move_large_arrays_to_scratch(llvm::Value* scratch);
  const Tile& tile(const ir::Value* v) const;
  llvm::Value* elem(const Tile& t, llvm::Type* ty, llvm::Value* idx);
  llvm::Value* elem(const ir::Value* v, llvm::Value* idx);
  void store_elem(llvm::Value* arr, llvm::Type* ty, llvm::Value* idx, llvm::Value* v);
  /// Emits `for (i = begin; i < end; ++i) body(i)` (i64, signed compare); body may add blocks.
  void loop(llvm::Value* begin, llvm::Value* end, const std::function<void(llvm::Value*)>& body,
            const llvm::Twine& name = "i");
  /// Same over [0, n); n == 1 emits body(0) without a loop.
  void loop(int64_t n, const std::function<void(llvm::Value*)>& body, const llvm::Twine& name = "i");
  /// Defines v element by element: a splat when v has one element, else a fresh array.
  void produce(const ir::Value* v, const ElemFn& f);
  /// Copies the elements of src (n of them) into array dst.
  void copy_into(llvm::Value* dst, llvm::Type* ty, const Tile& src, int64_t n);

  void lower_block(const ir::Block& b);
  void lower_op(const ir::Op& op);
  void lower_shape(const ir::Op& op);
  void lower_subtile(const ir::Op& op);
  void lower_for(const ir::Op& op);
  void lower_if(const ir::Op& op);
  /// Lowers the ops of a scalar region (reduce/scan combine) with its args bound to `args`;
  /// returns the yielded values.
  std::vector<llvm::Value*> inline_region(const ir::Region& r, const std::vector<llvm::Value*>& args);

  // ---- elementwise (lower_elementwise.cpp)
  void lower_elementwise(const ir::Op& op);
  /// Exact i64/u64 -> bf16 through the runtime helpers kI64ToBf16 / kU64ToBf16.
  llvm::Value* int64_to_bf16(llvm::Value* v, bool is_signed) override;

  // ---- memory (lower_memory.cpp)
  void lower_memory(const ir::Op& op);

  // ---- reductions, scans, dot, histogram (lower_reduce.cpp)
  void lower_reduce(const ir::Op& op);
  void lower_scan(const ir::Op& op);
  void lower_dot(const ir::Op& op);
  void lower_histogram(const ir::Op& op);
  void lower_histogram_ranks(const ir::Op& op);

  // ---- sort, gather (lower_sort.cpp)
  void lower_sort(const ir::Op& op);
  void lower_gather(const ir::Op& op);
};

}  // namespace tle::cpu::detail
