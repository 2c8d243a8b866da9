// src/layout/linear_layout.cpp - linear layouts over GF(2). See linear_layout.hpp.
//
// Internally every layout is also viewed as a bit matrix: input bits are numbered "flat" (the
// first input dimension's bits first, low bit first) and so are output bits. A column is the flat
// output vector of one input bit, so at most 63 bits on either side fit one uint64_t. All the
// linear algebra (rank, inverse, solving) is Gaussian elimination on these columns.
#include "layout/linear_layout.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <sstream>

#include "tle/error.hpp"

namespace tle::layout {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw InternalError("layout: " + msg); }

constexpr int kMaxBits = 63;   // total flat bits on either side
constexpr int kMaxDimBits = 30;  // one dimension: coordinates fit an int32_t

/// A growing set of GF(2) vectors in reduced form: every stored vector has a distinct leading
/// (highest) bit. Each vector remembers which combination of the inserted originals it is, so a
/// solve returns the combination of originals that produces the target.
class Gf2Elimination {
 public:
  /// Adds v (the original vectors combined by `comb`); false when v depends on earlier ones.
  bool insert(uint64_t v, uint64_t comb) {
    for (int b = 63; b >= 0; --b) {
      if (!((v >> b) & 1)) continue;
      if (vec_[b] == 0) {
        vec_[b] = v;
        comb_[b] = comb;
        ++rank_;
        return true;
      }
      v ^= vec_[b];
      comb ^= comb_[b];
    }
    return false;
  }
  /// The combination of originals whose XOR is y, or nothing if y is outside their span.
  /// Dependent originals never appear in the result (they are "free" and chosen 0).
  std::optional<uint64_t> solve(uint64_t y) const {
    uint64_t comb = 0;
    for (int b = 63; b >= 0; --b) {
      if (!((y >> b) & 1)) continue;
      if (vec_[b] == 0) return std::nullopt;
      y ^= vec_[b];
      comb ^= comb_[b];
    }
    return comb;
  }
  int rank() const { return rank_; }

 private:
  std::array<uint64_t, 64> vec_{}, comb_{};
  int rank_ = 0;
};

std::string join_dims(const std::vector<DimSize>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].name + ":" + std::to_string(dims[i].size);
  }
  return s + "]";
}

void check_permutation(const std::vector<std::string>& have, const std::vector<std::string>& order,
                       const char* what) {
  std::vector<std::string> a = have, b = order;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b) {
    std::string msg = std::string(what) + ": expected a permutation of {";
    for (size_t i = 0; i < have.size(); ++i) {
      if (i) msg += ',';
      msg += have[i];
    }
    fail(msg + "}");
  }
}

}  // namespace

std::string dim_name(int i) { return "dim" + std::to_string(i); }

int log2_exact(int64_t v) {
  if (!is_pow2(v)) fail("expected a power of two, got " + std::to_string(v));
  int b = 0;
  while ((int64_t{1} << b) < v) ++b;
  return b;
}

// ---- construction ------------------------------------------------------------------------------

LinearLayout::LinearLayout(std::vector<InDim> in_dims, std::vector<DimSize> out_dims)
    : outs_(std::move(out_dims)) {
  for (auto& d : in_dims) {
    if (d.bases.size() > static_cast<size_t>(kMaxDimBits))
      fail("input dimension '" + d.name + "' has too many bits");
    ins_.push_back(In{DimSize{d.name, int32_t{1} << d.bases.size()}, std::move(d.bases)});
  }
  finish();
}

