// src/passes/pipeline.cpp - THE pass order, plus IR dumps and verification between passes.
//
// First expand_descriptors (tensor-descriptor accesses to pointer loads and stores; a GPU compile
// keeps TMA's and lets run_gpu_pipeline decide by target). Then one round is canonicalize -> cse -> dce. Rounds repeat while a round changes the IR (dce can
// expose constants to fold, e.g. a loop-carried value replaced by its constant init), at most
// kMaxRounds times.
//
// TLE_DUMP_IR=1 prints the traced IR and the IR after every pass to stderr; TLE_DUMP_IR=<dir>
// writes <dir>/<kernel>.<NN>.<stage>.tir instead (NN = 00 for the traced IR, then 01, 02, ...).
// TLE_VERIFY=1 (always in debug builds) runs ir::verify on the traced IR and after every pass.
#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <fstream>

#include "passes/gpu/gpu_passes.hpp"
#include "passes/pass.hpp"

namespace tle::passes {
namespace {

constexpr int kMaxRounds = 3;

bool env_is_one(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "1";
}

std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out.empty() ? "kernel" : out;
}

class Dumper {
 public:
  Dumper(const ir::Function& f, const PipelineOptions& o, int first_index = 0) : f_(f), opt_(o), index_(first_index) {
    if (o.dump_from_env) {
      const char* v = std::getenv("TLE_DUMP_IR");
      if (v && *v && std::string(v) != "0") {
        if (std::string(v) == "1") {
          to_stderr_ = true;
        } else {
          dir_ = v;
          std::error_code ec;
          std::filesystem::create_directories(dir_, ec);
        }
      }
    }
  }

  void stage(const std::string& name) {
    int n = index_++;
    if (!to_stderr_ && dir_.empty() && !opt_.dumps) return;
    std::string text = ir::print(f_);
    if (opt_.dumps) opt_.dumps->emplace_back(name, text);
    if (to_stderr_)
      fmt::print(stderr, "// ----- tle IR of @{} after {} ({:02}) -----\n{}\n", f_.name, name, n, text);
    if (!dir_.empty()) {
      auto path = std::filesystem::path(dir_) / fmt::format("{}.{:02}.{}.tir", file_safe(f_.name), n, name);
      std::ofstream(path) << text;
    }
  }

 private:
  const ir::Function& f_;
  const PipelineOptions& opt_;
  bool to_stderr_ = false;
  std::string dir_;
  int index_;
};

/// ir::verify(f) (and verify_layouts when num_warps > 0), a failure rethrown as "<where>: ...".
void verify_at(const ir::Function& f, const std::string& where, int num_warps = 0) {
  try {
    ir::verify(f);
    if (num_warps > 0) verify_layouts(f, num_warps);
  } catch (const InternalError& e) {
    throw InternalError(fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace

const std::vector<Pass>& pipeline_passes() {
  static const std::vector<Pass> passes = {
      {"canonicalize", &canonicalize},
      {"cse", &cse},
      {"dce", &dce},
  };
  return passes;
}

PipelineOptions default_pipeline_options() {
  PipelineOptions o;
#ifndef NDEBUG
  o.verify = true;
#endif
  if (env_is_one("TLE_VERIFY")) o.verify = true;
  return o;
}

void run_pipeline(ir::Function& f, bool keep_tma_descriptors) {
  PipelineOptions o = default_pipeline_options();
  o.keep_tma_descriptors = keep_tma_descriptors;
  run_pipeline(f, o);
}

void run_pipeline(ir::Function& f, const PipelineOptions& options) {
  Dumper dump(f, options);
  dump.stage("trace");
  if (options.verify) verify_at(f, "traced IR");
  if (expand_descriptors(f, options.keep_tma_descriptors)) {
    dump.stage("expand_descriptors");
    if (options.verify) verify_at(f, "after pass expand_descriptors");
  }
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    for (const Pass& p : pipeline_passes()) {
      bool c = p.run(f);
      changed |= c;
      dump.stage(p.name);
      if (options.verify) verify_at(f, fmt::format("after pass {}", p.name));
    }
    if (!changed) break;
  }
}

void run_gpu_pipeline(ir::Function& f, int num_warps, int num_stages, bool wgmma, bool tma, bool reorder,
                      GpuPassStats* stats) {
  const PipelineOptions options = default_pipeline_options();
  Dumper dump(f, options, 50);
  bool copies_by_tma = false;
  ir::walk(f.entry(), [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::TmaCopy && !tma)
      throw UserError(op.loc, "gpu::copy from a TensorDescriptor needs the tensor memory accelerator (an sm_90a "
                              "target, TLE_TMA not 0); copy through pointers (gpu::copy(ptrs, buf)) elsewhere");
    copies_by_tma |= op.kind == ir::OpKind::TmaCopy;
  });
  if (expand_descriptors(f, /*keep_tma=*/tma, /*gpu_final=*/true) || copies_by_tma) {
    dump.stage("gpu_expand_descriptors");
    if (options.verify) verify_at(f, "after pass expand_descriptors");
  }
  // A descriptor has one tensor map: every TMA access of one (the copies into buffers and the
  // desc_load / desc_store kept for TMA, which stage their blocks unswizzled) must agree on its
  // swizzle.
  if (copies_by_tma) {
    std::map<const ir::Value*, std::pair<int64_t, const ir::Op*>> swizzle_of;
    ir::walk(f.entry(), [&](const ir::Op& op) {
      if (op.kind != ir::OpKind::TmaCopy && op.kind != ir::OpKind::DescLoad && op.kind != ir::OpKind::DescStore) return;
      const int64_t sw = op.kind == ir::OpKind::TmaCopy ? op.int_attr("swizzle") : 0;
      auto [it, fresh] = swizzle_of.emplace(op.operands[0], std::pair{sw, &op});
      if (!fresh && it->second.first != sw)
        throw UserError(op.loc, fmt::format("this TensorDescriptor is moved by TMA with {} here and with {} at {}:{}; "
                                            "a descriptor has one tensor map: pass one descriptor per buffer layout",
                                            sw ? fmt::format("the {}-byte swizzle", sw) : std::string("no swizzle"),
                                            it->second.first ? fmt::format("the {}-byte swizzle", it->second.first)
                                                             : std::string("no swizzle"),
                                            it->second.second->loc.file, it->second.second->loc.line));
    });
  }
  if (pad_shapes(f)) {
    dump.stage("gpu_pad");
    if (options.verify) verify_at(f, "after pass pad_shapes");
  }
  if (stats) stats->conversions_without_elimination = count_conversions_without_elimination(f, num_warps, wgmma);
  assign_layouts(f, num_warps, wgmma);
  dump.stage("gpu_layouts");
  dce(f);
  dump.stage("gpu_dce");
  hoist_conversions(f);
  dump.stage("gpu_hoist");
  pipeline_loads(f, num_warps, num_stages, wgmma);
  dump.stage("gpu_pipeline");
  if (reorder) {
    const int n = reorder_loads(f);
    if (stats) stats->loads_reordered = n;
    dump.stage("gpu_reorder_loads");
  }
  if (plan_shared_buffers(f) > 0 && insert_shared_barriers(f) > 0) dump.stage("gpu_shared_barriers");
  check_tile_registers(f, num_warps);
  if (options.verify) verify_at(f, "after the GPU passes", num_warps);
  if (stats) {
    stats->conversions = 0;
    ir::walk(f.entry(), [&](const ir::Op& op) { stats->conversions += op.kind == ir::OpKind::ConvertLayout; });
  }
}

}  // namespace tle::passes
