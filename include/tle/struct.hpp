// tle/struct.hpp - TLE-Struct: shared buffers a kernel names itself, asynchronous copies into
// them, the program barrier, and explicit register layouts.
//
// The middle layer of the language (FlagTree's `tle.gpu`; docs/struct.md has the memory model and
// a worked example): the kernel states which tiles live in shared memory and reads and writes them
// through ordinary pointer tiles, still writing tiles, not threads.
//
//   auto buf = tle::gpu::alloc<float>({2, 32, 33});         // two stages of a [32, 33] tile
//   tle::store(tle::gpu::local_ptr(buf[0]), x);             // stage 0 <- x   (any layout)
//   auto t = tle::load(tle::gpu::local_ptr(buf[0], {cols, rows}));  // read it transposed
//
// A program's statements take effect in order on every backend: on the GPU the compiler puts a
// CTA barrier between two accesses to a buffer by different threads that could conflict (a
// write, then a read or write of the same bytes; a read, then a write; atomics against plain
// accesses or against atomics that do not commute exactly; docs/struct.md, "Memory model"), so a
// kernel needs gpu::sync() only to order accesses the compiler cannot see (shared memory that
// inline PTX reaches, or CUDA device code without a pointer operand into the buffer).
#pragma once
#include <functional>
#include <initializer_list>
#include <variant>
#include <vector>

#include "tle/tensor_descriptor.hpp"
#include "tle/tile.hpp"

namespace tle::gpu {

/// Where a buffer lives (FlagTree's tle.gpu.smem). `shared`: the program's shared memory - the
/// CTA's shared memory on the GPU, storage private to the program on the CPU backend and in the
/// interpreter. Its contents are undefined until written.
enum class scope { shared };

/// How a buffer's elements are placed in shared memory (FlagTree's swizzled_shared_layout; the
/// wgmma/ldmatrix layouts the compiler uses for its own staging are the swizzled form below).
struct SharedLayout {
  enum class Kind { row_major, padded, swizzled } kind = Kind::row_major;
  int64_t pad = 0;                          // padded: unused elements after each innermost row
  int64_t vec = 1, per_phase = 1, max_phase = 1;  // swizzled