void LinearLayout::finish() {
  std::set<std::string> names;
  for (auto& in : ins_)
    if (!names.insert(in.dim.name).second) fail("duplicate input dimension '" + in.dim.name + "'");
  names.clear();
  for (auto& o : outs_) {
    if (!names.insert(o.name).second) fail("duplicate output dimension '" + o.name + "'");
    if (!is_pow2(o.size) || o.size > (int32_t{1} << kMaxDimBits))
      fail("output dimension '" + o.name + "' has size " + std::to_string(o.size) +
           ", not a power of two (<= 2^30)");
  }
  in_off_.clear();
  out_off_.clear();
  total_in_bits_ = total_out_bits_ = 0;
  for (auto& in : ins_) {
    in_off_.push_back(total_in_bits_);
    total_in_bits_ += static_cast<int>(in.bases.size());
    for (size_t i = 0; i < in.bases.size(); ++i) {
      const Basis& b = in.bases[i];
      if (b.size() != outs_.size())
        fail("basis " + std::to_string(i) + " of '" + in.dim.name + "' has " +
             std::to_string(b.size()) + " entries for " + std::to_string(outs_.size()) +
             " output dimensions");
      for (size_t k = 0; k < b.size(); ++k)
        if (b[k] < 0 || b[k] >= outs_[k].size)
          fail("basis " + std::to_string(i) + " of '" + in.dim.name + "' has coordinate " +
               std::to_string(b[k]) + " outside output dimension '" + outs_[k].name + "' of size " +
               std::to_string(outs_[k].size));
    }
  }
  for (auto& o : outs_) {
    out_off_.push_back(total_out_bits_);
    total_out_bits_ += log2_exact(o.size);
  }
  if (total_in_bits_ > kMaxBits || total_out_bits_ > kMaxBits)
    fail("layout too large (" + std::to_string(total_in_bits_) + " input bits, " +
         std::to_string(total_out_bits_) + " output bits; at most 63)");
}

LinearLayout LinearLayout::identity_1d(int32_t size, const std::string& in, const std::string& out) {
  int bits = log2_exact(size);
  std::vector<Basis> bases;
  for (int i = 0; i < bits; ++i) bases.push_back({int32_t{1} << i});
  return LinearLayout({{in, std::move(bases)}}, {{out, size}});
}

LinearLayout LinearLayout::zeros_1d(int32_t size, const std::string& in, const std::string& out,
                                    int32_t out_size) {
  int bits = log2_exact(size);
  return LinearLayout({{in, std::vector<Basis>(bits, Basis{0})}}, {{out, out_size}});
}

LinearLayout LinearLayout::strided_1d(int32_t size, int32_t stride, const std::string& in,
                                      const std::string& out) {
  int bits = log2_exact(size);
  log2_exact(stride);
  std::vector<Basis> bases;
  for (int i = 0; i < bits; ++i) bases.push_back({stride << i});
  return LinearLayout({{in, std::move(bases)}}, {{out, size * stride}});
}

LinearLayout LinearLayout::identity(const std::vector<DimSize>& dims) {
  std::vector<InDim> ins;
  for (size_t k = 0; k < dims.size(); ++k) {
    InDim d{dims[k].name, {}};
    for (int i = 0; i < log2_exact(dims[k].size); ++i) {
      Basis b(dims.size(), 0);
      b[k] = int32_t{1} << i;
      d.bases.push_back(std::move(b));
    }
    ins.push_back(std::move(d));
  }
  return LinearLayout(std::move(ins), dims);
}

// ---- dimensions --------------------------------------------------------------------------------

int LinearLayout::in_index(const std::string& name) const {
  for (size_t i = 0; i < ins_.size(); ++i)
    if (ins_[i].dim.name == name) return static_cast<int>(i);
  return -1;
}
int LinearLayout::out_index(const std::string& name) const {
  for (size_t i = 0; i < outs_.size(); ++i)
    if (outs_[i].name == name) return static_cast<int>(i);
  return -1;
}
std::vector<DimSize> LinearLayout::in_dims() const {
  std::vector<DimSize> r;
  for (auto& in : ins_) r.push_back(in.dim);
  return r;
}
std::vector<std::string> LinearLayout::in_dim_names() const {
  std::vector<std::string> r;
  for (auto& in : ins_) r.push_back(in.dim.name);
  return r;
}
std::vector<std::string> LinearLayout::out_dim_names() const {
  std::vector<std::string> r;
  for (auto& o : outs_) r.push_back(o.name);
  return r;
}
int32_t LinearLayout::in_dim_size(const std::string& name) const {
  int i = in_index(name);
  return i < 0 ? 1 : ins_[i].dim.size;
}
int LinearLayout::in_dim_bits(const std::string& name) const { return log2_exact(in_dim_size(name)); }
int32_t LinearLayout::out_dim_size(const std::string& name) const {
  int i = out_index(name);
  return i < 0 ? 1 : outs_[i].size;
}
int LinearLayout::out_dim_bits(const std::string& name) const { return log2_exact(out_dim_size(name)); }

