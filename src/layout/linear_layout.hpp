// src/layout/linear_layout.hpp - linear layouts over GF(2): the one representation of every GPU
// register layout and every swizzled shared-memory layout in tle.
//
// The idea follows Triton's LinearLayout (include/triton/Tools/LinearLayout.h); the code is ours.
//
// A LinearLayout L maps named *input* dimensions to named *output* dimensions. Every dimension has
// a power-of-two size, so an index into it is a string of bits. L is linear over GF(2), with XOR as
// addition:
//
//     L(x ^ y) = L(x) ^ L(y)          (applied per output dimension)
//
// so L is fully described by its *bases*: for every input dimension and every bit i of it, the
// output coordinates of the input that has only that bit set (value 1 << i). Applying L XORs the
// bases of the set bits together.
//
// Register layouts ("distributed" layouts) use the input dimensions
//     reg   - the register (value) index inside one thread
//     lane  - the thread index inside a warp (32 lanes)
//     warp  - the warp index inside a CTA
//     block - the CTA index inside a cluster (size 1 until clusters are used)
// and the output dimensions dim0, dim1, ... = the logical coordinates of the tile. Example: a
// [4,8] tile where each thread holds 2 consecutive elements of a row and a warp is 8 rows x 4
// threads (named_layouts.hpp: blocked({4,8}, {1,2}, {8,4}, {1,1}, {1,0})):
//
//     reg : 1 -> (0,1)
//     lane: 1 -> (0,2)  2 -> (0,4)  4 -> (1,0)  8 -> (2,0)  16 -> (0,0)   <- lane bit 4 broadcast
//
// so register 1 of lane 5 (= 0b00101: bits 0 and 2) holds (0,1)^(0,2)^(1,0) = (1,3), and lane 21
// (bits 0, 2, 4) holds the same element: the tile has 4 rows but the warp 8, so lanes 16..31
// replicate lanes 0..15.
//
// A zero basis means that flipping that input bit does not change the coordinate: the data is
// *replicated* (broadcast) across that bit. A layout that is not injective therefore holds copies;
// one that is not surjective leaves part of the tile uncovered. Shared-memory layouts use the
// logical coordinates dim0.. as inputs and one output dimension `offset` (the element offset in
// the buffer), so composing a shared layout after a register layout gives (reg,lane,warp,block) ->
// offset directly.
//
// Compared with CuTe (also see Triton's header comment): dimensions are named instead of
// numbered, there is no nesting, every size is a power of two, and layouts are runtime values
// that passes can build, compare and search - not C++ types.
//
// Errors: misuse (sizes that are not powers of two, bases out of range, composing layouts whose
// dimensions do not match, inverting a non-invertible layout) throws tle::InternalError: layouts
// are built by the compiler, never by users, so a bad layout is a bug in tle.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tle::layout {

// Names of the standard dimensions.
inline constexpr const char* kReg = "reg";
inline constexpr const char* kLane = "lane";
inline constexpr const char* kWarp = "warp";
inline constexpr const char* kBlock = "block";
inline constexpr const char* kOffset = "offset";
/// Lanes in a warp (NVIDIA).
inline constexpr int kWarpSize = 32;

/// "dim<i>": the name of logical tile dimension i.
std::string dim_name(int i);

/// A named dimension and its size (a power of two >= 1).
struct DimSize {
  std::string name;
  int32_t size = 1;
  bool operator==(const DimSize&) const = default;
};

/// True when v is a power of two (>= 1).
constexpr bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
/// log2 of a power of two.
int log2_exact(int64_t v);

struct ConversionPlan;

class LinearLayout {
 public:
  /// One output vector: a coordinate per output dimension, in output-dimension order.
  using Basis = std::vector<int32_t>;
  /// An input dimension: its name and one basis per bit (so its size is 1 << bases.size()).
  struct InDim {
    std::string name;
    std::vector<Basis> bases;
  };

  /// The empty layout: no input and no output dimensions (maps the single point to itself).
  LinearLayout() = default;
  /// Builds a layout from its bases. Every basis has one entry per output dimension, each entry in
  /// [0, size of that output dimension). Dimension names must be unique within inputs and within
  /// outputs; sizes must be powers of two; at most 63 input bits and 63 output bits in total.
  /// Throws InternalError otherwise.
  LinearLayout(std::vector<InDim> in_dims, std::vector<DimSize> out_dims);

