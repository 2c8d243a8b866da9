// tle/pipe.hpp - TLE-Lite's pipe: a bounded producer / consumer ring between the roles of one
// program, built on TLE-Struct's shared buffers and mbarriers (FlagTree's tle.pipe, notes 2.5;
// docs/struct.md, "Pipes").
//
//   auto kv = gpu::alloc<float>({3, 8, 32});                          // 3 slots of an [8, 32] block
//   auto p  = pipe(3, kv);                                             // capacity 3
//   gpu::warp_specialize({
//       gpu::Role(1, [&] {                                             // writer
//         auto w = p.writer();
//         for (auto j : range(0, n)) {
//           auto slot = w.acquire(j);                                  // slot j % 3, once free
//           gpu::copy(desc, {j * 8, 0}, slot.get<0>(), slot.ready);   // TMA into it
//           w.commit(j, p.slot_bytes());                               // its bytes announced
//         }
//       }),
//       gpu::Role(4, [&] {                                             // reader
//         auto r = p.reader();
//         Tile<float> acc = zeros<float>({8, 32});
//         for (auto j : range(0, n)) {
//           acc = acc + r.wait(j).get<0>().load();                     // slot j % 3, once filled
//           r.release(j);                                              // back to the writer
//         }
//         store(out + arange(0, 32), sum(acc, 0));
//       })});
//
// Iteration i uses slot i % capacity; the mbarrier phase parity of round i / capacity tells the
// ring's reuses apart (no counter in memory), so the iterations given to one end must count up
// from 0 without restarting for as long as the program uses the pipe (a second loop continues the
// first one's count), and every end sees the same sequence. Both ends come from one Pipe object,
// so they agree on the capacity and the fields' element types and shapes by construction; their
// trip counts must agree too - a reader waiting for an iteration no writer commits is a deadlock,
// which the interpreter (CPU backend) reports naming the waits.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "tle/struct.hpp"
#include "tle/tile.hpp"

