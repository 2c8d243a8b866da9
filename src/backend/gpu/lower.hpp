// src/backend/gpu/lower.hpp - tile IR with layouts -> LLVM IR for nvptx64 (one CTA per program).
//
// Model: every value of rank >= 1 carries a linear layout (src/layout) from (reg, lane, warp) to
// its coordinates; each thread holds `num_regs` LLVM values of it, register r being the element at
// coordinates layout(r, lane, warp). Scalars are one register that every thread holds. The layout
// pass (passes/gpu) guarantees the relations the lowering relies on (docs/ir.md, GPU layouts):
// elementwise operands share the result's layout and shape ops keep register numbering, so both
// are register-wise; a reduction combines registers in the thread, then lanes with butterfly
// shuffles, then warps through shared memory; a scan likewise where the layout allows
// (bitwise_scan), else through shared memory, as do convert_layout, histograms and dots that
// are not on tensor cores; an f16/bf16 dot in the mma layouts is
// mma.sync on registers. Elementwise arithmetic is backend::ScalarEmitter, as on the CPU.
// Files: lower.cpp (driver, elementwise, shapes, control flow, shared memory), lower_memory.cpp
// (load/store/atomics), lower_reduce.cpp (reduce, scan, dot, histogram), lower_sort.cpp (sort,
// gather), lower_mma.cpp (dot on
// tensor cores), lower_ldmatrix.cpp (conversions to tensor-core operand layouts through swizzled
// shared memory and ldmatrix), lower_pipeline.cpp (cp.async software pipelining of K loops).
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/subtile.hpp"
#include "backend/common/scalar_emitter.hpp"
#include "ir/ir.hpp"
#include "layout/linear_layout.hpp"

