// src/passes/gpu/axis_info.cpp - the axis-info analysis (see axis_info.hpp for what it computes).
//
// One forward walk in program order; a `for` re-walks its body until the carried facts stop
// changing (joining init and yielded facts each time, at most kMaxLoopIters walks, then all
// carried values fall back to "no facts"). Every rule keeps the three facts true, never guesses.
#include "passes/gpu/axis_info.hpp"

#include <algorithm>

namespace tle::passes::axis {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

constexpr int64_t kMaxDiv = int64_t{1} << 30;  // the divisibility of 0
constexpr int kMaxLoopIters = 4;

int64_t pow2_floor(int64_t v) {
  if (v < 1) return 1;
  int64_t p = 1;
  while (p * 2 <= v && p < kMaxDiv) p *= 2;
  return p;
}
int64_t pow2_div(int64_t v) {
  if (v == 0) return kMaxDiv;
  uint64_t u = static_cast<uint64_t>(v);
  uint64_t low = u & (~u + 1);
  return low >= static_cast<uint64_t>(kMaxDiv) ? kMaxDiv : static_cast<int64_t>(low);
}
int64_t mul_cap(int64_t a, int64_t b) { return (a >= kMaxDiv || b >= kMaxDiv || a * b >= kMaxDiv) ? kMaxDiv : a * b; }

int rank_of(const ir::Type& t) { return std::max(1, t.rank()); }
int64_t size_of(const ir::Type& t, int d) { return t.is_scalar() ? 1 : t.shape[d]; }

Info unknown(const ir::Type& t) {
  int r = rank_of(t);
  return Info{std::vector<int64_t>(r, 1), std::vector<int64_t>(r, 1), std::vector<int64_t>(r, 1), std::nullopt};
}
Info splat(const ir::Type& t, int64_t div, std::optional<int64_t> value) {
  Info i = unknown(t);
  for (int d = 0; d < rank_of(t); ++d) {
    i.div[d] = div;
    i.cst[d] = size_of(t, d);
  }
  i.value = value;
  return i;
}
Info join(const Info& a, const Info& b) {
  Info r = a;
  for (size_t d = 0; d < r.contig.size() && d < b.contig.size(); ++d) {
    r.contig[d] = std::min(a.contig[d], b.contig[d]);
    r.div[d] = std::min(a.div[d], b.div[d]);
    r.cst[d] = std::min(a.cst[d], b.cst[d]);
  }
  if (a.value != b.value) r.value.reset();
  return r;
}
/// Divisibility of the first element of runs of `rc` elements, given an operand's facts: if the
/// operand's runs are longer than rc, a new run may start inside one of them (divisibility 1).
int64_t eff_div(const Info& x, int d, int64_t rc) { return x.contig[d] > rc ? 1 : x.div[d]; }

int elem_bytes(DType d) { return byte_size(d) > 0 ? byte_size(d) : 1; }

class Analysis {
 public:
  explicit Analysis(const ir::Function& f) : f_(f) {}

  std::unordered_map<const Value*, Info> run() {
    const ir::Block& entry = f_.entry();
    for (size_t i = 0; i < entry.args.size(); ++i) {
      const Value* a = entry.args[i].get();
      const ir::Type& t = a->type;
      const int64_t div = i < f_.arg_info.size() ? f_.arg_info[i].divisibility : 1;
      if (t.dtype == DType::ptr) {
        // A typed pointer is at least naturally aligned (the runtime rejects nothing else).
        info_[a] = splat(t, std::max<int64_t>(div, elem_bytes(t.pointee)), std::nullopt);
      } else if (div > 1) {  // an integer specialized as a multiple of div
        info_[a] = splat(t, div, std::nullopt);
      } else {
        info_[a] = unknown(t);
      }
    }
    walk(entry);
    return std::move(info_);
  }

 private:
  const ir::Function& f_;
  std::unordered_map<const Value*, Info> info_;

  Info get(const Value* v, const ir::Type& like) {
    auto it = info_.find(v);
    Info i = it == info_.end() ? unknown(v->type) : it->second;
    // A scalar used where a tile is expected: a splat of it.
    if (v->type.is_scalar() && !like.is_scalar()) {
      Info s = splat(like, i.div[0], i.value);
      return s;
    }
    return i;
  }

  void walk(const ir::Block& b) {
    for (auto& op : b.ops) visit(*op);
  }