const std::vector<LinearLayout::Basis>& LinearLayout::bases(const std::string& in) const {
  int i = in_index(in);
  if (i < 0) fail("no input dimension '" + in + "' in " + str());
  return ins_[i].bases;
}
const LinearLayout::Basis& LinearLayout::basis(const std::string& in, int bit) const {
  const auto& b = bases(in);
  if (bit < 0 || bit >= static_cast<int>(b.size()))
    fail("input dimension '" + in + "' has no bit " + std::to_string(bit));
  return b[bit];
}

// ---- flat views --------------------------------------------------------------------------------

uint64_t LinearLayout::pack_out(const Basis& b) const {
  uint64_t v = 0;
  for (size_t k = 0; k < outs_.size(); ++k) v |= static_cast<uint64_t>(b[k]) << out_off_[k];
  return v;
}
LinearLayout::Basis LinearLayout::unpack_out(uint64_t v) const {
  Basis b(outs_.size());
  for (size_t k = 0; k < outs_.size(); ++k)
    b[k] = static_cast<int32_t>((v >> out_off_[k]) & (static_cast<uint64_t>(outs_[k].size) - 1));
  return b;
}
std::vector<uint64_t> LinearLayout::columns() const {
  std::vector<uint64_t> cols;
  for (auto& in : ins_)
    for (auto& b : in.bases) cols.push_back(pack_out(b));
  return cols;
}

LinearLayout LinearLayout::from_flat_inputs(const std::vector<DimSize>& new_ins,
                                            const std::vector<uint64_t>& cols,
                                            const std::vector<DimSize>& new_outs) const {
  // new_outs are this layout's input dimensions: unpack a flat input mask into them.
  std::vector<InDim> ins;
  size_t j = 0;
  for (auto& d : new_ins) {
    InDim in{d.name, {}};
    for (int i = 0; i < log2_exact(d.size); ++i, ++j) {
      Basis b(ins_.size());
      for (size_t k = 0; k < ins_.size(); ++k)
        b[k] = static_cast<int32_t>((cols[j] >> in_off_[k]) &
                                    (static_cast<uint64_t>(ins_[k].dim.size) - 1));
      in.bases.push_back(std::move(b));
    }
    ins.push_back(std::move(in));
  }
  return LinearLayout(std::move(ins), new_outs);
}

// ---- evaluation --------------------------------------------------------------------------------

std::vector<int32_t> LinearLayout::apply(const std::vector<int32_t>& in) const {
  if (in.size() != ins_.size())
    fail("apply: " + std::to_string(in.size()) + " indices for " + std::to_string(ins_.size()) +
         " input dimensions of " + join_dims(in_dims()));
  std::vector<int32_t> out(outs_.size(), 0);
  for (size_t d = 0; d < ins_.size(); ++d) {
    if (in[d] < 0 || in[d] >= ins_[d].dim.size)
      fail("apply: index " + std::to_string(in[d]) + " outside input dimension '" +
           ins_[d].dim.name + "' of size " + std::to_string(ins_[d].dim.size));
    for (size_t i = 0; i < ins_[d].bases.size(); ++i)
      if ((in[d] >> i) & 1)
        for (size_t k = 0; k < outs_.size(); ++k) out[k] ^= ins_[d].bases[i][k];
  }
  return out;
}