  /// Row-major over the buffer's dims, no gaps.
  static SharedLayout row_major() { return {}; }
  /// Row-major with `pad` (>= 1) unused elements after each row of the innermost dim, so that a
  /// walk down a column spreads over the 32 banks (a [32, 32] f32 buffer padded by 1 is read
  /// transposed without bank conflicts).
  static SharedLayout padded(int64_t pad) { return {Kind::padded, pad, 1, 1, 1}; }
  /// XOR-swizzled rows: in row r (the index along the next-to-last dim) the group of `vec`
  /// consecutive elements numbered g is stored at group g ^ ((r / per_phase) % max_phase), as
  /// Triton's SwizzledSharedEncoding. vec, per_phase and max_phase are powers of two; the buffer
  /// needs rank >= 2 and an innermost dim that is a multiple of vec * max_phase (UserError at
  /// alloc otherwise). With vec = 16 bytes / element size, per_phase = max(1, 128 bytes / row
  /// bytes) and max_phase = 8 / per_phase, 8 rows' 16-byte chunks at one column fall in 8
  /// different bank groups.
  static SharedLayout swizzled(int64_t vec, int64_t per_phase, int64_t max_phase) {
    return {Kind::swizzled, 0, vec, per_phase, max_phase};
  }
};

/// One index of gpu::local_ptr: an integer tile (any integer dtype, converted to i32) or a C++
/// integer.
struct Index {
  tle::detail::V v;
  SrcLoc loc;
  template <class U>
    requires tle::detail::IntElem<U>
  Index(const Tile<U>& t, loc_t l = loc_t::current()) : v(t.value()), loc(l) {
    tle::detail::require_value(v, l);
    if constexpr (!std::is_same_v<U, int32_t>) v = tle::detail::convert(v, DType::i32, l);
  }
  template <class U>
    requires std::is_integral_v<U>
  Index(U x, loc_t l = loc_t::current()) : v(tle::detail::constant_int(DType::i32, static_cast<int64_t>(x), l)), loc(l) {}
};

/// The index of Buffer::operator[] / slot(): a C++ integer (checked against the dim at trace
/// time) or an integer scalar tile (a runtime stage; not checked).
struct Stage {
  tle::detail::V v;
  bool is_static = false;     // a C++ integer (checked against the dim)
  bool in_range_type = true;  // the integer fits int64_t and is not negative
  int64_t static_index = 0;   // the C++ integer
  SrcLoc loc;
  template <class U>
    requires tle::detail::IntElem<U>
  Stage(const Tile<U>& t, loc_t l = loc_t::current()) : v(t.value()), loc(l) {
    tle::detail::require_value(v, l);
    if (!t.shape(l).empty()) throw UserError(l, "Buffer[]: the stage index must be a scalar");
    if constexpr (!std::is_same_v<U, int32_t>) v = tle::detail::convert(v, DType::i32, l);
  }
  template <class U>
    requires std::is_integral_v<U>
  Stage(U x, loc_t l = loc_t::current()) : v(nullptr), is_static(true), static_index(static_cast<int64_t>(x)), loc(l) {
    if constexpr (std::is_signed_v<U>) in_range_type = x >= 0;
    else in_range_type = static_cast<uint64_t>(x) <= static_cast<uint64_t>(INT64_MAX);
  }
};

/// A buffer in shared memory, or a view of part of one (FlagTree's buffered_tensor): element type
/// T, a shape known at trace time, and where its elements are (a base pointer, strides and the
/// layout's swizzle). Copying a Buffer copies the view, not the data.
template <class T> class Buffer {
 public:
  /// The view's shape (the allocated shape, less the dims indexed away by operator[]).
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const SharedLayout& layout() const { return layout_; }
  /// Element strides of the view's dims (padding included; the swizzle is applied on top).
  const std::vector<int64_t>& strides() const { return strides_; }

  /// The view of index `i` of dim 0 (one stage of a multi-buffered tile; FlagTree's slot()):
  /// the same buffer less its leading dim. `i` is a C++ integer, checked against the dim
  /// (UserError), or an integer scalar tile (a runtime stage, not checked: an index outside
  /// [0, shape()[0]) addresses outside the buffer, as a pointer would). A view of rank 0 cannot
  /// be made (index a rank-1 view's elements with local_ptr), nor one that drops a swizzled
  /// buffer's rows.
  Buffer operator[](Stage i) const { return slot(i); }
  Buffer slot(Stage i) const {
    const SrcLoc& l = i.loc;
    if (rank() < 2)
      throw UserError(l, "Buffer[]: the view would have no dimension left; address a rank-1 buffer's elements with "
                         "gpu::local_ptr(buf, {i})");
    if (layout_.kind == SharedLayout::Kind::swizzled && rank() < 3)
      throw UserError(l, "Buffer[]: a swizzled view keeps its last two dims; index the rows with gpu::local_ptr");
    if (i.is_static && (!i.in_range_type || i.static_index >= shape_[0]))
      throw UserError(l, "Buffer[]: index " + std::string(i.in_range_type ? std::to_string(i.static_index) : "out of range") +
                             " is outside the leading dim of size " + std::to_string(shape_[0]));
    tle::detail::V idx = i.is_static ? tle::detail::constant_int(DType::i32, i.static_index, l) : i.v;
    tle::detail::V st = tle::detail::constant_int(DType::i32, strides_[0], l);
    Ptr<T> b(tle::detail::addptr(base_.value(), tle::detail::binary(ir::BinaryOp::Mul, idx, st, DType::i32, l), l));
    return Buffer(b, Shape(shape_.begin() + 1, shape_.end()), std::vector<int64_t>(strides_.begin() + 1, strides_.end()),
                  layout_);
  }

  /// The pointer to the view's first element.
  Ptr<T> data() const { return base_; }

  /// The whole view as a tile (the load of local_ptr(*this)).
  Tile<T> load(loc_t l = loc_t::current()) const;
  /// Writes `v` (broadcast and converted to T) to the whole view.
  void store(std::type_identity_t<Operand<T>> v, loc_t l = loc_t::current()) const;

 private:
  template <class U> friend Buffer<U> alloc(const Shape&, scope, SharedLayout, loc_t);
  Buffer(Ptr<T> base, Shape shape, std::vector<int64_t> strides, SharedLayout layout)
      : base_(std::move(base)), shape_(std::move(shape)), strides_(std::move(strides)), layout_(layout) {}

  Ptr<T> base_;
  Shape shape_;
  std::vector<int64_t> strides_;
  SharedLayout layout_;
};

/// Allocates a buffer of `shape` (every dim >= 1) in `scope` with `layout` (FlagTree's
/// tle.gpu.alloc): the leading dim is typically the stage of a multi-buffered tile
/// ({S, BM, BK}). Call it in the kernel's body, not inside tle::range / tle::if_; the buffer
/// lives for the whole program and starts undefined. T: any integer or floating-point element
/// type. The first element is aligned to 128 bytes (1024 when swizzled). The program's buffers
/// may take at most 232448 bytes (227 KB, what an sm_90 block can use; padding and alignment
/// count), checked on every backend: a UserError at this line naming every buffer otherwise. On
/// the GPU the compiler's own staging buffers come on top, and the compile checks the sum.
template <class T>
Buffer<T> alloc(const Shape& shape, scope where = scope::shared, SharedLayout layout = {}, loc_t l = loc_t::current()) {
  static_assert(tle::detail::Arith<T>, "gpu::alloc<T>: T must be an integer or floating-point element type");
  (void)where;
  const int n = static_cast<int>(shape.size());
  // Every size below 2^31 first, so that no product below overflows (the tracer then refuses
  // anything over the shared-memory limit).
  constexpr int64_t kBig = int64_t(1) << 31;
  for (int64_t d : shape)
    if (d < 1 || d >= kBig) throw UserError(l, "gpu::alloc: every dim of a buffer must be from 1 to 2^31 - 1");
  auto pow2 = [](int64_t x) { return x >= 1 && x < (int64_t(1) << 16) && (x & (x - 1)) == 0; };
  std::vector<int64_t> strides(shape.size(), 1);
  int64_t pad = 0;
  if (layout.kind == SharedLayout::Kind::padded) {
    if (layout.pad < 1 || layout.pad >= kBig) throw UserError(l, "SharedLayout::padded: pad must be from 1 to 2^31 - 1 elements");
    pad = layout.pad;
  }
  if (layout.kind == SharedLayout::Kind::swizzled) {
    if (!pow2(layout.vec) || !pow2(layout.per_phase) || !pow2(layout.max_phase))
      throw UserError(l, "SharedLayout::swizzled: vec, per_phase and max_phase must be powers of two below 65536");
    if (n < 2) throw UserError(l, "SharedLayout::swizzled needs a buffer of rank 2 or more (rows and columns)");
    if (shape[static_cast<size_t>(n - 1)] % (layout.vec * layout.max_phase) != 0)
      throw UserError(l, "SharedLayout::swizzled: the innermost dim (" + std::to_string(shape.back()) +
                             ") must be a multiple of vec * max_phase (" +
                             std::to_string(layout.vec * layout.max_phase) + ")");
  }
  int64_t numel = 1;
  for (int d = n; d-- > 0;) {
    strides[static_cast<size_t>(d)] = numel;
    const int64_t ext = shape[static_cast<size_t>(d)] + (d == n - 1 ? pad : 0);
    numel = numel >= kBig / ext ? kBig : numel * ext;  // saturates: the tracer refuses it
  }
  const int64_t align = layout.kind == SharedLayout::Kind::swizzled ? 1024 : 128;
  Ptr<T> base(tle::detail::local_alloc(tle::detail::dtype_of<T>::value, shape, numel, align, l));
  return Buffer<T>(base, shape, strides, layout);
}

/// local_ptr with the indices already i32 tiles (used by the overloads below): the offset
/// sum of index * stride over the dims, the last index swizzled for a swizzled layout. The ops
/// carry the user's position `l`.
template <class T> Ptr<T> local_ptr_of(const Buffer<T>& buf, const std::vector<Tile<int32_t>>& ix, loc_t l) {
  using ir::BinaryOp;
  auto c = [&](int64_t x) { return tle::detail::constant_int(DType::i32, x, l); };
  auto bin = [&](BinaryOp op, tle::detail::V a, tle::detail::V b) { return tle::detail::binary(op, a, b, DType::i32, l); };
  auto lg = [](int64_t x) { int64_t k = 0; while ((int64_t(1) << k) < x) ++k; return k; };
  const int n = buf.rank();
  const SharedLayout& lay = buf.layout();
  tle::detail::V off = nullptr;
  for (int d = 0; d < n; ++d) {
    tle::detail::V i = ix[static_cast<size_t>(d)].value();
    tle::detail::V term;
    if (lay.kind == SharedLayout::Kind::swizzled && d == n - 1) {
      // group g = col / vec of row r moves to g ^ ((r / per_phase) % max_phase)
      tle::detail::V r = ix[static_cast<size_t>(n - 2)].value();
      tle::detail::V phase = bin(BinaryOp::And, bin(BinaryOp::Shr, r, c(lg(lay.per_phase))), c(lay.max_phase - 1));
      tle::detail::V g = bin(BinaryOp::Xor, bin(BinaryOp::Shr, i, c(lg(lay.vec))), phase);
      term = bin(BinaryOp::Or, bin(BinaryOp::Shl, g, c(lg(lay.vec))), bin(BinaryOp::And, i, c(lay.vec - 1)));
    } else {
      const int64_t st = buf.strides()[static_cast<size_t>(d)];
      term = st == 1 ? i : bin(BinaryOp::Mul, i, c(st));
    }
    off = off ? bin(BinaryOp::Add, off, term) : term;
  }
  return Ptr<T>(tle::detail::addptr(buf.data().value(), off, l));
}

/// The pointers to the elements buf[idx[0], idx[1], ...] (FlagTree's tle.gpu.local_ptr): one
/// index per dim of the view (UserError otherwise), integer tiles or C++ integers broadcast
/// together numpy-style; the result has their common shape. The pointers work with tle::load,
/// tle::store and the atomics, masks included, in any layout. Indices are not checked at run
/// time: one outside its dim addresses another element of the buffer or memory outside it.
template <class T> Ptr<T> local_ptr(const Buffer<T>& buf, std::initializer_list<Index> idx, loc_t l = loc_t::current()) {
  if (static_cast<int>(idx.size()) != buf.rank())
    throw UserError(l, "gpu::local_ptr: " + std::to_string(idx.size()) + " indices for a view of rank " +
                           std::to_string(buf.rank()) + "; give one index per dim");
  std::vector<Tile<int32_t>> ix;
  for (const Index& i : idx) ix.emplace_back(i.v);
  return local_ptr_of(buf, ix, l);
}
/// The pointers to every element of the view, a tile of the view's shape.
template <class T> Ptr<T> local_ptr(const Buffer<T>& buf, loc_t l = loc_t::current()) {
  std::vector<Tile<int32_t>> ix;
  const Shape& s = buf.shape();
  for (size_t d = 0; d < s.size(); ++d) {
    Shape one(s.size(), 1);
    one[d] = s[d];
    ix.push_back(reshape(arange(0, s[d], l), one, l));
  }
  return local_ptr_of(buf, ix, l);
}

template <class T> Tile<T> Buffer<T>::load(loc_t l) const { return tle::load(local_ptr(*this, l), l); }
template <class T> void Buffer<T>::store(std::type_identity_t<Operand<T>> v, loc_t l) const {
  tle::store(local_ptr(*this, l), v, l);
}

/// Copies global memory into a shared buffer asynchronously (FlagTree's tle.gpu.copy from a
/// pointer tile; Triton Gluon's async_copy_global_to_shared): element i of the view `dst` (or of
/// the buffer pointer tile `dst`, from gpu::local_ptr) receives *src[i], or 0 where `mask` is
/// false (src is then not read). src: global pointers (kernel arguments plus offsets), of the
/// view's shape; mask broadcasts to it. The copy lands in the background: gpu::commit_group()
/// closes the group of copies issued since the last commit and gpu::wait_group(n) waits until at
/// most n groups are still in flight; until then the destination elements must not be read or
/// written (the interpreter stops a kernel that does, naming the copy's line). Once waited for,
/// the data is the program's like a store's (the compiler puts the barrier between the wait and
/// the first read by other threads). On the GPU each thread copies its elements with cp.async
/// (PTX ISA 9.7.9.25.3; 4, 8 or 16 bytes each, zero-filled where masked, as far as the layout and
/// the pointers' alignment allow; 1- and 2-byte elements that cannot be grouped into 4 bytes are
/// loaded and stored at once); the CPU backend copies at once. The source may be read at any time
/// until the wait: do not write it in between. A kernel that copies
/// manages its cp.async groups itself: the compiler then pipelines none of its loops' loads.
/// UserError at this line when src points into a buffer, dst outside the program's buffers,
/// the shapes or element types differ, or inside a combine function.
template <class T> void copy(const Ptr<T>& src, const Ptr<T>& dst, loc_t l = loc_t::current()) {
  tle::detail::require_value(src.value(), l);
  tle::detail::require_value(dst.value(), l);
  tle::detail::async_copy(src.value(), dst.value(), nullptr, l);
}
template <class T> void copy(const Ptr<T>& src, const Ptr<T>& dst, const Tile<bool>& mask, loc_t l = loc_t::current()) {
  tle::detail::require_value(src.value(), l);
  tle::detail::require_value(dst.value(), l);
  tle::detail::require_value(mask.value(), l);
  tle::detail::async_copy(src.value(), dst.value(), mask.value(), l);
}
template <class T> void copy(const Ptr<T>& src, const Buffer<T>& dst, loc_t l = loc_t::current()) {
  copy(src, local_ptr(dst, l), l);
}
template <class T> void copy(const Ptr<T>& src, const Buffer<T>& dst, const Tile<bool>& mask, loc_t l = loc_t::current()) {
  copy(src, local_ptr(dst, l), mask, l);
}
/// Closes the group of gpu::copy calls issued since the previous commit (cp.async.commit_group,
/// PTX ISA 9.7.9.25.3.2). A copy not yet committed is not waited for by wait_group.
inline void commit_group(loc_t l = loc_t::current()) { tle::detail::async_commit(l); }
/// Waits until at most `pending` (0 to 255) committed groups of this program's copies are still
/// in flight (cp.async.wait_group, PTX ISA 9.7.9.25.3.3): the groups before them have landed.
/// UserError at this line for a count outside 0..255.
inline void wait_group(int pending, loc_t l = loc_t::current()) { tle::detail::async_wait(pending, l); }

/// One mbarrier (PTX ISA 9.7.13.15) of an array from alloc_mbarriers: a phase completes when the
/// program has made the phase's arrive statements and every transaction byte announced in it has
/// landed; then the next phase begins. Copying an MBarrier copies the reference.
class MBarrier {
 public:
  /// The 8-byte mbarrier object in shared memory.
  Ptr<int64_t> data() const { return p_; }

