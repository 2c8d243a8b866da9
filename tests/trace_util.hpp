// tests/trace_util.hpp - tracing a kernel lambda into an ir::Function without the runtime, as
// src/runtime/kernel.cpp does at a launch (tests of the GPU passes: test_gpu_layouts.cpp,
// test_pipeline.cpp), and finding ops in it.
#pragma once
#include <tle/tle.hpp>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/trace.hpp"
#include "ir/ir.hpp"
#include "passes/pass.hpp"

namespace tracetest {

template <class F> void trace_thunk(const void* fn, const tle::detail::TraceParam* p) {
  using Args = typename tle::detail::signature<F>::args;
  [&]<size_t... I>(std::index_sequence<I...>) {
    (*static_cast<const F*>(fn))(tle::detail::make_param<std::tuple_element_t<I, Args>>::get(p[I])...);
  }(std::make_index_sequence<std::tuple_size_v<Args>>());
}

/// Traces `fn` into a function named `name`, with its Constexpr parameters taken in order from
/// `cx`, as the runtime does for pointer arguments that are 16-byte aligned when `ptrs_div16` and
/// integer arguments that are multiples of 16 when `ints_div16`; runs the generic pass pipeline.
template <class F>
std::unique_ptr<tle::ir::Function> trace(const char* name, F fn, std::vector<int64_t> cx, bool ptrs_div16,
                                         bool ints_div16) {
  namespace detail = tle::detail;
  namespace ir = tle::ir;
  using Args = typename detail::signature<F>::args;
  constexpr size_t N = std::tuple_size_v<Args>;
  auto f = std::make_unique<ir::Function>();
  f->name = name;
  std::vector<detail::TraceParam> tp(N);
  size_t next = 0;
  auto add = [&]<class P>(detail::TraceParam& t, std::type_identity<P>) {
    detail::ParamSpec s = detail::param_spec<P>::get();
    ir::ArgInfo info;
    info.name = "arg" + std::to_string(f->arg_info.size());
    if (s.kind == detail::ParamSpec::Pointer) {
      t.value = f->entry().add_arg(ir::scalar_type(tle::DType::ptr, s.dtype));
      info.divisibility = ptrs_div16 ? 16 : 1;
      f->arg_info.push_back(info);
    } else if (s.kind == detail::ParamSpec::Scalar) {
      t.value = f->entry().add_arg(ir::scalar_type(s.dtype));
      info.divisibility = ints_div16 ? 16 : 1;
      f->arg_info.push_back(info);
    } else {
      t.i = cx.at(next++);
      t.f = static_cast<double>(t.i);
    }
  };
  [&]<size_t... I>(std::index_sequence<I...>) {
    (add(tp[I], std::type_identity<std::tuple_element_t<I, Args>>{}), ...);
  }(std::make_index_sequence<N>());
  tle::frontend::trace_into(*f, &trace_thunk<F>, &fn, tp.data());
  tle::passes::run_pipeline(*f);
  return f;
}

/// The ops of kind k anywhere in f, in walk order.
inline std::vector<const tle::ir::Op*> ops_of(const tle::ir::Function& f, tle::ir::OpKind k) {
  std::vector<const tle::ir::Op*> v;
  tle::ir::walk(f.entry(), [&](const tle::ir::Op& op) {
    if (op.kind == k) v.push_back(&op);
  });
  return v;
}

/// The kernel argument a memory op's pointer comes from (following operand 0 of addptr, broadcast,
/// expand_dims, ... back to an entry-block argument; not through a load), or -1.
inline long pointer_arg(const tle::ir::Function& f, const tle::ir::Op& op) {
  const tle::ir::Value* p = op.operands.at(0);
  while (p->def && !p->def->operands.empty() && p->def->kind != tle::ir::OpKind::Load) p = p->def->operands[0];
  for (unsigned i = 0; i < f.entry().args.size(); ++i)
    if (f.entry().arg(i) == p) return static_cast<long>(i);
  return -1;
}

/// How many ops of kind k f has, anywhere.
inline int count_ops(const tle::ir::Function& f, tle::ir::OpKind k) { return static_cast<int>(ops_of(f, k).size()); }

/// trace() of a kernel without Constexpr parameters, its pointers and integers 16-divisible.
template <class F> std::unique_ptr<tle::ir::Function> trace_div16(const char* name, F fn) {
  return trace(name, fn, {}, true, true);
}

/// The GPU passes at 4 warps, 3 stages, sm_90a rules (wgmma, TMA): what a kernel's IR becomes
/// before the lowering (tests of TLE-Struct's passes).
inline void gpu_passes_sm90(tle::ir::Function& f) { tle::passes::run_gpu_pipeline(f, 4, 3, true, true); }

}  // namespace tracetest
