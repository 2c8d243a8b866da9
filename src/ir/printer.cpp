// src/ir/printer.cpp - deterministic MLIR-like text of a Function (format: docs/ir.md, "Printed form").
#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "ir/printer.hpp"

namespace tle::ir {
namespace {

// Numbers every value in program order: the function's arguments, then for each op its results,
// then the arguments of each of its regions' blocks, then the ops inside, depth first.
void number_block(const Block& b, PrintPositions& pos, unsigned& next) {
  for (auto& op : b.ops) {
    for (auto& r : op->results) pos.value_ids.emplace(r.get(), next++);
    for (auto& reg : op->regions) {
      for (auto& a : reg->body().args) pos.value_ids.emplace(a.get(), next++);
      number_block(reg->body(), pos, next);
    }
  }
}

std::string format_double(double d) {
  if (std::isnan(d)) return std::signbit(d) ? "-nan" : "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  std::string s = fmt::format("{}", d);  // shortest text that reads back to the same double
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out + "\"";
}

// The enum type name of attribute `key` on `op`, via its name() function, or null.
const char* enum_name(const Op& op, const std::string& key, int64_t v) {
  if (v < 0 || v > 255) return nullptr;
  const char* n = nullptr;
  if (key == "op") {
    if (op.kind == OpKind::Binary) n = name(static_cast<BinaryOp>(v));
    else if (op.kind == OpKind::Unary) n = name(static_cast<UnaryOp>(v));
    else if (op.kind == OpKind::AtomicRMW) n = name(static_cast<AtomicOp>(v));
  } else if (key == "pred" && op.kind == OpKind::Compare) {
    n = name(static_cast<CmpPred>(v));
  } else if (key == "kind") {
    if (op.kind == OpKind::Reduce) n = name(static_cast<ReduceKind>(v));
    else if (op.kind == OpKind::Scan) n = name(static_cast<ScanKind>(v));
  } else if (key == "precision" && op.kind == OpKind::Dot) {
    n = name(static_cast<Precision>(v));
  }
  if (n && n[0] == '?') return nullptr;  // out of range: print the number
  return n;
}

class Printer {
 public:
  explicit Printer(PrintPositions& pos) : pos_(pos) {}

  std::string run(const Function& f) {
    unsigned next = 0;
    for (auto& a : f.entry().args) pos_.value_ids.emplace(a.get(), next++);
    number_block(f.entry(), pos_, next);

    out_ = fmt::format("func @{}(", f.name);
    const auto& args = f.entry().args;
    for (size_t i = 0; i < args.size(); ++i) {
      if (i) out_ += ", ";
      out_ += fmt::format("{}: {}", pos_.value_name(args[i].get()), tstr(args[i]->type));
      if (i < f.arg_info.size() && f.arg_info[i].divisibility > 1) out_ += fmt::format(" {{div{}}}", f.arg_info[i].divisibility);
      if (i < f.arg_info.size() && f.arg_info[i].tensor_map) out_ += " {tensor_map}";
      if (i < f.arg_info.size() && f.arg_info[i].mesh) out_ += " {mesh}";
    }
    out_ += ") {\n";
    line_ = 2;
    print_ops(f.entry(), 1);
    out_ += "}\n";
    // Layouts (GPU path) are listed after the function and referred to as #L<n> in types.
    for (size_t i = 0; i < layouts_.size(); ++i) {
      std::string text = layout_str(*layouts_[i]);
      for (auto& c : text)
        if (c == '\n') c = ' ';
      out_ += fmt::format("#L{} = {}\n", i, text);
    }
    return std::move(out_);
  }

 private:
  void newline() { out_ += '\n'; ++line_; }

  /// A type with its layout reference (#L<n>, numbered in order of first appearance).
  std::string tstr(const Type& t) {
    std::string s = t.str();
    if (!t.layout) return s;
    size_t i = 0;
    while (i < layouts_.size() && !layouts_equal(layouts_[i], t.layout.get())) ++i;
    if (i == layouts_.size()) layouts_.push_back(t.layout.get());
    return s + fmt::format("#L{}", i);
  }
  void indent(int depth) { out_.append(static_cast<size_t>(2 * depth), ' '); }