  void visit(const Op& op) {
    switch (op.kind) {
      case OpKind::For: return visit_for(op);
      case OpKind::If: {
        walk(op.region(0).body());
        walk(op.region(1).body());
        const Op* y0 = op.region(0).body().terminator();
        const Op* y1 = op.region(1).body().terminator();
        for (size_t i = 0; i < op.results.size(); ++i) {
          const ir::Type& t = op.result(i)->type;
          info_[op.result(i)] = join(get(y0->operands[i], t), get(y1->operands[i], t));
        }
        return;
      }
      case OpKind::Reduce:
      case OpKind::Scan:
        for (auto& r : op.regions)
          for (auto& a : r->body().args) info_[a.get()] = unknown(a->type);
        for (auto& r : op.regions) walk(r->body());
        break;
      default:
        for (auto& r : op.regions) walk(r->body());
        break;
    }
    if (op.results.size() == 1) info_[op.result()] = compute(op);
    else
      for (auto& r : op.results) info_[r.get()] = unknown(r->type);
  }

  void visit_for(const Op& op) {
    const ir::Block& body = op.region().body();
    const ir::Type& ivt = body.args[0]->type;
    Info lo = get(op.operands[0], ivt), step = get(op.operands[2], ivt);
    Info iv = unknown(ivt);
    iv.div[0] = std::min(lo.div[0], step.div[0]);
    info_[body.args[0].get()] = iv;
    size_t n = op.results.size();
    std::vector<Info> carried(n);
    for (size_t i = 0; i < n; ++i) carried[i] = get(op.operands[3 + i], op.result(i)->type);
    bool converged = false;
    for (int it = 0; it < kMaxLoopIters && !converged; ++it) {
      for (size_t i = 0; i < n; ++i) info_[body.args[1 + i].get()] = carried[i];
      walk(body);
      const Op* y = body.terminator();
      converged = true;
      for (size_t i = 0; i < n; ++i) {
        Info j = join(carried[i], get(y->operands[i], op.result(i)->type));
        if (!(j == carried[i])) {
          carried[i] = j;
          converged = false;
        }
      }
    }
    if (!converged) {
      for (size_t i = 0; i < n; ++i) carried[i] = unknown(op.result(i)->type);
      for (size_t i = 0; i < n; ++i) info_[body.args[1 + i].get()] = carried[i];
      walk(body);
    }
    for (size_t i = 0; i < n; ++i) info_[op.result(i)] = carried[i];
  }

  // Facts of elementwise add-like ops (add, addptr): `scale` multiplies b's divisibility.
  Info add_like(const Info& a, const Info& b, const ir::Type& t, int64_t scale) {
    Info r = unknown(t);
    for (int d = 0; d < rank_of(t); ++d) {
      int64_t rc = std::max(std::min(a.contig[d], b.cst[d]), std::min(b.contig[d], a.cst[d]));
      r.contig[d] = rc;
      r.div[d] = std::min(eff_div(a, d, rc), mul_cap(eff_div(b, d, rc), scale));
      r.cst[d] = std::min(a.cst[d], b.cst[d]);
    }
    return r;
  }

  Info cst_only(const Op& op) {
    const ir::Type& t = op.result()->type;
    Info r = unknown(t);
    for (int d = 0; d < rank_of(t); ++d) {
      int64_t c = size_of(t, d);
      for (auto* x : op.operands) c = std::min(c, get(x, t).cst[d]);
      r.cst[d] = c;
    }
    return r;
  }

