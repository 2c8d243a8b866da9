// src/interp/interp.cpp - the reference interpreter (interp.hpp): a tree walk over the IR, one
// vector of element bit patterns per value, each op a loop over elements. Data movement (loads,
// stores, selects, shape ops, bitcasts, carried values) copies bits, so NaN payloads survive it
// as on the backends; arithmetic decodes its operands into fold.hpp's canonical constants, calls
// the fold function, and encodes the result.
#include "interp/interp.hpp"

#include <fmt/format.h>

#include <optional>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "backend/cpu/program_guard.hpp"
#include "ir/builder.hpp"
#include "ir/subtile.hpp"
#include "passes/fold.hpp"
#include "support/half.hpp"

namespace tle::interp {
namespace {

/// The lock of the interpreter's atomics (AtomicRMW, AtomicCas), shared by every launch.
std::mutex& atomics_mutex() {
  static std::mutex m;
  return m;
}

using ir::Attr;
using ir::Op;
using ir::OpKind;

/// A value: its type and its elements, row-major, each as its memory bit pattern (the low
/// byte_size bits; i1 as 0 or 1; a pointer as its address).
struct TileValue {
  ir::Type type;
  std::vector<uint64_t> elems;
};

/// Element bits <-> fold.hpp's canonical constants.
Attr decode(DType d, uint64_t bits) { return passes::constant_from_bits(d, bits); }

/// The dtype f16/bf16 arithmetic is carried out in (docs/ir.md): f32; others their own.
DType compute_dtype(DType d) { return d == DType::f16 || d == DType::bf16 ? DType::f32 : d; }

int64_t int_of(const Attr& a) { return std::get<int64_t>(a); }
double float_of(const Attr& a) { return std::get<double>(a); }
/// A canonical integer's value (sign- or zero-extended) from its bits.
int64_t int_of(DType d, uint64_t bits) { return int_of(decode(d, bits)); }

/// Row-major strides of a shape.
std::vector<int64_t> strides(const ir::Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

class Interpreter {
 public:
  Interpreter(const ir::Function& f, const Options& o) : f_(f), opts_(o) {}

  void run(void* const* args, const int64_t grid[3]) {
    for (int i = 0; i < 3; ++i)
      if (grid[i] < 0 || grid[i] > INT32_MAX)
        throw RuntimeError("tle::interp", fmt::format("kernel '{}': grid axis {} is {}, outside [0, 2^31)", f_.name, i,
                                                      grid[i]));
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;
    const ir::Block& entry = f_.entry();
    std::vector<TileValue> argv;
    for (auto& a : entry.args) {
      if (!a->type.is_scalar())
        throw RuntimeError("tle::interp", fmt::format("kernel '{}': argument {} is not a scalar", f_.name, a->index));
      uint64_t raw = 0;
      std::memcpy(&raw, args[a->index], static_cast<size_t>(byte_size(a->type.dtype)));
      argv.push_back({a->type, {a->type.dtype == DType::i1 ? uint64_t((raw & 0xFF) != 0) : raw}});
    }
    for (int i = 0; i < 3; ++i) nprog_[i] = grid[i];
    const int64_t total = grid[0] * grid[1] * grid[2];
    for (int64_t p = 0; p < total; ++p) {
      pid_[0] = p % grid[0];
      pid_[1] = (p / grid[0]) % grid[1];
      pid_[2] = p / grid[0] / grid[1];
      program_ = p;
      env_.clear();
      for (auto& [op, bytes] : locals_) std::fill(bytes.begin(), bytes.end(), uint8_t(0));
      copies_.clear(), inflight_.clear(), groups_.assign(1, 0), role_ = 0, mbarriers_.clear();
      for (size_t i = 0; i < argv.size(); ++i) env_[entry.arg(static_cast<unsigned>(i))] = argv[i];
      eval_block(entry);
      // A program must not end while TMA bytes it announced or copied are outstanding: on the GPU
      // the copy would write into shared memory the next program may already use.
      for (const auto& [addr, b] : mbarriers_)
        if (b.tx != 0)
          fail(*b.init, fmt::format("program {} ends with {} transaction bytes of the mbarrier allocated here {} (a "
                                    "TMA copy in flight, or bytes announced and never copied): wait for the phase "
                                    "before the program ends",
                                    p, b.tx > 0 ? b.tx : -b.tx, b.tx > 0 ? "still to come" : "copied but not announced"));
    }
  }

 private:
  const ir::Function& f_;
  const Options& opts_;
  std::unordered_map<const ir::Value*, TileValue> env_;
  int64_t pid_[3] = {}, nprog_[3] = {};
  /// Options::detect_program_races: who touched each byte, and how.
  struct ByteUse {
    int64_t stored_by = -1;  // the program that stored it plainly, or -1
    int64_t atomic_by = -1;  // a program that updated it atomically, or -1
    int64_t read_by = -1;    // a program that read it plainly, or -1 (-2: several)
  };
  int64_t program_ = 0;                                    // linear index of the running program
  /// Storage of each local_alloc (zeroed for every program) and the byte ranges it hands out.
  std::unordered_map<const Op*, std::vector<uint8_t>> locals_;
  std::vector<std::pair<uintptr_t, uintptr_t>> local_ranges_;
  mutable std::unordered_map<uintptr_t, ByteUse> uses_;    // Options::detect_program_races
  /// Async copies (gpu::copy) not yet landed: what each writes, and its group (-1: not committed
  /// yet; else the commit's number). Their bytes may not be touched until a wait lands them.
  struct InflightCopy {
    const Op* op;
    int64_t group;
    std::vector<std::pair<uintptr_t, uint64_t>> writes;  // address, bits
    DType dtype;
    uintptr_t bar = 0;   // a TMA copy: its mbarrier (landed by a wait that sees `phase` complete)
    int64_t phase = 0;
    size_t role = 0;     // the warp_specialize role that issued it (its commits and waits are its own)
  };
  /// Lands (and forgets) the copies `done` picks.
  template <class F> void land(F&& done) {
    std::erase_if(copies_, [&](const InflightCopy& cp) {
      if (!done(cp)) return false;
      const size_t eb = static_cast<size_t>(byte_size(cp.dtype));
      for (auto [a, v] : cp.writes) {
        for (size_t b = 0; b < eb; ++b) inflight_.erase(a + b);
        copy(*cp.op, 0, reinterpret_cast<void*>(a), &v, eb, a, true);  // inside a buffer (checked at issue)
      }
      return true;
    });
  }
  std::vector<InflightCopy> copies_;
  /// The program's mbarriers (gpu::alloc_mbarriers) by address: arrivals per phase, those still
  /// to come and the transaction bytes outstanding in the current phase, phases completed.
  struct MBarrierState {
    const Op* init;
    int64_t count, pending, tx = 0, phases = 0;
  };
  std::unordered_map<uintptr_t, MBarrierState> mbarriers_;
  MBarrierState& mbarrier(const Op& op, uint64_t addr) {
    auto it = mbarriers_.find(static_cast<uintptr_t>(addr));
    if (it == mbarriers_.end()) fail(op, fmt::format("address {:#x} is not an mbarrier of this program", addr));
    return it->second;
  }
  /// Completes the current phase when its arrivals and bytes are all in.
  static void mbarrier_step(MBarrierState& b) {
    if (b.pending == 0 && b.tx == 0) b.pending = b.count, ++b.phases;
  }
  std::unordered_map<uintptr_t, const Op*> inflight_;  // byte -> the copy still writing it
  std::vector<int64_t> groups_{0};                     // commits so far, per role (one outside roles)

  // ---- warp_specialize: the roles run on threads of their own, one at a time (a baton), each
  // until it finishes or waits for an mbarrier phase not complete; then the next live role in
  // order runs. Every interpreter member is touched only by the thread holding the baton.
  struct Roles {
    std::mutex mu;
    std::condition_variable cv;
    size_t turn = 0;
    bool abort = false;
    std::vector<bool> done;
    std::vector<const Op*> waiting;  // the wait each role is blocked at, or null
    size_t stuck = 0;                // blocked hand-overs since the last mbarrier change
    std::exception_ptr error;
  };
  Roles* roles_ = nullptr;  // while a warp_specialize runs
  size_t role_ = 0;         // the role running now
  struct RoleAbort {};      // unwinds a role when another one failed

  size_t live_roles() const { return static_cast<size_t>(std::count(roles_->done.begin(), roles_->done.end(), false)); }
  /// Hands the baton from role `me` to the next live role and waits to get it back (or throws
  /// RoleAbort); called with rs.mu held through `lk`.
  void pass_baton(std::unique_lock<std::mutex>& lk, size_t me) {
    Roles& rs = *roles_;
    const size_t n = rs.done.size();
    for (size_t k = 1; k <= n; ++k)
      if (!rs.done[(me + k) % n]) {
        rs.turn = (me + k) % n;
        break;
      }
    rs.cv.notify_all();
    if (rs.done[me]) return;
    rs.cv.wait(lk, [&] { return rs.turn == me || rs.abort; });
    if (rs.abort) throw RoleAbort{};
    role_ = me;
  }
  /// Role role_ waits at `wait` for a phase not complete: hands over to the other roles until it
  /// is (done() true), or stops the kernel when every live role has found its wait blocked since
  /// the last mbarrier change (a deadlock on the GPU).
  template <class F> void block_until(const Op& wait, F&& done, const std::string& why) {
    Roles& rs = *roles_;
    const size_t me = role_;
    while (!done()) {
      rs.waiting[me] = &wait;
      if (++rs.stuck >= live_roles()) {
        std::string all;
        for (size_t r = 0; r < rs.waiting.size(); ++r)
          if (!rs.done[r] && rs.waiting[r])
            all += fmt::format("; role {} waits at {}:{}", r, rs.waiting[r]->loc.file, rs.waiting[r]->loc.line);
        fail(wait, fmt::format("{}, and no role can arrive on it any more: the roles wait for each other forever (a "
                               "deadlock on the GPU){}",
                               why, all));
      }
      std::unique_lock lk(rs.mu);
      pass_baton(lk, me);
    }
    rs.waiting[me] = nullptr;
  }
  /// An mbarrier changed: roles blocked at waits may go on.
  void progress() {
    if (roles_) roles_->stuck = 0;
  }

  void run_roles(const Op& op) {
    const size_t n = op.regions.size();
    Roles rs;
    rs.done.assign(n, false);
    rs.waiting.assign(n, nullptr);
    roles_ = &rs;
    groups_.resize(n, groups_[0]);
    std::vector<std::thread> threads;
    // Joins the threads started so far (after telling them to stop when one could not start).
    auto join_all = [&](bool stop) {
      if (stop) {
        std::lock_guard lk(rs.mu);
        rs.abort = true;
        rs.cv.notify_all();
      }
      for (auto& t : threads) t.join();
      roles_ = nullptr;
      role_ = 0;
    };
    try {
      for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] {
        std::unique_lock lk(rs.mu);
        rs.cv.wait(lk, [&] { return rs.turn == i || rs.abort; });
        if (!rs.abort) {
          role_ = i;
          lk.unlock();
          std::exception_ptr failed;
          try {
            eval_block(op.region(static_cast<unsigned>(i)).body());
          } catch (const RoleAbort&) {
          } catch (...) {
            failed = std::current_exception();
          }
          lk.lock();
          if (failed && !rs.error) rs.error = failed, rs.abort = true;
        }
        rs.done[i] = true;
        rs.waiting[i] = nullptr;
        pass_baton(lk, i);
        rs.cv.notify_all();
      });
    } catch (...) {  // (std::system_error: no thread for a role)
      join_all(true);
      throw;
    }
    {
      std::lock_guard lk(rs.mu);
      rs.cv.notify_all();
    }
    join_all(false);
    if (rs.error) std::rethrow_exception(rs.error);
  }

