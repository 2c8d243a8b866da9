// src/ir/ir.hpp - the tile IR: types, values, operations, blocks, regions and functions.
//
// Small and MLIR-like. A Function owns one Region whose single Block's arguments are the kernel
// arguments. Ops own their results and their regions; Blocks own their arguments and ops.
// Structured control flow only (For, If, plus combine bodies of Reduce/Scan), so every region
// has exactly one block ending in a Yield (except the function body, which has no terminator).
// There are no use-lists: kernels are small, and passes that need uses count them in one walk.
#pragma once
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tle/dtype.hpp"
#include "tle/detail/enums.hpp"
#include "tle/error.hpp"

namespace tle::ir {

using Shape = std::vector<int64_t>;

/// A register layout (GPU path): which thread and register holds each element of a tile, as a
/// linear layout over GF(2) from (reg, lane, warp, block) to the tile's dims (src/layout/).
/// Empty on the CPU path; filled by the GPU layout-assignment pass.
struct Layout;
/// Layout equality by value (defined in src/layout/ir_layout.cpp).
bool layouts_equal(const Layout* a, const Layout* b);
/// Printed form of a layout (for the IR printer), e.g. "#blocked{...}".
std::string layout_str(const Layout& l);

/// The type of a value: element dtype (+ pointee for pointers) and a static shape ([] = scalar).
struct Type {
  DType dtype = DType::f32;
  DType pointee = DType::f32;  // meaningful only when dtype == ptr
  Shape shape;
  std::shared_ptr<const Layout> layout;  // null until the GPU pipeline assigns one

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  bool is_scalar() const { return shape.empty(); }
  Type with_shape(Shape s) const { Type t = *this; t.shape = std::move(s); return t; }
  Type with_dtype(DType d) const { Type t = *this; t.dtype = d; return t; }
  /// Same dtype, pointee and shape (the layout is compared by identity).
  bool operator==(const Type& o) const;
  bool operator!=(const Type& o) const { return !(*this == o); }
  /// "f32", "ptr<f16>[128,64]", "i32[1024]".
  std::string str() const;
};

enum class OpKind : uint8_t {
#define TLE_OP(name, mnem, pure) name,
#include "ir/ops.def"
#undef TLE_OP
};
const char* op_mnemonic(OpKind k);
bool op_is_pure(OpKind k);

// Enumerations stored in the "op"/"pred"/"kind" attributes live in tle/detail/enums.hpp.
const char* name(BinaryOp);
const char* name(UnaryOp);
const char* name(CmpPred);
const char* name(AtomicOp);
const char* name(ReduceKind);
const char* name(ScanKind);
const char* name(Precision);

/// An attribute value. Integers and floats are kept exactly (floats as double, which holds every
/// f16/bf16/f32 value exactly).
using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

struct Op;
struct Block;
struct Region;

/// An SSA value: the result of an Op, or an argument of a Block.
struct Value {
  Type type;
  Op* def = nullptr;        // defining op, or null for a block argument
  Block* owner = nullptr;   // block of a block argument, or null for an op result
  unsigned index = 0;       // result number or argument number
  std::string name_hint;    // optional, for the printer ("x", "acc")

  bool is_block_arg() const { return def == nullptr; }
  /// The block in which this value is defined (the op's block for a result).
  Block* defining_block() const;
};

/// An operation. Operands are non-owning; results and regions are owned.
struct Op {
  OpKind kind;
  std::vector<Value*> operands;
  std::vector<std::unique_ptr<Value>> results;
  std::map<std::string, Attr> attrs;  // ordered: the printer is deterministic
  std::vector<std::unique_ptr<Region>> regions;
  Block* parent = nullptr;
  SrcLoc loc;

  Value* result(unsigned i = 0) const { return results.at(i).get(); }
  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t int_attr(const std::string& k) const;
  double float_attr(const std::string& k) const;
  const std::vector<int64_t>& ints_attr(const std::string& k) const;
  const std::string& str_attr(const std::string& k) const;
  /// Typed enum attribute ("op", "pred", "kind", "precision").
  template <class E> E enum_attr(const std::string& k) const { return static_cast<E>(int_attr(k)); }
  Region& region(unsigned i = 0) const { return *regions.at(i); }
  /// No side effects, so it may be CSE'd or deleted when unused: ops.def's flag (inline_asm: its
  /// "pure" attribute), and none in its regions (a reduce whose combine function stores is not pure).
  bool is_pure() const;
  /// A load or store with the volatile hint (int attribute "volatile" != 0: ld/st.volatile).
  bool is_volatile() const { return has_attr("volatile") && int_attr("volatile") != 0; }
};

/// A straight-line list of ops with arguments.
struct Block {
  std::vector<std::unique_ptr<Value>> args;
  std::list<std::unique_ptr<Op>> ops;
  Region* parent = nullptr;

