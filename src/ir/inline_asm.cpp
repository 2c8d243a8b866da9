// src/ir/inline_asm.cpp - operand rules of inline_asm ops (see inline_asm.hpp).
#include "ir/inline_asm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tle::ir {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

/// The letters a register of value dtype d (with `regs` layout) accepts, and a description.
std::string allowed_letters(DType d, const AsmValueRegs& r) {
  switch (r.reg_bits) {
    case 16: return "h";
    case 32: return r.elems_per_reg == 1 && d == DType::f32 ? "fr" : "r";
    case 64: return d == DType::f64 ? "dl" : "l";
    default: return "";
  }
}

std::string describe(DType d, const AsmValueRegs& r) {
  if (r.elems_per_reg == 1) return fmt::format("{} ({}-bit register)", dtype_name(d), r.reg_bits);
  return fmt::format("{} elements of {} packed {} per {}-bit register", r.elems_per_reg, dtype_name(d),
                     r.elems_per_reg, r.reg_bits);
}

std::string letters_text(const std::string& l, const char* prefix) {
  std::string s;
  for (size_t i = 0; i < l.size(); ++i)
    s += fmt::format("{}'{}{}'", i == 0 ? "" : i + 1 == l.size() ? " or " : ", ", prefix, l[i]);
  return s;
}

}  // namespace

AsmValueRegs asm_value_regs(DType d, int pack) {
  AsmValueRegs r;
  const int w = bit_width(d);
  r.elems_per_reg = w < 32 ? std::min(32 / w, pack) : 1;
  if (r.elems_per_reg < 1) r.elems_per_reg = 1;
  r.regs = pack / r.elems_per_reg;
  r.reg_bits = r.elems_per_reg * w;
  return r;
}

std::vector<AsmConstraint> parse_asm_constraints(const std::string& constraints) {
  std::vector<AsmConstraint> out;
  size_t start = 0;
  for (;;) {
    size_t comma = constraints.find(',', start);
    AsmConstraint c;
    c.text = trim(constraints.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!c.text.empty() && c.text[0] == '~') {
      c.clobber = true;
    } else if (!c.text.empty() && c.text[0] == '=') {
      c.output = true;
      size_t i = 1;
      if (i < c.text.size() && c.text[i] == '&') ++i;
      if (i + 1 == c.text.size()) c.letter = c.text[i];
    } else if (c.text.size() == 1) {
      c.letter = c.text[0];
    }
    out.push_back(std::move(c));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string normalized_asm_constraints(const std::string& constraints) {
  std::string s;
  for (auto& c : parse_asm_constraints(constraints)) s += (s.empty() ? "" : ",") + c.text;
  return s;
}

std::string check_inline_asm(const std::string& asm_text, const std::string& constraints, DType result,
                             const std::vector<DType>& operands, int64_t pack) {
  if (trim(asm_text).empty()) return "the asm text is empty; give one PTX instruction sequence such as \"ex2.approx.f32 $0, $1;\"";
  if (pack != 1 && pack != 2 && pack != 4)
    return fmt::format("pack must be 1, 2 or 4 (elements per asm invocation), got {}", pack);
  if (operands.empty()) return "inline_asm needs at least one operand tile (the result takes their broadcast shape)";
  // Every value: result first, then the operands.
  std::vector<DType> values;
  values.reserve(operands.size() + 1);
  values.push_back(result);
  for (DType d : operands) values.push_back(d);
  std::vector<AsmValueRegs> regs;
  for (size_t i = 0; i < values.size(); ++i) {
    DType d = values[i];
    std::string what = i == 0 ? std::string("the result") : fmt::format("operand {}", i - 1);
    if (d == DType::i1 || d == DType::ptr)
      return fmt::format("{} is a {} tile; inline_asm takes integer and floating-point tiles only (convert booleans to "
                         "an integer type, pointers are not supported)",
                         what, dtype_name(d));
    AsmValueRegs r = asm_value_regs(d, static_cast<int>(pack));
    if (r.reg_bits < 16)
      return fmt::format("{} is an 8-bit {} tile and PTX inline asm has no 8-bit registers; use pack = 2 ('h': two "
                         "elements per 16-bit register) or pack = 4 ('r': four per 32-bit register)",
                         what, dtype_name(d));
    regs.push_back(r);
  }
  size_t want = 0;
  for (auto& r : regs) want += static_cast<size_t>(r.regs);
  auto cs = parse_asm_constraints(constraints);
  size_t clobbers = 0;
  while (clobbers < cs.size() && cs[cs.size() - 1 - clobbers].clobber) ++clobbers;
  const size_t given = cs.size() - clobbers;
  auto layout_text = [&] {
    std::string s;
    for (size_t i = 0; i < values.size(); ++i)
      s += fmt::format("{}{} for {}", i ? ", " : "", regs[i].regs,
                       i == 0 ? std::string("the result") : fmt::format("operand {}", i - 1));
    return s;
  };
  if (given != want)
    return fmt::format("the constraint string \"{}\" has {} register constraints, but 1 result and {} operand{} with "
                       "pack = {} need {} ({}; outputs first)",
                       constraints, given, operands.size(), operands.size() == 1 ? "" : "s", pack, want,
                       layout_text());
  size_t k = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string ok = allowed_letters(values[i], regs[i]);
    for (int j = 0; j < regs[i].regs; ++j, ++k) {
      const AsmConstraint& c = cs[k];
      std::string what = i == 0 ? std::string("the result") : fmt::format("operand {}", i - 1);
      if (c.clobber) return fmt::format("constraint {} ('{}') is a clobber, but {} needs a register", k, c.text, what);
      if (i == 0 && !c.output)
        return fmt::format("constraint {} ('{}') is for the result and must be an output: '={}'", k, c.text, ok[0]);
      if (i > 0 && c.output)
        return fmt::format("constraint {} ('{}') is for {} and must be an input (no '='): '{}'", k, c.text, what, ok[0]);
      if (!c.letter || ok.find(c.letter) == std::string::npos)
        return fmt::format("constraint {} ('{}') does not fit {}, {}: use {} (letters: h 16-bit, r 32-bit, l "
                           "64-bit, f f32, d f64)",
                           k, c.text, what, describe(values[i], regs[i]), letters_text(ok, i == 0 ? "=" : ""));
    }
  }
  for (size_t j = 0; j < clobbers; ++j) {
    const std::string& t = cs[given + j].text;
    if (t.size() < 4 || t[1] != '{' || t.back() != '}')
      return fmt::format("clobber '{}' must have the form ~{{name}} (e.g. ~{{memory}})", t);
  }
  // $n references (LLVM syntax; "$$" is a literal '$').
  for (size_t i = 0; i < asm_text.size(); ++i) {
    if (asm_text[i] != '$') continue;
    if (i + 1 < asm_text.size() && asm_text[i + 1] == '$') {
      ++i;
      continue;
    }
    size_t j = i + 1;
    if (j < asm_text.size() && asm_text[j] == '{') ++j;
    size_t n0 = j;
    while (j < asm_text.size() && std::isdigit(static_cast<unsigned char>(asm_text[j]))) ++j;
    if (j == n0) continue;
    size_t n = std::stoul(asm_text.substr(n0, j - n0));
    if (n >= want)
      return fmt::format("the asm text refers to ${}, but there are only {} registers ($0..${}: {})", n, want, want - 1,
                         layout_text());
  }
  return {};
}

}  // namespace tle::ir