  Info compute(const Op& op) {
    const ir::Type& t = op.result()->type;
    const int r = rank_of(t);
    switch (op.kind) {
      case OpKind::Constant: {
        const ir::Attr& a = op.attrs.at("value");
        if (std::holds_alternative<int64_t>(a) && t.dtype != DType::ptr && !is_float(t.dtype)) {
          int64_t v = std::get<int64_t>(a);
          return splat(t, pow2_div(v), v);
        }
        return splat(t, 1, std::nullopt);
      }
      case OpKind::Arange: {
        Info i = unknown(t);
        int64_t start = op.int_attr("start");
        i.contig[0] = t.shape[0];
        i.div[0] = pow2_div(start);
        if (t.shape[0] == 1) i.value = start;
        return i;
      }
      case OpKind::ProgramId:
      case OpKind::NumPrograms: return unknown(t);
      // A shared buffer starts at its alignment (plan_shared_buffers; the region is 1024-aligned).
      case OpKind::LocalAlloc: return splat(t, op.int_attr("align"), std::nullopt);
      case OpKind::ConvertLayout: case OpKind::SetLayout: return get(op.operands[0], t);
      case OpKind::Hint: {
        Info i = get(op.operands[0], t);
        if (op.has_attr("multiple_of"))
          for (int d = 0; d < r; ++d) i.div[d] = std::max(i.div[d], pow2_div(op.int_attr("multiple_of")));
        if (op.has_attr("max_contiguous") && !t.is_scalar()) {
          int d = r - 1;
          i.contig[d] = std::max(i.contig[d], std::min(pow2_floor(op.int_attr("max_contiguous")), t.shape[d]));
        }
        return i;
      }
      case OpKind::Cast: {
        const ir::Type& xt = op.operands[0]->type;
        if (is_int(xt.dtype) && is_int(t.dtype) && t.dtype != DType::i1 && xt.dtype != DType::i1) {
          Info i = get(op.operands[0], t);
          return i;
        }
        return cst_only(op);
      }
      case OpKind::AddPtr: {
        Info p = get(op.operands[0], t), o = get(op.operands[1], t);
        return add_like(p, o, t, elem_bytes(t.pointee));
      }
      case OpKind::Binary: return binary(op);
      case OpKind::Compare: {
        Info a = get(op.operands[0], op.operands[0]->type), b = get(op.operands[1], op.operands[1]->type);
        Info i = unknown(t);
        auto pred = op.enum_attr<ir::CmpPred>("pred");
        bool ordered = pred != ir::CmpPred::Eq && pred != ir::CmpPred::Ne;
        bool ints = is_int(op.operands[0]->type.dtype);
        for (int d = 0; d < r; ++d) {
          int64_t c = std::min(a.cst[d], b.cst[d]);
          if (ordered && ints && !t.is_scalar()) {
            // A run of consecutive values starting at a multiple of D against a splat multiple of
            // D: the comparison is uniform over aligned blocks of D.
            if (b.cst[d] == t.shape[d] && a.contig[d] > 1)
              c = std::max(c, std::min({a.contig[d], a.div[d], b.div[d]}));
            if (a.cst[d] == t.shape[d] && b.contig[d] > 1)
              c = std::max(c, std::min({b.contig[d], b.div[d], a.div[d]}));
          }
          i.cst[d] = c;
        }
        return i;
      }
      case OpKind::Select: {
        Info c = get(op.operands[0], t), a = get(op.operands[1], t), b = get(op.operands[2], t);
        Info i = unknown(t);
        if (c.value) return *c.value ? a : b;
        for (int d = 0; d < r; ++d) {
          i.contig[d] = std::min({a.contig[d], b.contig[d], c.cst[d]});
          i.div[d] = std::min(eff_div(a, d, i.contig[d]), eff_div(b, d, i.contig[d]));
          i.cst[d] = std::min({a.cst[d], b.cst[d], c.cst[d]});
        }
        return i;
      }
      case OpKind::Broadcast: {
        Info x = get(op.operands[0], op.operands[0]->type);
        const ir::Type& xt = op.operands[0]->type;
        for (int d = 0; d < r; ++d)
          if (xt.shape[d] == 1 && t.shape[d] != 1) {
            x.contig[d] = 1;
            x.cst[d] = t.shape[d];
          }
        return x;
      }
      case OpKind::ExpandDims: {
        const ir::Type& xt = op.operands[0]->type;
        Info x = get(op.operands[0], xt);
        int axis = static_cast<int>(op.int_attr("axis"));
        if (xt.is_scalar()) return splat(t, x.div[0], x.value);
        int64_t dmin = kMaxDiv;
        for (int d = 0; d < xt.rank(); ++d) dmin = std::min(dmin, x.contig[d] > 1 ? 1 : x.div[d]);
        x.contig.insert(x.contig.begin() + axis, 1);
        x.cst.insert(x.cst.begin() + axis, 1);
        x.div.insert(x.div.begin() + axis, dmin);
        return x;
      }
      case OpKind::Reshape: {
        if (op.has_attr("real_in")) return unknown(t);  // moves elements (pad_shapes.cpp)
        const ir::Type& xt = op.operands[0]->type;
        Info x = get(op.operands[0], xt);
        // Only size-1 dims added or removed keeps the per-dim facts.
        std::vector<int> xd, rd;
        for (int d = 0; d < xt.rank(); ++d)
          if (xt.shape[d] != 1) xd.push_back(d);
        for (int d = 0; d < t.rank(); ++d)
          if (t.shape[d] != 1) rd.push_back(d);
        bool trivial = xd.size() == rd.size();
        for (size_t k = 0; trivial && k < xd.size(); ++k) trivial = xt.shape[xd[k]] == t.shape[rd[k]];
        int64_t dmin = kMaxDiv;
        for (int d = 0; d < rank_of(xt); ++d) dmin = std::min(dmin, x.contig[d] > 1 ? 1 : x.div[d]);
        Info i = unknown(t);
        i.value = x.value;
        for (int d = 0; d < r; ++d) i.div[d] = dmin;
        if (trivial) {
          for (size_t k = 0; k < rd.size(); ++k) {
            i.contig[rd[k]] = x.contig[xd[k]];
            i.div[rd[k]] = x.div[xd[k]];
            i.cst[rd[k]] = x.cst[xd[k]];
          }
        } else if (x.value) {
          return splat(t, dmin, x.value);
        }
        return i;
      }
      case OpKind::Permute: {
        const ir::Type& xt = op.operands[0]->type;
        Info x = get(op.operands[0], xt);
        const auto& order = op.ints_attr("order");
        Info i = unknown(t);
        i.value = x.value;
        for (int d = 0; d < r; ++d) {
          i.contig[d] = x.contig[order[d]];
          i.div[d] = x.div[order[d]];
          i.cst[d] = x.cst[order[d]];
        }
        return i;
      }
      case OpKind::Unary:
      case OpKind::Fma:
      case OpKind::Bitcast: return cst_only(op);
      default: return unknown(t);  // loads, atomics, reductions, scans, dot, histogram
    }
  }

