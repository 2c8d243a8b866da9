// src/layout/ir_layout.cpp - equality and printing of the IR's layout slot.
#include "layout/ir_layout.hpp"

namespace tle::ir {

bool layouts_equal(const Layout* a, const Layout* b) {
  if (a == b) return true;
  if (!a || !b) return false;
  return a->ll == b->ll;
}

std::string layout_str(const Layout& l) { return l.ll.str(); }

}  // namespace tle::ir