  std::string types(const std::vector<Value*>& vs) {
    std::string s;
    for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + (vs[i] ? tstr(vs[i]->type) : std::string("<null>"));
    return s;
  }

  void print_ops(const Block& b, int depth) {
    for (auto& op : b.ops) print_op(*op, depth);
  }

  void print_op(const Op& op, int depth) {
    indent(depth);
    pos_.op_lines[&op] = line_;
    if (!op.results.empty()) {
      for (size_t i = 0; i < op.results.size(); ++i)
        out_ += (i ? ", " : "") + pos_.value_name(op.results[i].get());
      out_ += " = ";
    }
    out_ += op_mnemonic(op.kind);
    // Operands; for `for`, the carried inits are set apart: `for %lo, %hi, %step iter(%a, %b)`.
    size_t plain = op.kind == OpKind::For ? std::min<size_t>(3, op.operands.size()) : op.operands.size();
    for (size_t i = 0; i < plain; ++i) out_ += (i ? ", " : " ") + pos_.value_name(op.operands[i]);
    if (op.operands.size() > plain) {
      out_ += " iter(";
      for (size_t i = plain; i < op.operands.size(); ++i)
        out_ += (i > plain ? ", " : "") + pos_.value_name(op.operands[i]);
      out_ += ")";
    }
    if (!op.attrs.empty()) {
      out_ += " {";
      bool first = true;
      for (auto& [k, v] : op.attrs) {
        out_ += (first ? "" : ", ") + k + "=" + print_attr(op, k, v);
        first = false;
      }
      out_ += "}";
    }
    if (op.kind != OpKind::Yield) {
      std::vector<Value*> res;
      for (auto& r : op.results) res.push_back(r.get());
      if (op.operands.empty()) {
        if (!res.empty()) out_ += " : " + (res.size() == 1 ? types(res) : "(" + types(res) + ")");
      } else {
        out_ += " : (" + types(op.operands) + ")";
        if (res.size() == 1) out_ += " -> " + types(res);
        else if (res.size() > 1) out_ += " -> (" + types(res) + ")";
      }
    }
    for (size_t r = 0; r < op.regions.size(); ++r) {
      if (r == 0) out_ += " {";
      else out_ += op.kind == OpKind::If && r == 1 ? " else {" : " {";
      newline();
      const Block& body = op.regions[r]->body();
      if (!body.args.empty()) {
        indent(depth);
        out_ += "^(";
        for (size_t i = 0; i < body.args.size(); ++i)
          out_ += fmt::format("{}{}: {}", i ? ", " : "", pos_.value_name(body.args[i].get()), tstr(body.args[i]->type));
        out_ += "):";
        newline();
      }
      print_ops(body, depth + 1);
      indent(depth);
      out_ += "}";
    }
    newline();
  }

  PrintPositions& pos_;
  std::vector<const Layout*> layouts_;
  std::string out_;
  unsigned line_ = 1;
};

}  // namespace

std::string PrintPositions::value_name(const Value* v) const {
  if (!v) return "<null>";
  auto it = value_ids.find(v);
  if (it == value_ids.end()) return "<undef>";
  return fmt::format("%{}", it->second);
}

std::string print_attr(const Op& op, const std::string& key, const Attr& value) {
  if (auto* i = std::get_if<int64_t>(&value)) {
    if (const char* n = enum_name(op, key, *i)) return n;
    // A u64 constant holds its bit pattern: show the unsigned value.
    if (op.kind == OpKind::Constant && key == "value" && op.results.size() == 1 &&
        op.results[0]->type.dtype == DType::u64)
      return fmt::format("{}", static_cast<uint64_t>(*i));
    return fmt::format("{}", *i);
  }
  if (auto* d = std::get_if<double>(&value)) return format_double(*d);
  if (auto* s = std::get_if<std::string>(&value)) return quote(*s);
  const auto& v = std::get<std::vector<int64_t>>(value);
  return fmt::format("[{}]", fmt::join(v, ", "));
}

std::string print_function(const Function& f, PrintPositions* pos) {
  PrintPositions local;
  Printer p(pos ? *pos : local);
  return p.run(f);
}

std::string print(const Function& f) { return print_function(f, nullptr); }

}  // namespace tle::ir