std::vector<std::pair<std::string, int32_t>> LinearLayout::apply_named(
    const std::vector<std::pair<std::string, int32_t>>& in) const {
  std::vector<int32_t> pos(ins_.size(), 0);
  for (auto& [name, v] : in) {
    int i = in_index(name);
    if (i < 0) fail("apply: no input dimension '" + name + "' in " + join_dims(in_dims()));
    pos[i] = v;
  }
  std::vector<int32_t> out = apply(pos);
  std::vector<std::pair<std::string, int32_t>> r;
  for (size_t k = 0; k < outs_.size(); ++k) r.emplace_back(outs_[k].name, out[k]);
  return r;
}

uint64_t LinearLayout::apply_flat(uint64_t in) const {
  if (total_in_bits_ < 64 && (in >> total_in_bits_) != 0) fail("apply_flat: input out of range");
  uint64_t out = 0;
  int j = 0;
  for (auto& d : ins_)
    for (auto& b : d.bases) {
      if ((in >> j) & 1) out ^= pack_out(b);
      ++j;
    }
  return out;
}

// ---- algebra -----------------------------------------------------------------------------------

LinearLayout LinearLayout::operator*(const LinearLayout& other) const {
  std::vector<DimSize> outs = outs_;
  for (auto& o : other.outs_) {
    int k = out_index(o.name);
    if (k >= 0)
      outs[k].size = static_cast<int32_t>(int64_t{outs[k].size} * o.size);
    else
      outs.push_back(o);
  }
  auto find_out = [&](const std::string& n) {
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k].name == n) return k;
    return outs.size();
  };
  auto widen_mine = [&](const Basis& b) {
    Basis r(outs.size(), 0);
    for (size_t k = 0; k < outs_.size(); ++k) r[k] = b[k];
    return r;
  };
  auto widen_other = [&](const Basis& b) {
    Basis r(outs.size(), 0);
    for (size_t k = 0; k < other.outs_.size(); ++k)
      r[find_out(other.outs_[k].name)] = b[k] * out_dim_size(other.outs_[k].name);
    return r;
  };
  std::vector<InDim> ins;
  for (auto& in : ins_) {
    InDim d{in.dim.name, {}};
    for (auto& b : in.bases) d.bases.push_back(widen_mine(b));
    int j = other.in_index(in.dim.name);
    if (j >= 0)
      for (auto& b : other.ins_[j].bases) d.bases.push_back(widen_other(b));
    ins.push_back(std::move(d));
  }
  for (auto& in : other.ins_) {
    if (in_index(in.dim.name) >= 0) continue;
    InDim d{in.dim.name, {}};
    for (auto& b : in.bases) d.bases.push_back(widen_other(b));
    ins.push_back(std::move(d));
  }
  return LinearLayout(std::move(ins), std::move(outs));
}

LinearLayout LinearLayout::compose(const LinearLayout& inner) const {
  for (auto& o : inner.outs_) {
    int i = in_index(o.name);
    if (i < 0)
      fail("compose: output dimension '" + o.name + "' of the inner layout " +
           join_dims(inner.outs_) + " is not an input of the outer layout " + join_dims(in_dims()));
    if (o.size > ins_[i].dim.size)
      fail("compose: output dimension '" + o.name + "' of the inner layout has size " +
           std::to_string(o.size) + ", larger than the outer input size " +
           std::to_string(ins_[i].dim.size));
  }
  std::vector<InDim> ins;
  for (auto& in : inner.ins_) {
    InDim d{in.dim.name, {}};
    for (auto& b : in.bases) {
      std::vector<int32_t> pos(ins_.size(), 0);
      for (size_t k = 0; k < inner.outs_.size(); ++k) pos[in_index(inner.outs_[k].name)] = b[k];
      d.bases.push_back(apply(pos));
    }
    ins.push_back(std::move(d));
  }
  return LinearLayout(std::move(ins), outs_);
}

