// tests/fuzz/trace.cpp - trace(): runs a Program's statements through tle's front end
// (tle/detail/trace_api.hpp, the calls tle/tile.hpp makes) exactly as the C++ that to_cpp()
// prints would: the same detail:: calls with the same operands, and variables as registered
// handles that live as long as the C++ variables would (so that device loops and if_ see the
// same assignments: the tracer's mem2reg).
#include <functional>

#include "frontend/trace.hpp"
#include "fuzz/harness.hpp"
#include "fuzz/program.hpp"
#include "ir/builder.hpp"
#include "tle/tle.hpp"

namespace fuzz {
namespace {

namespace detail = tle::detail;
namespace ir = tle::ir;
using detail::V;

/// A variable's handle: registered with the tracer while alive, like a Tile<T>.
struct Handle : detail::HandleBase {
  Handle() { detail::attach(this); }
  explicit Handle(V value) {
    v = value;
    detail::attach(this);
  }
  ~Handle() { detail::detach(this); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

/// A source position per statement, so that a UserError names the statement number.
tle::SrcLoc loc_of(int line) {
  tle::SrcLoc l;
  l.file = "fuzz-program";
  l.line = static_cast<unsigned>(line);
  return l;
}

class Tracer {
 public:
  explicit Tracer(const Program& p) : p_(p), h_(p.vars.size()) {}

  void run(const detail::TraceParam* params) {
    // Parameters: Tile<T> handles for the lambda's whole body.
    for (size_t i = 0; i < p_.params.size(); ++i) h_[p_.params[i].var] = std::make_unique<Handle>(params[i].value);
    block(p_.body);
    for (auto& h : h_) h.reset();
  }

 private:
  const Program& p_;
  std::vector<std::unique_ptr<Handle>> h_;
  int line_ = 0;

  V val(int var) const {
    if (var < 0 || !h_.at(var) || !h_[var]->v) throw tle::InternalError("fuzz trace: variable without a value");
    return h_[var]->v;
  }
  DType dt(int var) const { return p_.vars.at(var).dtype; }

  /// Runs a block; the variables it declares die at its end (C++ scope).
  void block(const std::vector<Stmt>& b) {
    std::vector<int> declared;
    for (const Stmt& s : b) {
      if (s.result >= 0 && s.kind != Kind::Assign && s.kind != Kind::For) declared.push_back(s.result);
      stmt(s);
    }
    for (int v : declared) h_[v].reset();
  }

  void define(int var, V v) { h_[var] = std::make_unique<Handle>(v); }

  /// host_constant<T>(lit) (tle/tile.hpp): the constant a C++ scalar makes for a tile of dtype d.
  static V constant(DType d, const Literal& l, const tle::SrcLoc& loc) {
    if (l.is_float) return detail::constant_float(d, l.f, loc);
    if (d == DType::i1 || tle::is_signed_int(d) || tle::is_float(d)) return detail::constant_int(d, l.i, loc);
    return detail::constant_uint(d, static_cast<uint64_t>(l.i), loc);
  }

  /// The tuple form of a combine statement (program.hpp), as print.cpp's pair_call spells it.
  void pair_combine(const Stmt& s) {
    const tle::SrcLoc loc = loc_of(line_);
    const DType d0 = dt(s.args[0]), d1 = dt(s.args[1]);
    using B = ir::BinaryOp;
    using C = ir::CmpPred;
    detail::CombineFn fn = [&](const std::vector<V>& p, const std::vector<V>& q) {
      Handle p0(p[0]), p1(p[1]), q0(q[0]), q1(q[1]);
      if (s.a == 4) {
        Handle m(detail::binary(B::Mul, p0.v, q0.v, d0, loc)), t(detail::binary(B::Mul, q0.v, p1.v, d0, loc));
        return std::vector<V>{m.v, detail::binary(B::Add, t.v, q1.v, d0, loc)};
      }
      Handle gt(detail::compare(C::Gt, p0.v, q0.v, d0, loc)), eq(detail::compare(C::Eq, p0.v, q0.v, d0, loc));
      Handle lt(detail::compare(C::Lt, p1.v, q1.v, d1, loc));
      Handle tie(detail::binary(B::And, eq.v, lt.v, DType::i1, loc));
      Handle t(detail::binary(B::Or, gt.v, tie.v, DType::i1, loc));
      Handle r0(detail::select(t.v, p0.v, q0.v, d0, loc));
      return std::vector<V>{r0.v, detail::select(t.v, p1.v, q1.v, d1, loc)};
    };
    std::vector<V> xs = {val(s.args[0]), val(s.args[1])};
    std::vector<V> rs = s.kind == Kind::ReduceCombine ? detail::reduce_combine(xs, s.axis, s.flag, fn, loc)
                                                      : detail::scan_combine(xs, s.axis, s.flag, fn, loc);
    define(s.result, rs.at(static_cast<size_t>(s.b)));
  }

  void stmt(const Stmt& s) {
    const tle::SrcLoc loc = loc_of(++line_);
    const auto& a = s.args;
    switch (s.kind) {
      case Kind::Const: {
        DType d = p_.vars[s.result].dtype;
        V c = constant(d, s.lit, loc);
        define(s.result, s.shape.empty() ? c : detail::full(s.shape, c, loc));
        return;
      }
      case Kind::Arange: define(s.result, detail::arange(s.a, s.b, loc)); return;
      case Kind::ProgramId: define(s.result, detail::program_id(s.axis, loc)); return;
      case Kind::NumPrograms: define(s.result, detail::num_programs(s.axis, loc)); return;
      case Kind::Binary:
        define(s.result, detail::binary(static_cast<ir::BinaryOp>(s.op), val(a[0]), val(a[1]), dt(a[0]), loc));
        return;
      case Kind::Compare:
        define(s.result, detail::compare(static_cast<ir::CmpPred>(s.op), val(a[0]), val(a[1]), dt(a[0]), loc));
        return;
      case Kind::Unary: define(s.result, detail::unary(static_cast<ir::UnaryOp>(s.op), val(a[0]), loc)); return;
      case Kind::Fma: define(s.result, detail::fma(val(a[0]), val(a[1]), val(a[2]), loc)); return;
      case Kind::Where: define(s.result, detail::select(val(a[0]), val(a[1]), val(a[2]), dt(a[1]), loc)); return;
      case Kind::Cast: define(s.result, detail::convert(val(a[0]), s.to, loc)); return;
      case Kind::Bitcast: define(s.result, detail::bitcast(val(a[0]), s.to, loc)); return;
      case Kind::BroadcastTo: define(s.result, detail::broadcast_to(val(a[0]), s.shape, loc)); return;
      case Kind::ExpandDims: define(s.result, detail::expand_dims(val(a[0]), s.axis, loc)); return;
      case Kind::Reshape: define(s.result, detail::reshape(val(a[0]), s.shape, loc)); return;
      case Kind::Permute: define(s.result, detail::permute(val(a[0]), s.order, loc)); return;
      case Kind::Reduce:
        define(s.result, detail::reduce(val(a[0]), s.axis, static_cast<ir::ReduceKind>(s.op), s.flag, loc));
        return;
      case Kind::ReduceCombine: case Kind::ScanCombine: {
        if (a.size() == 2) return pair_combine(s);
        // The lambda [](Tile<T> p, Tile<T> q) { ... } (program.hpp lists the forms, by s.a).
        DType d = dt(a[0]);
        auto op = static_cast<ir::BinaryOp>(s.op);
        std::function<V(V, V)> fn = [&](V x, V y) {
          Handle hx(x), hy(y);
          switch (s.a) {
            case 1: case 2:
              return detail::select(detail::compare(s.a == 1 ? ir::CmpPred::Gt : ir::CmpPred::Lt, hx.v, hy.v, d, loc),
                                    hx.v, hy.v, d, loc);
            case 3: {
              Handle t(detail::binary(op, hx.v, hy.v, d, loc));
              return detail::binary(op, t.v, hx.v, d, loc);
            }
            default: return detail::binary(op, hx.v, hy.v, d, loc);
          }
        };
        detail::CombineFn vfn = [&](const std::vector<V>& x, const std::vector<V>& y) {
          return std::vector<V>{fn(x[0], y[0])};
        };
        if (s.kind == Kind::ReduceCombine)
          define(s.result, detail::reduce_combine({val(a[0])}, s.axis, s.flag, vfn, loc)[0]);
        else
          define(s.result, detail::scan_combine({val(a[0])}, s.axis, s.flag, vfn, loc)[0]);
        return;
      }
      case Kind::Cumsum: define(s.result, detail::scan(val(a[0]), s.axis, s.flag, loc)); return;
      case Kind::Dot:
        define(s.result, detail::dot(val(a[0]), val(a[1]), a[2] >= 0 ? val(a[2]) : nullptr,
                                     static_cast<ir::Precision>(s.op), loc));
        return;
      case Kind::Histogram:
        define(s.result, (s.op == 1 ? detail::histogram_ranks : detail::histogram)(val(a[0]), s.a,
                                                                                  a[1] >= 0 ? val(a[1]) : nullptr, loc));
        return;
      case Kind::Sort: {
        static const char* what[] = {"sort", "argsort", "topk", "topk"};
        V values, indices;
        detail::sort(val(a[0]), s.axis, s.flag, s.op >= 2 ? s.a : 0, &values, &indices, loc, what[s.op]);
        define(s.result, s.op == 0 || s.op == 2 ? values : indices);
        return;
      }
      case Kind::Gather: define(s.result, detail::gather(val(a[0]), val(a[1]), s.axis, loc)); return;
      case Kind::Hint: define(s.result, detail::hint(val(a[0]), s.a, s.a ? 0 : s.b, loc)); return;
      case Kind::AddPtr: define(s.result, detail::addptr(val(a[0]), val(a[1]), loc)); return;
      case Kind::LocalAlloc: define(s.result, detail::local_alloc(s.to, {s.a}, s.a, 128, loc)); return;
      case Kind::Copy: detail::async_copy(val(a[0]), val(a[1]), a[2] >= 0 ? val(a[2]) : nullptr, loc); return;
      case Kind::CopyCommit: detail::async_commit(loc); return;
      case Kind::CopyWait: detail::async_wait(s.a, loc); return;
      case Kind::Load: {
        V mask = a[1] >= 0 ? val(a[1]) : nullptr;
        V other = nullptr;
        if (s.flag) other = constant(p_.vars[a[0]].pointee, s.lit, loc);
        else if (a[2] >= 0) other = val(a[2]);
        detail::MemHints hints;
        hints.is_async = s.is_async;
        define(s.result, detail::load(val(a[0]), mask, other, hints, loc));
        return;
      }
      case Kind::Store: detail::store(val(a[0]), val(a[1]), a[2] >= 0 ? val(a[2]) : nullptr, {}, loc); return;
      case Kind::Atomic:
        define(s.result, detail::atomic_rmw(static_cast<ir::AtomicOp>(s.op), val(a[0]), val(a[1]),
                                            a[2] >= 0 ? val(a[2]) : nullptr, loc));
        return;
      case Kind::AtomicCas: define(s.result, detail::atomic_cas(val(a[0]), val(a[1]), val(a[2]), loc)); return;
      case Kind::Assign: h_.at(s.result)->v = val(a[0]); return;
      case Kind::ExtractTile: case Kind::InsertTile: {
        // tle::TileIndex's forms (program.hpp): static ints, or the scalar variables after the tiles.
        const size_t tiles = s.kind == Kind::ExtractTile ? 1 : 2;
        detail::SubTileIndex ix;
        ix.multi = s.op == 1 || s.op == 3;
        if (s.op <= 1) ix.ints = s.index;
        else
          for (size_t i = tiles; i < a.size(); ++i) ix.values.push_back(val(a[i]));
        if (s.kind == Kind::ExtractTile) define(s.result, detail::extract_tile(val(a[0]), ix, s.shape, loc));
        else define(s.result, detail::insert_tile(val(a[0]), val(a[1]), ix, loc));
        return;
      }
      case Kind::For: {
        // tle::range(lo, hi, step): C++ integers are weak, tiles give the index type (their promotion).
        DType index = DType::i32;
        bool any = false;
        for (int v : a)
          if (v >= 0) index = any ? tle::promote(index, dt(v)) : dt(v), any = true;
        auto bound = [&](int v, int64_t lit) {
          if (v < 0) return detail::constant_int(index, lit, loc);
          return dt(v) == index ? val(v) : detail::convert(val(v), index, loc);
        };
        V lo = bound(a[0], s.lo), hi = bound(a[1], s.hi), step = bound(a[2], s.step);
        V iv = detail::for_begin(lo, hi, step, index, loc);
        define(s.result, iv);
        block(s.body);
        h_[s.result].reset();  // `auto i` dies before ++ closes the loop
        detail::for_end(loc);
        return;
      }
      case Kind::Roles:
        detail::warp_specialize({{s.b, 0, [] {}, loc}, {s.a, 0, [&] { block(s.body); }, loc}}, loc);
        return;
      case Kind::If: {
        std::function<void()> then_fn = [&] { block(s.body); };
        std::function<void()> else_fn = [&] { block(s.orelse); };
        detail::if_else(val(a[0]), then_fn, else_fn, loc);
        return;
      }
    }
    throw tle::InternalError("fuzz trace: unknown statement kind");
  }
};

void thunk(const void* fn, const detail::TraceParam* params) {
  const_cast<Tracer*>(static_cast<const Tracer*>(fn))->run(params);
}

}  // namespace

void trace_thunk(const void* program, const detail::TraceParam* params) {
  Tracer t(*static_cast<const Program*>(program));
  t.run(params);
}

std::unique_ptr<ir::Function> trace(const Program& p, const std::string& name) {
  auto f = std::make_unique<ir::Function>();
  f->name = name;
  std::vector<detail::TraceParam> tp(p.params.size());
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& pa = p.params[i];
    const Var& v = p.vars.at(pa.var);
    ir::ArgInfo info;
    info.name = "a" + std::to_string(i);
    if (pa.buffer >= 0) {
      tp[i].value = f->entry().add_arg(ir::scalar_type(DType::ptr, v.pointee));
      info.divisibility = 16;  // harness buffers are 64-byte aligned
    } else {
      tp[i].value = f->entry().add_arg(ir::scalar_type(v.dtype));
    }
    f->arg_info.push_back(info);
  }
  Tracer t(p);
  tle::frontend::trace_into(*f, &thunk, &t, tp.data());
  return f;
}

int count_statements(const std::vector<Stmt>& b) {
  int n = 0;
  for (const Stmt& s : b) n += 1 + count_statements(s.body) + count_statements(s.orelse);
  return n;
}

}  // namespace fuzz
