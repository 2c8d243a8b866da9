// src/passes/cse.cpp - common-subexpression elimination.
//
// Entry point: bool cse(ir::Function&).
// Two pure ops without regions are equal when they have the same kind, the same operands (the
// same Values), equal attributes (doubles compared by bit pattern: 0.0 and -0.0 differ, NaNs of
// one pattern match) and the same result types (layouts compared by identity). The later one is
// replaced by the earlier one when the earlier one dominates it: it was seen earlier in the same
// block or in an enclosing block. Ops in a region never leak to the enclosing block or to sibling
// regions (a scoped table, popped when a region is left).
#include <fmt/format.h>

#include <bit>
#include <unordered_map>

#include "passes/pass.hpp"

namespace tle::passes {
namespace {

using namespace ir;

std::string attr_key(const Attr& a) {
  if (auto* i = std::get_if<int64_t>(&a)) return fmt::format("i{}", *i);
  if (auto* d = std::get_if<double>(&a)) return fmt::format("d{:x}", std::bit_cast<uint64_t>(*d));
  if (auto* s = std::get_if<std::string>(&a)) return fmt::format("s{}:{}", s->size(), *s);
  return fmt::format("l[{}]", fmt::join(std::get<std::vector<int64_t>>(a), ","));
}

// A string that is equal for two ops exactly when they compute the same values.
std::string op_key(const Op& op) {
  std::string k = fmt::format("{}(", static_cast<int>(op.kind));
  for (auto* v : op.operands) k += fmt::format("{},", static_cast<const void*>(v));
  k += "){";
  for (auto& [name, a] : op.attrs) k += fmt::format("{}:{}:{};", name.size(), name, attr_key(a));
  k += "}->";
  for (auto& r : op.results)
    k += fmt::format("{}@{};", r->type.str(), static_cast<const void*>(r->type.layout.get()));
  return k;
}

class Cse {
 public:
  explicit Cse(Function& f) : f_(f) {}

  bool run_block(Block& b) {
    bool changed = false;
    std::vector<std::string> added;  // keys entered in this scope
    for (auto it = b.ops.begin(); it != b.ops.end();) {
      Op& op = **it;
      if (op.is_pure() && op.regions.empty() && !op.results.empty()) {
        std::string key = op_key(op);
        auto found = table_.find(key);
        if (found != table_.end()) {
          Op& prev = *found->second;
          for (size_t i = 0; i < op.results.size(); ++i) replace_all_uses(f_.entry(), op.result(i), prev.result(i));
          it = b.ops.erase(it);
          changed = true;
          continue;
        }
        table_.emplace(key, &op);
        added.push_back(std::move(key));
      }
      for (auto& r : op.regions) changed |= run_block(r->body());
      ++it;
    }
    for (auto& k : added) table_.erase(k);
    return changed;
  }

 private:
  Function& f_;
  std::unordered_map<std::string, Op*> table_;
};

}  // namespace

bool cse(Function& f) {
  // Merging ops makes more operand lists equal (a+b, a+b' with b == b'), so repeat to a fixpoint.
  bool any = false;
  while (Cse(f).run_block(f.entry())) any = true;
  return any;
}

}  // namespace tle::passes
