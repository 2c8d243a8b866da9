// src/backend/cpu/jit.cpp - compile_object(): lower, verify, optimize (new pass manager, O3 without
// loop unrolling, host CPU), emit object code; load(): link it into the process-wide ORC LLJIT;
// launch() over the thread pool.
#include <fmt/format.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <atomic>
#include <climits>
#include <mutex>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/lower.hpp"
#include "backend/cpu/program_guard.hpp"
#include "backend/cpu/runtime_helpers.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "support/llvm_guard.hpp"

namespace tle::cpu {
namespace {

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::logAllUnhandledErrors(std::move(e), os);
  return os.str();
}

template <class T> T check(llvm::Expected<T> v, const char* step) {
  if (!v) throw RuntimeError(step, to_string(v.takeError()));
  return std::move(*v);
}
void check(llvm::Error e, const char* step) {
  if (e) throw RuntimeError(step, to_string(std::move(e)));
}

/// The process-wide JIT (created once, never destroyed: kernels may outlive static destructors).
struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::mutex mu;  // serializes loading objects, lookups and removals
  std::atomic<uint64_t> counter{0};
};

void init_llvm_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

llvm::orc::JITTargetMachineBuilder host_jtmb() {
  init_llvm_target();
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "JITTargetMachineBuilder::detectHost");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

Jit& jit() {
  static Jit* j = [] {
    auto* jj = new Jit;
    jj->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(host_jtmb());
    jj->lljit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jj->jtmb).create(), "LLJITBuilder::create");
    auto& jd = jj->lljit->getMainJITDylib();
    const llvm::DataLayout& dl = jj->lljit->getDataLayout();
    jd.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(dl.getGlobalPrefix()),
                          "DynamicLibrarySearchGenerator::GetForCurrentProcess"));
    llvm::orc::MangleAndInterner mangle(jj->lljit->getExecutionSession(), dl);
    llvm::orc::SymbolMap syms;
    for (auto& [name, addr] : detail::runtime_helpers()) {
      syms[mangle(name)] = llvm::orc::ExecutorSymbolDef(llvm::orc::ExecutorAddr::fromPtr(addr),
                                                         llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
    }
    check(jd.define(llvm::orc::absoluteSymbols(std::move(syms))), "JITDylib::define(runtime helpers)");
    return jj;
  }();
  return *j;
}

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return r.empty() ? "kernel" : r;
}

void optimize(llvm::Module& m, llvm::TargetMachine* tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  // No loop unrolling (partial or full, except where metadata forces it): the vectorizer's
  // interleaving gives the loops their width, and unrolling the constant-trip loops of tiles made
  // dot kernels compile for seconds (a 128x128x32 f32 matmul block: 3.9 s, 15733 lines of IR,
  // most of it in the back end) for no speed on the examples and benchmarks.
  pto.LoopUnrolling = false;
  llvm::PassBuilder pb(tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);
}

/// Lowers f into a fresh module configured for the host, with the entry `symbol`; sets the
/// scratch arena its programs need.
std::unique_ptr<llvm::Module> build_module(const ir::Function& f, llvm::LLVMContext& ctx, llvm::TargetMachine& tm,
                                           const std::string& symbol, uint64_t& scratch_bytes) {
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  m->setDataLayout(tm.createDataLayout());
  m->setTargetTriple(tm.getTargetTriple().str());
  scratch_bytes = detail::lower_function(f, *m, symbol).scratch_bytes;
  for (auto& fn : *m) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", tm.getTargetCPU());
    fn.addFnAttr("target-features", tm.getTargetFeatureString());
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*m, &os)) throw RuntimeError("llvm::verifyModule", fmt::format("kernel '{}': {}", f.name, os.str()));
  return m;
}

std::unique_ptr<llvm::TargetMachine> host_tm() {
  return check(host_jtmb().createTargetMachine(), "JITTargetMachineBuilder::createTargetMachine");
}

/// Removes a kernel's code from the JIT (its JITDylib) when the last CompiledKernel copy goes away.
struct KernelResources {
  llvm::orc::JITDylib* jd = nullptr;
  ~KernelResources() {
    if (!jd) return;
    Jit& j = jit();
    std::lock_guard<std::mutex> lk(j.mu);
    llvm::consumeError(j.lljit->getExecutionSession().removeJITDylib(*jd));
  }
};

/// The RuntimeError of a program that faulted.
RuntimeError program_fault_error(const CompiledKernel& k, const int64_t grid[3], const detail::ProgramFault& f,
                                 const SrcLoc& launched_at) {
  const int64_t x = f.pid % grid[0], y = f.pid / grid[0] % grid[1], z = f.pid / grid[0] / grid[1];
  std::string where = launched_at.known() ? fmt::format(" launched at {}:{}", launched_at.file, launched_at.line) : "";
  std::string program = f.pid >= 0 ? fmt::format("program ({}, {}, {})", x, y, z) : "a program (before its first)";
  if (f.message)
    return RuntimeError("tle::cpu::launch", fmt::format("kernel '{}'{}: {} of the grid {}x{}x{} stopped: {}. The "
                                                        "programs still running finished; the others did not run",
                                                        k.kernel, where, program, grid[0], grid[1], grid[2], f.message));
  return RuntimeError("tle::cpu::launch",
                      fmt::format("kernel '{}'{}: {} of the grid {}x{}x{} stopped on {} at address {}; a load, store "
                                  "or atomic of the program reached memory it may not (a null or freed pointer, or "
                                  "an offset or mask that lets an access leave its buffer). The programs still "
                                  "running finished; the others did not run",
                                  k.kernel, where, program, grid[0], grid[1], grid[2],
                                  detail::signal_description(f.signal), f.address));
}

}  // namespace

