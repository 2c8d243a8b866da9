// src/frontend/trace.hpp - the tracer's context: the function being built, the live Tile handles,
// and the stack of open regions (device loops, if branches, combine bodies, warp_specialize roles).
#pragma once
#include <optional>
#include <vector>

#include "ir/builder.hpp"
#include "ir/ir.hpp"
#include "tle/detail/trace_api.hpp"

namespace tle::detail {
/// The value a Tile holds once the trace that made it has ended (a static object, never freed):
/// every use of it is a UserError (stale_message), never a read of the freed function.
ir::Value* stale_value() noexcept;
/// "<what> was made while tracing another kernel ...": the message for a use of stale_value().
std::string stale_message(const std::string& what);
}  // namespace tle::detail

namespace tle::frontend {

/// An open region while tracing.
struct Frame {
  enum Kind { Loop, Branch, Body, Role } kind;
  ir::Op* op = nullptr;       // the For / If / Reduce / Scan / WarpSpecialize op
  ir::Block* block = nullptr; // the region's block (ops go here)
  std::vector<detail::HandleBase*> tracked;  // handles alive when the region opened (null once dead)
  std::vector<ir::Value*> before;            // their values when the region opened
  SrcLoc loc;
};

/// One kernel trace on this thread. Constructing it makes it current; destroying it detaches
/// every handle still registered, makes each one that holds a value hold detail::stale_value()
/// (the trace's values die with it, so a Tile kept past its trace must never reach them), and
/// restores the previous context.
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

  /// The pointers remote() moved, with its location: their origins are checked when the trace
  /// ends (finish_mesh_remotes), once loops have their yields.
  std::vector<std::pair<ir::Value*, SrcLoc>> mesh_remotes;

  /// Throws the pending error, if any.
  void check_pending();

  /// Is v defined in a block that is open (the entry block or an open region's block)? False for
  /// detail::stale_value().
  bool visible(ir::Value* v) const;
  /// The checks every use of an operand makes: UserError at loc when v is null (a Tile never
  /// assigned), belongs to a trace that has ended (a Tile kept from another kernel's trace, or
  /// from an earlier trace of this one), or was defined in a region that has ended. `what`
  /// prefixes the message (e.g. "cuda_function 'f': argument 2"); empty for plain operands.
  ir::Value* use(ir::Value* v, const SrcLoc& loc, const std::string& what = {}) const;

 private:
  TraceContext* prev_;
};

/// At the end of a trace: the kernel arguments each remote() pointer derives from go to
/// ir::Function::mesh_remote_args (the launch checks them); UserError at the remote() for pointers
/// from a gpu::alloc buffer or of an origin tle cannot follow (loaded, gathered).
void finish_mesh_remotes(TraceContext& c);

/// Traces `thunk(fn, params)` into `f`, whose entry block already holds the runtime arguments.
void trace_into(ir::Function& f, detail::TraceThunk thunk, const void* fn, const detail::TraceParam* params);

/// A warning about a traced kernel: where, and what (without the location).
struct BufferReadWarning {
  SrcLoc loc;
  std::string message;
};
/// The loads of traced kernel f that read a gpu::alloc buffer before anything writes it (issue
/// #13 item 6; src/frontend/buffer_reads.cpp says what counts): one per buffer, at the first such
/// load. The runtime prints them as warnings when it traces a kernel.
std::vector<BufferReadWarning> unwritten_buffer_reads(const ir::Function& f);

}  // namespace tle::frontend