namespace tle::gpu::detail {

/// A 2-D tile of 16-bit (esize 2) or 8-bit (esize 1) elements in shared memory, row-major along
/// `cdim` (the contiguous tile dim, `cols` elements per row; `rows` along the other dim),
/// XOR-swizzled in 16-byte chunks of E = 16 / esize elements: layout::shared_swizzled(shape, E,
/// per_phase, max_phase, order) with
///     chunk' = chunk ^ ((row / per_phase) % max_phase)
/// and per_phase = max(1, 8 / chunks per row), max_phase = min(chunks per row, 8 / per_phase) (the
/// rows of one 128-byte span share a phase), so that 8 rows' 16-byte reads at one logical chunk
/// (ldmatrix) and a row's 16-byte writes hit 8 different bank groups. Requires rows, cols powers of
/// two, rows >= 8 and rows of at least 16 bytes. The swizzle is a function of byte addresses, so an
/// 8-bit tile is laid out byte for byte as the 16-bit tile of half as many columns.
///
/// A wgmma operand tile (make_wgmma) is split along cdim into atoms of `atom` columns (32, 64 or
/// 128 bytes: 16, 32 or 64 16-bit elements, 32, 64 or 128 8-bit ones), each a [rows, atom] tile
/// swizzled as above, atom after atom: element (row, col) is at (col / atom) * rows * atom + the
/// swizzled offset of (row, col % atom) in its atom. With 1024-byte aligned atoms this is exactly
/// the 32/64/128-byte swizzle mode of wgmma's shared-memory matrix layouts (PTX ISA 9.7.15.5.1.2,
/// Swizzle<1|2|3, 4, 3> on byte addresses); lower_wgmma.cpp builds its matrix descriptors from it.
/// For make(), atom == cols. Offsets are in elements; bytes are offsets * esize.
struct SwizzledTile {
  int64_t rows = 0, cols = 0;
  int cdim = 1;
  int32_t per_phase = 1, max_phase = 1;
  int64_t atom = 0;
  int esize = 2;  ///< bytes per element: 2 or 1
  static SwizzledTile make(int64_t rows, int64_t cols, int cdim, int esize = 2);
  /// The wgmma layout of a [rows, cols] tile with atoms of min(cols, max_atom) columns (max_atom
  /// 32, 64 or 128 bytes' worth of elements; default the 128-byte swizzle). Requires rows >= 8 and
  /// rows of at least 32 bytes, powers of two.
  static SwizzledTile make_wgmma(int64_t rows, int64_t cols, int cdim, int64_t max_atom = 0, int esize = 2);
  /// Elements per 16-byte chunk.
  int64_t chunk() const { return 16 / esize; }
  /// Element offset of (row, col) (row along the strided dim, col along cdim).
  int64_t offset(int64_t row, int64_t col) const;
  /// Element offset of (row, col) without the swizzle: where a matrix descriptor starting at that
  /// element points (row a multiple of 8, col of a chunk).
  int64_t plain_offset(int64_t row, int64_t col) const { return (col / atom) * rows * atom + row * atom + col % atom; }
  int64_t bytes() const { return rows * cols * esize; }
};

/// The bits of a wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2) on a make_wgmma tile `t`, all but
/// the start address (bits 0-13, added per instruction): leading byte offset (bits 16-29; K-major:
/// unused, 1; MN-major: the stride between atoms along M/N, rows * atom * esize bytes), stride byte
/// offset (bits 32-45: the next 8 rows of an atom, 8 * atom * esize bytes), base offset 0 (atoms are
/// aligned to their swizzle pattern) and the swizzle mode (bits 62-63: 1 = 128, 2 = 64, 3 = 32
/// bytes). `k_major`: the tile is contiguous along K. Throws InternalError for tiles wgmma cannot read.
uint64_t wgmma_desc_bits(const SwizzledTile& t, bool k_major);

/// How ldmatrix.m8n8 reads a register layout of 16-bit elements: registers 2m and 2m+1 of every
/// thread form the 8x8 matrix m (register 0's basis is +1 along `kd`; lanes are the ldmatrix
/// fragment: lane bits 0, 1 -> +2, +4 along kd, bits 2, 3, 4 -> +1, +2, +4 along the other dim;
/// every other register and warp basis a multiple of 8 in both dims). This is exactly the mma.sync
/// m16n8k16 f16/bf16 A and B fragment (kd = K). One ldmatrix reads `per_instr` (4, 2 or 1)
/// consecutive matrices.
struct LdmatrixPlan {
  int kd = 1;
  int matrices = 0;
  int per_instr = 4;
};
/// The plan for layout `l`, or nullopt when its registers are not ldmatrix fragments.
std::optional<LdmatrixPlan> ldmatrix_plan(const layout::LinearLayout& l);
/// The ldmatrix reads of one value from one tile: the lane-dependent address part (computed
/// once) and each instruction's result once emitted.
struct LdmatrixReads {
  LdmatrixPlan plan;
  SwizzledTile tile;
  llvm::Value* base = nullptr;       // absolute byte offset of the tile
  llvm::Value* lane_base = nullptr;  // base + this lane's offset (bytes)
  llvm::Value* row_in = nullptr;     // lane % 8
  llvm::Value* lc[2] = {nullptr, nullptr};
  int32_t lmask[2] = {0, 0};          // bits the lane/warp part can set, per dim
  std::vector<llvm::Value*> done;    // per instruction: its result, null until emitted
};

class Lowerer : public backend::ScalarEmitter {
 public:
  /// `maxnreg` > 0 caps the registers per thread (`.maxnreg`, gpu::Options::maxnreg); `wgmma`: the
  /// target is sm_90a (dots on wgmma); `warp_specialize`: a K loop that qualifies
  /// (find_ws_loop) gets producer warps (gpu::Options::warp_specialize).
  Lowerer(const ir::Function& f, llvm::Module& m, int num_warps, int maxnreg = 0, bool wgmma = false,
          bool warp_specialize = false);
  /// Emits the kernel `name`; returns it.
  llvm::Function* run(const std::string& name);
  /// Dynamic shared memory the kernel needs (bytes).
  int64_t shared_bytes() const { return user_smem_ + resident_bytes_ + std::max(smem_reserved_, smem_bytes_); }
  /// Shared memory taken by resident dot operands (plan_resident_operands).
  int64_t resident_shared_bytes() const { return resident_bytes_; }
  /// False: no resident dot operands (compile.cpp lowers again so when they leave too little
  /// shared memory for the rest).
  bool resident_operands = true;
  /// Of which the program's own buffers (local_alloc, at the start; a multiple of 1024).
  int64_t user_shared_bytes() const { return user_smem_; }
  /// Counts over the emitted code (each op as often as it is emitted):
  /// convert_layout ops that go through shared memory (a register renumbering does not), the bytes
  /// they write there, and CTA or role barriers (bar.sync / barrier.sync; mbarrier waits are not).
  int conversions_through_shared = 0;
  int64_t conversion_shared_bytes = 0;
  int barriers = 0;

  // hooks of ScalarEmitter: libdevice math, exact i64 -> bf16 in integer code, and sm_80
  // instructions: f32 max/min as max.NaN / min.NaN.f32, f32 -> bf16 as cvt.rn.bf16.f32
  llvm::Value* call_libm(const char* f32name, const char* f64name, std::vector<llvm::Value*> args) override;
  llvm::Value* int64_to_bf16(llvm::Value* v, bool is_signed) override;
  llvm::Value* float_max_min(bool is_max, llvm::Value* a, llvm::Value* b) override;
  llvm::Value* f32_to_bf16(llvm::Value* f) override;
  /// The inline asm f32_to_bf16 emits (pack16x2 recognizes it).
  static constexpr const char* kF32ToBf16Asm = "cvt.rn.bf16.f32 $0, $1;";
  /// fp8 conversions with sm_89's cvt (when fp8_cvt; lower.cpp), else ScalarEmitter's integer code
  llvm::Value* f32_to_fp8(llvm::Value* f, DType d) override;
  llvm::Value* fp8_to_f32(llvm::Value* b, DType d) override;
  /// The target has cvt to and from .e4m3x2 / .e5m2x2 (sm_89 and later); set by gpu::compile.
  bool fp8_cvt = false;
  [[noreturn]] void fail(const ir::Op& op, const std::string& msg) const override;