Object compile_object(const ir::Function& f, int opt_level) {
  Object o;
  o.symbol = "tle_" + sanitize(f.name);
  llvm::LLVMContext ctx;
  auto tm = host_tm();
  auto m = build_module(f, ctx, *tm, o.symbol, o.scratch_bytes);
  bool cannot_emit = false;
  // An LLVM fatal error (a selection failure on the host target) is an InternalError, not an exit.
  auto fatal = support::catch_llvm_fatal_errors([&] {
    if (opt_level > 0) optimize(*m, tm.get());
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      cannot_emit = true;
      return;
    }
    pm.run(*m);
    o.bytes.assign(buf.begin(), buf.end());
  });
  if (cannot_emit) throw RuntimeError("TargetMachine::addPassesToEmitFile", "the host target cannot emit object files");
  if (fatal)
    throw InternalError(fmt::format("kernel '{}': LLVM's host code generator failed (a tle bug; please report it "
                                    "with TLE_DUMP_IR=dir's files): {}",
                                    f.name, *fatal));
  return o;
}

std::shared_ptr<CompiledKernel> load(const Object& o, const std::string& kernel_name) {
  Jit& j = jit();
  auto k = std::make_shared<CompiledKernel>();
  k->name = o.symbol;
  k->kernel = kernel_name;
  k->scratch_bytes = o.scratch_bytes;
  auto res = std::make_shared<KernelResources>();
  std::lock_guard<std::mutex> lk(j.mu);
  // A JITDylib per kernel: the same object (a disk-cache hit for a second kernel object with
  // the same code) may be loaded more than once, and removing a kernel removes just its code.
  auto jd_or = j.lljit->createJITDylib(fmt::format("{}.{}", o.symbol, j.counter.fetch_add(1)));
  if (!jd_or) throw RuntimeError("LLJIT::createJITDylib", to_string(jd_or.takeError()));
  llvm::orc::JITDylib& jd = *jd_or;
  res->jd = &jd;
  jd.addToLinkOrder(j.lljit->getMainJITDylib());  // runtime helpers and the process's symbols
  check(j.lljit->addObjectFile(jd, llvm::MemoryBuffer::getMemBufferCopy(o.bytes, o.symbol)), "LLJIT::addObjectFile");
  k->entry = check(j.lljit->lookup(jd, o.symbol), "LLJIT::lookup").toPtr<EntryFn>();
  k->resources = std::move(res);
  return k;
}

std::shared_ptr<CompiledKernel> compile(const ir::Function& f, int opt_level) {
  return load(compile_object(f, opt_level), f.name);
}

const std::string& host_target() {
  static const std::string t = [] {
    auto tm = host_tm();
    return fmt::format("{} {} {}", tm->getTargetTriple().str(), tm->getTargetCPU().str(),
                       tm->getTargetFeatureString().str());
  }();
  return t;
}

std::string llvm_ir_text(const ir::Function& f, bool optimized) {
  llvm::LLVMContext ctx;
  auto tm = host_tm();
  uint64_t scratch_bytes = 0;
  auto m = build_module(f, ctx, *tm, "tle_" + sanitize(f.name), scratch_bytes);
  if (optimized) optimize(*m, tm.get());
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return os.str();
}

void launch(const CompiledKernel& k, void* const* args, const int64_t grid[3], const SrcLoc& launched_at,
            bool in_order) {
  if (!k.entry) throw RuntimeError("tle::cpu::launch", "kernel is not compiled");
  int64_t total = 1;
  for (int i = 0; i < 3; ++i) {
    if (grid[i] < 0 || grid[i] > INT32_MAX)
      throw RuntimeError("tle::cpu::launch", fmt::format("grid axis {} is {}, outside [0, 2^31)", i, grid[i]));
  }
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0) return;
    if (__builtin_mul_overflow(total, grid[i], &total))
      throw RuntimeError("tle::cpu::launch", "grid has more than 2^63 programs");
  }
  struct Chunk {
    const CompiledKernel& k;
    void* const* args;
    const int64_t* grid;
    int64_t begin, end;
  };
  auto run = [](void* ctx, void* scratch, volatile int64_t* current_pid) {
    auto* c = static_cast<Chunk*>(ctx);
    c->k.entry(c->args, c->grid, c->begin, c->end, scratch, current_pid);
  };
  auto programs = [&](int64_t b, int64_t e) {
    Chunk c{k, args, grid, b, e};
    if (auto fault = detail::run_programs(run, &c, k.scratch_bytes)) throw program_fault_error(k, grid, *fault, launched_at);
  };
  if (in_order) programs(0, total);
  else ThreadPool::global().parallel_for(total, programs);
}

}  // namespace tle::cpu
