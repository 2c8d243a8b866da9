// src/passes/gpu/check_registers.cpp - refuses tiles too large for a thread's registers
// (gpu_passes.hpp, check_tile_registers; the last step of the GPU pipeline).
//
// The GPU keeps every tile in registers: a thread holds the distinct elements its layout gives it
// (layout.num_regs() less the register copies of broadcast layouts; a 64-bit element takes two
// 32-bit registers). An sm_80/sm_90 thread has at most 255 registers;
// past that ptxas spills to local memory, and a tile many times larger makes PTX whose size and
// JIT time grow with the tile (a [4, 65536] f32 tile on 4 warps: 2048 elements per thread, 292 KB
// of PTX, 24 s in the driver's JIT, nearly all of it spilled). Such a kernel is refused here,
// before any code is generated, with the numbers the user needs: how many registers the tile
// takes per thread, and which num_warps would bring it under the hardware limit (or that the
// tile must be processed in chunks by a loop). Tiles up to kMaxTileRegs registers per thread
// (4x the hardware limit) still compile: some spilling kernels are wanted (and ptxas reports
// them: Kernel::stats, "spills").
#include <fmt/format.h>

#include <bit>

#include "layout/ir_layout.hpp"
#include "passes/gpu/gpu_passes.hpp"

namespace tle::passes {
namespace {

constexpr int64_t kHardwareRegs = 255;

struct Worst {
  int64_t regs = 0;
  const ir::Value* value = nullptr;
  const ir::Op* op = nullptr;  // the op that defines it, or owns the block argument
};

/// 32-bit registers per thread of v: its distinct elements per thread (register copies of one
/// element - the free register bits of a broadcast layout - are one SSA value), two for 64-bit ones.
int64_t regs_of(const ir::Value& v) {
  if (!v.type.layout) return 0;
  const auto& ll = v.type.layout->ll;
  const int64_t distinct = int64_t(ll.num_regs()) >> std::popcount(ll.free_variable_mask(layout::kReg));
  const int64_t words = byte_size(v.type.dtype) > 4 ? 2 : 1;  // ptr, i64, u64, f64: two 32-bit registers
  return distinct * words;
}

void scan(const ir::Block& b, Worst& w) {
  for (auto& op : b.ops) {
    for (auto& r : op->results)
      if (int64_t n = regs_of(*r); n > w.regs) w = {n, r.get(), op.get()};
    for (auto& reg : op->regions) {
      for (auto& a : reg->body().args)
        if (int64_t n = regs_of(*a); n > w.regs) w = {n, a.get(), op.get()};
      scan(reg->body(), w);
    }
  }
}

}  // namespace

namespace {
/// The check on the tiles under `root`, laid out over num_warps warps (`role`: a warp_specialize
/// role's, whose warps the advice names).
void check_block(const ir::Block& root, int num_warps, bool role) {
  Worst w;
  scan(root, w);
  if (w.regs <= kMaxTileRegs) return;
  // A layout without replication halves its registers per thread when the warps double.
  int fits = 0;
  for (int nw = num_warps * 2; nw <= 32 && !fits; nw *= 2)
    if (w.regs * num_warps / nw <= kHardwareRegs) fits = nw;
  const std::string advice =
      fits ? fmt::format("{} {} ({}about {} registers per thread) or process the tile in smaller chunks in a loop",
                         role ? "give the gpu::warp_specialize role num_warps" : "launch with num_warps", fits,
                         role ? "" : "Grid::with_warps; ", w.regs * num_warps / fits)
           : fmt::format("even num_warps 32 would need about {} per thread: process the tile in smaller chunks in a "
                         "loop (range(...) over blocks of it)",
                         w.regs * num_warps / 32);
  throw UserError(w.op->loc,
                  fmt::format("{}: a {} tile needs {} 32-bit registers per thread on {} warps; a GPU thread has at most "
                              "{}, and tle refuses tiles that need more than {} (most of the tile would spill to local "
                              "memory and the PTX would take tens of seconds to compile); {}",
                              ir::op_mnemonic(w.op->kind), w.value->type.str(), w.regs, num_warps, kHardwareRegs,
                              kMaxTileRegs, advice));
}
}  // namespace

void check_tile_registers(const ir::Function& f, int num_warps) {
  if (const ir::Op* ws = ir::find_warp_specialize(f)) {
    for (size_t r = 0; r < ws->regions.size(); ++r)
      check_block(ws->regions[r]->body(), static_cast<int>(ws->ints_attr("warps")[r]), true);
    return;
  }
  check_block(f.entry(), num_warps, false);
}

}  // namespace tle::passes