  // ---- infrastructure (lower.cpp)
  const ir::Function& fn_ir;
  int num_warps;  // the warps the layouts distribute tiles over (the "consumers"; in a warp_specialize role, its warps)
  const int maxnreg;
  const bool wgmma;
  const bool warp_specialize;
  /// Warps per CTA at launch: num_warps, num_warps + 4 with a warp-specialized loop, the roles'
  /// end (ir::role_first_warps) with gpu::warp_specialize.
  int launch_warps() const { return ws_launch_ ? ws_launch_ : ws_loop_ ? num_warps + 4 : num_warps; }
  llvm::Function* kernel = nullptr;
  llvm::Value* lane = nullptr;  // i32 thread index in the warp
  llvm::Value* warp = nullptr;  // i32 warp index in the CTA
  llvm::Value* tid = nullptr;   // i32 thread index in the CTA
  // Shared memory (`tle_smem`, the dynamic shared memory): the program's own buffers
  // (local_alloc, placed by passes::plan_shared_buffers) occupy [0, user_smem_), resident dot
  // operands [user_smem_, user_smem_ + resident_bytes_); `smem` points just past them, and every
  // other user works from there: conversions, reductions, ... from byte
  // smem_base_ of it, which is 0 except inside a pipelined loop, whose buffers occupy
  // [0, smem_reserved_).
  llvm::GlobalVariable* smem_var = nullptr;
  llvm::Constant* smem = nullptr;
  int64_t user_smem_ = 0;
  int64_t smem_bytes_ = 0;     // end of the furthest use
  int64_t smem_reserved_ = 0;  // pipeline buffers of the largest pipelined loop
  int64_t smem_base_ = 0;
  std::unordered_map<const ir::Value*, std::vector<llvm::Value*>> regs;
  /// The line totals of an integer cumsum's operand, left by the bitwise scan (lower_reduce.cpp):
  /// the block it was lowered in, its axis and each register's line total. A sum of the same tile
  /// along that axis later in that block reuses them instead of reducing again (a compaction's
  /// positions and count: one barrier-bound pass, not two).
  struct ScanTotals {
    const ir::Block* block;
    int axis;
    std::vector<llvm::Value*> per_reg;
  };
  std::unordered_map<const ir::Value*, ScanTotals> scan_totals;
  std::map<const ir::Value*, int> uses_;  // uses of every value of the kernel (ir::count_uses)

  static const layout::LinearLayout* layout_of(const ir::Value* v);
  int num_regs(const ir::Value* v) const;
  std::vector<llvm::Value*>& get(const ir::Value* v);
  /// Register i of v (register 0 for a scalar).
  llvm::Value* reg(const ir::Value* v, int i);
  /// Constant part of the coordinates of register r (one entry per output dim).
  static std::vector<int32_t> reg_coords(const layout::LinearLayout& l, int r);
  /// Thread-dependent part (lane and warp bases), one i32 per output dim.
  std::vector<llvm::Value*> hw_coords(const layout::LinearLayout& l);
  /// Coordinates of register r: reg part XOR hardware part.
  std::vector<llvm::Value*> coords(const layout::LinearLayout& l, const std::vector<llvm::Value*>& hw, int r);
  /// Row-major linear index of coordinates in `shape`.
  llvm::Value* linear(const std::vector<llvm::Value*>& c, const ir::Shape& shape);
  /// True for a register that repeats another register's element (a zero register basis is set).
  static bool duplicate_reg(const layout::LinearLayout& l, int r);
  /// i1: this thread is the first holder of its elements (replicated lanes/warps are not).
  llvm::Value* owner(const layout::LinearLayout* l);
  /// Shared memory at a byte offset from smem_base_, as a pointer in address space 3.
  llvm::Value* smem_ptr(llvm::Value* byte_offset);
  /// Shared memory at an absolute byte offset (the pipeline buffers start at 0).
  llvm::Value* smem_abs_ptr(llvm::Value* byte_offset);
  void need_smem(int64_t bytes) {
    if (smem_base_ + bytes > smem_bytes_) smem_bytes_ = smem_base_ + bytes, smem_op = cur_op;
  }
  const ir::Op* cur_op = nullptr;   // the op being lowered
  const ir::Op* smem_op = nullptr;  // the op that needs the most shared memory
  void barrier();
  llvm::Value* i32c(int64_t v) { return B.getInt32(static_cast<uint32_t>(v)); }
  /// Loads/stores an element of dtype d in shared memory at element index idx from `base` bytes.
  void smem_store(DType d, int64_t base, llvm::Value* idx, llvm::Value* v);
  llvm::Value* smem_load(DType d, int64_t base, llvm::Value* idx);
  /// Element strides of a tile of `shape` in shared memory: row-major with dim `fast` innermost
  /// (-1: the last dim), and with `padded` each innermost row of 64 bytes or more padded by 16
  /// bytes (fewer bank conflicts when a conversion walks across rows).
  static std::vector<int64_t> smem_strides(const ir::Shape& shape, DType d, bool padded, int fast = -1);
  /// Bytes a tile staged with those strides spans.
  static int64_t smem_size(const ir::Shape& shape, DType d, bool padded, int fast = -1);
  /// Registers per vector shared-memory access for layout l (consecutive along dim `fast`,
  /// aligned, at most 16 bytes); 1 when none.
  static int smem_run(const layout::LinearLayout& l, const ir::Shape& shape, DType d, int fast = -1);
  llvm::Value* smem_index(const std::vector<llvm::Value*>& coords, const std::vector<int64_t>& strides);
  /// Writes every element a thread holds to shared memory at `base` (layout: smem_strides).
  void stage(const ir::Value* v, int64_t base, bool padded = false, int fast = -1);
  /// Reads the registers of `layout`/`shape` from shared memory staged at `base`.
  std::vector<llvm::Value*> unstage(const layout::LinearLayout* l, const ir::Shape& shape, DType d, int64_t base,
                                    bool padded = false, int fast = -1);
  /// Butterfly shuffle of any register type across lanes (lane ^ mask).
  llvm::Value* shuffle_xor(llvm::Value* v, int mask);
  /// Emits `for (k = 0; k < n; ++k)` with loop-carried values; body returns the next values.
  /// Emits `if (cond) body();`; code after it runs on every thread.
  void when(llvm::Value* cond, const std::function<void()>& body);
  /// The num_warps * 32 compute threads take the items [0, count) in turn (thread t: t, t +
  /// threads, ...): body(item) for each; the producer warps of a warp-specialized loop, which run
  /// the code before it too, take none. No barrier.
  void for_each_item(int64_t count, const std::function<void(llvm::Value* item)>& body);
  std::vector<llvm::Value*> counted_loop(llvm::Value* n, std::vector<llvm::Value*> init,
                                         const std::function<std::vector<llvm::Value*>(llvm::Value* k,
                                                                                       const std::vector<llvm::Value*>&)>& body);