LinearLayout LinearLayout::invert() const {
  if (!is_invertible())
    fail(std::string("invert: the layout is not ") + (is_injective() ? "surjective" : "injective") +
         ":\n" + str());
  return pseudo_invert();
}

LinearLayout LinearLayout::pseudo_invert() const {
  Gf2Elimination elim;
  std::vector<uint64_t> cols = columns();
  for (size_t j = 0; j < cols.size(); ++j) elim.insert(cols[j], uint64_t{1} << j);
  if (elim.rank() != total_out_bits_) fail("pseudo_invert: the layout is not surjective:\n" + str());
  std::vector<uint64_t> inv;
  for (int j = 0; j < total_out_bits_; ++j) inv.push_back(*elim.solve(uint64_t{1} << j));
  return from_flat_inputs(outs_, inv, in_dims());
}

LinearLayout LinearLayout::invert_and_compose(const LinearLayout& outer) const {
  std::vector<std::string> mine = out_dim_names(), theirs = outer.out_dim_names();
  check_permutation(mine, theirs, "invert_and_compose: output dimensions differ");
  LinearLayout o = outer.transpose_outs(mine);
  if (o.outs_ != outs_)
    fail("invert_and_compose: output sizes differ: " + join_dims(outs_) + " vs " +
         join_dims(outer.outs_));
  Gf2Elimination elim;
  std::vector<uint64_t> ocols = o.columns();
  for (size_t j = 0; j < ocols.size(); ++j) elim.insert(ocols[j], uint64_t{1} << j);
  std::vector<uint64_t> cols;
  for (uint64_t c : columns()) {
    auto s = elim.solve(c);
    if (!s)
      fail("invert_and_compose: an output of\n" + str() + "is not produced by\n" + outer.str());
    cols.push_back(*s);
  }
  return o.from_flat_inputs(in_dims(), cols, o.in_dims());
}

LinearLayout LinearLayout::sublayout(const std::vector<std::string>& ins,
                                     const std::vector<std::string>& outs) const {
  for (auto& n : ins)
    if (in_index(n) < 0) fail("sublayout: no input dimension '" + n + "'");
  std::vector<size_t> keep;
  std::vector<DimSize> new_outs;
  for (auto& n : outs)
    if (out_index(n) < 0) fail("sublayout: no output dimension '" + n + "'");
  for (size_t k = 0; k < outs_.size(); ++k)
    if (std::find(outs.begin(), outs.end(), outs_[k].name) != outs.end()) {
      keep.push_back(k);
      new_outs.push_back(outs_[k]);
    }
  std::vector<InDim> new_ins;
  for (auto& in : ins_) {
    if (std::find(ins.begin(), ins.end(), in.dim.name) == ins.end()) continue;
    InDim d{in.dim.name, {}};
    for (auto& b : in.bases) {
      Basis nb;
      for (size_t k : keep) nb.push_back(b[k]);
      d.bases.push_back(std::move(nb));
    }
    new_ins.push_back(std::move(d));
  }
  return LinearLayout(std::move(new_ins), std::move(new_outs));
}

LinearLayout LinearLayout::reshape_outs(const std::vector<DimSize>& new_outs) const {
  int64_t total = 1;
  for (auto& d : new_outs) {
    if (!is_pow2(d.size)) fail("reshape_outs: size of '" + d.name + "' is not a power of two");
    total *= d.size;
  }
  if (total != total_out_size())
    fail("reshape_outs: " + join_dims(outs_) + " and " + join_dims(new_outs) +
         " have different total sizes");
  std::vector<InDim> ins;
  for (auto& in : ins_) {
    InDim d{in.dim.name, {}};
    for (auto& b : in.bases) {
      int64_t flat = 0;  // row-major: the last dimension is the most minor
      for (size_t k = 0; k < outs_.size(); ++k) flat = flat * outs_[k].size + b[k];
      Basis nb(new_outs.size());
      for (size_t k = new_outs.size(); k-- > 0;) {
        nb[k] = static_cast<int32_t>(flat % new_outs[k].size);
        flat /= new_outs[k].size;
      }
      d.bases.push_back(std::move(nb));
    }
    ins.push_back(std::move(d));
  }
  return LinearLayout(std::move(ins), new_outs);
}