  /// The shared buffer (local_alloc range) whose bytes include addr, or null.
  const std::pair<uintptr_t, uintptr_t>* local_range(uintptr_t addr) const {
    for (const auto& r : local_ranges_)
      if (addr >= r.first && addr < r.second) return &r;
    return nullptr;
  }
  /// Lane k of copy `cp` writes bits v to the buffer element at p: checked like a store, which
  /// must land inside the program's buffers, and in flight from now on.
  void copy_lane(InflightCopy& cp, int64_t k, uint64_t p, uint64_t v) {
    const Op& op = *cp.op;
    const size_t eb = static_cast<size_t>(byte_size(cp.dtype));
    const uintptr_t a = checked(op, k, p, cp.dtype, true);
    if (!local_range(a))
      fail(op, fmt::format("lane {} copies to address {:#x}, outside the program's shared buffers (a destination "
                           "index past its buffer)",
                           k, a));
    for (size_t b = 0; b < eb; ++b)
      if (!inflight_.emplace(a + b, &op).second)
        fail(op, fmt::format("lane {} copies into a buffer element that another lane of this copy also writes (two "
                             "lanes of one copy race)",
                             k));
    cp.writes.emplace_back(a, v);
  }

  [[noreturn]] void fail(const Op& op, const std::string& msg) const {
    std::string where;
    if (op.loc.known()) where = fmt::format(" (traced at {}:{})", op.loc.file, op.loc.line);
    throw RuntimeError("tle::interp",
                       fmt::format("kernel '{}': op '{}': {}{}", f_.name, ir::op_mnemonic(op.kind), msg, where));
  }

  const TileValue& get(const ir::Value* v) const {
    auto it = env_.find(v);
    if (it == env_.end())
      throw InternalError(fmt::format("interp: kernel '{}' uses a value of type {} before its definition", f_.name,
                                      v->type.str()));
    return it->second;
  }
  /// Element i of v: its bits, or its canonical constant (val).
  uint64_t elem(const ir::Value* v, int64_t i) const { return get(v).elems[static_cast<size_t>(i)]; }
  Attr val(const ir::Value* v, int64_t i) const { return decode(v->type.dtype, elem(v, i)); }
  bool truth(const ir::Value* v, int64_t i) const { return elem(v, i) != 0; }

  /// A fold result, or a failure naming the op when the rule is not defined for the dtype.
  Attr need(const std::optional<Attr>& r, const Op& op, DType d) const {
    if (!r) fail(op, fmt::format("not defined on {}", dtype_name(d)));
    return *r;
  }
  /// The bits of a canonical constant of dtype d.
  uint64_t enc(const Op& op, DType d, const Attr& a) const {
    auto b = passes::constant_bits(d, a);
    if (!b) fail(op, fmt::format("a value of the wrong kind for {}", dtype_name(d)));
    return *b;
  }

  /// Defines result `i` of op elementwise: f(k) gives element k.
  template <class F> void produce(const Op& op, unsigned i, F&& f) {
    const ir::Value* r = op.result(i);
    TileValue t{r->type, {}};
    const int64_t n = r->type.numel();
    t.elems.reserve(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) t.elems.push_back(f(k));
    env_[r] = std::move(t);
  }

  // ---- memory