  /// Lowers b's ops, then waits for the pending wgmma dots (wgmma_flush) - all of them, or all but
  /// those whose results are in `keep` (and older than every other pending one).
  void lower_block(const ir::Block& b, const std::unordered_set<const ir::Value*>* keep = nullptr);
  void lower_op(const ir::Op& op);
  void lower_elementwise(const ir::Op& op);
  void lower_shape(const ir::Op& op);
  void lower_convert(const ir::Op& op);
  void lower_remap(const ir::Op& op);  // a reshape pad_shapes marked with real_in / real_out
  // ---- extract_tile / insert_tile (lower_subtile.cpp)
  void lower_subtile(const ir::Op& op);
  /// The sub-tile's start per dim (i32): constants for a static index, else from the index operand.
  std::vector<llvm::Value*> subtile_offsets(const ir::Op& op, const ir::SubTileGrid& g, size_t nfixed);
  /// The register-renumbering form (no instruction) when the index is static and the layouts
  /// allow it: the result's registers in *out; false otherwise.
  bool subtile_renumber(const ir::Op& op, const ir::SubTileGrid& g, const ir::Value* big, const ir::Value* small,
                        std::vector<llvm::Value*>& out);
  void lower_for(const ir::Op& op);
  /// What a loop adds to lower_for_body: extra loop-carried LLVM values (after the carried tiles'
  /// registers), `begin(k, extra)` run first in each iteration (k: the i64 trip index) and
  /// `end(extra)` run after the body, returning the next extra values.
  struct LoopHooks {
    std::vector<llvm::Value*> extra_init;
    std::function<void(llvm::Value* k, const std::vector<llvm::Value*>& extra)> begin;
    std::function<std::vector<llvm::Value*>(const std::vector<llvm::Value*>& extra)> end;
    /// Carried values (indices into the yield) whose wgmma dot may stay in flight into the next
    /// iteration (carried_dots).
    std::set<size_t> in_flight;
  };
  /// The counted loop of `for` op `op` over trip count `t`: binds the induction variable and the
  /// carried values, lowers the body, carries the yields, binds the op's results.
  void lower_for_body(const ir::Op& op, const Trips& t, const LoopHooks& hooks);
  /// The carried values of `for` op `loop` (indices into its yield) that may reach the next
  /// iteration with their wgmma still in flight: yielded results of a dot directly in the body,
  /// used by nothing else, whose block argument is last read before that dot, with no op after
  /// it that waits for every pending dot (a store, an arrival): FlashAttention's acc = dot(p, v,
  /// acc * alpha), waited for where the next iteration scales it. Empty off sm_90a.
  std::set<size_t> carried_dots(const ir::Op& loop) const;
  void lower_if(const ir::Op& op);
  /// Lowers a scalar region (combine body) with its args bound to `args`; returns the yields.
  std::vector<llvm::Value*> inline_region(const ir::Region& r, const std::vector<llvm::Value*>& args);