namespace tle {

struct PipeOptions;
template <class... T> class Pipe;
template <class... T>
Pipe<T...> pipe(int64_t capacity, const std::tuple<gpu::Buffer<T>...>& fields, PipeOptions options,
                loc_t l = loc_t::current());

/// Options of tle::pipe.
struct PipeOptions {
  /// Reader endpoints (roles) that each read and release every slot, 1 to 32 (FlagTree's
  /// readers=(...), single producer / multiple consumers): a slot is free again once all of them
  /// released it. Every reader role must have the same number of warps (an mbarrier's arrivals
  /// come from roles of one size).
  int readers = 1;
};

/// A ring of `capacity` slots, each one stage of every field (shared buffers whose leading dim is
/// the capacity), with the mbarriers that hand slots from the writer to the readers and back.
/// Made by tle::pipe; copying a Pipe copies the reference.
template <class... T> class Pipe {
 public:
  /// Slot `stage` of the ring: the fields' views of that stage, and `ready`, the mbarrier whose
  /// phase the writer's commit completes (TMA copies into the slot complete their bytes on it).
  struct Slot {
    std::tuple<gpu::Buffer<T>...> fields;
    gpu::MBarrier ready;
    Tile<int32_t> stage;  ///< the slot's index, iter % capacity
    /// Field I's view of the slot (the field less its leading dim). In a template, where the
    /// slot's type depends on a parameter, write slot.template get<I>() or std::get<I>(slot.fields).
    template <size_t I> const auto& get() const { return std::get<I>(fields); }
    /// Field 0's view: the slot of a pipe of one field.
    const auto& buffer() const { return std::get<0>(fields); }
  };

  /// The producing end (FlagTree's pipe.writer(); CUTLASS's producer_acquire / producer_commit).
  /// Between acquire(i) and commit(i) the writer fills slot i % capacity: gpu::copy from a
  /// TensorDescriptor completing on slot.ready (TMA), gpu::copy from pointers (cp.async: commit_group
  /// and wait_group for them before commit), stores through gpu::local_ptr; fields may use
  /// different ones.
  class Writer {
   public:
    /// Waits until slot iter % capacity is free - every reader released iteration iter - capacity
    /// (PTX mbarrier.try_wait.parity on the slot's `empty` mbarrier; at once in the first round) -
    /// and returns it. iter: an int32 scalar tile (or C++ integer), >= 0, see the file comment.
    /// UserError at this line for an iter that is not a scalar.
    Slot acquire(const Tile<int32_t>& iter, loc_t l = loc_t::current()) const {
      auto [stage, round] = p_.place(iter, l);
      gpu::wait(p_.empty_[gpu::Stage(stage, l)], round + 1, l);  // the round before's parity: complete at first
      return p_.slot(stage, l);
    }
    /// Hands slot iter % capacity to the readers: one arrive on slot.ready (PTX mbarrier.arrive,
    /// release semantics: the writer's accesses of the slot become visible to a reader's wait),
    /// announcing tx_bytes (0 to 2^20 - 1, PTX mbarrier.arrive.expect_tx: the bytes of the slot's
    /// TMA copies, e.g. p.slot_bytes(); they may be issued before or after the commit; 0 without
    /// TMA). UserError at this line for an iter that is not a scalar or tx_bytes out of range;
    /// tx_bytes > 0 needs sm_90 (UserError when compiled for an older GPU), and TMA copies into a
    /// slot without any announced bytes are a UserError at the copy when the kernel is traced.
    void commit(const Tile<int32_t>& iter, int64_t tx_bytes = 0, loc_t l = loc_t::current()) const {
      gpu::MBarrier full = p_.full_[gpu::Stage(p_.place(iter, l).first, l)];
      if (tx_bytes != 0) gpu::arrive_expect_tx(full, tx_bytes, l);
      else gpu::arrive(full, l);
    }

   private:
    friend class Pipe;
    explicit Writer(const Pipe& p) : p_(p) {}
    Pipe p_;
  };

  /// A consuming end (FlagTree's pipe.reader(); CUTLASS's consumer_wait / consumer_release): read
  /// slot i between wait(i) and release(i) only.
  class Reader {
   public:
    /// Waits until the writer committed iteration iter (PTX mbarrier.try_wait.parity on the slot's
    /// `full` mbarrier, acquire semantics: the writer's accesses and the slot's TMA bytes are
    /// visible) and returns slot iter % capacity. iter as Writer::acquire's; UserError at this
    /// line for an iter that is not a scalar.
    Slot wait(const Tile<int32_t>& iter, loc_t l = loc_t::current()) const {
      auto [stage, round] = p_.place(iter, l);
      gpu::wait(p_.full_[gpu::Stage(stage, l)], round, l);
      return p_.slot(stage, l);
    }
    /// Gives slot iter % capacity back: one arrive on its `empty` mbarrier (release semantics);
    /// the slot is free once every reader released it. UserError at this line for an iter that
    /// is not a scalar.
    void release(const Tile<int32_t>& iter, loc_t l = loc_t::current()) const {
      gpu::arrive(p_.empty_[gpu::Stage(p_.place(iter, l).first, l)], l);
    }

   private:
    friend class Pipe;
    explicit Reader(const Pipe& p) : p_(p) {}
    Pipe p_;
  };

  /// Slots in the ring.
  int64_t capacity() const { return capacity_; }
  /// Reader ends that release every slot (PipeOptions::readers).
  int readers() const { return readers_; }
  /// Bytes of one slot, over every field (elements times their size): what commit announces when
  /// TMA fills the whole slot.
  int64_t slot_bytes() const {
    int64_t b = 0;
    std::apply([&](const auto&... f) { ((b += field_slot_bytes(f)), ...); }, fields_);
    return b;
  }
  /// The writer end (one role uses it) and a reader end (each of the readers roles uses one).
  Writer writer() const { return Writer(*this); }
  Reader reader() const { return Reader(*this); }

 private:
  template <class... U>
  friend Pipe<U...> pipe(int64_t, const std::tuple<gpu::Buffer<U>...>&, PipeOptions, loc_t);
  Pipe(std::tuple<gpu::Buffer<T>...> fields, gpu::MBarriers full, gpu::MBarriers empty, int64_t capacity, int readers)
      : fields_(std::move(fields)), full_(std::move(full)), empty_(std::move(empty)), capacity_(capacity),
        readers_(readers) {}
  /// Bytes of one stage of field f (its dims past the leading one).
  template <class U> static int64_t field_slot_bytes(const gpu::Buffer<U>& f) {
    int64_t n = static_cast<int64_t>(sizeof(U));
    for (size_t d = 1; d < f.shape().size(); ++d) n *= f.shape()[d];
    return n;
  }
  /// (slot, round) of iteration iter.
  std::pair<Tile<int32_t>, Tile<int32_t>> place(const Tile<int32_t>& iter, loc_t l) const {
    if (!iter.shape(l).empty())
      throw UserError(l, "tle::pipe: the iteration must be a scalar (an int32 loop index or C++ integer), not a tile");
    Tile<int32_t> cap(static_cast<int32_t>(capacity_), l);
    return {Tile<int32_t>(iter % cap), Tile<int32_t>(iter / cap)};
  }
  Slot slot(const Tile<int32_t>& stage, loc_t l) const {
    auto views = std::apply([&](const auto&... f) { return std::tuple{f.slot(gpu::Stage(stage, l))...}; }, fields_);
    return Slot{std::move(views), full_[gpu::Stage(stage, l)], stage};
  }

  std::tuple<gpu::Buffer<T>...> fields_;
  gpu::MBarriers full_, empty_;
  int64_t capacity_;
  int readers_;
};

/// Makes a pipe of `capacity` (1 to 1024) slots over `fields` (FlagTree's tle.pipe(capacity=,
/// **fields)): shared buffers (gpu::alloc) whose leading dim is `capacity` - slot i is stage i of
/// each - of rank 2 or more (3 or more when swizzled: a slot keeps the last two dims). It
/// allocates 2 x capacity mbarriers (gpu::alloc_mbarriers: `full`, one arrival, and `empty`,
/// `options.readers` arrivals), so call it where gpu::alloc may be called: in the kernel's body,
/// before gpu::warp_specialize. Use its writer() in one role and reader() in `options.readers`
/// others. GPU: mbarrier wait / arrive (sm_80 and later; a commit with tx_bytes, TMA, sm_90).
/// CPU backend and interpreter: the roles run interleaved (gpu::warp_specialize). UserError at
/// this line for a capacity or reader count out of range, a field whose leading dim is not the
/// capacity or whose slots would have no dims, and no fields.
template <class... T>
Pipe<T...> pipe(int64_t capacity, const std::tuple<gpu::Buffer<T>...>& fields, PipeOptions options, loc_t l) {
  static_assert(sizeof...(T) > 0, "tle::pipe: give it at least one field");
  if (capacity < 1 || capacity > 1024)
    throw UserError(l, "tle::pipe: capacity " + std::to_string(capacity) + " is outside 1..1024");
  if (options.readers < 1 || options.readers > 32)
    throw UserError(l, "tle::pipe: readers " + std::to_string(options.readers) + " is outside 1..32");
  int index = 0;
  auto check = [&](const auto& f) {
    const std::string which = "tle::pipe: field " + std::to_string(index++);
    if (f.rank() < 1 || f.shape()[0] != capacity)
      throw UserError(l, which + "'s leading dim is " + (f.rank() ? std::to_string(f.shape()[0]) : std::string("missing")) +
                             ", not the capacity " + std::to_string(capacity) + ": allocate it as {" +
                             std::to_string(capacity) + ", ...}");
    const int keep = f.layout().kind == gpu::SharedLayout::Kind::swizzled ? 3 : 2;
    if (f.rank() < keep)
      throw UserError(l, which + " has rank " + std::to_string(f.rank()) + "; a slot drops the leading dim and keeps " +
                             (keep == 3 ? "a swizzled buffer's last two dims: give it rank 3 or more"
                                        : "at least one: give it rank 2 or more"));
  };
  std::apply([&](const auto&... f) { (check(f), ...); }, fields);
  gpu::MBarriers full = gpu::alloc_mbarriers(capacity, 1, l);
  gpu::MBarriers empty = gpu::alloc_mbarriers(capacity, options.readers, l);
  return Pipe<T...>(fields, std::move(full), std::move(empty), capacity, options.readers);
}

/// tle::pipe with the default options.
template <class... T>
Pipe<T...> pipe(int64_t capacity, const std::tuple<gpu::Buffer<T>...>& fields, loc_t l = loc_t::current()) {
  return pipe(capacity, fields, PipeOptions{}, l);
}

/// tle::pipe of one field.
template <class T>
Pipe<T> pipe(int64_t capacity, const gpu::Buffer<T>& field, PipeOptions options = {}, loc_t l = loc_t::current()) {
  return pipe(capacity, std::tuple<gpu::Buffer<T>>{field}, options, l);
}

}  // namespace tle