LinearLayout LinearLayout::transpose_outs(const std::vector<std::string>& order) const {
  check_permutation(out_dim_names(), order, "transpose_outs");
  std::vector<int> idx;
  std::vector<DimSize> outs;
  for (auto& n : order) {
    idx.push_back(out_index(n));
    outs.push_back(outs_[idx.back()]);
  }
  std::vector<InDim> ins;
  for (auto& in : ins_) {
    InDim d{in.dim.name, {}};
    for (auto& b : in.bases) {
      Basis nb;
      for (int k : idx) nb.push_back(b[k]);
      d.bases.push_back(std::move(nb));
    }
    ins.push_back(std::move(d));
  }
  return LinearLayout(std::move(ins), std::move(outs));
}

LinearLayout LinearLayout::transpose_ins(const std::vector<std::string>& order) const {
  check_permutation(in_dim_names(), order, "transpose_ins");
  std::vector<InDim> ins;
  for (auto& n : order) ins.push_back({n, ins_[in_index(n)].bases});
  return LinearLayout(std::move(ins), outs_);
}

LinearLayout LinearLayout::rename_outs(const std::vector<std::string>& names) const {
  if (names.size() != outs_.size()) fail("rename_outs: wrong number of names");
  LinearLayout r = *this;
  for (size_t k = 0; k < names.size(); ++k) r.outs_[k].name = names[k];
  r.finish();
  return r;
}

LinearLayout LinearLayout::rename_in(const std::string& from, const std::string& to) const {
  int i = in_index(from);
  if (i < 0) fail("rename_in: no input dimension '" + from + "'");
  LinearLayout r = *this;
  r.ins_[i].dim.name = to;
  r.finish();
  return r;
}

LinearLayout LinearLayout::with_in_dim(const std::string& name) const {
  if (has_in_dim(name)) return *this;
  LinearLayout r = *this;
  r.ins_.push_back(In{DimSize{name, 1}, {}});
  r.finish();
  return r;
}

LinearLayout LinearLayout::with_bases(const std::string& in, std::vector<Basis> bases) const {
  if (bases.size() > static_cast<size_t>(kMaxDimBits)) fail("with_bases: too many bits");
  LinearLayout r = *this;
  int i = in_index(in);
  In d{DimSize{in, int32_t{1} << bases.size()}, std::move(bases)};
  if (i < 0)
    r.ins_.push_back(std::move(d));
  else
    r.ins_[i] = std::move(d);
  r.finish();
  return r;
}

// ---- properties --------------------------------------------------------------------------------

int LinearLayout::rank() const {
  Gf2Elimination elim;
  for (uint64_t c : columns()) elim.insert(c, 0);
  return elim.rank();
}

std::vector<std::pair<std::string, uint32_t>> LinearLayout::free_variable_masks() const {
  Gf2Elimination elim;
  std::vector<std::pair<std::string, uint32_t>> r;
  for (auto& in : ins_) {
    uint32_t mask = 0;
    for (size_t i = 0; i < in.bases.size(); ++i)
      if (!elim.insert(pack_out(in.bases[i]), 0)) mask |= uint32_t{1} << i;
    r.emplace_back(in.dim.name, mask);
  }
  return r;
}

uint32_t LinearLayout::free_variable_mask(const std::string& in) const {
  for (auto& [n, m] : free_variable_masks())
    if (n == in) return m;
  return 0;
}

uint32_t LinearLayout::zero_basis_mask(const std::string& in) const {
  int d = in_index(in);
  if (d < 0) return 0;
  uint32_t mask = 0;
  for (size_t i = 0; i < ins_[d].bases.size(); ++i)
    if (std::all_of(ins_[d].bases[i].begin(), ins_[d].bases[i].end(), [](int32_t v) { return v == 0; }))
      mask |= uint32_t{1} << i;
  return mask;
}