  // ---- memory (lower_memory.cpp)
  void lower_addptr(const ir::Op& op);
  void lower_load(const ir::Op& op);
  void lower_store(const ir::Op& op);
  void lower_atomic(const ir::Op& op);
  /// signal / signal_wait (device mesh), lower_mesh.cpp.
  void lower_signal(const ir::Op& op);
  /// async_copy (gpu::copy): cp.async per vector of each owner thread's registers.
  void lower_async_copy(const ir::Op& op);
  /// A global load of type t (1-16 bytes) / store of val as inline PTX ld.global<mods> /
  /// st.global<mods> (mods: cache operator or .L1:: eviction priority, e.g. ".L1::evict_last").
  llvm::Value* hinted_load(llvm::Type* t, llvm::Value* ptr, const std::string& mods);
  void hinted_store(llvm::Value* val, llvm::Value* ptr, const std::string& mods);
  /// Makes values computed by owner threads visible to every holder (through shared memory).
  std::vector<llvm::Value*> share_from_owners(const ir::Value* v, const std::vector<llvm::Value*>& vals);

  // ---- reductions, scans, dot, histogram (lower_reduce.cpp)
  void lower_reduce(const ir::Op& op);
  void lower_scan(const ir::Op& op);
  void lower_dot(const ir::Op& op);
  void lower_histogram(const ir::Op& op);
  /// histogram / histogram_ranks: register q's bin (i32), -1 where it is not counted (outside
  /// [0, bins) or masked off). Bins fit i32 (at most 2^20).
  llvm::Value* counted_bin(const ir::Op& op, int q);
  /// histogram_ranks: x staged in shared memory; warp w ranks the w-th contiguous part of the tile,
  /// 32 elements at a time (match.any.sync, popc, a per-warp counter per bin); a result adds the
  /// counts of the warps before its own.
  void lower_histogram_ranks(const ir::Op& op);
  /// sort: a bitonic network over (key, index) pairs in shared memory; gather: x staged in shared
  /// memory, read at the indices (lower_sort.cpp).
  void lower_sort(const ir::Op& op);
  void lower_gather(const ir::Op& op);
  /// inline_asm: one llvm::InlineAsm call per group of `pack` registers (lower_asm.cpp).
  void lower_inline_asm(const ir::Op& op);
  /// cuda_call: stage tiles in shared memory, call the CUDA device function from every thread,
  /// read in-out tiles back (lower_cuda.cpp).
  void lower_cuda_call(const ir::Op& op);

  // ---- dot on tensor cores (lower_mma.cpp)
  /// Lowers `dot` with mma.sync.aligned.m16n8k16 when a, b, acc and the result carry exactly the
  /// layouts of passes::gpu_rules::mma_v2_plan(op, num_warps) (f16/bf16 inputs, f32 acc); returns
  /// false, emitting nothing, otherwise (lower_dot then takes the shared-memory FMA path).
  bool lower_dot_mma(const ir::Op& op);
  /// 32-bit registers that already hold two 16-bit registers of a value (low, high), e.g. as
  /// ldmatrix returned them; lower_dot_mma uses them instead of re-packing.
  std::unordered_map<const ir::Value*, std::map<std::pair<int, int>, llvm::Value*>> packed32;

  // ---- tensor-core operands through shared memory (lower_ldmatrix.cpp)
  /// convert_layout to a layout ldmatrix can read (ldmatrix_plan) of 16-bit elements: the source
  /// is written to a swizzled tile (or, for a pipelined load, is already in its buffer) and read
  /// with ldmatrix.sync.aligned.m8n8.x{4,2,1}[.trans].b16. False (nothing emitted) otherwise.
  bool lower_convert_ldmatrix(const ir::Op& op);
  /// The lane part of the reads of r (layout planned by `p`) from `t` at absolute byte offset `base`.
  LdmatrixReads ldmatrix_setup(const ir::Value* r, const LdmatrixPlan& p, const SwizzledTile& t, llvm::Value* base);
  /// Emits (once) ldmatrix instruction q of m: registers 2*per_instr*q .. of r, into packed32[r].
  llvm::Value* ldmatrix_instr(const ir::Value* r, LdmatrixReads& m, int q);
  /// Every instruction of m; returns r's registers.
  std::vector<llvm::Value*> ldmatrix_read(const ir::Value* r, LdmatrixReads& m);
  /// Element offset of (row, col) in t, emitted.
  llvm::Value* swizzled_offset(const SwizzledTile& t, llvm::Value* row, llvm::Value* col);
  /// Writes tile x (any layout; elements of t.esize bytes) into t at byte `base` from smem_base_, each thread its
  /// runs along t.cdim as vectors of up to 16 bytes (no barrier).
  void store_swizzled(const ir::Value* x, const SwizzledTile& t, int64_t base);

