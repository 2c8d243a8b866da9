// src/runtime/kernel.cpp - kernel objects: argument checking and packing, specialization keys,
// the in-memory cache of compiled specializations, and launch.
//
// Specialization (Triton's rules): constexpr values, 16-byte alignment of each pointer, and which
// integer scalars equal 1 select a specialization; each is traced and compiled once.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "backend/cpu/cpu_backend.hpp"
#include "frontend/trace.hpp"
#include "ir/builder.hpp"
#include "ir/ir.hpp"
#include "passes/pass.hpp"
#include "support/half.hpp"
#include "tle/detail/trace_api.hpp"

namespace tle::detail {

namespace {

struct KeyHash {
  size_t operator()(const std::vector<uint64_t>& k) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (auto x : k) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

std::string param_str(const ParamSpec& p) {
  switch (p.kind) {
    case ParamSpec::Pointer: return fmt::format("Ptr<{}>", dtype_name(p.dtype));
    case ParamSpec::Scalar: return fmt::format("Tile<{}>", dtype_name(p.dtype));
    case ParamSpec::ConstexprInt: return "Constexpr<integer>";
    case ParamSpec::ConstexprFloat: return "Constexpr<floating-point>";
    case ParamSpec::ConstexprBool: return "Constexpr<bool>";
  }
  return "?";
}

bool is_constexpr(const ParamSpec& p) { return p.kind >= ParamSpec::ConstexprInt; }

/// An argument after checking: its 8-byte slot as the compiled code reads it, and the facts the
/// specialization key uses.
struct Packed {
  std::vector<uint64_t> slots;       // runtime arguments, in parameter order (constexprs skipped)
  std::vector<TraceParam> constexprs;  // per parameter (only constexpr entries used)
  std::vector<uint64_t> key;
};

bool int_fits(DType d, int64_t v) {
  if (d == DType::i1) return v == 0 || v == 1;
  int w = bit_width(d);
  if (is_signed_int(d)) return w == 64 || (v >= -(int64_t(1) << (w - 1)) && v < (int64_t(1) << (w - 1)));
  return v >= 0 && (w == 64 || v < (int64_t(1) << w));
}
bool uint_fits(DType d, uint64_t v) {
  if (d == DType::u64) return true;
  if (v > uint64_t(std::numeric_limits<int64_t>::max())) return false;
  return int_fits(d, static_cast<int64_t>(v));
}

/// Stores a float value rounded once into dtype d's memory format.
uint64_t float_slot(DType d, double v) {
  uint64_t s = 0;
  switch (d) {
    case DType::f64: std::memcpy(&s, &v, 8); break;
    case DType::f32: { float f = static_cast<float>(v); std::memcpy(&s, &f, 4); break; }
    case DType::f16: s = f64_to_f16_bits(v); break;
    case DType::bf16: s = f64_to_bf16_bits(v); break;
    default: break;
  }
  return s;
}

}  // namespace

class KernelState {
 public:
  std::string name;
  std::vector<ParamSpec> params;
  TraceThunk thunk;
  SrcLoc loc;

  std::shared_mutex mu;
  std::unordered_map<std::vector<uint64_t>, std::shared_ptr<cpu::CompiledKernel>, KeyHash> cache;
  std::mutex compile_mu;

  std::string signature() const {
    std::vector<std::string> ps;
    for (auto& p : params) ps.push_back(param_str(p));
    return fmt::format("{}({})", name, fmt::join(ps, ", "));
  }

  Packed pack(const HostArg* args, size_t n, const SrcLoc& loc) const {
    if (n != params.size())
      throw UserError(loc, fmt::format("kernel {} takes {} argument{}, but {} were passed", signature(), params.size(),
                                       params.size() == 1 ? "" : "s", n));
    Packed pk;
    pk.constexprs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const ParamSpec& p = params[i];
      const HostArg& a = args[i];
      auto bad = [&](const std::string& why) {
        return UserError(loc, fmt::format("argument {} of kernel {}: parameter is {}, {}", i + 1, signature(),
                                          param_str(p), why));
      };
      switch (p.kind) {
        case ParamSpec::Pointer: {
          if (a.kind != HostArg::Pointer) throw bad(fmt::format("pass a pointer, not a {}", a.type_name));
          if (!a.untyped_pointer && a.pointee != p.dtype)
            throw bad(fmt::format("got a pointer to {}; pass a {}* (or cast the pointer explicitly)",
                                  dtype_name(a.pointee), dtype_name(p.dtype)));
          uint64_t s = reinterpret_cast<uintptr_t>(a.p);
          pk.slots.push_back(s);
          pk.key.push_back(s % 16 == 0 ? 1 : 0);
          break;
        }
        case ParamSpec::Scalar: {
          DType d = p.dtype;
          uint64_t s = 0;
          bool one = false;
          if (is_int(d)) {
            int64_t v;
            if (a.kind == HostArg::Int) {
              if (!int_fits(d, a.i)) throw bad(fmt::format("the value {} does not fit in {}", a.i, dtype_name(d)));
              v = a.i;
            } else if (a.kind == HostArg::UInt) {
              if (!uint_fits(d, a.u)) throw bad(fmt::format("the value {} does not fit in {}", a.u, dtype_name(d)));
              v = static_cast<int64_t>(a.u);
            } else if (a.kind == HostArg::Bool) {
              v = a.b ? 1 : 0;
            } else {
              throw bad(fmt::format("got a {}; pass an integer (convert explicitly if truncation is meant)",
                                    a.type_name));
            }
            s = static_cast<uint64_t>(v);
            if (bit_width(d) < 64) s &= (uint64_t(1) << (d == DType::i1 ? 8 : bit_width(d))) - 1;
            one = v == 1 && d != DType::i1;
          } else {
            double v;
            if (a.kind == HostArg::Float) v = a.f;
            else if (a.kind == HostArg::Int) v = static_cast<double>(a.i);
            else if (a.kind == HostArg::UInt) v = static_cast<double>(a.u);
            else if (a.kind == HostArg::Half) v = f16_bits_to_f64(a.h);
            else if (a.kind == HostArg::BFloat) v = bf16_bits_to_f64(a.h);
            else throw bad(fmt::format("got a {}; pass a number", a.type_name));
            s = float_slot(d, v);
          }
          pk.slots.push_back(s);
          pk.key.push_back(one ? 1 : 0);
          break;
        }
        case ParamSpec::ConstexprInt:
        case ParamSpec::ConstexprBool: {
          int64_t v;
          if (a.kind == HostArg::Int) v = a.i;
          else if (a.kind == HostArg::UInt && a.u <= uint64_t(std::numeric_limits<int64_t>::max())) v = int64_t(a.u);
          else if (a.kind == HostArg::Bool) v = a.b;
          else throw bad(fmt::format("got a {}; pass an integer value", a.type_name));
          if (p.kind == ParamSpec::ConstexprBool && v != 0 && v != 1) throw bad("pass true or false");
          pk.constexprs[i].i = v;
          pk.key.push_back(static_cast<uint64_t>(v));
          break;
        }
        case ParamSpec::ConstexprFloat: {
          double v;
          if (a.kind == HostArg::Float) v = a.f;
          else if (a.kind == HostArg::Int) v = static_cast<double>(a.i);
          else throw bad(fmt::format("got a {}; pass a number", a.type_name));
          pk.constexprs[i].f = v;
          uint64_t bits;
          std::memcpy(&bits, &v, 8);
          pk.key.push_back(bits);
          break;
        }
      }
    }
    return pk;
  }

