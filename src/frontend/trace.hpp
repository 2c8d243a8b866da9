// src/frontend/trace.hpp - the tracer's context: the function being built, the live Tile handles,
// and the stack of open regions (device loops, if branches, combine bodies).
#pragma once
#include <optional>
#include <vector>

#include "ir/builder.hpp"
#include "ir/ir.hpp"
#include "tle/detail/trace_api.hpp"

namespace tle::frontend {

/// An open region while tracing.
struct Frame {
  enum Kind { Loop, Branch, Body } kind;
  ir::Op* op = nullptr;       // the For / If / Reduce / Scan op
  ir::Block* block = nullptr; // the region's block (ops go here)
  std::vector<detail::HandleBase*> tracked;  // handles alive when the region opened (null once dead)
  std::vector<ir::Value*> before;            // their values when the region opened
  SrcLoc loc;
};

/// One kernel trace on this thread. Constructing it makes it current; destroying it detaches
/// every handle still registered and restores the previous context.
class TraceContext {
 public:
  explicit TraceContext(ir::Function& fn);
  ~TraceContext();
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  static TraceContext* current() noexcept;

  ir::Function& fn;
  ir::Builder builder;
  detail::HandleBase* head = nullptr;
  std::vector<Frame> frames;
  /// An error found where it could not be thrown (a loop object destroyed by `break`); thrown at
  /// the next operation or at the end of tracing.
  std::optional<UserError> pending;

  /// Throws the pending error, if any.
  void check_pending();

 private:
  TraceContext* prev_;
};

/// Traces `thunk(fn, params)` into `f`, whose entry block already holds the runtime arguments.
void trace_into(ir::Function& f, detail::TraceThunk thunk, const void* fn, const detail::TraceParam* params);

}  // namespace tle::frontend