  // ---- dot on Hopper tensor cores (lower_wgmma.cpp)
  /// Lowers `dot` with wgmma.mma_async (sm_90a) when the target has it (`wgmma`) and the result
  /// and acc carry passes::gpu_rules::mma_v3_plan's accumulator layout; a and b are read from
  /// shared memory: a `wgmma` pipelined load's current buffer, or the registers staged into a
  /// K-major swizzled tile. False (nothing emitted) otherwise.
  bool lower_dot_wgmma(const ir::Op& op);
  /// fence.proxy.async.shared::cta: this thread's shared-memory writes through the generic proxy
  /// become visible to the async proxy (wgmma, TMA) after the next barrier.
  void fence_proxy_async();
  /// wgmma.fence, threading `live` (f32 and b32 values the following wgmmas read) through it as
  /// in-out operands: returns the values to use after it, all computed before the fence.
  std::vector<llvm::Value*> wgmma_fence(const std::vector<llvm::Value*>& live);
  /// Two 16-bit values in one b32, lo in the low half: one cvt.rn.{bf16x2,f16x2}.f32 when both
  /// are f32 roundings, shifts and an or otherwise.
  llvm::Value* pack16x2(llvm::Value* lo, llvm::Value* hi);
  /// wgmma.wait_group n, threading `acc` through it (in-out operands): returns the values to use
  /// after it, so that nothing reads accumulators before the wgmma writing them are done.
  std::vector<llvm::Value*> wgmma_wait(int n, const std::vector<llvm::Value*>& acc);
  /// The dot of pipelined `for` op `loop` that may stay in flight across iterations: the body's
  /// only dot, on wgmma, reading only `wgmma` pipelined loads (directly or transposed), whose acc
  /// is a carried value used by nothing else and whose result is only yielded back into it. Null
  /// if there is none.
  const ir::Op* in_flight_dot(const ir::Op& loop) const;
  /// The in-flight dot of the pipelined loop being lowered (lower_dot_wgmma ends it with
  /// wait_group 1; lower_for_pipelined waits for it after the loop).
  const ir::Op* async_wgmma_ = nullptr;
  /// A wgmma dot issued but not yet waited for (lower_dot_wgmma defers the wait of every dot
  /// whose operands are not staged, other than a pipelined loop's in-flight dot; the whitelist of
  /// wgmma_flush_for keeps its buffers unwritten until the wait): its result's registers as the
  /// wgmmas left them, to be read only through wgmma_flush.
  struct PendingWgmma {
    const ir::Value* result;
    std::vector<llvm::Value*> acc;
    bool across = false;  // issued in the previous iteration of the loop (lower_for_body)
  };
  /// Every deferred wait copies the registers in its asm (wgmma_flush): the kernel has a dot that
  /// yield_interferes (set by run()).
  bool flush_copies_ = false;
  /// Dot `dot` is yielded into a loop-carried slot whose block argument is still read after it
  /// (the next block's scores issued before the softmax of the current ones): its raw registers
  /// cannot become the waited value's, so LLVM would copy them before a tied wait.
  bool yield_interferes(const ir::Op& dot) const;
  std::vector<PendingWgmma> pending_wgmma_;  // in commit order
  /// wgmma.wait_group for the pending dots up to and including the one whose result is `upto`
  /// (every pending dot when null), leaving the later ones in flight; their registers pass through
  /// the wait into `regs`.
  void wgmma_flush(const ir::Value* upto = nullptr);
  /// Before lowering `op`: waits for the pending dots it reads, or for all of them when op is not
  /// one a wgmma may run under (anything that writes memory, arrives on a barrier or holds a
  /// region; see lower_wgmma.cpp).
  void wgmma_flush_for(const ir::Op& op);

  // ---- tensor descriptors on TMA (lower_tma.cpp; sm_90a, blocks passes::tma_block_ok takes)
  /// desc_load / desc_store through cp.async.bulk.tensor and a shared-memory buffer.
  void lower_desc_tma(const ir::Op& op);
  /// Appends the op's offsets, innermost first, to args (as inline-asm operands $first...) and
  /// returns the PTX vector "{$first, ...}".
  std::string tma_coords(const ir::Op& op, std::vector<llvm::Value*>& args, int first);
  /// One cp.async.bulk.tensor load of the box at `coords` (i32, innermost first) of the tensor
  /// map at generic address `map` (i64) into shared memory at 32-bit address `dst`, completing
  /// its bytes on the mbarrier at `mbar` (PTX ISA 9.7.9.25.5.1).
  void tma_load_box(llvm::Value* dst, llvm::Value* map, const std::vector<llvm::Value*>& coords, llvm::Value* mbar);
  /// Tensor maps the kernel reads with a swizzled box (pipelined TMA loads into wgmma buffers):
  /// kernel argument index -> box width in elements (the swizzle is its bytes: 128, 64 or 32).
  std::map<int, int> tma_swizzled;

