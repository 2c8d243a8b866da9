// tests/fuzz/program.hpp - random tile programs for differential testing (issue #12): the program
// representation, and the entry points that make, trace, print, vary and reduce programs.
//
// A Program is a kernel written as a list of statements, each one call of tle's front end
// (`tle::load`, `a + b`, `tle::sum`, `tle::range`, `tle::if_`, ...) defining a variable, so that
//  - trace(p) runs the statements through the real front end (tle::detail, as a lambda would)
//    into an ir::Function, and
//  - to_cpp(p) prints the same calls as C++ source: a ready tle::jit kernel and a Catch2 test
//    case that runs it on the interpreter and the CPU backend (tests/fuzz/regressions.cpp).
// Every variable has a fixed dtype and shape (the statements are well typed by construction) and
// each program is made from a seed alone (generate), so a failure is reproducible from its seed.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.hpp"
#include "tle/dtype.hpp"

namespace fuzz {

using tle::DType;
using Shape = std::vector<int64_t>;

/// A C++ scalar in a statement: an integer (signed dtypes and bool: the value; unsigned: the bit
/// pattern) or a double (exactly representable in the dtype it is used with).
struct Literal {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
  static Literal integer(int64_t v) { return {false, v, 0}; }
  static Literal real(double v) { return {true, 0, v}; }
};

enum class Kind : uint8_t {
  Const,          // result = full<T>(shape, lit)        (Tile<T>(lit) for shape [])
  Arange,         // result = arange(a, b)
  ProgramId,      // result = program_id(axis)
  NumPrograms,    // result = num_programs(axis)
  Binary,         // result = args[0] op args[1]         (op: BinaryOp; same dtypes)
  Compare,        // result = args[0] pred args[1]       (op: CmpPred)
  Unary,          // result = op(args[0])                (op: UnaryOp)
  Fma,            // result = fma(args[0], args[1], args[2])
  Where,          // result = where(args[0], args[1], args[2])
  Cast,           // result = args[0].to<to>()
  Bitcast,        // result = bitcast<to>(args[0])
  BroadcastTo,    // result = broadcast_to(args[0], shape)
  ExpandDims,     // result = expand_dims(args[0], axis)
  Reshape,        // result = reshape(args[0], shape)
  Permute,        // result = permute(args[0], order)
  Reduce,         // result = sum/max/min/argmax/argmin(args[0], axis, flag = keepdims)   (op: ReduceKind)
  ReduceCombine,  // result = reduce(args[0], axis, combine, flag)   (combine: op and a, see below)
  Cumsum,         // result = cumsum(args[0], axis, flag = reverse)
  ScanCombine,    // result = associative_scan(args[0], axis, combine, flag)
                  // combine functions [](p, q) { return ...; }, by a: 0 `p op q` (op a BinaryOp;
                  // maximum / minimum for Max / Min), 1 `where(p > q, p, q)`, 2 `where(p < q, p, q)`,
                  // 3 `(p op q) op p`.
                  // With two args (integer tiles of one shape): the tuple form, result =
                  // std::get<b>(reduce / associative_scan(std::tuple{args[0], args[1]}, ...)) with the
                  // combine by a: 4 the linear recurrence (p0 q0, q0 p1 + q1) (one dtype), 5 the
                  // lexicographic maximum (p0 > q0, ties by the smaller p1) of the pairs
  Dot,            // result = dot(args[0], args[1] [, args[2] acc], precision = op)       (args[2] -1: none)
  Histogram,      // result = histogram (op 0) or histogram_ranks (op 1) (args[0], a = bins [, args[1] mask])
                  //                                                                       (args[1] -1: none)
  Sort,           // result = sort / argsort(args[0], axis, flag = descending) (op 0 / 1), or
                  // topk(args[0], a = k, axis, flag = largest).values / .indices (op 2 / 3)
  Gather,         // result = gather(args[0], args[1] (an integer index tile), axis)
  Hint,           // result = multiple_of(args[0], a) if a, else max_contiguous(args[0], b) (true promises only)
  AddPtr,         // result = args[0] (a pointer parameter) + args[1]
  Load,           // result = load(args[0] [, args[1] mask [, other]] [, MemHints{.is_async = true}])
                  // other: args[2], or lit if flag; the hint when is_async
  Store,          // store(args[0], args[1] [, args[2] mask])
  Atomic,         // result = atomic_<op>(args[0], args[1] [, args[2] mask])              (op: AtomicOp)
  AtomicCas,      // result = atomic_cas(args[0], args[1], args[2])
  For,            // for (auto result : range(lo, hi, step)) { body }; args: lo, hi, step vars or -1 (literal)
  If,             // if_(args[0], [&] { body }, [&] { orelse });
  Assign,         // result = args[0];  (a variable declared earlier takes a new value)
  LocalAlloc,     // result = gpu::alloc<to>({a}).data(): the pointer to a shared buffer of a elements
                  // (TLE-Struct; in the kernel's top-level block only, before every use)
  Copy,           // gpu::copy(args[0] global pointers, args[1] buffer pointers [, args[2] mask])
  CopyCommit,     // gpu::commit_group()
  CopyWait,       // gpu::wait_group(a)
  Roles,          // gpu::warp_specialize({gpu::Role(b, [] {}), gpu::Role(a, [&] { body })}): the body on a
                  // role of a warps after an idle one of b (the variant in_roles only; the last statement)
  ExtractTile,    // result = extract_tile(args[0], <index>, shape)          (tle::TileIndex forms, by op:
  InsertTile,     // result = insert_tile(args[0], args[1], <index>)          0 the static linear id index[0],
                  // 1 the static per-dim index `index`, 2 the dynamic linear id: the integer scalar variable
                  // after the tiles, 3 the dynamic per-dim index: one i32 scalar variable per dim after the
                  // tiles. Sub-tile shape: `shape` (extract) or args[1]'s (insert); its dims divide the tile's.
};

struct Stmt {
  Kind kind = Kind::Const;
  int result = -1;          // the variable defined (or assigned); -1 for none
  std::vector<int> args;    // operand variables; -1 marks an absent optional operand
  int op = 0;               // BinaryOp / CmpPred / UnaryOp / ReduceKind / AtomicOp / Precision
  int axis = 0;             // as printed (may be negative: counts from the end)
  bool flag = false;        // keepdims / reverse / load: `lit` is the other value
  DType to = DType::f32;    // Cast / Bitcast target
  Shape shape;              // Const / BroadcastTo / Reshape / ExtractTile (the sub-tile shape)
  std::vector<int64_t> index;  // ExtractTile / InsertTile static index (op 0: {linear id}, op 1: per dim)
  bool is_async = false;    // Load: the load hint {.is_async = true} (must not change the value)
  std::vector<int> order;   // Permute
  Literal lit;              // Const value; Load other
  int64_t a = 0, b = 0;     // Arange start, end; Histogram bins (a); topk k (a)
  int64_t lo = 0, hi = 0, step = 1;  // For literal bounds
  std::vector<Stmt> body, orelse;
};

/// A variable: its dtype (+ pointee) and shape never change.
struct Var {
  DType dtype = DType::f32;
  DType pointee = DType::f32;  // dtype == ptr
  Shape shape;
};

/// A memory buffer passed to the kernel as a pointer parameter.
struct Buffer {
  enum Role : uint8_t { In, Out, InOut } role = In;
  DType dtype = DType::f32;
  int64_t size = 1;  // elements
  /// Contents before the launch (fill()): In/InOut: Special values of the dtype, or integers
  /// uniform in [lo, hi] (Index); Out: the byte 0xA5 (never a value a store of the program makes
  /// by accident: outputs that a kernel must leave alone show up when they change).
  enum Fill : uint8_t { Special, Index, Sentinel } fill = Special;
  int64_t lo = 0, hi = 0;  ///< Index: the range (float buffers too: small integers, exact in any sum)
  /// Out buffers of math-function results (GenOptions::portable only): how many units in the last
  /// place a backend whose math library is not the host's (the GPU's libdevice) may differ by
  /// (harness.hpp, compare). 0: exact, the rule for everything else.
  int ulp = 0;
};

/// A kernel parameter: a buffer (Ptr<T>) or a scalar (Tile<T>) with its launch value.
struct Param {
  int var = -1;
  int buffer = -1;  // >= 0: Ptr<buffer dtype>
  Literal value;    // scalars
};

struct Program {
  uint64_t seed = 0;
  int64_t grid[3] = {1, 1, 1};
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  std::vector<Var> vars;
  std::vector<Stmt> body;
  int64_t programs() const { return grid[0] * grid[1] * grid[2]; }
};

/// Generator options. The defaults are the CI budget's: small tiles, short loops.
struct GenOptions {
  int statements = 10;     ///< statements of the top-level block (blocks nest up to max_depth)
  int max_depth = 2;       ///< nested loops / ifs
  int64_t max_numel = 96;  ///< elements per tile
  bool pow2 = false;       ///< every tile dimension a power of two (the GPU backend's rule)
  /// Programs whose results the GPU backend must reproduce (implies pow2; docs/testing.md,
  /// "The GPU stage"): reductions and scans only with combines that are exact in any association
  /// order (integer ops, and/or/xor, IEEE maximum/minimum; no float sum, cumsum, product or
  /// where-select combine), float dots only on small integers (exact in any summation order), and
  /// math functions (exp, sin, ..., pow) only as stored leaves, in buffers with a ULP bound
  /// (Buffer::ulp) since libdevice and the host's libm may differ in the last bits.
  bool portable = false;
};

/// A well-typed random program from `seed` alone, free of undefined behaviour by construction:
/// every access is inside its buffer (index ranges are tracked, or a mask guards the lanes),
/// stores and atomics of one program touch addresses no other program does, loops run a few
/// trips; everything else tle defines for all inputs (docs/semantics.md: wrapping integers, x/0,
/// shifts, saturating casts, NaN rules). Deterministic: the same seed gives the same program.
Program generate(uint64_t seed, const GenOptions& opt = {});

/// Traces p through tle's front end into a function named `name` (no pass runs). Throws what the
/// front end throws (a UserError here is a generator bug).
std::unique_ptr<tle::ir::Function> trace(const Program& p, const std::string& name = "fuzz");

/// The C++ source of p: a Catch2 TEST_CASE named `test_name` holding the tle::jit kernel and a
/// launch on the interpreter and the CPU backend with the inputs Memory makes (harness.hpp),
/// whose outputs must agree (fuzz::expect_backends_agree, tests/fuzz/regression.hpp). `note`
/// becomes a comment above it. With `printer_check`, the test instead regenerates p from its
/// seed and also requires the printed kernel to give what trace(p) gives on the interpreter
/// (fuzz::expect_printed_matches): the check that the printer is faithful.
/// With `gpu`, the test case (tag [.gpu]) instead runs the kernel on the interpreter and on the GPU
/// at each of fuzz::device_configs(p) (fuzz::expect_gpu_agrees): a GPU stage failure as a test.
std::string to_cpp(const Program& p, const std::string& test_name, const std::string& note = {},
                   bool printer_check = false, bool gpu = false);

// ---- metamorphic variants: programs that must give bit-identical outputs (harness.hpp)

/// Operands of commutative binary ops and symmetric comparisons swapped (a < b as b > a).
Program swap_commutative(const Program& p);
/// A branch that is never taken at run time (its condition is false in every program, but not
/// for the compiler), assigning variables and storing garbage, inserted at a random point.
Program add_dead_branch(const Program& p, uint64_t seed);
/// p with every top-level statement but the gpu::alloc ones moved into a gpu::warp_specialize role
/// of 1, 4 or 8 warps that comes after an idle role of 1 or 4 (by seed): the same outputs, the
/// roles' lowering (rebased indices, named barriers, scratch past the idle role's) on the GPU.
/// Nullopt when p cannot be so wrapped (a top-level variable the body assigns).
std::optional<Program> in_roles(const Program& p, uint64_t seed);
/// Every constant made a kernel parameter (a runtime value): folding cannot see it, so the
/// backend computes at run time what canonicalize folded before.
Program opaque_constants(const Program& p);

/// Number of statements, nested ones included.
int count_statements(const std::vector<Stmt>& b);

}  // namespace fuzz
