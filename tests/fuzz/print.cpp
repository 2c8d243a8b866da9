// tests/fuzz/print.cpp - to_cpp(): a Program as C++ source, the calls trace() makes written as a
// user would write them (tests/fuzz/program.hpp lists the statement forms).
#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "fuzz/harness.hpp"
#include "fuzz/program.hpp"

namespace fuzz {
namespace {

namespace ir = tle::ir;

const char* cpp_type(DType d) {
  switch (d) {
    case DType::i1: return "bool";
    case DType::i8: return "int8_t";
    case DType::i16: return "int16_t";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
    case DType::u8: return "uint8_t";
    case DType::u16: return "uint16_t";
    case DType::u32: return "uint32_t";
    case DType::u64: return "uint64_t";
    case DType::f16: return "tle::f16";
    case DType::bf16: return "tle::bf16";
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f8e4m3: return "tle::f8e4m3";
    case DType::f8e5m2: return "tle::f8e5m2";
    case DType::ptr: break;
  }
  return "?";
}

std::string double_literal(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-std::numeric_limits<double>::quiet_NaN()" : "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v)) return v < 0 ? "-std::numeric_limits<double>::infinity()" : "std::numeric_limits<double>::infinity()";
  return fmt::format("{:a}", v);  // hexadecimal: exact
}

/// The C++ scalar host_constant<T> turns into `lit` for a tile of dtype d (trace.cpp's constant()).
std::string literal(DType d, const Literal& l) {
  if (l.is_float) return double_literal(l.f);
  if (d == DType::i1) return l.i ? "true" : "false";
  if (tle::is_signed_int(d) || tle::is_float(d)) {
    if (l.i == INT64_MIN) return "int64_t(-9223372036854775807LL - 1)";
    return fmt::format("int64_t({})", l.i);
  }
  return fmt::format("uint64_t({}ull)", static_cast<uint64_t>(l.i));
}