  // ---- TLE-Struct mbarriers and TMA copies (lower_tma.cpp)
  /// mbarrier_init (one thread inits, count x the arriving warps; fence; barrier),
  /// mbarrier_arrive (lane 0 of every warp arrives after bar.warp.sync; with tx thread 0
  /// announces the bytes with its arrival),
  /// mbarrier_wait (every thread spins on the parity), tma_copy (thread 0 issues the box).
  void lower_mbarrier(const ir::Op& op);
  /// The program has tma_copy ops: every barrier is preceded by fence.proxy.async, so generic
  /// writes (shared and global memory) before it are ordered before the async proxy's copies after it.
  bool proxy_fence_barriers_ = false;
  /// Some buffer wgmma reads in place (plan_buffer_reads) may be written through the generic proxy
  /// (a store, atomic, cp.async, inline asm or CUDA call into it): every mbarrier arrive is
  /// preceded by fence.proxy.async.shared::cta (another role's wgmma may read what this one wrote).
  bool fence_arrives_ = false;

  // ---- mbarriers (PTX ISA 9.7.13.15), at 32-bit shared-memory addresses
  void mbarrier_init(llvm::Value* addr, int count);
  /// Spins on mbarrier.try_wait.parity (test_wait.parity before sm_90) until the phase of parity
  /// `parity` (i32 0/1) completed.
  void mbarrier_wait(llvm::Value* addr, llvm::Value* parity);
  /// The parity (i32 0/1) of the phase that use number `use` (i64) of a buffer's barrier completes.
  llvm::Value* mbarrier_parity(llvm::Value* use);
  void mbarrier_arrive(llvm::Value* addr);
  /// cp.async.mbarrier.arrive.noinc: arrives when this thread's earlier cp.async copies land.
  void cp_async_arrive(llvm::Value* addr);
  /// The 32-bit shared-memory address of byte `off` of the dynamic shared memory.
  llvm::Value* smem_addr32(llvm::Value* off);