  // ---- simple constructors -----------------------------------------------------------------
  /// in -> out, i -> i, both of size `size`.
  static LinearLayout identity_1d(int32_t size, const std::string& in, const std::string& out);
  /// in (size `size`) -> out (size `out_size`), everything -> 0: `size`-fold replication.
  static LinearLayout zeros_1d(int32_t size, const std::string& in, const std::string& out,
                               int32_t out_size = 1);
  /// in -> out, i -> i * stride; the output size is size * stride.
  static LinearLayout strided_1d(int32_t size, int32_t stride, const std::string& in,
                                 const std::string& out);
  /// The identity on the given dimensions (input names == output names).
  static LinearLayout identity(const std::vector<DimSize>& dims);

  // ---- dimensions --------------------------------------------------------------------------
  int num_in_dims() const { return static_cast<int>(ins_.size()); }
  int num_out_dims() const { return static_cast<int>(outs_.size()); }
  std::vector<DimSize> in_dims() const;                 ///< names and sizes, in order
  const std::vector<DimSize>& out_dims() const { return outs_; }
  std::vector<std::string> in_dim_names() const;
  std::vector<std::string> out_dim_names() const;
  bool has_in_dim(const std::string& name) const { return in_index(name) >= 0; }
  bool has_out_dim(const std::string& name) const { return out_index(name) >= 0; }
  /// Size of an input dimension; 1 for a dimension the layout does not have.
  int32_t in_dim_size(const std::string& name) const;
  int in_dim_bits(const std::string& name) const;       ///< log2(in_dim_size)
  /// Size of an output dimension; 1 for a dimension the layout does not have.
  int32_t out_dim_size(const std::string& name) const;
  int out_dim_bits(const std::string& name) const;
  int total_in_bits() const { return total_in_bits_; }
  int total_out_bits() const { return total_out_bits_; }
  int64_t total_in_size() const { return int64_t{1} << total_in_bits_; }
  int64_t total_out_size() const { return int64_t{1} << total_out_bits_; }
  /// Registers per thread / lanes / warps / blocks (1 when the dimension is absent).
  int32_t num_regs() const { return in_dim_size(kReg); }
  int32_t num_lanes() const { return in_dim_size(kLane); }
  int32_t num_warps() const { return in_dim_size(kWarp); }
  int32_t num_blocks() const { return in_dim_size(kBlock); }
  /// The bases of input dimension `in` (one per bit); throws if the layout has no such dimension.
  const std::vector<Basis>& bases(const std::string& in) const;
  /// The basis of bit `bit` of input dimension `in`.
  const Basis& basis(const std::string& in, int bit) const;

  // ---- evaluation --------------------------------------------------------------------------
  /// Applies the layout. `in` has one index per input dimension, in input-dimension order; the
  /// result has one coordinate per output dimension, in output-dimension order. Throws if an index
  /// is out of range.
  std::vector<int32_t> apply(const std::vector<int32_t>& in) const;
  /// Named form: input dimensions not listed are 0; every listed name must be an input dimension.
  /// Returns (output name, coordinate) in output-dimension order.
  std::vector<std::pair<std::string, int32_t>> apply_named(
      const std::vector<std::pair<std::string, int32_t>>& in) const;
  /// Flat form: the inputs packed into one integer (first input dimension in the low bits), the
  /// outputs packed the same way (first output dimension in the low bits).
  uint64_t apply_flat(uint64_t in) const;