  /// 2^k when v is x & (2^k - 1) (its values are below 2^k), else nullopt.
  std::optional<int64_t> low_mask_bound(const Value* v) {
    const Op* d = v->def;
    while (d && (d->kind == OpKind::Broadcast || d->kind == OpKind::ExpandDims || d->kind == OpKind::Reshape))
      d = d->operands[0]->def;  // the same values, moved
    if (!d || d->kind != OpKind::Binary || d->enum_attr<ir::BinaryOp>("op") != ir::BinaryOp::And) return std::nullopt;
    for (const Value* o : d->operands) {
      const std::optional<int64_t> m = get(o, o->type).value;
      if (m && *m >= 0 && *m < kMaxDiv && pow2_div(*m + 1) == *m + 1) return *m + 1;
    }
    return std::nullopt;
  }

  Info binary(const Op& op) {
    const ir::Type& t = op.result()->type;
    const int r = rank_of(t);
    Info a = get(op.operands[0], t), b = get(op.operands[1], t);
    auto kind = op.enum_attr<ir::BinaryOp>("op");
    if (!is_int(t.dtype) || t.dtype == DType::i1) return cst_only(op);
    Info i = unknown(t);
    auto both = [&](auto f) -> std::optional<int64_t> {
      if (a.value && b.value) return f(*a.value, *b.value);
      return std::nullopt;
    };
    for (int d = 0; d < r; ++d) i.cst[d] = std::min(a.cst[d], b.cst[d]);
    switch (kind) {
      case ir::BinaryOp::Add: {
        Info s = add_like(a, b, t, 1);
        s.value = both([](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) + y); });
        return s;
      }
      case ir::BinaryOp::Sub: {
        for (int d = 0; d < r; ++d) {
          int64_t rc = std::min(a.contig[d], b.cst[d]);
          i.contig[d] = rc;
          i.div[d] = std::min(eff_div(a, d, rc), eff_div(b, d, rc));
        }
        i.value = both([](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) - y); });
        return i;
      }
      case ir::BinaryOp::Mul: {
        for (int d = 0; d < r; ++d) {
          int64_t rc = a.value == 1 ? b.contig[d] : b.value == 1 ? a.contig[d] : 1;
          i.contig[d] = rc;
          i.div[d] = mul_cap(eff_div(a, d, rc), eff_div(b, d, rc));
        }
        i.value = both([](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) * y); });
        return i;
      }
      case ir::BinaryOp::Rem: {
        for (int d = 0; d < r; ++d) {
          int64_t rc = 1;
          if (b.cst[d] == (t.is_scalar() ? 1 : t.shape[d]) && a.contig[d] > 1)
            rc = std::min({a.contig[d], a.div[d], b.div[d]});
          i.contig[d] = rc;
          i.div[d] = std::min(eff_div(a, d, rc), b.div[d]);
        }
        return i;
      }
      case ir::BinaryOp::Div:
      case ir::BinaryOp::Shr: {
        int64_t by = 0;  // a known power-of-two divisor
        if (b.value && kind == ir::BinaryOp::Div && *b.value > 0 && pow2_div(*b.value) == *b.value) by = *b.value;
        if (b.value && kind == ir::BinaryOp::Shr && *b.value >= 0 && *b.value < 30) by = int64_t{1} << *b.value;
        if (by > 0) {
          for (int d = 0; d < r; ++d) {
            if (a.contig[d] > 1) i.cst[d] = std::max(i.cst[d], std::min({a.contig[d], a.div[d], by}));
            else i.div[d] = std::max<int64_t>(1, a.div[d] / by);
          }
          if (by == 1) return a;
        }
        return i;
      }
      case ir::BinaryOp::And: {
        // x & (2^k - 1): the low k bits of x. Runs of x aligned to 2^k stay runs (the swizzled
        // column's offset within its group, struct.hpp's local_ptr); values are multiples of
        // x's divisibility below 2^k.
        const Info& x = a.value ? b : a;
        const std::optional<int64_t> m = a.value ? a.value : b.value;
        if (m && *m >= 0 && *m < kMaxDiv && pow2_div(*m + 1) == *m + 1) {
          const int64_t bound = *m + 1;
          for (int d = 0; d < r; ++d) {
            // runs of x start at multiples of its div: cut to rc, each starts at a multiple of rc
            // below 2^k; single values keep x's divisibility (0 when it is 2^k or more)
            const int64_t rc = std::min({x.contig[d], x.div[d], bound});
            i.contig[d] = rc;
            i.div[d] = x.contig[d] > 1 ? rc : x.div[d] >= bound ? kMaxDiv : x.div[d];
          }
          i.value = both([](int64_t p, int64_t q) { return p & q; });
        }
        return i;
      }
      case ir::BinaryOp::Or: {
        // a | b is a + b when one operand only has bits below 2^k (x & (2^k - 1)) and the other's
        // values are multiples of 2^k (the swizzled group's start | the offset in it).
        for (int side = 0; side < 2; ++side) {
          const Info& hi = side ? b : a;
          const std::optional<int64_t> bound = low_mask_bound(op.operands[side ? 0 : 1]);
          bool disjoint = bound.has_value();
          for (int d = 0; disjoint && d < r; ++d) disjoint = hi.contig[d] == 1 && hi.div[d] >= *bound;
          if (disjoint) {
            Info s2 = add_like(a, b, t, 1);
            s2.value = both([](int64_t p, int64_t q) { return p | q; });
            return s2;
          }
        }
        return i;
      }
      case ir::BinaryOp::Min:
      case ir::BinaryOp::Max:
        // One of the operands, element by element: a multiple of what both are multiples of
        // (e.g. a slice's end, minimum(lo + slice, n)); runs are not kept.
        for (int d = 0; d < r; ++d) i.div[d] = std::min(eff_div(a, d, 1), eff_div(b, d, 1));
        return i;
      case ir::BinaryOp::Xor: {
        // Common low zero bits stay zero.
        for (int d = 0; d < r; ++d) i.div[d] = std::min(eff_div(a, d, 1), eff_div(b, d, 1));
        i.value = both([](int64_t p, int64_t q) { return p ^ q; });
        return i;
      }
      case ir::BinaryOp::Shl: {
        if (b.value && *b.value >= 0 && *b.value < 30) {
          if (*b.value == 0) return a;
          for (int d = 0; d < r; ++d) i.div[d] = mul_cap(eff_div(a, d, 1), int64_t{1} << *b.value);
          i.value = both([](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) << y); });
        }
        return i;
      }
      default: return i;
    }
  }
};

}  // namespace

std::unordered_map<const Value*, Info> analyze(const ir::Function& f) { return Analysis(f).run(); }

}  // namespace tle::passes::axis
