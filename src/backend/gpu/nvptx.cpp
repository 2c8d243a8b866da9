// src/backend/gpu/nvptx.cpp - PTX from LLVM IR through the NVPTX back end (see nvptx.hpp).
#include "backend/gpu/nvptx.hpp"

#include <fmt/format.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/OptBisect.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/IPO/Internalize.h>

#include <mutex>

#include "support/llvm_guard.hpp"
#include "tle/error.hpp"

extern "C" const char tle_libdevice_begin[];
extern "C" const char tle_libdevice_end[];

namespace tle::gpu {
namespace {

const llvm::Target& nvptx_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget("nvptx64-nvidia-cuda", err);
  if (!t) throw RuntimeError("llvm::TargetRegistry::lookupTarget(nvptx64)", err);
  return *t;
}

std::unique_ptr<llvm::TargetMachine> target_machine(const Target& t) {
  llvm::TargetOptions opt;
  // Standard: only llvm.fmuladd (none emitted) may fuse; separate fmul and fadd stay unfused, so the
  // GPU rounds products and sums like the CPU does.
  opt.AllowFPOpFusion = llvm::FPOpFusion::Standard;
  std::string features = fmt::format("+ptx{}", t.ptx_version);
  std::unique_ptr<llvm::TargetMachine> tm(nvptx_target().createTargetMachine(
      "nvptx64-nvidia-cuda", t.cpu(), features, opt, std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw RuntimeError("llvm::Target::createTargetMachine", "cannot create the NVPTX target for " + t.cpu());
  return tm;
}

void link_libdevice(llvm::Module& m) {
  bool needed = false;
  for (auto& f : m)
    if (f.isDeclaration() && f.getName().starts_with("__nv_")) needed = true;
  if (!needed) return;
  llvm::StringRef bytes(tle_libdevice_begin, static_cast<size_t>(tle_libdevice_end - tle_libdevice_begin));
  // Lazily: only the bodies the linker asks for (LinkOnlyNeeded: the __nv_ functions the kernel
  // calls and theirs) are read from the bitcode; parsing all of libdevice's ~350 functions was most
  // of the LLVM time of a kernel that calls one math function.
  auto lib = llvm::getLazyBitcodeModule(llvm::MemoryBufferRef(bytes, "libdevice.10.bc"), m.getContext());
  if (!lib) {
    std::string s;
    llvm::raw_string_ostream os(s);
    llvm::logAllUnhandledErrors(lib.takeError(), os);
    throw RuntimeError("llvm::getLazyBitcodeModule(libdevice)", os.str());
  }
  (*lib)->setDataLayout(m.getDataLayout());
  (*lib)->setTargetTriple(m.getTargetTriple());
  // The linker reads the lazy bodies and reports what fails as context diagnostics, which without
  // a handler of ours would print and exit the process: collect them for the exception instead.
  struct Collect : llvm::DiagnosticHandler {
    std::string text;
    bool handleDiagnostics(const llvm::DiagnosticInfo& di) override {
      llvm::raw_string_ostream os(text);
      llvm::DiagnosticPrinterRawOStream printer(os);
      di.print(printer);
      os << "\n";
      return true;
    }
  };
  llvm::LLVMContext& ctx = m.getContext();
  auto previous = ctx.getDiagnosticHandler();
  ctx.setDiagnosticHandler(std::make_unique<Collect>());
  bool failed = llvm::Linker::linkModules(m, std::move(*lib), llvm::Linker::Flags::LinkOnlyNeeded);
  auto mine = ctx.getDiagnosticHandler();
  ctx.setDiagnosticHandler(std::move(previous));
  if (failed) {
    const std::string& log = static_cast<Collect*>(mine.get())->text;
    throw RuntimeError("llvm::Linker::linkModules(libdevice)", "linking libdevice failed", log);
  }
}

/// The gate the NVPTX code generator runs under (set on the kernel's own LLVMContext, so the CPU
/// back end, on other contexts, keeps every pass): Loop Strength Reduction is skipped. On tile
/// loops - every register's address and mask an induction-variable user, with bases that differ
/// per register - its formula search ran for seconds to minutes (moe_align's one-kernel path at 4
/// warps: 9 s for 256 experts, over two minutes for 2048). Without it matmul, attention, topk and
/// moe_align ran within the spread on an H100 (benchmarks/RESULTS.md, 2026-12-08); the plain
/// attention kernel at BN = 128 takes 251 registers instead of 206 (one program per SM either way).
/// The name is the legacy pass's registered one (INITIALIZE_PASS "loop-reduce"); the gate replaces
/// the context's bisect gate, so -opt-bisect-limit does not reach NVPTX code generation.
struct NoLoopStrengthReduction final : llvm::OptPassGate {
  bool shouldRunPass(const llvm::StringRef pass, llvm::StringRef) override { return pass != "Loop Strength Reduction"; }
  bool isEnabled() const override { return true; }
};

}  // namespace

void configure_module(llvm::Module& m, const Target& t) {
  auto tm = target_machine(t);
  m.setTargetTriple("nvptx64-nvidia-cuda");
  m.setDataLayout(tm->createDataLayout());
  // libdevice's __nvvm_reflect("__CUDA_FTZ"): keep denormals (IEEE), as PyTorch's kernels do.
  m.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
}

std::string emit_ptx(llvm::Module& m, const Target& t) {
  auto tm = target_machine(t);
  link_libdevice(m);
  // Everything but the kernels becomes internal, so libdevice's unused functions disappear.
  llvm::internalizeModule(m, [](const llvm::GlobalValue& g) {
    auto* f = llvm::dyn_cast<llvm::Function>(&g);
    return f && f->getCallingConv() == llvm::CallingConv::PTX_Kernel;
  });
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(m, &os)) throw RuntimeError("llvm::verifyModule(nvptx)", os.str());
  }
  std::string ptx_text;
  bool cannot_emit = false;
  // An LLVM fatal error (NVPTX's "Cannot select", fuzzer seed 805) is an InternalError naming the
  // kernel, not an exit of the host process (support/llvm_guard.hpp).
  auto fatal = support::catch_llvm_fatal_errors([&] {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);

    llvm::SmallString<0> ptx;
    llvm::raw_svector_ostream os(ptx);
    static auto& gate = *new NoLoopStrengthReduction;  // stateless; never destroyed
    m.getContext().setOptPassGate(gate);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
      cannot_emit = true;
      return;
    }
    pm.run(m);
    ptx_text = std::string(ptx.str());
  });
  if (cannot_emit) throw RuntimeError("llvm::TargetMachine::addPassesToEmitFile", "NVPTX cannot emit PTX");
  if (fatal)
    throw InternalError(fmt::format("module '{}': LLVM's NVPTX back end failed (a tle bug; please report it with "
                                    "TLE_DUMP_IR=dir's files): {}",
                                    m.getName().str(), *fatal));
  return ptx_text;
}

}  // namespace tle::gpu
