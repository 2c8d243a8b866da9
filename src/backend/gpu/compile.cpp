// src/backend/gpu/compile.cpp - gpu::compile: GPU passes, lowering, PTX (see gpu_backend.hpp).
#include <fmt/format.h>
#include <llvm/Support/raw_ostream.h>

#include <cctype>

#include "backend/gpu/gpu_backend.hpp"
#include "backend/gpu/lower.hpp"
#include "passes/pass.hpp"

namespace tle::gpu {

Artifact compile(ir::Function& f, const Target& target, const Options& options, bool keep_llvm_ir) {
  if (options.num_warps < 1 || options.num_warps > 32 || (options.num_warps & (options.num_warps - 1)))
    throw UserError(f.loc, fmt::format("num_warps must be a power of two from 1 to 32, got {}", options.num_warps));
  if (options.num_stages < 1)
    throw UserError(f.loc, fmt::format("num_stages must be at least 1, got {}", options.num_stages));
  if (options.maxnreg != 0 && (options.maxnreg < 24 || options.maxnreg > 255))
    throw UserError(f.loc, fmt::format("maxnreg must be 0 (no limit) or from 24 to 255, got {}", options.maxnreg));
  const bool wgmma = target.sm == 90 && target.arch_specific;  // sm_90a
  passes::GpuPassStats pass_stats;
  passes::run_gpu_pipeline(f, options.num_warps, target.sm >= 80 ? options.num_stages : 0, wgmma,  // 0: no cp.async
                           wgmma && options.tma, options.reorder_loads, &pass_stats);
  std::string name = "tle_";
  for (char c : f.name) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  // Shared memory per block that an sm can give a kernel (opt-in maximum, CUDA Programming
  // Guide, "Compute capabilities": 227 KB on sm_90, 163 KB on sm_80, 99 KB on sm_86/89).
  const int64_t smem_limit = target.sm >= 90 ? 232448 : target.sm == 80 ? 166912 : 101376;
  // Resident dot operands (Lowerer::plan_resident_operands) only where they fit: a kernel that
  // needs too much shared memory with them is lowered again without them.
  for (bool resident : {true, false}) {
    llvm::LLVMContext ctx;
    llvm::Module m(name, ctx);
    configure_module(m, target);
    detail::Lowerer lowerer(f, m, options.num_warps, options.maxnreg, wgmma, wgmma && options.warp_specialize);
    lowerer.fp8_cvt = target.sm >= 89;
    lowerer.resident_operands = resident;
    lowerer.run(name);
    if (resident && lowerer.resident_shared_bytes() > 0 && lowerer.shared_bytes() > smem_limit) continue;
    if (lowerer.user_shared_bytes() > smem_limit) {  // the program's own buffers alone do not fit
      const ir::Op* largest = nullptr;
      std::string list;
      ir::walk(f.entry(), [&](const ir::Op& op) {
        if (op.kind != ir::OpKind::LocalAlloc) return;
        const int64_t b = ir::local_alloc_bytes(op);
        list += fmt::format("{}{}:{} ({} bytes)", list.empty() ? "" : ", ", op.loc.file, op.loc.line, b);
        if (!largest || b > ir::local_alloc_bytes(*largest)) largest = &op;
      });
      throw UserError(largest ? largest->loc : f.loc,
                      fmt::format("the kernel's gpu::alloc buffers take {} bytes of shared memory per program, more than "
                                  "the {} bytes an {} block can use (buffers: {}); use fewer stages or smaller buffers",
                                  lowerer.user_shared_bytes(), smem_limit, target.cpu(), list));
    }
    if (lowerer.shared_bytes() > smem_limit) {
      const ir::Op* op = lowerer.smem_op;
      const int64_t pipelined = lowerer.pipeline_smem_bytes();
      const std::string stages =
          pipelined > 0 ? fmt::format(" ({} of them for the cp.async buffers of a pipelined loop: fewer stages with "
                                      "Grid::with_stages, now {}, or the loop's range(..., {{.num_stages = S}}) also help)",
                                      pipelined, options.num_stages)
                        : "";
      const std::string user = op ? fmt::format("this {}", ir::op_mnemonic(op->kind)) : "a layout conversion";
      std::string buffers;
      if (lowerer.user_shared_bytes() > 0)
        buffers = fmt::format(" ({} of them the kernel's own gpu::alloc buffers: fewer stages or smaller buffers)",
                              lowerer.user_shared_bytes());
      throw UserError(op ? op->loc : f.loc,
                      fmt::format("this kernel needs {} bytes of shared memory per program{}{}, more than the {} bytes "
                                  "an {} block can use (the largest user is {}, which stages its tiles in shared "
                                  "memory); use smaller tiles",
                                  lowerer.shared_bytes(), stages, buffers, smem_limit, target.cpu(), user));
    }
    Artifact a;
    a.entry = name;
    a.num_warps = lowerer.launch_warps();
    a.shared_bytes = static_cast<int>(lowerer.shared_bytes());
    a.tma_swizzled.assign(lowerer.tma_swizzled.begin(), lowerer.tma_swizzled.end());
    a.stats.conversions = pass_stats.conversions;
    a.stats.conversions_without_elimination = pass_stats.conversions_without_elimination;
    a.stats.conversions_through_shared = lowerer.conversions_through_shared;
    a.stats.conversion_shared_bytes = lowerer.conversion_shared_bytes;
    a.stats.barriers = lowerer.barriers;
    a.stats.loads_reordered = pass_stats.loads_reordered;
    if (keep_llvm_ir) {
      llvm::raw_string_ostream os(a.llvm_ir);
      m.print(os, nullptr);
    }
    a.ptx = emit_ptx(m, target);
    return a;
  }
  throw InternalError("gpu::compile: no lowering was attempted");
}

}  // namespace tle::gpu