  // ---- algebra -----------------------------------------------------------------------------
  /// Product (Triton's operator*). Input dimensions present in both are concatenated, `other`'s
  /// bits above this layout's; output dimensions present in both are concatenated the same way
  /// (other's coordinates are scaled by this layout's size of that dimension, i.e. `other` is the
  /// more major part). On disjoint dimensions this is the block-diagonal (direct) product. The
  /// result lists this layout's dimensions first, then `other`'s new ones.
  LinearLayout operator*(const LinearLayout& other) const;
  LinearLayout& operator*=(const LinearLayout& other) { return *this = *this * other; }
  /// this ∘ inner: x -> this(inner(x)). Every output dimension of `inner` must be an input
  /// dimension of this layout, of at least the same size. The result has inner's inputs and this
  /// layout's outputs.
  LinearLayout compose(const LinearLayout& inner) const;
  /// The inverse of a bijective layout (injective and surjective): inputs and outputs swap.
  /// Throws if the layout is not invertible.
  LinearLayout invert() const;
  /// A right inverse of a surjective layout: P with this(P(y)) == y for every y. Input bits that
  /// are free (replicated, see free_variable_masks) are chosen 0, i.e. P picks the copy with the
  /// lowest register / lane / warp bits. Equals invert() for a bijective layout. Throws if the
  /// layout is not surjective.
  LinearLayout pseudo_invert() const;
  /// C = outer^-1 ∘ this: maps this layout's inputs to `outer`'s inputs such that
  /// outer(C(x)) == this(x) for every x (free bits of `outer` chosen 0, as pseudo_invert).
  /// Both layouts must have the same output dimensions (names and sizes) and the image of this
  /// layout must lie in the image of `outer`. This is the "where does my element live in the
  /// other layout" map that conversions need.
  LinearLayout invert_and_compose(const LinearLayout& outer) const;
  /// The restriction to the listed input and output dimensions (other inputs are fixed to 0,
  /// other outputs dropped). Listed names must exist; dimension order is kept.
  LinearLayout sublayout(const std::vector<std::string>& ins,
                         const std::vector<std::string>& outs) const;
  /// Reinterprets the outputs: flattens them row-major (the last output dimension is the most
  /// minor) and splits the flat index into `new_outs`, also row-major. Total sizes must match.
  LinearLayout reshape_outs(const std::vector<DimSize>& new_outs) const;
  /// Reorders the output dimensions (names kept); `order` is a permutation of out_dim_names().
  LinearLayout transpose_outs(const std::vector<std::string>& order) const;
  /// Reorders the input dimensions (names kept); `order` is a permutation of in_dim_names().
  LinearLayout transpose_ins(const std::vector<std::string>& order) const;
  /// Renames the output dimensions (same count, new names unique).
  LinearLayout rename_outs(const std::vector<std::string>& names) const;
  /// Renames one input dimension.
  LinearLayout rename_in(const std::string& from, const std::string& to) const;
  /// Adds an input dimension of size 1 when absent (keeps the layout otherwise).
  LinearLayout with_in_dim(const std::string& name) const;
  /// Replaces the bases of one input dimension (which must exist, or is appended).
  LinearLayout with_bases(const std::string& in, std::vector<Basis> bases) const;

  // ---- properties --------------------------------------------------------------------------
  /// Rank of the map over GF(2) (log2 of the number of distinct outputs).
  int rank() const;
  /// No two inputs map to the same output (no replication).
  bool is_injective() const { return rank() == total_in_bits_; }
  /// Every output is reached (the layout covers the whole tile / buffer).
  bool is_surjective() const { return rank() == total_out_bits_; }
  bool is_invertible() const { return is_injective() && is_surjective(); }
  /// For each input dimension (in order), a mask of its *free* bits: bits whose basis is a
  /// combination of the bases of earlier bits (inputs in order, low bits first). Flipping free
  /// bits together with suitable earlier bits leaves the output unchanged; the number of copies of
  /// every element is 2^(number of free bits). For layouts built from power-of-two strides (all
  /// named layouts) the free bits are exactly the zero bases (see zero_basis_mask).
  std::vector<std::pair<std::string, uint32_t>> free_variable_masks() const;
  /// Mask of the free bits of one input dimension (0 when absent).
  uint32_t free_variable_mask(const std::string& in) const;
  /// Mask of the bits of `in` whose basis is all-zero: the data is broadcast across them.
  uint32_t zero_basis_mask(const std::string& in) const;
  /// Same dimensions (names, sizes, order) and same bases.
  bool operator==(const LinearLayout& o) const;
  bool operator!=(const LinearLayout& o) const { return !(*this == o); }
  /// Same map, ignoring the order of dimensions and input dimensions of size 1 (absent == size 1).
  bool equivalent(const LinearLayout& o) const;
  /// Readable multi-line dump: the dimensions, then the bases of each input bit, low bit first
  /// ("-" for a dimension of size 1). The example layout at the top of this file prints as
  ///   [reg:2, lane:32, warp:1, block:1] -> [dim0:4, dim1:8]
  ///     reg  : (0,1)
  ///     lane : (0,2) (0,4) (1,0) (2,0) (0,0)
  ///     warp : -
  ///     block: -
  std::string str() const;

 private:
  struct In {
    DimSize dim;
    std::vector<Basis> bases;
  };
  std::vector<In> ins_;
  std::vector<DimSize> outs_;
  std::vector<int> in_off_, out_off_;  // flat bit offsets
  int total_in_bits_ = 0, total_out_bits_ = 0;