std::string shape_list(const Shape& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

const char* binary_infix(ir::BinaryOp op) {
  using B = ir::BinaryOp;
  switch (op) {
    case B::Add: return "+";
    case B::Sub: return "-";
    case B::Mul: return "*";
    case B::Div: return "/";
    case B::Rem: return "%";
    case B::And: return "&";
    case B::Or: return "|";
    case B::Xor: return "^";
    case B::Shl: return "<<";
    case B::Shr: return ">>";
    default: return nullptr;
  }
}

const char* binary_fn(ir::BinaryOp op) {
  switch (op) {
    case ir::BinaryOp::Max: return "tle::maximum";
    case ir::BinaryOp::Min: return "tle::minimum";
    case ir::BinaryOp::Pow: return "tle::pow";
    default: return nullptr;
  }
}

const char* cmp_infix(ir::CmpPred p) {
  switch (p) {
    case ir::CmpPred::Eq: return "==";
    case ir::CmpPred::Ne: return "!=";
    case ir::CmpPred::Lt: return "<";
    case ir::CmpPred::Le: return "<=";
    case ir::CmpPred::Gt: return ">";
    case ir::CmpPred::Ge: return ">=";
  }
  return "?";
}

std::string binary_expr(ir::BinaryOp op, const std::string& a, const std::string& b) {
  if (const char* f = binary_fn(op)) return fmt::format("{}({}, {})", f, a, b);
  return fmt::format("{} {} {}", a, binary_infix(op), b);
}

class Printer {
 public:
  explicit Printer(const Program& p) : p_(p) {}

  std::string var(int v) const {
    for (size_t i = 0; i < p_.params.size(); ++i)
      if (p_.params[i].var == v) return "a" + std::to_string(i);
    return "v" + std::to_string(v);
  }
  std::string type(int v) const {
    const Var& x = p_.vars.at(v);
    if (x.dtype == DType::ptr) return fmt::format("tle::Ptr<{}>", cpp_type(x.pointee));
    return fmt::format("tle::Tile<{}>", cpp_type(x.dtype));
  }

  void block(const std::vector<Stmt>& b, int ind) {
    for (const Stmt& s : b) stmt(s, ind);
  }

  std::string out;

 private:
  const Program& p_;

  void line(int ind, const std::string& s) { out += std::string(static_cast<size_t>(ind) * 2, ' ') + s + "\n"; }
  void def(int ind, const Stmt& s, const std::string& expr) { line(ind, fmt::format("{} {} = {};", type(s.result), var(s.result), expr)); }

  /// The tuple form of a combine statement (program.hpp): std::get<b>(fn(std::tuple{x, y}, ...)).
  std::string pair_call(const char* fn, const Stmt& s) const {
    std::string body = s.a == 4 ? "return std::tuple{p0 * q0, q0 * p1 + q1};"
                                : "auto t = (p0 > q0) | ((p0 == q0) & (p1 < q1)); "
                                  "return std::tuple{tle::where(t, p0, q0), tle::where(t, p1, q1)};";
    return fmt::format("std::get<{}>(tle::{}(std::tuple{{{}, {}}}, {}, [](auto p, auto q) {{ auto [p0, p1] = p; "
                       "auto [q0, q1] = q; {} }}, {}))",
                       s.b, fn, var(s.args[0]), var(s.args[1]), s.axis, body, s.flag ? "true" : "false");
  }

  std::string combine_lambda(DType d, const Stmt& s) const {
    std::string t = fmt::format("tle::Tile<{}>", cpp_type(d));
    auto op = static_cast<ir::BinaryOp>(s.op);
    std::string body;
    switch (s.a) {
      case 1: body = "tle::where(p > q, p, q)"; break;
      case 2: body = "tle::where(p < q, p, q)"; break;
      case 3: body = binary_expr(op, "(" + binary_expr(op, "p", "q") + ")", "p"); break;
      default: body = binary_expr(op, "p", "q");
    }
    return fmt::format("[]({} p, {} q) {{ return {}; }}", t, t, body);
  }

  void stmt(const Stmt& s, int ind) {
    const auto& a = s.args;
    auto A = [&](int i) { return var(a.at(i)); };
    switch (s.kind) {
      case Kind::Const: {
        DType d = p_.vars[s.result].dtype;
        if (s.shape.empty()) def(ind, s, fmt::format("{}({})", type(s.result), literal(d, s.lit)));
        else def(ind, s, fmt::format("tle::full<{}>({}, {})", cpp_type(d), shape_list(s.shape), literal(d, s.lit)));
        return;
      }
      case Kind::Arange: def(ind, s, fmt::format("tle::arange({}, {})", s.a, s.b)); return;
      case Kind::ProgramId: def(ind, s, fmt::format("tle::program_id({})", s.axis)); return;
      case Kind::NumPrograms: def(ind, s, fmt::format("tle::num_programs({})", s.axis)); return;
      case Kind::Binary: {
        auto op = static_cast<ir::BinaryOp>(s.op);
        def(ind, s, binary_expr(op, A(0), A(1)));
        return;
      }
      case Kind::Compare: def(ind, s, fmt::format("{} {} {}", A(0), cmp_infix(static_cast<ir::CmpPred>(s.op)), A(1))); return;
      case Kind::Unary: {
        auto op = static_cast<ir::UnaryOp>(s.op);
        DType d = p_.vars[a[0]].dtype;
        std::string e;
        if (op == ir::UnaryOp::Neg) e = "-" + A(0);
        else if (op == ir::UnaryOp::Not) e = (d == DType::i1 ? "!" : "~") + A(0);
        else e = fmt::format("tle::{}({})", ir::name(op), A(0));
        def(ind, s, e);
        return;
      }
      case Kind::Fma: def(ind, s, fmt::format("tle::fma({}, {}, {})", A(0), A(1), A(2))); return;
      case Kind::Where: def(ind, s, fmt::format("tle::where({}, {}, {})", A(0), A(1), A(2))); return;
      case Kind::Cast: def(ind, s, fmt::format("{}.to<{}>()", A(0), cpp_type(s.to))); return;
      case Kind::Bitcast: def(ind, s, fmt::format("tle::bitcast<{}>({})", cpp_type(s.to), A(0))); return;
      case Kind::BroadcastTo: def(ind, s, fmt::format("tle::broadcast_to({}, {})", A(0), shape_list(s.shape))); return;
      case Kind::ExpandDims: def(ind, s, fmt::format("tle::expand_dims({}, {})", A(0), s.axis)); return;
      case Kind::Reshape: def(ind, s, fmt::format("tle::reshape({}, {})", A(0), shape_list(s.shape))); return;
      case Kind::Permute: {
        std::string o = "{";
        for (size_t i = 0; i < s.order.size(); ++i) o += (i ? ", " : "") + std::to_string(s.order[i]);
        def(ind, s, fmt::format("tle::permute({}, {}}})", A(0), o));
        return;
      }
      case Kind::Reduce:
        def(ind, s, fmt::format("tle::{}({}, {}, {})", ir::name(static_cast<ir::ReduceKind>(s.op)), A(0), s.axis,
                                s.flag ? "true" : "false"));
        return;
      case Kind::ReduceCombine:
        if (a.size() == 2) return def(ind, s, pair_call("reduce", s));
        def(ind, s, fmt::format("tle::reduce({}, {}, {}, {})", A(0), s.axis, combine_lambda(p_.vars[a[0]].dtype, s),
                                s.flag ? "true" : "false"));
        return;
      case Kind::Cumsum: def(ind, s, fmt::format("tle::cumsum({}, {}, {})", A(0), s.axis, s.flag ? "true" : "false")); return;
      case Kind::ScanCombine:
        if (a.size() == 2) return def(ind, s, pair_call("associative_scan", s));
        def(ind, s, fmt::format("tle::associative_scan({}, {}, {}, {})", A(0), s.axis,
                                combine_lambda(p_.vars[a[0]].dtype, s), s.flag ? "true" : "false"));
        return;
      case Kind::Dot: {
        static const char* prec[] = {"tle::Precision::IEEE", "tle::Precision::TF32", "tle::Precision::TF32x3"};
        if (a[2] >= 0) def(ind, s, fmt::format("tle::dot({}, {}, {}, {})", A(0), A(1), A(2), prec[s.op]));
        else def(ind, s, fmt::format("tle::dot({}, {}, {})", A(0), A(1), prec[s.op]));
        return;
      }
      case Kind::Histogram: {
        const char* f = s.op == 1 ? "tle::histogram_ranks" : "tle::histogram";
        if (a[1] >= 0) def(ind, s, fmt::format("{}({}, {}, {})", f, A(0), s.a, A(1)));
        else def(ind, s, fmt::format("{}({}, {})", f, A(0), s.a));
        return;
      }
      case Kind::Sort: {
        const char* f = s.flag ? "true" : "false";
        if (s.op == 0) def(ind, s, fmt::format("tle::sort({}, {}, {})", A(0), s.axis, f));
        else if (s.op == 1) def(ind, s, fmt::format("tle::argsort({}, {}, {})", A(0), s.axis, f));
        else
          def(ind, s, fmt::format("tle::topk({}, {}, {}, {}).{}", A(0), s.a, s.axis, f, s.op == 2 ? "values" : "indices"));
        return;
      }
      case Kind::Gather: def(ind, s, fmt::format("tle::gather({}, {}, {})", A(0), A(1), s.axis)); return;
      case Kind::Hint:
        if (s.a) def(ind, s, fmt::format("tle::multiple_of({}, {})", A(0), s.a));
        else def(ind, s, fmt::format("tle::max_contiguous({}, {})", A(0), s.b));
        return;
      case Kind::AddPtr: def(ind, s, fmt::format("{} + {}", A(0), A(1))); return;
      case Kind::LocalAlloc: def(ind, s, fmt::format("tle::gpu::alloc<{}>({{{}}}).data()", cpp_type(s.to), s.a)); return;
      case Kind::Copy:
        line(ind, fmt::format("tle::gpu::copy({}, {}{});", A(0), A(1), a[2] >= 0 ? ", " + A(2) : std::string()));
        return;
      case Kind::CopyCommit: line(ind, "tle::gpu::commit_group();"); return;
      case Kind::CopyWait: line(ind, fmt::format("tle::gpu::wait_group({});", s.a)); return;
      case Kind::Load: {
        std::string e = "tle::load(" + A(0);
        if (a[1] >= 0) e += ", " + A(1);
        if (s.flag) e += ", " + literal(p_.vars[a[0]].pointee, s.lit);
        else if (a[2] >= 0) e += ", " + A(2);
        if (s.is_async) e += ", tle::MemHints{.is_async = true}";
        def(ind, s, e + ")");
        return;
      }
      case Kind::Store:
        if (a[2] >= 0) line(ind, fmt::format("tle::store({}, {}, {});", A(0), A(1), A(2)));
        else line(ind, fmt::format("tle::store({}, {});", A(0), A(1)));
        return;
      case Kind::Atomic: {
        std::string fn = fmt::format("tle::atomic_{}", ir::name(static_cast<ir::AtomicOp>(s.op)));
        if (a[2] >= 0) def(ind, s, fmt::format("{}({}, {}, {})", fn, A(0), A(1), A(2)));
        else def(ind, s, fmt::format("{}({}, {})", fn, A(0), A(1)));
        return;
      }
      case Kind::AtomicCas: def(ind, s, fmt::format("tle::atomic_cas({}, {}, {})", A(0), A(1), A(2))); return;
      case Kind::Assign: line(ind, fmt::format("{} = {};", var(s.result), A(0))); return;
      case Kind::ExtractTile: case Kind::InsertTile: {
        // tle::TileIndex (program.hpp: the forms by s.op), spelled as tests/test_ops_lite.cpp does
        const size_t tiles = s.kind == Kind::ExtractTile ? 1 : 2;
        std::string ix;
        if (s.op == 0) ix = fmt::format("int64_t({})", s.index.at(0));
        else if (s.op == 1)
          for (size_t i = 0; i < s.index.size(); ++i) ix += fmt::format("{}int64_t({})", i ? ", " : "{", s.index[i]);
        else if (s.op == 2) ix = A(static_cast<int>(tiles));
        else
          for (size_t i = tiles; i < a.size(); ++i) ix += (i > tiles ? ", " : "{") + A(static_cast<int>(i));
        if (s.op == 1 || s.op == 3) ix += "}";
        if (s.kind == Kind::ExtractTile) def(ind, s, fmt::format("tle::extract_tile({}, {}, {})", A(0), ix, shape_list(s.shape)));
        else def(ind, s, fmt::format("tle::insert_tile({}, {}, {})", A(0), A(1), ix));
        return;
      }
      case Kind::For: {
        auto b = [&](int i, int64_t lit) { return a[i] >= 0 ? A(i) : std::to_string(lit); };
        line(ind, fmt::format("for (auto {} : tle::range({}, {}, {})) {{", var(s.result), b(0, s.lo), b(1, s.hi), b(2, s.step)));
        block(s.body, ind + 1);
        line(ind, "}");
        return;
      }
      case Kind::Roles:
        line(ind, fmt::format("tle::gpu::warp_specialize({{tle::gpu::Role({}, [] {{}}), tle::gpu::Role({}, [&] {{", s.b,
                              s.a));
        block(s.body, ind + 1);
        line(ind, "})});");
        return;
      case Kind::If:
        line(ind, fmt::format("tle::if_({}, [&] {{", A(0)));
        block(s.body, ind + 1);
        line(ind, "}, [&] {");
        block(s.orelse, ind + 1);
        line(ind, "});");
        return;
    }
  }
};

const char* role_name(Buffer::Role r) {
  switch (r) {
    case Buffer::In: return "fuzz::Buffer::In";
    case Buffer::Out: return "fuzz::Buffer::Out";
    case Buffer::InOut: return "fuzz::Buffer::InOut";
  }
  return "?";
}
const char* fill_name(Buffer::Fill f) {
  switch (f) {
    case Buffer::Special: return "fuzz::Buffer::Special";
    case Buffer::Index: return "fuzz::Buffer::Index";
    case Buffer::Sentinel: return "fuzz::Buffer::Sentinel";
  }
  return "?";
}
const char* dtype_enum(DType d) {
  switch (d) {
    case DType::i1: return "tle::DType::i1";
    case DType::i8: return "tle::DType::i8";
    case DType::i16: return "tle::DType::i16";
    case DType::i32: return "tle::DType::i32";
    case DType::i64: return "tle::DType::i64";
    case DType::u8: return "tle::DType::u8";
    case DType::u16: return "tle::DType::u16";
    case DType::u32: return "tle::DType::u32";
    case DType::u64: return "tle::DType::u64";
    case DType::f16: return "tle::DType::f16";
    case DType::bf16: return "tle::DType::bf16";
    case DType::f32: return "tle::DType::f32";
    case DType::f64: return "tle::DType::f64";
    case DType::ptr: return "tle::DType::ptr";
    case DType::f8e4m3: return "tle::DType::f8e4m3";
    case DType::f8e5m2: return "tle::DType::f8e5m2";
  }
  return "?";
}

/// A C++ expression of the scalar argument's launch value, of the parameter's C++ type.
std::string scalar_arg(DType d, const Literal& l) {
  if (tle::is_float(d)) {
    std::string v = l.is_float ? double_literal(l.f) : fmt::format("{}.0", l.i);
    if (d == DType::f16 || d == DType::bf16) return fmt::format("{}({})", cpp_type(d), v);
    return fmt::format("{}({})", cpp_type(d), v);
  }
  if (d == DType::i1) return l.i ? "true" : "false";
  if (tle::is_signed_int(d)) {
    if (l.i == INT64_MIN) return "int64_t(-9223372036854775807LL - 1)";
    return fmt::format("{}({})", cpp_type(d), l.i);
  }
  return fmt::format("{}({}ull)", cpp_type(d), static_cast<uint64_t>(l.i));
}

}  // namespace

