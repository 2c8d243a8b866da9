// src/ir/printer.hpp - internals of the IR printer shared with the verifier: the value numbering
// and the printed line of every op, so that diagnostics name ops exactly as a dump shows them.
// The public entry point is ir::print (ir.hpp); the text format is documented in docs/ir.md.
#pragma once
#include <string>
#include <unordered_map>

#include "ir/ir.hpp"

namespace tle::ir {

/// What print_function records while printing: %N of every value and the 1-based line of every op.
struct PrintPositions {
  std::unordered_map<const Value*, unsigned> value_ids;
  std::unordered_map<const Op*, unsigned> op_lines;
  /// "%5", or "<null>" / "<undef>" for a value the function does not define.
  std::string value_name(const Value* v) const;
};

/// Prints `f` (exactly ir::print's text) and, if `pos` is given, fills it.
std::string print_function(const Function& f, PrintPositions* pos);
/// Text of one attribute value as the printer writes it in op `op` under key `key`.
std::string print_attr(const Op& op, const std::string& key, const Attr& value);

}  // namespace tle::ir