  int in_index(const std::string& name) const;
  int out_index(const std::string& name) const;
  void finish();  // validate + compute offsets
  uint64_t pack_out(const Basis& b) const;
  Basis unpack_out(uint64_t v) const;
  /// The flat output vector of every input bit, in flat input-bit order.
  std::vector<uint64_t> columns() const;
  /// Builds the layout (outs_ as inputs) -> (ins_ as outputs) whose basis for flat output bit j is
  /// given as a flat input mask.
  LinearLayout from_flat_inputs(const std::vector<DimSize>& new_ins, const std::vector<uint64_t>& cols,
                                const std::vector<DimSize>& new_outs) const;
  friend ConversionPlan plan_conversion(const LinearLayout& src, const LinearLayout& dst);
};

// ---- conversions ---------------------------------------------------------------------------

/// What converting a distributed tile from one register layout to another costs, cheapest first.
enum class ConversionKind : uint8_t {
  Identity,         ///< the layouts are the same map: nothing to do
  RegisterPermute,  ///< every thread already holds what it needs: rename/copy registers
  WarpShuffle,      ///< data moves only between lanes of the same warp: shuffles
  SharedMemory,     ///< data moves between warps of a CTA: store + barrier + load through smem
  CrossCta,         ///< data moves between CTAs of a cluster: distributed shared memory
};
const char* name(ConversionKind k);

/// The result of plan_conversion.
struct ConversionPlan {
  ConversionKind kind = ConversionKind::Identity;
  /// Maps a destination position (reg, lane, warp, block) to a source position (reg, lane, warp,
  /// block) holding the same element: src(dst_to_src(x)) == dst(x) for every x. It respects the
  /// kind: for RegisterPermute it keeps lane, warp and block (so each destination register reads
  /// a source register of the same thread); for WarpShuffle it keeps warp and block (so the
  /// source lane is a linear function of the destination reg/lane bits, ready for shfl); for
  /// SharedMemory it keeps block. Inputs and outputs are exactly reg, lane, warp, block.
  LinearLayout dst_to_src;
};

/// Classifies the conversion of a tile from register layout `src` to register layout `dst`
/// (same logical shape) purely from the two maps: a level (lane / warp / block) can be kept if
/// every destination position finds its element in the source at the same position of that
/// level and all coarser ones. Missing input dimensions count as size 1. Throws InternalError
/// if the output dimensions differ, if an input dimension is not one of reg/lane/warp/block, if the
/// lane, warp or block counts differ (one kernel has one CTA shape), or if `dst` needs an element
/// that `src` does not hold. The register counts may differ.
ConversionPlan plan_conversion(const LinearLayout& src, const LinearLayout& dst);

/// How many leading register bases of `l` step along output dim `dim` only, by 1, 2, 4, ...
/// (basis b is 2^b along `dim` and 0 along every other dim): registers 0 .. 2^n - 1 then hold
/// consecutive elements along `dim`. 0 when `l` has no register dim.
int consecutive_reg_bits(const LinearLayout& l, int dim);
/// The output dim along which registers 0 .. vec-1 of `l` hold consecutive elements (vec a power
/// of two >= 2), or -1 when there is none. Vector loads/stores, cp.async copies and shared-memory
/// runs are decided with it.
int vector_dim(const LinearLayout& l, int64_t vec);
/// Elements per access of a memory op whose `vec` attribute is `vec` in layout `l`: vec when
/// registers 0 .. vec-1 hold consecutive elements (vector_dim), else 1. The lowering of loads and
/// stores and the pipelining pass (copies of a load's own registers) both use it.
int64_t access_vec(const LinearLayout& l, int64_t vec);
/// The dim along which a cp.async-pipelined load of a 2-D tile (`shape`, elements of `elem_bytes`
/// bytes, layout `l`) copies vectors of `vec` elements, or -1 when it cannot be copied so: each
/// copy is 4, 8 or 16 bytes, registers 0 .. vec-1 are consecutive along the dim (vector_dim), and
/// both dims hold at least 8 elements (the swizzled buffer's rows). The pipeline pass marks loads
/// with it and the lowering sizes their buffers with it, so the two cannot disagree.
int cp_async_dim(const LinearLayout& l, const std::vector<int64_t>& shape, int64_t vec, int elem_bytes);

}  // namespace tle::layout
