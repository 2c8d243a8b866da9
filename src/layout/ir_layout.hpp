// src/layout/ir_layout.hpp - the IR's layout slot (ir::Layout) holds a LinearLayout.
#pragma once
#include <memory>

#include "ir/ir.hpp"
#include "layout/linear_layout.hpp"

namespace tle::ir {

struct Layout {
  layout::LinearLayout ll;
  explicit Layout(layout::LinearLayout l) : ll(std::move(l)) {}
};

inline std::shared_ptr<const Layout> make_layout(layout::LinearLayout l) {
  return std::make_shared<const Layout>(std::move(l));
}

}  // namespace tle::ir