 private:
  friend class MBarriers;
  explicit MBarrier(Ptr<int64_t> p) : p_(std::move(p)) {}
  Ptr<int64_t> p_;
};

/// An array of mbarriers in shared memory (FlagTree's alloc_barriers with phase indices, Gluon's
/// mbarrier.allocate_mbarrier + init).
class MBarriers {
 public:
  int64_t size() const { return n_; }
  /// Barrier i: a C++ integer (checked: UserError outside [0, size())) or an integer scalar
  /// tile (a runtime index, not checked).
  MBarrier operator[](Stage i) const {
    if (i.is_static && (!i.in_range_type || i.static_index >= n_))
      throw UserError(i.loc, "MBarriers[]: index " +
                                 std::string(i.in_range_type ? std::to_string(i.static_index) : "out of range") +
                                 " is outside the " + std::to_string(n_) + " mbarriers");
    tle::detail::V idx = i.is_static ? tle::detail::constant_int(DType::i32, i.static_index, i.loc) : i.v;
    return MBarrier(Ptr<int64_t>(tle::detail::addptr(base_.value(), idx, i.loc)));
  }

 private:
  friend MBarriers alloc_mbarriers(int64_t, int64_t, loc_t);
  MBarriers(Ptr<int64_t> base, int64_t n) : base_(std::move(base)), n_(n) {}
  Ptr<int64_t> base_;
  int64_t n_;
};

/// Allocates `n` (1 to 1024) mbarriers in shared memory, each initialized so that a phase
/// completes after `arrivals` arrive statements of the program (gpu::arrive or
/// gpu::arrive_expect_tx; a statement counts once, however many threads run it) and the
/// transaction bytes they announced. In the kernel's body only, like gpu::alloc (UserError at this
/// line otherwise, or for counts out of range: arrivals times the arriving warps must stay below
/// 2^20, checked when compiled for the GPU). Phase 0 is the first; wait for phase k with its
/// parity, gpu::wait(bar, k & 1) or gpu::wait(bar, k).
/// GPU: mbarrier.init by one thread (count: arrivals times the warps of the program, or of the
/// role that arrives, each of which arrives once), then a fence and a barrier; works on sm_80 and
/// later. CPU backend: nothing to wait
/// for (statements run in order); interpreter: phases counted, and a wait that nothing can
/// complete stops the kernel (a deadlock on the GPU).
inline MBarriers alloc_mbarriers(int64_t n, int64_t arrivals = 1, loc_t l = loc_t::current()) {
  return MBarriers(Ptr<int64_t>(tle::detail::mbarrier_alloc(n, arrivals, l)), n);
}
/// The program arrives on `bar` once (its threads' earlier memory accesses are released to
/// whoever waits on the phase; on the GPU each warp synchronizes, bar.warp.sync, and its lane 0
/// arrives: PTX mbarrier.arrive, release semantics).
inline void arrive(const MBarrier& bar, loc_t l = loc_t::current()) { tle::detail::mbarrier_arrive(bar.data().value(), 0, l); }
/// The program announces `bytes` (0 to 2^20 - 1) transaction bytes for the current phase and
/// arrives once (PTX mbarrier.arrive.expect_tx; sm_90): the phase completes when as many bytes of
/// TMA copies (gpu::copy from a TensorDescriptor) have landed. UserError at this line for a count
/// out of range, and at compile time for a GPU without it (before sm_90).
inline void arrive_expect_tx(const MBarrier& bar, int64_t bytes, loc_t l = loc_t::current()) {
  tle::detail::mbarrier_arrive(bar.data().value(), bytes, l);
}
/// Waits until the phase of `bar` whose parity is `phase & 1` has completed (PTX
/// mbarrier.try_wait.parity; test_wait.parity before sm_90): the accesses released by its arrivals
/// and the bytes of its TMA copies are visible to the program. The phase is an integer scalar or
/// a C++ integer.
inline void wait(const MBarrier& bar, Index phase, loc_t l = loc_t::current()) {
  tle::detail::mbarrier_wait(bar.data().value(), phase.v, l);
}

/// Copies the block of tensor descriptor `desc` at `offsets` (elements; out-of-bounds elements
/// are zeros, as desc.load) into the buffer view `dst` (shape: the descriptor's block) with the
/// tensor memory accelerator (cp.async.bulk.tensor, PTX ISA 9.7.9.25.5.1; FlagTree's
/// tle.gpu.copy from a descriptor, Gluon's tma.async_copy_global_to_shared), completing its bytes
/// (the block's, out-of-bound ones included) on `bar`: announce them in the same phase with
/// gpu::arrive_expect_tx(bar, bytes) and wait on the phase before touching the view. One thread
/// issues it. dst's layout must be what TMA writes: row_major, or for rows of 32, 64 or 128 bytes
/// SharedLayout::swizzled(16 / sizeof(T), 128 / row bytes, row bytes / 16) (the 32/64/128-byte
/// swizzle); a view of a buffer whose stage offset keeps 128 bytes alignment (swizzled: 8 rows, 1024, 512
/// or 256 bytes).
/// UserError at this line for a block TMA cannot move (dims powers of two up to 256, rows >= 16
/// bytes, <= 64 KiB), a view of another shape or layout; at compile time on a GPU without TMA
/// (before sm_90, or TLE_TMA=0), for a view not provably aligned or an innermost offset not
/// provably a multiple of 16 bytes. CPU backend: a plain copy that completes the bytes at once;
/// interpreter: the bytes complete at once, the data lands at the wait that sees the phase
/// complete (an earlier access of the view stops the kernel).
template <class T, int R>
void copy(const TensorDescriptor<T, R>& desc, const std::array<Offset, (R > 0 ? R : 0)>& offsets, const Buffer<T>& dst,
          const MBarrier& bar, loc_t l = loc_t::current()) {
  const SharedLayout& lay = dst.layout();
  int64_t swizzle = 0;
  if (lay.kind == SharedLayout::Kind::padded)
    throw UserError(l, "gpu::copy from a TensorDescriptor: TMA writes rows without padding; use a row_major or swizzled buffer");
  if (lay.kind == SharedLayout::Kind::swizzled) {
    const int64_t row = dst.shape().back() * static_cast<int64_t>(sizeof(T));
    const bool ok = (row == 32 || row == 64 || row == 128) && lay.vec * static_cast<int64_t>(sizeof(T)) == 16 &&
                    lay.per_phase == 128 / row && lay.max_phase == row / 16;
    if (!ok)
      throw UserError(l, "gpu::copy from a TensorDescriptor: a swizzled buffer must have rows of 32, 64 or 128 bytes "
                         "laid out as SharedLayout::swizzled(16 / sizeof(T), 128 / row bytes, row bytes / 16), the "
                         "swizzle TMA writes");
    swizzle = row;
    // TMA's swizzle phase follows the box's flattened rows; the buffer's, the rows along the
    // next-to-last dim: the two agree when that dim is whole periods of 8 rows (or the only one).
    const Shape& sh = dst.shape();
    int64_t outer = 1;
    for (size_t d = 0; d + 2 < sh.size(); ++d) outer *= sh[d];
    if (outer > 1 && sh[sh.size() - 2] % 8 != 0)
      throw UserError(l, "gpu::copy from a TensorDescriptor: a swizzled view of rank 3 or more needs a next-to-last "
                         "dim that is a multiple of 8 rows (TMA's swizzle runs over the flattened rows)");
  }
  tle::detail::tma_copy(desc.traced_values(), std::vector<int64_t>(desc.block_shape().begin(), desc.block_shape().end()),
                        TensorDescriptor<T, R>::offsets_of(offsets), dst.data().value(), local_ptr(dst, l).value(),
                        bar.data().value(), swizzle, l);
}

/// A blocked register layout (Triton's BlockedEncoding, FlagTree's tle.gpu.BlockEncoding): each
/// thread holds a size_per_thread[d] block along dim d, a warp is threads_per_warp[d] threads
/// along d (product 32), the program warps_per_cta[d] warps along d (product: the launch's
/// num_warps); within each level the indices run along `order` (order[0] the fastest dim). One
/// entry per dim of the tile, powers of two. On a tile larger than the layout's extent the
/// pattern repeats in registers; on a smaller one threads hold copies.
struct BlockedLayout {
  Shape size_per_thread, threads_per_warp, warps_per_cta, order;
};

/// The tensor-core accumulator layout (Triton's NvidiaMmaEncoding, Gluon's
/// gl.NVMMADistributedLayout) of a rank-2 [M, N] tile:
///  - version 2: mma.sync.m16n8 (sm_80 and newer), the C/D fragment of PTX ISA 9.7.14.5.8 (in a
///    warp, lane l's registers c0..c3 hold rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1);
///    warps_per_cta = [wm, wn] warps of 16 x 8 tiles, the warp index running along M first; the
///    [16 wm, 8 wn] CTA tile repeats in registers along N, then M. instr_n: 0 (or 8).
///  - version 3: wgmma.mma_async.m64nN (sm_90a), the D fragment of PTX ISA 9.7.15.5.1.1: warp w
///    of a warpgroup holds rows 16w..16w+15 as version 2 does, repeated along the warpgroup's N
///    columns. warps_per_cta = [wm, wn] with wm a multiple of 4 (wm / 4 warpgroups along M, wn
///    along N); instr_n = n, wgmma's N (a power of two from 8 to 256), or 0 for N / wn - the
///    layout the compiler gives its own wgmma accumulators; the [64 wm / 4, n wn] CTA tile repeats
///    in registers along N, then M.
/// Any dtype (the layout places elements; tensor-core dots use f32 accumulators). Parameters that
/// are malformed on their own are UserErrors at set_layout; when compiled for the GPU, at the same
/// line: wm * wn other than the launch's num_warps, version 3 on a target other than sm_90a, and a
/// tile (after padding to powers of two) the layout cannot tile: version 2 needs M >= 16 and
/// N >= 8; version 3 M a multiple of 16 wm and N a multiple of n wn (n >= 8).
struct MmaLayout {
  int version = 2;
  Shape warps_per_cta;
  int64_t instr_n = 0;
};

/// The register layout of a tensor-core dot's operand (Triton's DotOperandEncoding, Gluon's
/// gl.DotOperandLayout): op_idx 0 is A, a rank-2 [M, K] tile; op_idx 1 is B, [K, N]; `parent` the
/// accumulator's MmaLayout (its warps: A is replicated over the wn warps of a row of warps, B
/// over the wm of a column). k_width is the number of elements along K in one 32-bit register:
/// 1 (tf32, m16n8k8), 2 (f16 / bf16, m16n8k16) or 4 (8-bit, m16n8k32) - PTX ISA 9.7.14.5.7,
/// 9.7.14.5.8 and 9.7.14.5.9, the A and B fragment tables; 0 takes 32 / the tile's element bits.
/// A version 3 parent has an A layout only: wgmma's A read from registers (PTX ISA 9.7.15.5.1.1,
/// the same per-warp fragment as mma.sync's A, warp w of a warpgroup on rows 16w..16w+15); B of
/// wgmma is read from shared memory (UserError). When compiled: A needs M >= 16 and K >= 8
/// k_width, B K >= 8 k_width and N >= 8, plus the parent's warp and target rules above. The
/// compiler's own dots use k_width = 32 / bits; a dot given an operand in another layout converts it.
struct DotOperandLayout {
  int op_idx = 0;
  MmaLayout parent;
  int k_width = 0;
};

/// A slice of a layout (Triton's SliceEncoding, Gluon's gl.SliceLayout): `parent`, a layout of
/// rank r + 1, with dim `dim` (0..r) removed, for a tile of rank r - the layout of a reduction of
/// a parent-layout tile along dim, and of the operand of expand_dims(x, dim) to one; threads that
/// differed only along dim hold copies. The parent's rules hold for the tile's shape with dim
/// inserted (of the parent's smallest extent there). UserError at set_layout for a dim out of
/// range or a parent of the wrong rank (an MmaLayout or DotOperandLayout parent is of rank 2, so
/// its slices are of rank-1 tiles).
struct SliceLayout {
  int dim = 0;
  std::variant<BlockedLayout, MmaLayout, DotOperandLayout> parent;
};

/// x, with its GPU register layout pinned to `layout` (FlagTree's tle.gpu.set_layout): a hard
/// anchor the layout pass spreads to x's producers and the result's users (elementwise chains,
/// shape ops, loops' carried values) before anything else and never overrides; where a neighbour
/// needs another layout (a tensor-core dot, a differently laid out value) the compiler converts at
/// the boundary. A load whose value's only use is set_layout, or a load / store / atomic whose
/// pointer tile is a set_layout result, accesses memory in that layout (instead of the coalesced
/// one it would pick). The values are x's on every backend; the CPU backend and the interpreter
/// ignore the layout. UserError at this line for a scalar x or a malformed layout (lengths,
/// powers of two, 32 threads, order a permutation), and when compiled for the GPU with a number
/// of warps other than warps_per_cta's product. Any dtype and shape (rank >= 1).
template <class T> Tile<T> set_layout(const Tile<T>& x, const BlockedLayout& layout, loc_t l = loc_t::current()) {
  tle::detail::require_value(x.value(), l);
  tle::detail::LayoutSpec s;
  s.size_per_thread = layout.size_per_thread, s.threads_per_warp = layout.threads_per_warp;
  s.warps_per_cta = layout.warps_per_cta, s.order = layout.order;
  return Tile<T>(tle::detail::set_layout(x.value(), s, l));
}

namespace layout_detail {
inline void fill_spec(tle::detail::LayoutSpec& s, const BlockedLayout& b) {
  s.kind = "blocked";
  s.size_per_thread = b.size_per_thread, s.threads_per_warp = b.threads_per_warp;
  s.warps_per_cta = b.warps_per_cta, s.order = b.order;
}
inline void fill_spec(tle::detail::LayoutSpec& s, const MmaLayout& m) {
  s.kind = "mma";
  s.version = m.version, s.warps_per_cta = m.warps_per_cta, s.instr_n = m.instr_n;
}
inline void fill_spec(tle::detail::LayoutSpec& s, const DotOperandLayout& d) {
  fill_spec(s, d.parent);
  s.kind = "dot_operand";
  s.op_idx = d.op_idx, s.k_width = d.k_width;
}
}  // namespace layout_detail

/// x pinned to the mma accumulator layout `layout` (above), a rank-2 [M, N] tile; as the blocked
/// overload otherwise: a tile used as a dot's accumulator keeps this layout, and the dot converts
/// when it is not the one the dot computes in (a version 2 layout on sm_90a, other warps).
template <class T> Tile<T> set_layout(const Tile<T>& x, const MmaLayout& layout, loc_t l = loc_t::current()) {
  tle::detail::require_value(x.value(), l);
  tle::detail::LayoutSpec s;
  layout_detail::fill_spec(s, layout);
  return Tile<T>(tle::detail::set_layout(x.value(), s, l));
}

/// x pinned to the dot operand layout `layout` (above): A [M, K] or B [K, N], rank 2.
template <class T> Tile<T> set_layout(const Tile<T>& x, const DotOperandLayout& layout, loc_t l = loc_t::current()) {
  tle::detail::require_value(x.value(), l);
  tle::detail::LayoutSpec s;
  layout_detail::fill_spec(s, layout);
  return Tile<T>(tle::detail::set_layout(x.value(), s, l));
}

/// x pinned to the slice layout `layout` (above): x's rank is the parent's - 1.
template <class T> Tile<T> set_layout(const Tile<T>& x, const SliceLayout& layout, loc_t l = loc_t::current()) {
  tle::detail::require_value(x.value(), l);
  tle::detail::LayoutSpec s;
  std::visit([&](const auto& p) { layout_detail::fill_spec(s, p); }, layout.parent);
  s.sliced = true, s.slice_dim = layout.dim;
  return Tile<T>(tle::detail::set_layout(x.value(), s, l));
}

/// The program's threads as a tile, for the rare thread-level code (CUDA's threadIdx.x): an int32
/// tile of shape [32 * num_warps] whose element i is i and is held by thread i (pinned by
/// set_layout to BlockedLayout{{1}, {32}, {num_warps}, {0}}), so elementwise code on it runs one
/// element per thread - e.g. store(out + thread_id(4), f(thread_id(4))) has thread t store f(t).
/// num_warps is the program's (or, inside a gpu::warp_specialize role, the role's) warps, with
/// thread 0 its first thread; a power of two from 1 to 32, else UserError at this line, and on
/// the GPU a UserError at this line when it is not the launch's (set_layout's check). On the CPU
/// backend and the interpreter the values are the same (the layout is not used).
inline Tile<int32_t> thread_id(int num_warps, loc_t l = loc_t::current()) {
  if (num_warps < 1 || num_warps > 32 || (num_warps & (num_warps - 1)) != 0)
    throw UserError(l, "gpu::thread_id(" + std::to_string(num_warps) +
                           "): num_warps must be the program's warps, a power of two from 1 to 32");
  return set_layout(arange(0, int64_t{32} * num_warps, l), BlockedLayout{{1}, {32}, {num_warps}, {0}}, l);
}
/// The warp of each thread (thread_id(num_warps) / 32, in thread_id's layout): [32 * num_warps] int32.
inline Tile<int32_t> warp_id(int num_warps, loc_t l = loc_t::current()) { return thread_id(num_warps, l) / 32; }
/// The lane of each thread in its warp (thread_id(num_warps) % 32, in thread_id's layout, PTX's
/// %laneid): [32 * num_warps] int32.
inline Tile<int32_t> lane_id(int num_warps, loc_t l = loc_t::current()) { return thread_id(num_warps, l) % 32; }

/// One role of gpu::warp_specialize: `num_warps` warps (a power of two, 1 to 32) run `body`, a
/// lambda taking nothing and returning nothing, traced into the role. `max_regs` (0: unchanged;
/// else a multiple of 8 from 24 to 256, for a role of whole warpgroups) is the role's registers
/// per thread after setmaxnreg (PTX ISA 9.7.17.1) on sm_90a: a producer that only copies gives
/// registers up (e.g. 40) so that consumers holding accumulators can take more (e.g. 232); other
/// targets and backends ignore it. UserError at gpu::warp_specialize for values out of range.
struct Role {
  int num_warps = 0;
  int max_regs = 0;
  std::function<void()> body;
  SrcLoc loc;
  Role(int num_warps_, std::function<void()> body_, loc_t l = loc_t::current())
      : num_warps(num_warps_), body(std::move(body_)), loc(l) {}
  Role(int num_warps_, int max_regs_, std::function<void()> body_, loc_t l = loc_t::current())
      : num_warps(num_warps_), max_regs(max_regs_), body(std::move(body_)), loc(l) {}
};

/// Warp specialization (FlagTree's tle.gpu warp specialization, Gluon's warp_specialize,
/// CUTLASS's producer / consumer warpgroups): the program's warps are split among `roles`, each
/// running its own body at the same time as the others - typically a producer that copies tiles
/// into shared buffers and consumers that compute on them. Role r runs on warps
/// [first_r, first_r + num_warps_r), placed in order, each starting where the previous one ended
/// rounded up to a multiple of min(num_warps_r, 4) (a role of 4 or more warps is whole
/// warpgroups, as wgmma needs; warps skipped idle). The program launches with the last role's
/// end, whatever Grid::with_warps says: {Role(4, 40, producer), Role(8, 232, consumer)} takes
/// 12 warps, {Role(1, producer), Role(4, consumer)} 8 (warps 1 to 3 idle).
///
/// Contract: the call is the kernel's last statement, in its body (not in a loop or branch); no
/// tile is made before it (scalars, buffers, mbarriers and descriptors are: gpu::alloc and
/// gpu::alloc_mbarriers must come before it). In a role, tiles are spread over the role's warps;
/// it uses the kernel's scalars, buffers, mbarriers and descriptors, assigns no Tile declared
/// outside it (UserError at the role; a Tile made in one role is not usable in another) and calls
/// no cuda_function (its __syncthreads() spans the CTA; UserError at the call). Roles share only
/// memory: they order their accesses to shared buffers with mbarriers - an arrive releases the
/// role's earlier accesses, a wait that sees the phase complete acquires them (docs/struct.md,
/// "Warp specialization"); gpu::sync() and the barriers the compiler inserts in a role are
/// barriers of its warps only (bar.sync with the role's thread count). An mbarrier's arrivals
/// count arrive statements: every arrive on one alloc_mbarriers array must come from roles of the
/// same number of warps (UserError at compile time on the GPU otherwise). Traced, the kernel's
/// mbarriers are checked: a wait on mbarriers nothing arrives on or copies to, and announced
/// transaction bytes that differ from the TMA copies' in the same block, are UserErrors at the
/// wait / the arrive_expect_tx.
/// GPU: one branch per role on the warp index, warp and thread indices rebased to the role,
/// setmaxnreg where asked (the roles' counts times their threads must fit in the registers the
/// program has at entry, .maxnreg times its threads, or setmaxnreg.inc would wait: UserError at
/// compile time otherwise). CPU backend and interpreter: the kernel runs on the interpreter, its
/// roles interleaved - each runs until it waits for an mbarrier phase not yet complete, then the
/// next runs; a wait no role can complete any more stops the kernel naming every role's wait
/// (where the GPU would hang).
inline void warp_specialize(std::initializer_list<Role> roles, loc_t l = loc_t::current()) {
  std::vector<tle::detail::RoleSpec> specs;
  for (const Role& r : roles) specs.push_back({r.num_warps, r.max_regs, r.body, r.loc});
  tle::detail::warp_specialize(specs, l);
}

/// A barrier of the program (CUDA's __syncthreads, FlagTree's CTA barrier): every memory access
/// the program made before it completes, and is visible to the program, before any after it.
/// Inside a gpu::warp_specialize role it is a barrier of the role's warps.
/// The compiler already orders the accesses it sees to shared buffers (see the top of this
/// file); sync() is for what it cannot see. On the CPU backend and in the interpreter programs
/// run their statements in order, and it does nothing.
inline void sync(loc_t l = loc_t::current()) { tle::detail::barrier(l); }

}  // namespace tle::gpu