  Value* arg(unsigned i) const { return args.at(i).get(); }
  Value* add_arg(Type t, std::string hint = {});
  /// The enclosing op of this block's region (null for the function body).
  Op* parent_op() const;
  /// The Yield at the end, or null.
  Op* terminator() const;
};

/// A region: exactly one block in this IR.
struct Region {
  std::unique_ptr<Block> block;
  Op* parent = nullptr;  // null for a function body
  Region();
  Block& body() { return *block; }
  const Block& body() const { return *block; }
};

/// Per-argument facts from specialization: the largest power of two, at most 16, that a pointer's
/// address (in bytes) or a non-zero integer is a multiple of (Triton specializes on 16 only; the
/// smaller powers let ragged shapes, e.g. bf16 rows of 4100 elements, keep 8-byte vectors).
struct ArgInfo {
  std::string name;
  int32_t divisibility = 1;  // 1, 2, 4, 8 or 16
  /// A tensor descriptor's CUtensorMap (a ptr<u8> argument): on the GPU a 128-byte .param,
  /// 64-byte aligned, whose address TMA instructions take; ignored by the host backends.
  bool tensor_map = false;
  /// A hidden argument of a kernel that uses the device mesh (tle/mesh.hpp): appended after the
  /// user's, in the order of ir::MeshArg, and filled at each launch from the launching rank.
  bool mesh = false;
};


/// A kernel: one function, its body region's block args are the runtime arguments.
struct Function {
  std::string name;
  Region body;
  std::vector<ArgInfo> arg_info;
  SrcLoc loc;  // where the user called tle::jit
  /// The kernel traced a tle::distributed_barrier: its program ids index the mesh scratch's
  /// counters, so a launch checks the grid against their number (src/runtime/mesh.cpp).
  bool mesh_barrier = false;
  /// The kernel arguments (entry-block argument indices) that tle::remote moves to other ranks,
  /// each with the first call's position: a launch checks that they point into the launching
  /// rank's symmetric memory (anything else would address no rank's copy).
  std::vector<std::pair<unsigned, SrcLoc>> mesh_remote_args;
  Block& entry() { return body.body(); }
  const Block& entry() const { return body.body(); }
};

/// The index of f's first hidden mesh argument, or -1 when f uses no mesh primitive.
int mesh_args_begin(const Function& f);

/// A tile of shape s viewed as [outer, n, inner] around dim `axis` (reductions, scans and sort on
/// the CPU backend and the interpreter).
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit split_at_axis(const Shape& s, int64_t axis) {
  AxisSplit r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d < axis) r.outer *= s[d];
    else if (d == axis) r.n = s[d];
    else r.inner *= s[d];
  }
  return r;
}

/// The bytes a local_alloc's buffer occupies: numel elements of its result's pointee.
inline int64_t local_alloc_bytes(const Op& op) { return op.int_attr("numel") * byte_size(op.result()->type.pointee); }

/// The warps of a warp_specialize op's roles (TLE-Struct, gpu::warp_specialize): element r is
/// the first warp of role r, the last element the warps the program launches. Roles are placed in
/// order, each at the end of the previous one rounded up to a multiple of min(its warps, 4), so
/// that a role of 4 or more warps is whole warpgroups (wgmma and setmaxnreg work per warpgroup,
/// PTX ISA 9.7.15, 9.7.17.1); the warps skipped exit at once.
std::vector<int64_t> role_first_warps(const Op& ws);
/// The body of the warp_specialize role that holds block b (b itself, or a block enclosing it),
/// or null outside roles.
Block* enclosing_role(Block* b);
/// The warps of the warp_specialize role that runs op, or 0 outside roles.
int role_warps(const Op& op);
/// The warp_specialize op of f (the entry block's last op), or null.
const Op* find_warp_specialize(const Function& f);

/// Replace every use of `from` by `to` in ops nested under `root` (operands of all ops, at any depth).
void replace_all_uses(Block& root, Value* from, Value* to);
/// Number of uses of every value under `root`.
std::map<const Value*, int> count_uses(const Block& root);
/// Calls f(op) for every op under block, in program order, pre-order (op before its regions).
template <class F> void walk(Block& b, F&& f) {
  for (auto& op : b.ops) {
    f(*op);
    for (auto& r : op->regions) walk(r->body(), f);
  }
}
template <class F> void walk(const Block& b, F&& f) {
  for (auto& op : b.ops) {
    f(static_cast<const Op&>(*op));
    for (auto& r : op->regions) walk(static_cast<const Block&>(r->body()), f);
  }
}

/// The UserError a host backend throws at a GPU-only op (inline_asm, cuda_call: PTX and CUDA
/// device code cannot run on the host; docs/semantics.md, docs/raw.md), at the op's position.
/// `backend` says where the kernel was going to run ("was compiled for the CPU backend", "runs on
/// the interpreter (TLE_BACKEND=interp)"). Throws InternalError for any other op.
[[noreturn]] void refuse_gpu_only_op(const Op& op, const std::string& kernel, const std::string& backend);

/// Deterministic text of a function (values numbered in program order).
std::string print(const Function& f);
/// Checks structural invariants; throws InternalError naming the op on failure.
void verify(const Function& f);

}  // namespace tle::ir