  uintptr_t checked(const Op& op, int64_t lane, uint64_t p, DType d, bool write) const {
    uintptr_t addr = static_cast<uintptr_t>(p);
    size_t bytes = static_cast<size_t>(byte_size(d));
    // The program's own shared buffers (local_alloc): private to it, so neither the caller's
    // check nor the race detector applies; an access that starts inside one must end inside it.
    if (const auto* range = local_range(addr)) {
      if (addr + bytes > range->second)
        fail(op, fmt::format("lane {} {} {} bytes at address {:#x}, past the end of its shared buffer", lane,
                             write ? "writes" : "reads", bytes, addr));
      for (size_t b = 0; b < bytes && !inflight_.empty(); ++b)
        if (auto it = inflight_.find(addr + b); it != inflight_.end())
          fail(op, fmt::format("lane {} {} a buffer element that the gpu::copy traced at {}:{} is still copying "
                               "into ({}) before touching the element",
                               lane, write ? "writes" : "reads", it->second->loc.file, it->second->loc.line,
                               it->second->kind == OpKind::TmaCopy
                                   ? "a TMA copy: wait for its mbarrier phase with gpu::wait"
                                   : "its group is not waited for: commit the copy with gpu::commit_group() and wait "
                                     "for it with gpu::wait_group(n)"));
      return addr;
    }
    if (opts_.check_access && !opts_.check_access(addr, bytes, write))
      fail(op, fmt::format("lane {} {} {} bytes at address {:#x}, outside the memory the caller allowed", lane,
                           write ? "writes" : "reads", bytes, addr));
    // The null page is never memory: a clear error rather than a fault (a memcpy through a null
    // pointer is undefined before it faults; UBSan reported it). Other bad addresses fault, and
    // the launch's fault guard (runtime/kernel.cpp, run_interp) reports them.
    if (addr < 4096)
      fail(op, fmt::format("lane {} {} {} bytes at address {:#x}, in the null page: a null pointer (plus an offset)",
                           lane, write ? "writes" : "reads", bytes, addr));
    if (opts_.detect_program_races) note_access(op, lane, addr, bytes, write);
    return addr;
  }

  void note_access(const Op& op, int64_t lane, uintptr_t addr, size_t bytes, bool write) const {
    const bool atomic = op.kind == OpKind::AtomicRMW || op.kind == OpKind::AtomicCas || op.kind == OpKind::Signal ||
                        op.kind == OpKind::SignalWait;
    const int64_t me = program_;
    for (size_t b = 0; b < bytes; ++b) {
      ByteUse& u = uses_[addr + b];
      auto other = [&](int64_t who) { return who != -1 && who != me; };
      const char* clash = nullptr;
      if (atomic) {
        if (other(u.stored_by)) clash = "stored by";
        else if (other(u.read_by)) clash = "read by";
        if (!clash) u.atomic_by = me;
      } else if (write) {
        if (other(u.stored_by)) clash = "stored by";
        else if (other(u.atomic_by)) clash = "updated atomically by";
        else if (other(u.read_by)) clash = "read by";
        if (!clash) u.stored_by = me;
      } else {
        if (other(u.stored_by)) clash = "stored by";
        else if (other(u.atomic_by)) clash = "updated atomically by";
        if (!clash) u.read_by = u.read_by == -1 || u.read_by == me ? me : -2;
      }
      if (clash)
        fail(op, fmt::format("lane {} of program {} {} address {:#x}, which was {} another program: a race "
                             "between programs (the GPU runs them concurrently)",
                             lane, me, atomic ? "updates" : write ? "stores to" : "reads", addr + b, clash));
    }
  }
  /// The element at address p (a bool is any non-zero byte: 1).
  uint64_t read(const Op& op, int64_t lane, uint64_t p, DType d) const {
    uintptr_t addr = checked(op, lane, p, d, false);
    uint64_t raw = 0;
    copy(op, lane, &raw, reinterpret_cast<const void*>(addr), static_cast<size_t>(byte_size(d)), addr, false);
    return d == DType::i1 ? uint64_t((raw & 0xFF) != 0) : raw;
  }
  void write(const Op& op, int64_t lane, uint64_t p, DType d, uint64_t v) const {
    uintptr_t addr = checked(op, lane, p, d, true);
    copy(op, lane, reinterpret_cast<void*>(addr), &v, static_cast<size_t>(byte_size(d)), addr, true);
  }
  /// The access itself, under the CPU backend's fault guard: a fault (an unmapped address) is a
  /// RuntimeError naming the op and the lane, and the process lives on.
  void copy(const Op& op, int64_t lane, void* dst, const void* src, size_t n, uintptr_t addr, bool write) const {
    cpu::detail::ProgramFault fault;
    if (!cpu::detail::guarded_copy(dst, src, n, &fault))
      fail(op, fmt::format("lane {} {} {} bytes at address {:#x} and stopped on {}: memory it may not access (a "
                           "freed or wild pointer, or an offset or mask that lets an access leave its buffer)",
                           lane, write ? "writes" : "reads", n, addr, cpu::detail::signal_description(fault.signal)));
  }

  // ---- blocks and ops

  /// Evaluates the ops of b; returns the operands of its yield (none for the function body).
  std::vector<TileValue> eval_block(const ir::Block& b) {
    for (auto& op : b.ops) {
      if (op->kind == OpKind::Yield) {
        std::vector<TileValue> out;
        for (auto* v : op->operands) out.push_back(get(v));
        return out;
      }
      eval(*op);
    }
    return {};
  }

  /// Binds the arguments of region r's block and evaluates it; the yielded values.
  std::vector<TileValue> eval_region(const ir::Region& r, std::vector<TileValue> args, const Op& op) {
    const ir::Block& b = r.body();
    if (b.args.size() != args.size()) fail(op, "region argument count mismatch");
    for (size_t i = 0; i < args.size(); ++i) env_[b.arg(static_cast<unsigned>(i))] = std::move(args[i]);
    if (!b.terminator()) fail(op, "region without a yield");
    return eval_block(b);
  }

