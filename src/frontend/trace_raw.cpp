// src/frontend/trace_raw.cpp - tracing tle::cuda_function (TLE-Raw, include/tle/raw.hpp) into a
// cuda_call op. The protocol's operand rules are src/ir/cuda_call.hpp, shared with the verifier.
#include <fmt/format.h>

#include <cctype>

#include "frontend/trace.hpp"
#include "ir/cuda_call.hpp"
#include "tle/raw.hpp"

namespace tle::detail {

std::vector<V> cuda_call(const std::string& source, const std::vector<std::string>& options, const std::string& file,
                         const std::string& name, int ret_dtype, const std::vector<CudaCallArg>& args,
                         const SrcLoc& loc) {
  auto* c = frontend::TraceContext::current();
  if (!c)
    throw UserError(loc, fmt::format("cuda_function '{}' can only be called while a kernel is traced (inside the "
                                     "lambda given to tle::jit)",
                                     name));
  c->check_pending();
  // A collective call of the whole CTA: never inside a combine function, whose code runs a varying
  // number of times on each GPU thread (it would hang, and its shared-memory effects could not
  // be ordered).
  // Nor inside a warp_specialize role: its __syncthreads() and CTA-wide thread indices span the
  // program's warps, which a role has only a share of.
  for (const frontend::Frame& f : c->frames) {
    if (f.kind == frontend::Frame::Body)
      throw UserError(loc, fmt::format("cuda_function '{}' inside a combine function (reduce / associative_scan): "
                                       "the whole CTA calls it, but a combine runs a varying number of times on each "
                                       "GPU thread; call it outside the combine",
                                       name));
    if (f.kind == frontend::Frame::Role)
      throw UserError(loc, fmt::format("cuda_function '{}' inside a gpu::warp_specialize role: the whole CTA calls "
                                       "it (its __syncthreads() and thread indices span every warp), but a role runs "
                                       "on some of them; call it before the roles, or write the role in tiles",
                                       name));
  }
  bool ident = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char ch : name) ident = ident && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  if (!ident)
    throw UserError(loc, fmt::format("cuda_function: '{}' is not a C identifier; name an extern \"C\" __device__ "
                                     "function of the source",
                                     name));
  if (source.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UserError(loc, fmt::format("cuda_function '{}': the CUDA source is empty", name));
  for (const std::string& o : options)
    if (o.find('\n') != std::string::npos || o.empty())
      throw UserError(loc, fmt::format("cuda_function '{}': NVRTC option '{}' is empty or holds a newline", name, o));
  std::vector<V> operands;
  std::vector<int64_t> kinds;
  std::vector<ir::Type> results;
  if (ret_dtype >= 0) {
    DType d = static_cast<DType>(ret_dtype);
    if (std::string why = ir::check_cuda_return(d); !why.empty())
      throw UserError(loc, fmt::format("cuda_function '{}': {}", name, why));
    results.push_back(ir::scalar_type(d));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    V v = c->use(args[i].v, loc, fmt::format("cuda_function '{}': argument {}", name, i + 1));
    int64_t kind = args[i].kind;
    // A 0-d tile goes by value; tle::inout of a scalar is not a tile.
    if (kind == ir::kCudaTile && v->type.is_scalar()) kind = ir::kCudaValue;
    if (std::string why = ir::check_cuda_operand(v->type, kind); !why.empty())
      throw UserError(loc, fmt::format("cuda_function '{}': argument {}: {}", name, i + 1, why));
    operands.push_back(v);
    kinds.push_back(kind);
  }
  for (size_t i = 0; i < operands.size(); ++i)
    if (kinds[i] == ir::kCudaInOut) results.push_back(ir::Type{operands[i]->type.dtype, operands[i]->type.pointee,
                                                               operands[i]->type.shape, nullptr});
  std::string joined;
  for (size_t i = 0; i < options.size(); ++i) joined += (i ? "\n" : "") + options[i];
  ir::Op* op = c->builder.create(ir::OpKind::CudaCall, operands, results,
                                 {{"source", source},
                                  {"options", joined},
                                  {"file", file},
                                  {"name", name},
                                  {"kinds", kinds},
                                  {"ret", int64_t(ret_dtype >= 0 ? 1 : 0)}},
                                 loc);
  std::vector<V> out;
  for (auto& r : op->results) out.push_back(r.get());
  return out;
}

}  // namespace tle::detail
