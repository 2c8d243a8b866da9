// src/frontend/trace_mesh.cpp - tracing the device-mesh primitives of tle/mesh.hpp: the hidden
// mesh arguments (ir::MeshArg, added together at a kernel's first use) and the signal /
// signal_wait ops. shard_id, num_shards, remote and distributed_barrier are written in tle on top
// of these (include/tle/mesh.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "frontend/trace.hpp"
#include "passes/pointer_origin.hpp"
#include "tle/mesh.hpp"

namespace tle::detail {
namespace {

frontend::TraceContext& mesh_ctx(const char* what, const SrcLoc& loc) {
  auto* c = frontend::TraceContext::current();
  if (!c)
    throw UserError(loc, fmt::format("{} can only be called while a kernel is traced (inside the lambda given to "
                                     "tle::jit)",
                                     what));
  c->check_pending();
  return *c;
}

/// signal and signal_wait are one access per program, ordered against all of the program's
/// others by a CTA barrier on the GPU: never in a combine function (run a varying number of times
/// per thread) nor in a warp_specialize role (the barrier spans every warp of the program).
void refuse_partial_program(const frontend::TraceContext& c, const char* what, const SrcLoc& loc) {
  for (const frontend::Frame& f : c.frames) {
    if (f.kind == frontend::Frame::Body)
      throw UserError(loc, fmt::format("{} inside a combine function (reduce / associative_scan): it is one access "
                                       "of the whole program, but a combine runs once per pair of elements; call it "
                                       "outside the combine",
                                       what));
    if (f.kind == frontend::Frame::Role)
      throw UserError(loc, fmt::format("{} inside a gpu::warp_specialize role: it orders every access of the whole "
                                       "program (a CTA barrier on the GPU), but a role runs on some of its warps; "
                                       "call it before or after gpu::warp_specialize",
                                       what));
  }
}

V scalar_operand(frontend::TraceContext& c, V v, DType d, const char* what, const char* name, const SrcLoc& loc) {
  c.use(v, loc, fmt::format("{}: {}", what, name));
  if (!v->type.is_scalar())
    throw UserError(loc, fmt::format("{}: the {} must be a scalar (one flag per program), got a {} tile; index one "
                                     "element, or call {} once per element in a loop",
                                     what, name, v->type.str(), what));
  return v->type.dtype == d ? v : convert(v, d, loc);
}

}  // namespace

V mesh_arg(ir::MeshArg which, const SrcLoc& loc) {
  auto& c = mesh_ctx("a mesh primitive (shard_id, num_shards, remote, signal, signal_wait, distributed_barrier)", loc);
  ir::Function& f = c.fn;
  int at = ir::mesh_args_begin(f);
  if (at < 0) {
    at = static_cast<int>(f.entry().args.size());
    struct Hidden {
      const char* name;
      ir::Type type;
      int32_t div;
    };
    const Hidden hidden[] = {{"mesh.shard_id", ir::scalar_type(DType::i32), 1},
                             {"mesh.num_shards", ir::scalar_type(DType::i32), 1},
                             // a multiple of the symmetric heap's granularity (64 KiB or more)
                             {"mesh.stride", ir::scalar_type(DType::i64), 16},
                             {"mesh.scratch", ir::scalar_type(DType::ptr, DType::u64), 16},
                             {"mesh.timeout_ns", ir::scalar_type(DType::i64), 1}};
    static_assert(std::size(hidden) == static_cast<size_t>(ir::MeshArg::Count));
    for (const Hidden& h : hidden) {
      ir::ArgInfo info;
      info.name = h.name;
      info.divisibility = h.div;
      info.mesh = true;
      f.arg_info.push_back(info);
      f.entry().add_arg(h.type);
    }
  }
  if (which == ir::MeshArg::Scratch) f.mesh_barrier = true;
  return f.entry().args.at(static_cast<size_t>(at) + static_cast<size_t>(which)).get();
}

void mesh_note_remote(V p, const SrcLoc& loc) {
  auto& c = mesh_ctx("remote", loc);
  c.use(p, loc, "remote: the pointers");
  c.mesh_remotes.emplace_back(p, loc);  // checked when the trace ends (frontend::finish_mesh_remotes)
}

void mesh_signal(V flag, V value, ir::SignalOp op, const SrcLoc& loc) {
  auto& c = mesh_ctx("signal", loc);
  refuse_partial_program(c, "signal", loc);
  c.use(flag, loc, "signal: the flag");
  if (!flag->type.is_scalar())
    throw UserError(loc, fmt::format("signal: the flag must be one pointer (a scalar Ptr<uint64_t>), got a {} tile",
                                     flag->type.str()));
  value = scalar_operand(c, value, DType::u64, "signal", "value", loc);
  c.builder.create(ir::OpKind::Signal, {flag, value}, {}, {{"op", int64_t(op)}}, loc);
}

void mesh_signal_wait(V flag, V value, ir::WaitCmp cmp, const SrcLoc& loc) {
  auto& c = mesh_ctx("signal_wait", loc);
  refuse_partial_program(c, "signal_wait", loc);
  c.use(flag, loc, "signal_wait: the flag");
  if (!flag->type.is_scalar())
    throw UserError(loc, fmt::format("signal_wait: the flag must be one pointer (a scalar Ptr<uint64_t>), got a {} "
                                     "tile",
                                     flag->type.str()));
  value = scalar_operand(c, value, DType::u64, "signal_wait", "value", loc);
  V timeout = mesh_arg(ir::MeshArg::TimeoutNs, loc);
  c.builder.create(ir::OpKind::SignalWait, {flag, value, timeout}, {}, {{"cmp", int64_t(cmp)}}, loc);
}

}  // namespace tle::detail

namespace tle::frontend {

void finish_mesh_remotes(TraceContext& c) {
  for (const auto& [p, loc] : c.mesh_remotes) {
    // Now that every loop has its yield, a carried pointer's origin includes what the body assigns.
    const passes::PointerOrigin o = passes::pointer_origin(p);
    if (!o.allocs.empty())
      throw UserError(loc, "remote: the pointers derive from a gpu::alloc buffer (shared memory of this program); "
                           "remote reaches other ranks' symmetric memory: pass pointers into a SymmetricBuffer "
                           "(Rank::local) as kernel arguments");
    if (o.unknown)
      throw UserError(loc, "remote: the pointers do not derive from kernel arguments alone (a pointer loaded from "
                           "memory or gathered): tle checks at each launch that what remote() moves is the launching "
                           "rank's symmetric memory, so derive them from a Ptr argument (Rank::local of a "
                           "SymmetricBuffer) by pointer arithmetic");
    for (unsigned a : o.args) {
      if (a < c.fn.arg_info.size() && c.fn.arg_info[a].mesh) continue;  // the mesh scratch: symmetric
      auto& list = c.fn.mesh_remote_args;
      if (std::none_of(list.begin(), list.end(), [&](auto& e) { return e.first == a; })) list.emplace_back(a, loc);
    }
  }
}

}  // namespace tle::frontend