  void eval(const Op& op) {
    using K = OpKind;
    const auto& in = op.operands;
    switch (op.kind) {
      case K::Constant: {
        const DType d = op.result()->type.dtype;
        Attr v = op.attrs.at("value");
        if (is_float(d) && std::holds_alternative<int64_t>(v)) v = Attr(static_cast<double>(int_of(v)));
        std::optional<Attr> c;
        if (d == DType::ptr) c = v;
        else if (is_int(d) && std::holds_alternative<double>(v)) c = passes::fold_cast(DType::f64, d, v);
        else c = passes::normalize_constant(d, v);
        const uint64_t bits = enc(op, d, need(c, op, d));
        produce(op, 0, [&](int64_t) { return bits; });
        return;
      }
      case K::Arange: {
        int64_t start = op.int_attr("start");
        produce(op, 0, [&](int64_t k) { return static_cast<uint64_t>(start + k) & 0xFFFFFFFFu; });
        return;
      }
      case K::ProgramId: case K::NumPrograms: {
        int64_t axis = op.int_attr("axis");
        if (axis < 0 || axis > 2) fail(op, fmt::format("axis {} is not 0, 1 or 2", axis));
        uint64_t v = static_cast<uint64_t>(op.kind == K::ProgramId ? pid_[axis] : nprog_[axis]);
        produce(op, 0, [&](int64_t) { return v; });
        return;
      }
      case K::Broadcast: case K::Permute: {
        const ir::Shape& xs = in[0]->type.shape;
        const ir::Shape& rs = op.result()->type.shape;
        const int rank = static_cast<int>(rs.size());
        if (static_cast<int>(xs.size()) != rank) fail(op, "operand and result ranks differ");
        std::vector<int64_t> xst = strides(xs), src(rank);
        for (int d = 0; d < rank; ++d) {
          if (op.kind == K::Broadcast) {
            if (xs[d] != rs[d] && xs[d] != 1) fail(op, "dimension is neither 1 nor equal to the result's");
            src[d] = xs[d] == 1 ? 0 : xst[d];
          } else {
            const auto& order = op.ints_attr("order");
            if (static_cast<int>(order.size()) != rank || order[d] < 0 || order[d] >= rank || xs[order[d]] != rs[d])
              fail(op, "bad order");
            src[d] = xst[order[d]];
          }
        }
        std::vector<int64_t> rst = strides(rs);
        produce(op, 0, [&](int64_t k) {
          int64_t at = 0;
          for (int d = 0; d < rank; ++d) at += (k / rst[d]) % rs[d] * src[d];
          return elem(in[0], at);
        });
        return;
      }
      case K::Reshape:
        if (op.has_attr("real_in")) {
          // A remapping reshape of padded tiles (GPU pass pad_shapes; docs/ir.md): result element
          // k, when real, is the operand's real element of the same real row-major index; pads 0.
          const ir::Shape &ri = op.ints_attr("real_in"), &ro = op.ints_attr("real_out");
          const ir::Shape &xs = in[0]->type.shape, &rs = op.result()->type.shape;
          if (ri.size() != xs.size() || ro.size() != rs.size()) fail(op, "real shapes do not match the ranks");
          produce(op, 0, [&](int64_t k) -> uint64_t {
            int64_t t = 0, rest = k;
            std::vector<int64_t> idx(rs.size());
            for (size_t d = rs.size(); d-- > 0;) idx[d] = rest % rs[d], rest /= rs[d];
            for (size_t d = 0; d < rs.size(); ++d) {
              if (idx[d] >= ro[d]) return 0;
              t = t * ro[d] + idx[d];
            }
            int64_t at = 0;
            std::vector<int64_t> src(ri.size());
            for (size_t d = ri.size(); d-- > 0;) src[d] = t % ri[d], t /= ri[d];
            for (size_t d = 0; d < ri.size(); ++d) at = at * xs[d] + src[d];
            return elem(in[0], at);
          });
          return;
        }
        [[fallthrough]];
      case K::ExpandDims: case K::Hint: case K::ConvertLayout: case K::SetLayout: {
        if (in[0]->type.numel() != op.result()->type.numel()) fail(op, "element count changes");
        produce(op, 0, [&](int64_t k) { return elem(in[0], k); });
        return;
      }
      case K::Binary: {
        auto bop = op.enum_attr<ir::BinaryOp>("op");
        DType d = in[0]->type.dtype;
        produce(op, 0, [&](int64_t k) { return enc(op, d, need(passes::fold_binary(bop, d, val(in[0], k), val(in[1], k)), op, d)); });
        return;
      }
      case K::Compare: {
        auto p = op.enum_attr<ir::CmpPred>("pred");
        DType d = in[0]->type.dtype;
        produce(op, 0, [&](int64_t k) {
          return enc(op, DType::i1, need(passes::fold_compare(p, d, val(in[0], k), val(in[1], k)), op, d));
        });
        return;
      }
      case K::Unary: {
        auto u = op.enum_attr<ir::UnaryOp>("op");
        DType d = in[0]->type.dtype;
        produce(op, 0, [&](int64_t k) { return enc(op, d, need(passes::fold_unary(u, d, val(in[0], k)), op, d)); });
        return;
      }
      case K::Fma: {
        DType d = op.result()->type.dtype;
        produce(op, 0, [&](int64_t k) {
          return enc(op, d, need(passes::fold_fma(d, val(in[0], k), val(in[1], k), val(in[2], k)), op, d));
        });
        return;
      }
      case K::Select:
        produce(op, 0, [&](int64_t k) { return truth(in[0], k) ? elem(in[1], k) : elem(in[2], k); });
        return;
      case K::Cast: {
        DType from = in[0]->type.dtype, to = op.result()->type.dtype;
        produce(op, 0, [&](int64_t k) { return from == to ? elem(in[0], k) : enc(op, to, cast(op, from, to, val(in[0], k))); });
        return;
      }
      case K::Bitcast: {
        DType from = in[0]->type.dtype, to = op.result()->type.dtype;
        if (bit_width(from) != bit_width(to) || from == DType::i1 || to == DType::i1) fail(op, "bit widths differ");
        produce(op, 0, [&](int64_t k) { return elem(in[0], k); });  // the same bits
        return;
      }
      case K::LocalAlloc: {
        // A program-private buffer, aligned as asked (docs/ir.md); allocated once per op.
        const int64_t align = op.int_attr("align");
        const int64_t bytes = ir::local_alloc_bytes(op);
        auto [it, fresh] = locals_.try_emplace(&op);
        if (fresh) it->second.assign(static_cast<size_t>(bytes + align), uint8_t(0));
        const uintptr_t raw = reinterpret_cast<uintptr_t>(it->second.data());
        const uintptr_t lo = (raw + static_cast<uintptr_t>(align) - 1) / static_cast<uintptr_t>(align) *
                             static_cast<uintptr_t>(align);
        if (fresh) local_ranges_.emplace_back(lo, lo + static_cast<uintptr_t>(bytes));
        produce(op, 0, [&](int64_t) { return static_cast<uint64_t>(lo); });
        return;
      }
      case K::Barrier: return;  // statements already run in order
      case K::Signal: case K::SignalWait: {
        // Other ranks run on other threads (tle/mesh.hpp): the flag is accessed atomically, after
        // one guarded read has shown that its address is memory.
        const uint64_t p = elem(in[0], 0);
        const uintptr_t addr = checked(op, 0, p, DType::u64, op.kind == K::Signal);
        uint64_t probe = 0;
        copy(op, 0, &probe, reinterpret_cast<const void*>(addr), 8, addr, false);
        std::atomic_ref<uint64_t> flag(*reinterpret_cast<uint64_t*>(addr));
        const uint64_t value = elem(in[1], 0);
        if (op.kind == K::Signal) {
          // Under the atomics' lock: an atomic_add on the same flag reads and writes it plainly.
          std::lock_guard<std::mutex> atomic(atomics_mutex());
          if (op.enum_attr<ir::SignalOp>("op") == ir::SignalOp::Add) flag.fetch_add(value);
          else flag.store(value);
          return;
        }
        const bool eq = op.enum_attr<ir::WaitCmp>("cmp") == ir::WaitCmp::Eq;
        const auto timeout = std::chrono::nanoseconds(static_cast<int64_t>(elem(in[2], 0)));
        const auto start = std::chrono::steady_clock::now();
        for (uint64_t spin = 0;; ++spin) {
          const uint64_t v = flag.load(std::memory_order_acquire);
          if (eq ? v == value : v >= value) return;
          std::this_thread::yield();
          if (timeout.count() > 0 && spin % 256 == 255 && std::chrono::steady_clock::now() - start > timeout)
            fail(op, fmt::format("signal_wait timed out after {} s: the flag at {:#x} holds {}, waiting for {} {} (a "
                                 "rank that should signal it did not: it was not launched, failed, or waits itself)",
                                 static_cast<double>(timeout.count()) * 1e-9, addr, v, eq ? "==" : ">=", value));
        }
      }
      case K::AsyncCopy: {
        // Read now, land at the wait that completes its group (docs/struct.md, "Copies"); until
        // then its destination bytes are off limits, so a kernel that reads them early fails here
        // rather than racing on the GPU.
        const ir::Value* mask = in.size() > 2 ? in[2] : nullptr;
        const ir::Value* active = in.size() > 3 ? in[3] : nullptr;  // (the GPU's pad lanes)
        const DType d = in[0]->type.pointee;
        InflightCopy cp{&op, -1, {}, d};
        cp.role = role_;
        for (int64_t k = 0; k < in[0]->type.numel(); ++k)
          if (!active || truth(active, k))
            copy_lane(cp, k, elem(in[1], k), mask && !truth(mask, k) ? 0 : read(op, k, elem(in[0], k), d));
        copies_.push_back(std::move(cp));
        return;
      }
      case K::MBarrierInit: {
        const uint64_t base = elem(in[0], 0);
        for (int64_t i = 0; i < op.int_attr("n"); ++i) {
          const int64_t c = op.int_attr("count");
          mbarriers_[static_cast<uintptr_t>(base + 8 * static_cast<uint64_t>(i))] = MBarrierState{&op, c, c};
        }
        return;
      }
      case K::MBarrierArrive: case K::MBarrierTx: {
        MBarrierState& b = mbarrier(op, elem(in[0], 0));
        if (op.kind == K::MBarrierTx) {
          b.tx -= op.int_attr("bytes");
        } else {
          if (b.pending == 0)
            fail(op, fmt::format("arrives on the mbarrier allocated at {}:{} after its phase {} already has all {} "
                                 "arrivals (its transaction bytes are still to come): one arrive too many per phase",
                                 b.init->loc.file, b.init->loc.line, b.phases, b.count));
          b.tx += op.int_attr("tx");
          if (b.tx >= (int64_t(1) << 20))
            fail(op, fmt::format("announces {} transaction bytes in one phase of the mbarrier allocated at {}:{}; a "
                                 "phase counts at most 2^20 - 1",
                                 b.tx, b.init->loc.file, b.init->loc.line));
          --b.pending;
        }
        mbarrier_step(b);
        progress();
        return;
      }
      case K::MBarrierWait: {
        // Statements run in order and nothing else arrives: a phase not complete now never is.
        const uintptr_t addr = static_cast<uintptr_t>(elem(in[0], 0));
        const MBarrierState& b = mbarrier(op, addr);
        const int64_t parity = int_of(DType::i32, elem(in[1], 0)) & 1;
        if (roles_)  // other roles may still complete the phase
          block_until(op, [&] { return (b.phases & 1) != parity; },
                      fmt::format("role {} waits for phase parity {} of the mbarrier allocated at {}:{}", role_, parity,
                                  b.init->loc.file, b.init->loc.line));
        if ((b.phases & 1) != parity) {  // complete: the TMA copies of its completed phases land
          land([&](const InflightCopy& cp) { return cp.bar == addr && cp.phase < b.phases; });
          return;
        }
          fail(op, fmt::format("waits for phase parity {} of the mbarrier allocated at {}:{}, whose phase {} has {} of "
                               "{} arrivals and {} transaction bytes still to come, and nothing else can arrive: on "
                               "the GPU it would wait forever (arrive on it first, or wait for the other parity)",
                               parity, b.init->loc.file, b.init->loc.line, b.phases, b.pending, b.count,
                               b.tx > 0 ? b.tx : 0));
        return;
      }
      case K::AsyncCommit: {
        const int64_t g = ++groups_[role_];
        for (InflightCopy& cp : copies_)
          if (cp.group < 0 && cp.bar == 0 && cp.role == role_) cp.group = g;
        return;
      }
      case K::AsyncWait: {
        const int64_t done = groups_[role_] - op.int_attr("pending");  // groups 1..done have landed
        land([&](const InflightCopy& cp) {
          return cp.bar == 0 && cp.role == role_ && cp.group >= 0 && cp.group <= done;
        });
        return;
      }
      case K::WarpSpecialize: run_roles(op); return;
      case K::AddPtr: {
        const uint64_t size = static_cast<uint64_t>(byte_size(in[0]->type.pointee));
        const DType od = in[1]->type.dtype;
        produce(op, 0, [&](int64_t k) {
          // The offset sign- (signed) or zero-extended (unsigned) to 64 bits: its canonical value.
          return elem(in[0], k) + static_cast<uint64_t>(int_of(od, elem(in[1], k))) * size;
        });
        return;
      }
      case K::Load: {
        const ir::Value* mask = in.size() > 1 ? in[1] : nullptr;
        const ir::Value* other = in.size() > 2 ? in[2] : nullptr;
        const DType d = in[0]->type.pointee;
        produce(op, 0, [&](int64_t k) -> uint64_t {
          if (mask && !truth(mask, k)) return other ? elem(other, k) : 0;  // E01: not accessed; 0 is +0.0
          return read(op, k, elem(in[0], k), d);
        });
        return;
      }
      case K::Store: {
        const ir::Value* mask = in.size() > 2 ? in[2] : nullptr;
        const DType d = in[0]->type.pointee;
        const int64_t n = in[0]->type.numel();
        for (int64_t k = 0; k < n; ++k)
          if (!mask || truth(mask, k)) write(op, k, elem(in[0], k), d, elem(in[1], k));
        return;
      }
      case K::DescLoad:
      case K::DescStore:
      case K::TmaCopy: {
        // docs/ir.md, "Tensor descriptors": element i of the block is global element offsets + i
        // when 0 <= offsets[d] + i[d] < shape[d] in every dimension d, else 0 (load) or not
        // written (store). A tma_copy (kept when the trace was made for the GPU) writes the block
        // through its view pointer tile at once and completes its bytes on the mbarrier, as its
        // expanded form does.
        const int64_t r = op.int_attr("rank");
        const bool store = op.kind == K::DescStore;
        const bool tma = op.kind == K::TmaCopy;
        if (tma && in.size() != static_cast<size_t>(5 + 3 * r)) fail(op, "a tma_copy without its view pointer tile");
        const ir::Value* blockv = store ? in[2 + 3 * r] : tma ? in.back() : op.result();
        const ir::Shape& B = blockv->type.shape;
        const DType d = tma ? in[1]->type.pointee : blockv->type.dtype;
        const uint64_t base = elem(in[1], 0);
        const std::vector<int64_t> bst = strides(B);
        // Element k's address, or nullopt outside the tensor.
        auto addr = [&](int64_t k) -> std::optional<uint64_t> {
          uint64_t a = base;
          for (int64_t j = 0; j < r; ++j) {
            const int64_t i = (k / bst[j]) % B[j];
            const int64_t g = int_of(DType::i32, elem(in[2 + 2 * r + j], 0)) + i;
            if (g < 0 || g >= int_of(DType::i64, elem(in[2 + j], 0))) return std::nullopt;
            a += static_cast<uint64_t>(g * int_of(DType::i64, elem(in[2 + r + j], 0)) * byte_size(d));
          }
          return a;
        };
        if (store) {
          for (int64_t k = 0; k < blockv->type.numel(); ++k)
            if (auto a = addr(k)) write(op, k, *a, d, elem(blockv, k));
        } else if (tma) {
          // Read now; in flight until a wait sees its phase complete (reading the view earlier
          // stops the kernel, as for cp.async copies).
          const uintptr_t bar = static_cast<uintptr_t>(elem(in[3 + 3 * r], 0));
          MBarrierState& b = mbarrier(op, bar);
          InflightCopy cp{&op, -1, {}, d, bar, b.phases};
          for (int64_t k = 0; k < blockv->type.numel(); ++k) {
            auto a = addr(k);
            copy_lane(cp, k, elem(blockv, k), a ? read(op, k, *a, d) : 0);
          }
          copies_.push_back(std::move(cp));
          b.tx -= blockv->type.numel() * byte_size(d);
          mbarrier_step(b);
          progress();
        } else {
          produce(op, 0, [&](int64_t k) -> uint64_t {
            auto a = addr(k);
            return a ? read(op, k, *a, d) : 0;
          });
        }
        return;
      }
      case K::AtomicRMW: {
        const ir::Value* mask = in.size() > 2 ? in[2] : nullptr;
        const DType d = in[0]->type.pointee;
        auto aop = op.enum_attr<ir::AtomicOp>("op");
        // Launches on other threads (the ranks of a device mesh, tle/mesh.hpp) may update the
        // same memory: every interpreted atomic holds one process-wide lock.
        std::lock_guard<std::mutex> atomic(atomics_mutex());
        produce(op, 0, [&](int64_t k) -> uint64_t {
          if (mask && !truth(mask, k)) return 0;
          const uint64_t p = elem(in[0], k);
          uint64_t old = read(op, k, p, d);
          write(op, k, p, d, atomic_combine(op, aop, d, old, elem(in[1], k)));
          return old;
        });
        return;
      }
      case K::AtomicCas: {
        const ir::Value* mask = in.size() > 3 ? in[3] : nullptr;  // only from the GPU pass pad_shapes
        const DType d = in[0]->type.pointee;
        std::lock_guard<std::mutex> atomic(atomics_mutex());
        produce(op, 0, [&](int64_t k) -> uint64_t {
          if (mask && !truth(mask, k)) return 0;
          const uint64_t p = elem(in[0], k);
          uint64_t old = read(op, k, p, d);
          if (old == elem(in[1], k)) write(op, k, p, d, elem(in[2], k));  // compares bits, as cmpxchg does
          return old;
        });
        return;
      }
      case K::Reduce: eval_reduce(op); return;
      case K::Scan: eval_scan(op); return;
      case K::Dot: eval_dot(op); return;
      case K::Histogram: eval_histogram(op); return;
      case K::HistogramRanks: eval_histogram_ranks(op); return;
      case K::Sort: eval_sort(op); return;
      case K::Gather: eval_gather(op); return;
      case K::ExtractTile: case K::InsertTile: eval_subtile(op); return;
      case K::For: eval_for(op); return;
      case K::If: {
        if (in.size() != 1 || op.regions.size() != 2) fail(op, "needs one condition and two regions");
        auto ys = eval_region(op.region(truth(in[0], 0) ? 0 : 1), {}, op);
        if (ys.size() != op.results.size()) fail(op, "a branch must yield every result");
        for (size_t j = 0; j < ys.size(); ++j) env_[op.result(static_cast<unsigned>(j))] = std::move(ys[j]);
        return;
      }
      case K::InlineAsm: case K::CudaCall:
        ir::refuse_gpu_only_op(op, f_.name, "runs on the interpreter (TLE_BACKEND=interp)");
      case K::Yield: fail(op, "yield outside of a region");
    }
    fail(op, "unknown op kind");
  }