std::string to_cpp(const Program& p, const std::string& test_name, const std::string& note, bool printer_check, bool gpu) {
  Printer pr(p);
  std::ostringstream o;
  if (!note.empty()) {
    std::istringstream n(note);
    for (std::string l; std::getline(n, l);) o << "// " << l << "\n";
  }
  o << fmt::format("TEST_CASE(\"{}\", \"{}\") {{\n", test_name,
                   printer_check ? "[fuzz][printer]" : gpu ? "[.gpu][fuzz-gpu][regression]" : "[fuzz][regression]");
  std::string params;
  for (size_t i = 0; i < p.params.size(); ++i)
    params += fmt::format("{}{} {}", i ? ", " : "", pr.type(p.params[i].var), pr.var(p.params[i].var));
  o << fmt::format("  auto kernel = tle::jit(\"fuzz_{}\", []({}) {{\n", p.seed, params);
  pr.block(p.body, 2);
  o << pr.out;
  o << "  });\n";
  if (printer_check) {
    o << fmt::format("  const fuzz::Program p = fuzz::generate({}ull);\n", p.seed);
    o << "  fuzz::expect_printed_matches(p, [&](tle::Backend backend, fuzz::Memory& m) {\n";
  } else {
    o << "  fuzz::Program p;\n";
    o << fmt::format("  p.seed = {}ull;\n", p.seed);
    for (const Buffer& b : p.buffers)
      o << fmt::format("  p.buffers.push_back({{{}, {}, {}, {}, {}, {}{}}});\n", role_name(b.role), dtype_enum(b.dtype),
                       b.size, fill_name(b.fill), b.lo, b.hi, b.ulp ? fmt::format(", {}", b.ulp) : "");
    if (gpu) {
      std::string configs;
      for (const DeviceConfig& c : device_configs(p))
        configs += fmt::format("{}{{{}, {}}}", configs.empty() ? "" : ", ", c.num_warps, c.num_stages);
      o << "  fuzz::expect_gpu_agrees(p, {" << configs
        << "}, [&](tle::Backend backend, fuzz::Memory& m, fuzz::DeviceConfig c) {\n";
    } else {
      o << "  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {\n";
    }
  }
  std::string args;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& pa = p.params[i];
    if (pa.buffer >= 0)
      args += fmt::format(", m.ptr<{}>({})", cpp_type(p.buffers[pa.buffer].dtype), pa.buffer);
    else
      args += ", " + scalar_arg(p.vars[pa.var].dtype, pa.value);
  }
  o << fmt::format("    kernel(tle::Grid({}, {}, {}).backend(backend){}{});\n", p.grid[0], p.grid[1], p.grid[2],
                   gpu && !printer_check ? ".with_warps(c.num_warps).with_stages(c.num_stages)" : "", args);
  o << "  });\n";
  o << "}\n";
  return o.str();
}

}  // namespace fuzz