  /// Traces the specialization described by `pk` into a fresh function (no passes run).
  std::unique_ptr<ir::Function> trace(const void* fn, const Packed& pk) {
    auto f = std::make_unique<ir::Function>();
    f->name = name;
    f->loc = loc;
    std::vector<TraceParam> tp = pk.constexprs;
    ir::Builder b(&f->entry());
    size_t slot = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamSpec& p = params[i];
      if (is_constexpr(p)) continue;
      ir::Value* v;
      ir::ArgInfo info;
      info.name = fmt::format("arg{}", i);
      if (p.kind == ParamSpec::Pointer) {
        v = f->entry().add_arg(ir::scalar_type(DType::ptr, p.dtype));
        info.divisible_by_16 = pk.key[i] == 1;
      } else {
        v = f->entry().add_arg(ir::scalar_type(p.dtype));
      }
      f->arg_info.push_back(info);
      // Integer scalars equal to 1 are specialized: the kernel sees the constant.
      if (p.kind == ParamSpec::Scalar && is_int(p.dtype) && pk.key[i] == 1)
        v = b.constant(ir::scalar_type(p.dtype), int64_t(1), loc);
      tp[i].value = v;
      ++slot;
    }
    frontend::trace_into(*f, thunk, fn, tp.data());
    return f;
  }

  std::shared_ptr<cpu::CompiledKernel> get(const void* fn, const Packed& pk) {
    {
      std::shared_lock lk(mu);
      auto it = cache.find(pk.key);
      if (it != cache.end()) return it->second;
    }
    std::lock_guard compile_lock(compile_mu);
    {
      std::shared_lock lk(mu);
      auto it = cache.find(pk.key);
      if (it != cache.end()) return it->second;
    }
    auto f = trace(fn, pk);
    passes::run_pipeline(*f);
    auto compiled = cpu::compile(*f);
    std::unique_lock lk(mu);
    cache.emplace(pk.key, compiled);
    return compiled;
  }
};

KernelState* kernel_create(const char* name, const std::vector<ParamSpec>& params, TraceThunk thunk,
                           const SrcLoc& loc) {
  auto* k = new KernelState();
  k->name = name ? name : "kernel";
  k->params = params;
  k->thunk = thunk;
  k->loc = loc;
  return k;
}

void kernel_destroy(KernelState* k) noexcept { delete k; }

void kernel_launch(KernelState* k, const void* fn, const Grid3& grid, const HostArg* args, size_t nargs,
                   const SrcLoc& loc) {
  Packed pk = k->pack(args, nargs, loc);
  const int64_t g[3] = {grid.x, grid.y, grid.z};
  const int64_t limit[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
  const char* axis[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    if (g[i] < 0 || g[i] > limit[i])
      throw UserError(loc, fmt::format("launch grid axis {} is {}, outside the limit 0..{}; split the work over "
                                       "another axis or loop inside the kernel",
                                       axis[i], g[i], limit[i]));
  }
  if (g[0] == 0 || g[1] == 0 || g[2] == 0) return;  // rule E08: nothing to run, outputs untouched
  auto compiled = k->get(fn, pk);
  std::vector<void*> ptrs(pk.slots.size());
  for (size_t i = 0; i < ptrs.size(); ++i) ptrs[i] = &pk.slots[i];
  cpu::launch(*compiled, ptrs.data(), g);
}

std::string kernel_ir(KernelState* k, const void* fn, const HostArg* args, size_t nargs, bool optimized,
                      const SrcLoc& loc) {
  Packed pk = k->pack(args, nargs, loc);
  auto f = k->trace(fn, pk);
  if (optimized) passes::run_pipeline(*f);
  return ir::print(*f);
}

size_t kernel_num_compiled(const KernelState* k) noexcept {
  auto* m = const_cast<KernelState*>(k);
  std::shared_lock lk(m->mu);
  return m->cache.size();
}

}  // namespace tle::detail