  /// Value conversion (docs/ir.md "Conversions"): fold_cast, plus the pointer <-> integer cases
  /// the backends lower (ptrtoint / inttoptr) that folding leaves alone.
  Attr cast(const Op& op, DType from, DType to, const Attr& x) const {
    if (from == to) return x;
    if (from == DType::ptr) {
      if (to == DType::i1) return Attr(int64_t(int_of(x) != 0));
      return need(passes::normalize_constant(to, x), op, to);
    }
    if (to == DType::ptr) {
      if (!is_int(from)) fail(op, fmt::format("no conversion {} -> ptr", dtype_name(from)));
      return Attr(static_cast<int64_t>(enc(op, from, x)));  // zero-extended
    }
    return need(passes::fold_cast(from, to, x), op, to);
  }

  /// The value an atomic writes: op(old, v), as bits. Xchg writes v's bits as they are.
  uint64_t atomic_combine(const Op& op, ir::AtomicOp aop, DType d, uint64_t old_bits, uint64_t v_bits) const {
    using A = ir::AtomicOp;
    using B = ir::BinaryOp;
    B bop;
    switch (aop) {
      case A::Add: bop = d == DType::i1 ? B::Or : B::Add; break;
      case A::Max: bop = B::Max; break;
      case A::Min: bop = B::Min; break;
      case A::Xchg: return v_bits;
      case A::And: case A::Or: case A::Xor:
        if (!is_int(d)) fail(op, fmt::format("atomic '{}' is not defined on {}", ir::name(aop), dtype_name(d)));
        bop = aop == A::And ? B::And : aop == A::Or ? B::Or : B::Xor;
        break;
      default: fail(op, "unknown atomic op");
    }
    return enc(op, d, need(passes::fold_binary(bop, d, decode(d, old_bits), decode(d, v_bits)), op, d));
  }