bool LinearLayout::operator==(const LinearLayout& o) const {
  if (outs_ != o.outs_ || ins_.size() != o.ins_.size()) return false;
  for (size_t i = 0; i < ins_.size(); ++i)
    if (ins_[i].dim != o.ins_[i].dim || ins_[i].bases != o.ins_[i].bases) return false;
  return true;
}

bool LinearLayout::equivalent(const LinearLayout& o) const {
  std::vector<std::string> mine = out_dim_names(), theirs = o.out_dim_names();
  std::sort(mine.begin(), mine.end());
  std::sort(theirs.begin(), theirs.end());
  if (mine != theirs) return false;
  LinearLayout t = o.transpose_outs(out_dim_names());
  if (t.outs_ != outs_) return false;
  auto big = [](const LinearLayout& l) {
    std::vector<std::string> r;
    for (auto& in : l.ins_)
      if (in.dim.size > 1) r.push_back(in.dim.name);
    std::sort(r.begin(), r.end());
    return r;
  };
  if (big(*this) != big(t)) return false;
  for (auto& in : ins_)
    if (in.dim.size > 1 && in.bases != t.bases(in.dim.name)) return false;
  return true;
}

std::string LinearLayout::str() const {
  std::ostringstream os;
  os << join_dims(in_dims()) << " -> " << join_dims(outs_) << "\n";
  size_t w = 0;
  for (auto& in : ins_) w = std::max(w, in.dim.name.size());
  for (auto& in : ins_) {
    os << "  " << in.dim.name << std::string(w - in.dim.name.size(), ' ') << ":";
    if (in.bases.empty()) os << " -";
    for (auto& b : in.bases) {
      os << " (";
      for (size_t k = 0; k < b.size(); ++k) os << (k ? "," : "") << b[k];
      os << ")";
    }
    os << "\n";
  }
  return os.str();
}

// ---- conversions -------------------------------------------------------------------------------

const char* name(ConversionKind k) {
  switch (k) {
    case ConversionKind::Identity: return "identity";
    case ConversionKind::RegisterPermute: return "register_permute";
    case ConversionKind::WarpShuffle: return "warp_shuffle";
    case ConversionKind::SharedMemory: return "shared_memory";
    case ConversionKind::CrossCta: return "cross_cta";
  }
  return "?";
}