  // ---- software pipelining (lower_pipeline.cpp)
  /// The `for` the kernel warp-specializes, or null: with `warp_specialize` and 4 or 8 warps, the
  /// first pipelined loop directly in the kernel's body that lower_for_pipelined can plan, whose
  /// pipelined loads are all `wgmma` loads (read by wgmma dots), whose copy addresses come from
  /// register-wise ops (outer_cone), preceded by nothing that writes memory (the producer
  /// warpgroup runs that code too); with 8 warps only a loop with an in_flight_dot (its
  /// accumulator fits the registers left after the producers').
  const ir::Op* find_ws_loop() const;
  /// The warp-specialized form of lower_for_pipelined for ws_loop_ (lower_pipeline.cpp): `issue`
  /// copies an iteration into a buffer (with its TMA boxes when the flag is set: once per
  /// iteration, whereas the cp.async copies are issued per compute warp), `bind_reads` points the loads at a buffer, `next_slot`
  /// advances a buffer index; `mbar_at` is where plan_loop put the mbarriers, `bytes` the end of
  /// the loop's shared memory; `tma_only`: every pipelined load is a TMA load (one producer
  /// thread issues them, the full barriers count one arrival).
  void lower_warp_specialized(const ir::Op& op, const Trips& t, int S, int64_t mbar_at, int64_t bytes,
                              const std::unordered_set<const ir::Value*>& need,
                              const std::function<void(llvm::Value*, llvm::Value*, bool)>& issue,
                              const std::function<void(llvm::Value*)>& bind_reads,
                              const std::function<llvm::Value*(llvm::Value*)>& next_slot, bool tma_only);
  /// The ops of the kernel's body before `loop` that compute the values in `need` (the operands
  /// of the loop's pipelined copies), transitively, in program order: the producer warps compute
  /// them again for each compute warp they copy for. Nullopt if one cannot be (it uses shared
  /// memory or barriers, writes memory, or holds a region).
  std::optional<std::vector<const ir::Op*>> outer_cone(const ir::Op& loop,
                                                       std::unordered_set<const ir::Value*> need) const;
  /// A convergent inline-asm statement with a memory clobber and i32 operands $0.. (e.g.
  /// shared-memory addresses).
  void asm_stmt(const std::string& text, const std::vector<llvm::Value*>& args = {});
  const ir::Op* ws_loop_ = nullptr;
  // ---- gpu::warp_specialize (lower.cpp)
  /// The kernel's warp_specialize op, or null; its launch warps (0 without one).
  const ir::Op* ws_op_ = nullptr;
  int ws_launch_ = 0;
  /// Registers per thread at entry (`.maxnreg`) when a role asks for setmaxnreg, else 0.
  int entry_regs_ = 0;
  /// In a role: its named barrier (1 + the role's index; barrier() syncs the role's warps with it).
  int role_barrier_ = 0;
  /// One branch per role on the warp index: tid / warp rebased to the role's first warp,
  /// num_warps the role's, barriers the role's, its own shared scratch after every earlier
  /// role's, setmaxnreg where asked (sm_90a). A barrier of all warps comes first.
  void lower_roles(const ir::Op& op);
  /// The warps that arrive on the mbarriers `init` initializes: those of the role(s) whose
  /// arrive statements name them (all must agree: UserError otherwise), else the program's.
  int arriving_warps(const ir::Op& init) const;
  /// After the warp-specialized loop only the num_warps compute warps run: barrier() syncs them
  /// with a named barrier (bar.sync 1, 32 * num_warps).
  bool consumers_only_ = false;
  /// A `for` with `num_stages` and pipelined loads (passes/gpu/pipeline_loads.cpp): prologue of
  /// cp.async copies, waits, barriers, ldmatrix reads of the current stage. False (nothing
  /// emitted) when the loop's pipelined loads cannot be lowered so; lower_for then lowers it plainly.
  bool lower_for_pipelined(const ir::Op& op);
  /// Bytes of pipeline buffers the function's pipelined loops need (the largest loop).
  int64_t pipeline_smem_bytes() const;
  struct PipeRead {
    SwizzledTile tile;
    llvm::Value* base;  // absolute byte offset of the stage read in this iteration
    int own_vec = 0;    // > 0: read back in the load's own layout (read_own_stage), vectors of own_vec
    bool wgmma = false;  // read by a wgmma dot through matrix descriptors (lower_wgmma.cpp)
  };
  /// The registers of pipelined load `ld` (a `pipe_vec` load) from this thread's vectors in the
  /// stage buffer `pr`.
  void read_own_stage(const ir::Op& ld, const PipeRead& pr);
  /// Shared-memory address of this thread's vector q (of `vbytes` bytes) in a `pipe_vec` stage
  /// buffer at absolute byte offset `stage`: byte (q * threads + tid) * vbytes of it.
  llvm::Value* own_slot(llvm::Value* stage, int q, int vbytes);
  /// The stage buffer of the pipelined load that defines x when its convert_layout reads it with
  /// ldmatrix (not a `pipe_vec` load, whose registers are its own); null otherwise.
  const PipeRead* ldmatrix_source(const ir::Value* x) const {
    if (!x->def) return nullptr;
    auto it = pipe_reads.find(x->def);
    return it != pipe_reads.end() && it->second.own_vec == 0 && !it->second.wgmma ? &it->second : nullptr;
  }
  /// The stage buffer of the `wgmma` pipelined load that defines x, or whose 2-D transpose x is
  /// (`*transposed` set then); null otherwise.
  const PipeRead* wgmma_source(const ir::Value* x, bool* transposed = nullptr) const;
  /// A dot operand wgmma reads straight from the program's own buffer (TLE-Struct): the load's
  /// pointer tile is a scalar `base` plus offsets that are, element for element, a wgmma tile's
  /// (K-major or MN-major SwizzledTile::make_wgmma, e.g. a buffer view with the 128-byte swizzle
  /// and 64 16-bit elements per row), from a base aligned to its swizzle period.
  struct BufferRead {
    SwizzledTile tile;
    const ir::Value* base;
  };
  /// Loads read so (only by a dot that lowers to wgmma; they are not lowered themselves).
  std::unordered_map<const ir::Op*, BufferRead> buffer_reads_;
  /// Finds them (lower_wgmma.cpp), before lowering: for each dot that will run on wgmma, each
  /// operand that is a load used only by it, without a mask, in the dot's block with nothing but
  /// pure ops and loads between them (the wgmma reads the buffer at the dot), whose offsets
  /// evaluate at compile time to a wgmma tile's (atoms as gpu_rules::wgmma_atom allows).
  void plan_buffer_reads();
  /// A dot operand defined in the kernel's entry block and read by wgmma dots inside its loops
  /// (attention's q): written once, where it is defined, into a K-major wgmma tile of its own
  /// (below `smem`, never reused) and read in place by every one of those dots, so its registers
  /// are free for the loops (A no longer from registers; B no longer staged at every dot).
  struct Resident {
    SwizzledTile tile;
    int64_t offset;  // bytes from `smem` (negative: the region lies below it)
  };
  std::unordered_map<const ir::Value*, Resident> resident_;
  int64_t resident_bytes_ = 0;
  /// Finds them (lower_wgmma.cpp), before `smem` is placed: values of the entry block every use
  /// of which is the same operand of a dot that lowers to wgmma (a only where the dot's N is 128
  /// or more), at least one of those dots in a loop; not with warp specialization (its roles' dots
  /// keep their own paths).
  void plan_resident_operands();
  /// After op is lowered: writes its result into its resident tile if it has one, then
  /// fence.proxy.async and a barrier (the wgmma dots read it through the async proxy).
  void stage_resident(const ir::Op& op);

  std::unordered_map<const ir::Op*, PipeRead> pipe_reads;  // pipelined loads of the loop being lowered
};

}  // namespace tle::gpu::detail