  // ---- reductions, scans, dot, histogram


  /// The state of a reduction or scan: a value (in compute_dtype(d) for Sum/Max/Min, else in d) and,
  /// for Argmax/Argmin, an index.
  struct State {
    uint64_t bits = 0;
    int64_t index = 0;
  };

  /// Applies the combine region of `op` (over n operands) to the left values l and the right values
  /// r (bits of the operands' dtypes); returns the n yielded values.
  std::vector<uint64_t> combine_region(const Op& op, const std::vector<uint64_t>& l, const std::vector<uint64_t>& r) {
    const size_t n = op.operands.size();
    std::vector<TileValue> args;
    for (size_t c = 0; c < 2 * n; ++c)
      args.push_back(TileValue{ir::scalar_type(op.operands[c % n]->type.dtype), {c < n ? l[c] : r[c - n]}});
    auto ys = eval_region(op.region(0), std::move(args), op);
    if (ys.size() != n) fail(op, fmt::format("the combine region must yield {} scalars", n));
    std::vector<uint64_t> out;
    for (auto& y : ys) {
      if (y.elems.size() != 1) fail(op, "the combine region must yield scalars");
      out.push_back(y.elems[0]);
    }
    return out;
  }

  /// reduce / scan with a combine region over n operands: strictly in index order, the left value
  /// the accumulation of the lower indices (of the higher ones for a reverse scan).
  void eval_combine(const Op& op, bool scan) {
    const size_t n = op.operands.size();
    const ir::Type& t0 = op.operands.at(0)->type;
    const int64_t axis = op.int_attr("axis");
    if (axis < 0 || axis >= t0.rank()) fail(op, fmt::format("axis {} out of range", axis));
    const bool reverse = scan && op.has_attr("reverse") && op.int_attr("reverse") != 0;
    ir::AxisSplit sp = ir::split_at_axis(t0.shape, axis);
    std::vector<std::vector<uint64_t>> out(n);
    if (scan)
      for (auto& o : out) o.resize(static_cast<size_t>(t0.numel()));
    std::vector<uint64_t> s(n), x(n);
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        auto at = [&](int64_t kk) { return (o * sp.n + (reverse ? sp.n - 1 - kk : kk)) * sp.inner + i; };
        for (int64_t kk = 0; kk < sp.n; ++kk) {
          for (size_t c = 0; c < n; ++c) x[c] = elem(op.operands[c], at(kk));
          s = kk == 0 ? x : combine_region(op, s, x);
          if (scan)
            for (size_t c = 0; c < n; ++c) out[c][static_cast<size_t>(at(kk))] = s[c];
        }
        if (!scan)
          for (size_t c = 0; c < n; ++c) out[c].push_back(s[c]);
      }
    for (size_t c = 0; c < n; ++c) {
      const ir::Value* r = op.result(static_cast<unsigned>(c));
      env_[r] = TileValue{r->type, std::move(out[c])};
    }
  }

  /// The state after the first element (index 0).
  State first(const Op& op, ir::ReduceKind kind, DType d, uint64_t x) const {
    using R = ir::ReduceKind;
    if (kind == R::Sum || kind == R::Max || kind == R::Min) {
      const DType cd = compute_dtype(d);
      return {cd == d ? x : enc(op, cd, cast(op, d, cd, decode(d, x))), 0};
    }
    return {x, 0};
  }

  /// One accumulation step of reduce kind `kind` with element x (bits of dtype d) at index k.
  void accumulate(const Op& op, ir::ReduceKind kind, DType d, State& s, uint64_t x, int64_t k) {
    using R = ir::ReduceKind;
    const DType cd = compute_dtype(d);
    switch (kind) {
      case R::Sum: case R::Max: case R::Min: {
        auto bop = kind == R::Sum ? ir::BinaryOp::Add : kind == R::Max ? ir::BinaryOp::Max : ir::BinaryOp::Min;
        s.bits = enc(op, cd, need(passes::fold_binary(bop, cd, decode(cd, s.bits), cast(op, d, cd, decode(d, x))), op, d));
        return;
      }
      case R::Argmax: case R::Argmin: {
        // E02/E03: the first NaN wins; else a strictly better value (ties keep the first index).
        const Attr xv = decode(d, x), sv = decode(d, s.bits);
        auto pred = kind == R::Argmax ? ir::CmpPred::Gt : ir::CmpPred::Lt;
        bool take = int_of(need(passes::fold_compare(pred, d, xv, sv), op, d)) != 0;
        if (is_float(d)) take = !std::isnan(float_of(sv)) && (std::isnan(float_of(xv)) || take);
        if (take) s = {x, k};
        return;
      }
      case R::Combine: break;  // eval_combine
    }
    fail(op, "unknown reduce kind");
  }