// A position at level L (0 reg, 1 lane, 2 warp, 3 block) can be *kept* by a conversion when every
// destination element is found in the source at the same coordinates of level L and all coarser
// levels. By linearity it suffices to check the destination's bases: a basis of a kept level must
// satisfy dst(e) ^ src(e) ∈ span(src bases of the moved levels); a basis of a moved level must
// satisfy dst(e) ∈ span(src bases of the moved levels). Each solve also yields the source
// position, so the map dst -> src comes out of the same elimination.
ConversionPlan plan_conversion(const LinearLayout& src_in, const LinearLayout& dst_in) {
  static const std::vector<std::string> kLevels = {kReg, kLane, kWarp, kBlock};
  auto normalize = [](const LinearLayout& l, const char* which) {
    for (auto& n : l.in_dim_names())
      if (std::find(kLevels.begin(), kLevels.end(), n) == kLevels.end())
        fail(std::string("plan_conversion: ") + which + " layout has input dimension '" + n +
             "'; expected only reg, lane, warp, block");
    LinearLayout r = l;
    for (auto& n : kLevels) r = r.with_in_dim(n);
    return r.transpose_ins(kLevels);
  };
  LinearLayout src = normalize(src_in, "source");
  LinearLayout dst = normalize(dst_in, "destination");
  {
    std::vector<std::string> a = src.out_dim_names(), b = dst.out_dim_names();
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) fail("plan_conversion: the layouts have different output dimensions:\n" + src.str() + dst.str());
  }
  dst = dst.transpose_outs(src.out_dim_names());
  if (dst.out_dims() != src.out_dims())
    fail("plan_conversion: the layouts cover different shapes:\n" + src.str() + dst.str());

  for (int l = 1; l < 4; ++l)
    if (src.in_dim_size(kLevels[l]) != dst.in_dim_size(kLevels[l]))
      fail("plan_conversion: the layouts are for different numbers of " + kLevels[l] + "s (" +
           std::to_string(src.in_dim_size(kLevels[l])) + " vs " +
           std::to_string(dst.in_dim_size(kLevels[l])) + ")");
  if (src == dst)
    return {ConversionKind::Identity, LinearLayout::identity(src.in_dims())};

  std::vector<uint64_t> scols = src.columns(), dcols = dst.columns();
  static const ConversionKind kinds[] = {ConversionKind::RegisterPermute, ConversionKind::WarpShuffle,
                                         ConversionKind::SharedMemory, ConversionKind::CrossCta};
  for (int moved = 1; moved <= 4; ++moved) {  // levels [0, moved) may move
    bool ok = true;
    Gf2Elimination elim;
    for (int l = 0; l < moved; ++l)
      for (int i = 0; i < src.in_dim_bits(kLevels[l]); ++i) {
        int j = src.in_off_[l] + i;
        elim.insert(scols[j], uint64_t{1} << j);
      }
    std::vector<uint64_t> cols;
    for (int l = 0; l < 4 && ok; ++l)
      for (int i = 0; i < dst.in_dim_bits(kLevels[l]) && ok; ++i) {
        uint64_t y = dcols[dst.in_off_[l] + i];
        uint64_t keep = 0;
        if (l >= moved) {
          int j = src.in_off_[l] + i;
          y ^= scols[j];
          keep = uint64_t{1} << j;
        }
        auto s = elim.solve(y);
        if (!s) ok = false;
        else cols.push_back(*s | keep);
      }
    if (ok)
      return {kinds[moved - 1], src.from_flat_inputs(dst.in_dims(), cols, src.in_dims())};
  }
  fail("plan_conversion: the destination needs elements the source does not hold:\nsource " +
       src.str() + "destination " + dst.str());
}

int consecutive_reg_bits(const LinearLayout& l, int dim) {
  if (!l.has_in_dim(kReg)) return 0;
  const auto& rb = l.bases(kReg);
  int n = 0;
  for (; n < static_cast<int>(rb.size()); ++n) {
    bool ok = rb[n][static_cast<size_t>(dim)] == (int32_t{1} << n);
    for (size_t k = 0; k < rb[n].size(); ++k) ok = ok && (static_cast<int>(k) == dim || rb[n][k] == 0);
    if (!ok) break;
  }
  return n;
}

int vector_dim(const LinearLayout& l, int64_t vec) {
  if (vec < 2 || !is_pow2(vec) || !l.has_in_dim(kReg) || l.bases(kReg).empty()) return -1;
  const auto& b0 = l.bases(kReg)[0];
  for (size_t d = 0; d < b0.size(); ++d)
    if (b0[d] == 1) return consecutive_reg_bits(l, static_cast<int>(d)) >= log2_exact(vec) ? static_cast<int>(d) : -1;
  return -1;
}

int64_t access_vec(const LinearLayout& l, int64_t vec) { return vec > 1 && vector_dim(l, vec) >= 0 ? vec : 1; }

int cp_async_dim(const LinearLayout& l, const std::vector<int64_t>& shape, int64_t vec, int elem_bytes) {
  const int64_t bytes = vec * elem_bytes;
  if (shape.size() != 2 || (bytes != 4 && bytes != 8 && bytes != 16)) return -1;
  const int d = vector_dim(l, vec);
  if (d < 0 || shape[static_cast<size_t>(d)] < 8 || shape[static_cast<size_t>(1 - d)] < 8) return -1;
  return d;
}

}  // namespace tle::layout