  /// The result element of a final state.
  uint64_t result(const Op& op, ir::ReduceKind kind, DType d, const State& s) const {
    using R = ir::ReduceKind;
    if (kind == R::Argmax || kind == R::Argmin) return static_cast<uint64_t>(s.index);
    const DType cd = compute_dtype(d);
    return cd == d ? s.bits : enc(op, d, cast(op, cd, d, decode(cd, s.bits)));
  }

  void eval_reduce(const Op& op) {
    if (op.enum_attr<ir::ReduceKind>("kind") == ir::ReduceKind::Combine) return eval_combine(op, false);
    const ir::Value* x = op.operands.at(0);
    const int64_t axis = op.int_attr("axis");
    if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
    const auto kind = op.enum_attr<ir::ReduceKind>("kind");
    const DType d = x->type.dtype;
    ir::AxisSplit sp = ir::split_at_axis(x->type.shape, axis);
    std::vector<uint64_t> out;
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        auto at = [&](int64_t k) { return elem(x, (o * sp.n + k) * sp.inner + i); };
        State s = first(op, kind, d, at(0));
        for (int64_t k = 1; k < sp.n; ++k) accumulate(op, kind, d, s, at(k), k);
        out.push_back(result(op, kind, d, s));
      }
    env_[op.result()] = TileValue{op.result()->type, std::move(out)};
  }

  void eval_scan(const Op& op) {
    if (op.enum_attr<ir::ScanKind>("kind") == ir::ScanKind::Combine) return eval_combine(op, true);
    const ir::Value* x = op.operands.at(0);
    const int64_t axis = op.int_attr("axis");
    if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
    const bool reverse = op.has_attr("reverse") && op.int_attr("reverse") != 0;
    const auto kind = ir::ReduceKind::Sum;
    const DType d = x->type.dtype;
    ir::AxisSplit sp = ir::split_at_axis(x->type.shape, axis);
    std::vector<uint64_t> out(static_cast<size_t>(x->type.numel()));
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        auto at = [&](int64_t kk) { return (o * sp.n + (reverse ? sp.n - 1 - kk : kk)) * sp.inner + i; };
        State s = first(op, kind, d, elem(x, at(0)));
        out[static_cast<size_t>(at(0))] = result(op, kind, d, s);
        for (int64_t kk = 1; kk < sp.n; ++kk) {
          accumulate(op, kind, d, s, elem(x, at(kk)), kk);
          out[static_cast<size_t>(at(kk))] = result(op, kind, d, s);
        }
      }
    env_[op.result()] = TileValue{op.result()->type, std::move(out)};
  }

  void eval_dot(const Op& op) {
    const ir::Value *a = op.operands.at(0), *b = op.operands.at(1), *c = op.operands.at(2);
    if (a->type.rank() != 2 || b->type.rank() != 2 || c->type.rank() != 2) fail(op, "operands must be 2-D");
    const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
    if (b->type.shape[0] != K || c->type.shape[0] != M || c->type.shape[1] != N)
      fail(op, "shapes do not match [M,K]x[K,N]+[M,N]");
    const DType ad = a->type.dtype, bd = b->type.dtype, cd = c->type.dtype, rd = op.result()->type.dtype;
    const bool flt = is_float(ad);
    if (flt != is_float(bd) || flt != is_float(rd)) fail(op, "mixed float and integer operands");
    DType kd = rd;  // the dtype products and sums are formed in
    if (flt) kd = (ad == DType::f64 || bd == DType::f64 || cd == DType::f64 || rd == DType::f64) ? DType::f64 : DType::f32;
    auto prec = op.has_attr("precision") ? op.enum_attr<ir::Precision>("precision") : ir::Precision::IEEE;
    const bool tf32 = prec == ir::Precision::TF32 && kd == DType::f32;
    auto input = [&](const ir::Value* v, int64_t i) {
      Attr x = cast(op, v->type.dtype, kd, val(v, i));
      if (tf32) x = Attr(static_cast<double>(round_to_tf32(static_cast<float>(float_of(x)))));
      return x;
    };
    std::vector<uint64_t> out;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        Attr s = cast(op, cd, kd, val(c, m * N + n));
        for (int64_t k = 0; k < K; ++k) {
          Attr p = need(passes::fold_binary(ir::BinaryOp::Mul, kd, input(a, m * K + k), input(b, k * N + n)), op, kd);
          s = need(passes::fold_binary(ir::BinaryOp::Add, kd, s, p), op, kd);
        }
        out.push_back(enc(op, rd, cast(op, kd, rd, s)));
      }
    env_[op.result()] = TileValue{op.result()->type, std::move(out)};
  }

  void eval_histogram(const Op& op) {
    const ir::Value* x = op.operands.at(0);
    const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
    const int64_t bins = op.int_attr("bins");
    if (bins < 1 || op.result()->type.numel() != bins) fail(op, "bad bin count");
    if (!is_int(x->type.dtype)) fail(op, "values must be integers");
    std::vector<uint64_t> counts(static_cast<size_t>(bins), 0);
    for (int64_t k = 0; k < x->type.numel(); ++k) {
      if (mask && !truth(mask, k)) continue;
      // Canonical values are sign- or zero-extended: a negative one is huge as unsigned (E06).
      uint64_t v = static_cast<uint64_t>(int_of(x->type.dtype, elem(x, k)));
      if (v < static_cast<uint64_t>(bins)) counts[static_cast<size_t>(v)] = (counts[static_cast<size_t>(v)] + 1) & 0xFFFFFFFFu;
    }
    env_[op.result()] = TileValue{op.result()->type, std::move(counts)};
  }

  void eval_histogram_ranks(const Op& op) {
    const ir::Value* x = op.operands.at(0);
    const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
    const int64_t bins = op.int_attr("bins");
    if (bins < 1) fail(op, "bad bin count");
    if (!is_int(x->type.dtype)) fail(op, "values must be integers");
    std::vector<int64_t> seen(static_cast<size_t>(bins), 0);
    std::vector<uint64_t> ranks;
    for (int64_t k = 0; k < x->type.numel(); ++k) {
      const uint64_t v = static_cast<uint64_t>(int_of(x->type.dtype, elem(x, k)));  // negatives are huge (E06)
      int64_t rank = -1;
      if ((!mask || truth(mask, k)) && v < static_cast<uint64_t>(bins)) rank = seen[static_cast<size_t>(v)]++;
      ranks.push_back(enc(op, DType::i32, Attr(rank)));
    }
    env_[op.result()] = TileValue{op.result()->type, std::move(ranks)};
  }

  /// Whether element a sorts before element b in ascending order (docs/semantics.md, "Sorting"):
  /// by value, -0.0 == +0.0 (`<` is false both ways), every NaN after everything else.
  bool sorts_before(const Op& op, DType d, uint64_t a, uint64_t b) const {
    if (d == DType::i1) return a < b;
    const Attr va = decode(d, a), vb = decode(d, b);
    if (is_float(d)) {
      const bool na = std::isnan(float_of(va)), nb = std::isnan(float_of(vb));
      if (na || nb) return !na && nb;
    }
    return int_of(need(passes::fold_compare(ir::CmpPred::Lt, d, va, vb), op, d)) != 0;
  }

  /// sort: per line, std::stable_sort of the indices 0..n-1 (descending: b before a), first k kept.
  void eval_sort(const Op& op) {
    const ir::Value* x = op.operands.at(0);
    const int64_t axis = op.int_attr("axis"), k = op.int_attr("k");
    const bool descending = op.int_attr("descending") != 0;
    if (axis < 0 || axis >= x->type.rank()) fail(op, fmt::format("axis {} out of range", axis));
    const DType d = x->type.dtype;
    const ir::AxisSplit sp = ir::split_at_axis(x->type.shape, axis);
    if (k < 1 || k > sp.n) fail(op, fmt::format("k = {} out of range", k));
    std::vector<uint64_t> values(static_cast<size_t>(sp.outer * k * sp.inner)), indices(values.size());
    std::vector<int64_t> order(static_cast<size_t>(sp.n));
    // The optional mask (pad_shapes: "element is real"): masked-off elements sort after every other.
    const ir::Value* mask = op.operands.size() > 1 ? op.operands[1] : nullptr;
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        auto at = [&](int64_t j) { return elem(x, (o * sp.n + j) * sp.inner + i); };
        auto real = [&](int64_t j) { return !mask || elem(mask, (o * sp.n + j) * sp.inner + i) != 0; };
        for (int64_t j = 0; j < sp.n; ++j) order[static_cast<size_t>(j)] = j;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          if (real(a) != real(b)) return real(a);
          return descending ? sorts_before(op, d, at(b), at(a)) : sorts_before(op, d, at(a), at(b));
        });
        for (int64_t j = 0; j < k; ++j) {
          const auto slot = static_cast<size_t>((o * k + j) * sp.inner + i);
          values[slot] = at(order[static_cast<size_t>(j)]);
          indices[slot] = static_cast<uint64_t>(order[static_cast<size_t>(j)]);
        }
      }
    env_[op.result(0)] = TileValue{op.result(0)->type, std::move(values)};
    env_[op.result(1)] = TileValue{op.result(1)->type, std::move(indices)};
  }

  /// gather: x at the index along the axis, 0 (all bits clear) for an index outside [0, dim).
  /// extract_tile / insert_tile (docs/ir.md): the grid and offsets of ir/subtile.hpp; storage is
  /// row-major in the types' shapes, which pad_shapes may have padded (then pads read 0 / keep x).
  void eval_subtile(const Op& op) {
    const ir::SubTileGrid g = ir::subtile_grid(op);
    if (!g.valid) fail(op, "the sub-tile shape does not divide the tile's");
    const bool ins = op.kind == ir::OpKind::InsertTile;
    const size_t nfixed = ins ? 2 : 1;
    const uint32_t id = op.operands.size() > nfixed ? static_cast<uint32_t>(elem(op.operands[nfixed], 0))
                                                    : static_cast<uint32_t>(op.int_attr("index"));
    const std::vector<int64_t> off = ir::subtile_offsets(g, id);
    const ir::Value* x = op.operands[0];
    const ir::Shape& xs = x->type.shape;
    const ir::Shape& ss = ir::subtile_type(op).shape;
    const std::vector<int64_t> xst = strides(xs), sst = strides(ss);
    const size_t rank = xs.size();
    if (!ins) {
      produce(op, 0, [&](int64_t k) -> uint64_t {
        int64_t at = 0;
        for (size_t d = 0; d < rank; ++d) {
          const int64_t c = (k / sst[d]) % ss[d];
          if (c >= g.sub[d]) return 0;  // a pad of the result
          at += (off[d] + c) * xst[d];
        }
        return elem(x, at);
      });
      return;
    }
    const ir::Value* sub = op.operands[1];
    produce(op, 0, [&](int64_t k) -> uint64_t {
      int64_t at = 0;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t c = (k / xst[d]) % xs[d];
        if (c < off[d] || c >= off[d] + g.sub[d]) return elem(x, k);
        at += (c - off[d]) * sst[d];
      }
      return elem(sub, at);
    });
  }

  void eval_gather(const Op& op) {
    const ir::Value* x = op.operands.at(0);
    const ir::Value* index = op.operands.at(1);
    const int64_t axis = op.int_attr("axis");
    const int rank = x->type.rank();
    if (axis < 0 || axis >= rank || index->type.rank() != rank) fail(op, "bad axis or rank");
    if (!is_int(index->type.dtype)) fail(op, "the index must be an integer tile");
    const ir::Shape& is = index->type.shape;
    const std::vector<int64_t> xst = strides(x->type.shape), ist = strides(is);
    // pad_shapes' real_dim: the axis' real length (an index into the padding is out of range)
    const uint64_t dim = static_cast<uint64_t>(op.has_attr("real_dim") ? op.int_attr("real_dim")
                                                                        : x->type.shape[static_cast<size_t>(axis)]);
    produce(op, 0, [&](int64_t k) {
      // Canonical values are sign- or zero-extended: a negative one is huge as unsigned.
      const uint64_t v = static_cast<uint64_t>(int_of(index->type.dtype, elem(index, k)));
      if (v >= dim) return uint64_t(0);
      int64_t at = 0;
      for (int d = 0; d < rank; ++d) at += (d == axis ? static_cast<int64_t>(v) : (k / ist[d]) % is[d]) * xst[d];
      return elem(x, at);
    });
  }

  void eval_for(const Op& op) {
    if (op.operands.size() < 3) fail(op, "needs lo, hi, step");
    const size_t ncarried = op.operands.size() - 3;
    const ir::Block& body = op.region(0).body();
    if (body.args.size() != ncarried + 1 || op.results.size() != ncarried) fail(op, "carried value count mismatch");
    const DType d = op.operands[0]->type.dtype;
    if (!is_int(d)) fail(op, "bounds must be integers");
    // Canonical values are sign- (signed) or zero-extended (unsigned) to 64 bits. Trip count
    // (docs/ir.md `for`), without overflow: differences in unsigned 64-bit arithmetic.
    const bool sgn = is_signed_int(d);
    const int64_t lo = int_of(d, elem(op.operands[0], 0)), hi = int_of(d, elem(op.operands[1], 0)),
                  step = int_of(d, elem(op.operands[2], 0));
    const uint64_t ulo = static_cast<uint64_t>(lo), uhi = static_cast<uint64_t>(hi), ustep = static_cast<uint64_t>(step);
    const bool pos = sgn ? step > 0 : step != 0;
    const bool neg = sgn && step < 0;
    uint64_t trips = 0;
    if (pos && (sgn ? lo < hi : ulo < uhi)) trips = (uhi - ulo - 1) / ustep + 1;
    else if (neg && lo > hi) trips = (ulo - uhi - 1) / (uint64_t(0) - ustep) + 1;
    std::vector<TileValue> carried;
    for (size_t j = 0; j < ncarried; ++j) carried.push_back(get(op.operands[3 + j]));
    const ir::Type ivt = body.arg(0)->type;
    for (uint64_t k = 0; k < trips; ++k) {
      // iv = lo + k * step, in the index dtype (it never wraps: docs/ir.md)
      uint64_t iv = enc(op, d, *passes::normalize_constant(d, Attr(static_cast<int64_t>(ulo + k * ustep))));
      std::vector<TileValue> args;
      args.push_back(TileValue{ivt, {iv}});
      for (auto& c : carried) args.push_back(std::move(c));
      carried = eval_region(op.region(0), std::move(args), op);
      if (carried.size() != ncarried) fail(op, "the body must yield every carried value");
    }
    for (size_t j = 0; j < ncarried; ++j) env_[op.result(static_cast<unsigned>(j))] = std::move(carried[j]);
  }
};

}  // namespace

void run(const ir::Function& f, void* const* args, const int64_t grid[3], const Options& opts) {
  cpu::detail::install_fault_handler();
  Interpreter(f, opts).run(args, grid);
}

}  // namespace tle::interp
