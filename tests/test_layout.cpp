// tests/test_layout.cpp - the GF(2) layout algebra and the named GPU layouts.
//
// Every reference table here is written independently of src/layout: the PTX ISA fragment
// formulas for mma.m16n8k* and ldmatrix, Triton's blocked / swizzled definitions in integer
// arithmetic, and brute-force enumeration for injectivity, coverage and conversion levels.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "layout/linear_layout.hpp"
#include "layout/named_layouts.hpp"
#include "tle/error.hpp"

using namespace tle;
using namespace tle::layout;

namespace {

using Coord = std::vector<int32_t>;
using Basis = LinearLayout::Basis;

/// Calls f(input indices, output coordinates) for every input of `l`.
void for_each_input(const LinearLayout& l, const std::function<void(const Coord&, const Coord&)>& f) {
  std::vector<DimSize> ins = l.in_dims();
  for (int64_t flat = 0; flat < l.total_in_size(); ++flat) {
    Coord in;
    int64_t rest = flat;
    for (auto& d : ins) {
      in.push_back(static_cast<int32_t>(rest % d.size));
      rest /= d.size;
    }
    f(in, l.apply(in));
  }
}

/// Number of distinct outputs, by enumeration.
size_t distinct_outputs(const LinearLayout& l) {
  std::set<Coord> seen;
  for_each_input(l, [&](const Coord&, const Coord& out) { seen.insert(out); });
  return seen.size();
}

int32_t pow2_below(std::mt19937& rng, int max_bits) {  // 2^k, k uniform in [0, max_bits]
  return int32_t{1} << std::uniform_int_distribution<int>(0, max_bits)(rng);
}

/// A random layout: `in` dims and `out` dims with the given bit counts and random bases.
LinearLayout random_layout(std::mt19937& rng, const std::vector<std::pair<std::string, int>>& in,
                           const std::vector<std::pair<std::string, int>>& out) {
  std::vector<LinearLayout::InDim> ins;
  std::vector<DimSize> outs;
  for (auto& [n, b] : out) outs.push_back({n, int32_t{1} << b});
  for (auto& [n, b] : in) {
    LinearLayout::InDim d{n, {}};
    for (int i = 0; i < b; ++i) {
      Basis v;
      for (auto& o : outs) v.push_back(std::uniform_int_distribution<int32_t>(0, o.size - 1)(rng));
      d.bases.push_back(v);
    }
    ins.push_back(d);
  }
  return LinearLayout(ins, outs);
}

/// A random bijection: the flat identity scrambled by elementary column operations.
LinearLayout random_invertible(std::mt19937& rng, const std::vector<std::pair<std::string, int>>& in,
                               const std::vector<std::pair<std::string, int>>& out) {
  int n = 0;
  for (auto& p : in) n += p.second;
  std::vector<uint64_t> cols(n);
  for (int j = 0; j < n; ++j) cols[j] = uint64_t{1} << j;
  std::uniform_int_distribution<int> pick(0, n - 1);
  for (int step = 0; step < 4 * n && n > 1; ++step) {
    int a = pick(rng), b = pick(rng);
    if (a == b) continue;
    if (step % 3 == 0) std::swap(cols[a], cols[b]);
    else cols[a] ^= cols[b];
  }
  std::vector<LinearLayout::InDim> ins;
  std::vector<DimSize> outs;
  for (auto& [nm, b] : out) outs.push_back({nm, int32_t{1} << b});
  int j = 0;
  for (auto& [nm, b] : in) {
    LinearLayout::InDim d{nm, {}};
    for (int i = 0; i < b; ++i, ++j) {
      Basis v;
      int off = 0;
      for (auto& [on, ob] : out) {
        v.push_back(static_cast<int32_t>((cols[j] >> off) & ((uint64_t{1} << ob) - 1)));
        off += ob;
      }
      d.bases.push_back(v);
    }
    ins.push_back(d);
  }
  return LinearLayout(ins, outs);
}

/// A random split of `bits` bits over `parts` dimensions.
std::vector<int> split_bits(std::mt19937& rng, int bits, int parts) {
  std::vector<int> r(parts, 0);
  for (int i = 0; i < bits; ++i) r[std::uniform_int_distribution<int>(0, parts - 1)(rng)]++;
  return r;
}

std::vector<int32_t> random_order(std::mt19937& rng, int rank) {
  std::vector<int32_t> o(rank);
  for (int i = 0; i < rank; ++i) o[i] = i;
  std::shuffle(o.begin(), o.end(), rng);
  return o;
}

struct BlockedParams {
  std::vector<int64_t> shape;
  std::vector<int32_t> spt, tpw, wpc, order;
};

BlockedParams random_blocked(std::mt19937& rng, int rank) {
  BlockedParams p;
  std::vector<int> lane_bits = split_bits(rng, 5, rank);
  std::vector<int> warp_bits = split_bits(rng, std::uniform_int_distribution<int>(0, 3)(rng), rank);
  for (int d = 0; d < rank; ++d) {
    p.shape.push_back(pow2_below(rng, rank == 1 ? 8 : rank == 2 ? 6 : 4));
    p.spt.push_back(pow2_below(rng, 2));
    p.tpw.push_back(int32_t{1} << lane_bits[d]);
    p.wpc.push_back(int32_t{1} << warp_bits[d]);
  }
  p.order = random_order(rng, rank);
  return p;
}

LinearLayout make(const BlockedParams& p) { return blocked(p.shape, p.spt, p.tpw, p.wpc, p.order); }

/// Multi-index of `idx` over `sizes`, order[0] fastest.
std::vector<int64_t> delinearize(int64_t idx, const std::vector<int32_t>& sizes, const std::vector<int32_t>& order) {
  std::vector<int64_t> r(sizes.size());
  for (int32_t d : order) {
    r[d] = idx % sizes[d];
    idx /= sizes[d];
  }
  return r;
}

// Input positions in the standard order of the named register layouts.
enum { REG = 0, LANE = 1, WARP = 2, BLOCK = 3 };

}  // namespace

// =================================================================================================
// The algebra
// =================================================================================================

TEST_CASE("layout: simple constructors and apply", "[layout]") {
  auto id = LinearLayout::identity_1d(8, kLane, dim_name(0));
  for (int i = 0; i < 8; ++i) CHECK(id.apply({i}) == Coord{i});
  CHECK(id.is_injective());
  CHECK(id.is_surjective());

  auto z = LinearLayout::zeros_1d(4, kReg, dim_name(0), 2);
  for (int i = 0; i < 4; ++i) CHECK(z.apply({i}) == Coord{0});
  CHECK(z.zero_basis_mask(kReg) == 0b11);
  CHECK(z.free_variable_mask(kReg) == 0b11);
  CHECK_FALSE(z.is_surjective());

  auto s = LinearLayout::strided_1d(4, 8, kLane, kOffset);
  CHECK(s.out_dim_size(kOffset) == 32);
  for (int i = 0; i < 4; ++i) CHECK(s.apply({i}) == Coord{8 * i});

  // Named apply: missing inputs are 0; XOR of bases.
  LinearLayout l({{kReg, {{0, 1}, {2, 0}}}, {kLane, {{1, 1}, {0, 2}}}}, {{"dim0", 4}, {"dim1", 4}});
  auto r = l.apply_named({{kLane, 3}, {kReg, 1}});
  CHECK(r == std::vector<std::pair<std::string, int32_t>>{{"dim0", 1}, {"dim1", 1 ^ 1 ^ 2}});
  CHECK(l.apply({3, 3}) == Coord{0 ^ 2 ^ 1 ^ 0, 1 ^ 0 ^ 1 ^ 2});
  CHECK(l.apply_flat(0b1111) == (uint64_t{3} | uint64_t{2} << 2));  // (3, 2), dim0 in the low bits
  // apply_flat packs the first dimension in the low bits: cross-check against apply.
  for (uint64_t x = 0; x < 16; ++x) {
    Coord o = l.apply({static_cast<int32_t>(x & 3), static_cast<int32_t>(x >> 2)});
    CHECK(l.apply_flat(x) == (static_cast<uint64_t>(o[0]) | static_cast<uint64_t>(o[1]) << 2));
  }
  CHECK(l.num_regs() == 4);
  CHECK(l.num_lanes() == 4);
  CHECK(l.num_warps() == 1);
  CHECK(l.in_dim_bits(kLane) == 2);
  CHECK(l.str() == "[reg:4, lane:4] -> [dim0:4, dim1:4]\n  reg : (0,1) (2,0)\n  lane: (1,1) (0,2)\n");
}

TEST_CASE("layout: invalid layouts throw InternalError", "[layout]") {
  CHECK_THROWS_AS(LinearLayout({{kReg, {{4}}}}, {{"dim0", 4}}), InternalError);        // basis out of range
  CHECK_THROWS_AS(LinearLayout({{kReg, {{1}}}}, {{"dim0", 6}}), InternalError);        // size not 2^k
  CHECK_THROWS_AS(LinearLayout({{kReg, {{1, 0}}}}, {{"dim0", 4}}), InternalError);     // basis arity
  CHECK_THROWS_AS(LinearLayout({{kReg, {}}, {kReg, {}}}, {{"dim0", 4}}), InternalError);  // duplicate
  CHECK_THROWS_AS(LinearLayout::identity_1d(12, kReg, "dim0"), InternalError);
  auto id = LinearLayout::identity_1d(8, kReg, "dim0");
  CHECK_THROWS_AS(id.apply({8}), InternalError);
  CHECK_THROWS_AS(id.apply({1, 2}), InternalError);
  CHECK_THROWS_AS(LinearLayout::zeros_1d(4, kReg, "dim0", 4).invert(), InternalError);
  CHECK_THROWS_AS(LinearLayout::zeros_1d(4, kReg, "dim0", 4).pseudo_invert(), InternalError);
  CHECK_THROWS_WITH(LinearLayout::identity_1d(4, kReg, "x").compose(LinearLayout::identity_1d(4, kLane, "y")),
                    Catch::Contains("not an input of the outer layout"));
}

TEST_CASE("layout: product concatenates shared dimensions, block-diagonal otherwise", "[layout]") {
  // Disjoint dimensions: block-diagonal.
  auto a = LinearLayout::identity_1d(4, kReg, "dim1");
  auto b = LinearLayout::identity_1d(2, kLane, "dim0");
  auto p = a * b;
  CHECK(p.in_dim_names() == std::vector<std::string>{kReg, kLane});
  CHECK(p.out_dim_names() == std::vector<std::string>{"dim1", "dim0"});
  for (int r = 0; r < 4; ++r)
    for (int l = 0; l < 2; ++l) CHECK(p.apply({r, l}) == Coord{r, l});
  // Shared input and output: `other` is the more major part of both.
  auto c = LinearLayout::identity_1d(4, kReg, "dim0") * LinearLayout::strided_1d(2, 2, kReg, "dim0");
  CHECK(c.num_regs() == 8);
  CHECK(c.out_dim_size("dim0") == 16);
  CHECK(c.bases(kReg) == std::vector<Basis>{{1}, {2}, {4 * 2}});
  // Product of a 1x1 layout is neutral.
  CHECK(LinearLayout() * a == a);
  CHECK(a * LinearLayout() == a);
}

TEST_CASE("layout: invert and compose on random bijections", "[layout]") {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 60; ++iter) {
    int bits = std::uniform_int_distribution<int>(0, 9)(rng);
    auto in = split_bits(rng, bits, 3);
    auto out = split_bits(rng, bits, 2);
    LinearLayout l = random_invertible(rng, {{kReg, in[0]}, {kLane, in[1]}, {kWarp, in[2]}},
                                       {{"dim0", out[0]}, {"dim1", out[1]}});
    INFO(l.str());
    REQUIRE(l.is_injective());
    REQUIRE(l.is_surjective());
    CHECK(distinct_outputs(l) == static_cast<size_t>(l.total_in_size()));
    LinearLayout inv = l.invert();
    CHECK(inv.in_dim_names() == l.out_dim_names());
    CHECK(inv.out_dim_names() == l.in_dim_names());
    // invert ∘ apply = identity, element by element.
    for_each_input(l, [&](const Coord& x, const Coord& y) { CHECK(inv.apply(y) == x); });
    // compose with the inverse = identity, as layouts.
    CHECK(inv.compose(l) == LinearLayout::identity(l.in_dims()));
    CHECK(l.compose(inv) == LinearLayout::identity(l.out_dims()));
    CHECK(inv.invert() == l);
    CHECK(l.pseudo_invert() == inv);
    for (auto& [n, m] : l.free_variable_masks()) CHECK(m == 0u);
  }
}

TEST_CASE("layout: compose agrees with applying twice", "[layout]") {
  std::mt19937 rng(99);
  for (int iter = 0; iter < 40; ++iter) {
    auto inner = random_layout(rng, {{kReg, 2}, {kLane, 3}}, {{"dim0", 3}, {"dim1", 2}});
    // outer takes dim0/dim1 (possibly larger) to an offset.
    auto outer = random_layout(rng, {{"dim1", 3}, {"dim0", 3}}, {{kOffset, 5}});
    auto c = outer.compose(inner);
    CHECK(c.in_dim_names() == inner.in_dim_names());
    CHECK(c.out_dim_names() == std::vector<std::string>{kOffset});
    for_each_input(inner, [&](const Coord& x, const Coord& y) {
      CHECK(c.apply(x) == outer.apply({y[1], y[0]}));
    });
  }
}

TEST_CASE("layout: pseudo-inverse and invert_and_compose of replicated layouts", "[layout]") {
  std::mt19937 rng(7);
  int tested = 0;
  for (int iter = 0; iter < 200 && tested < 40; ++iter) {
    auto l = random_layout(rng, {{kReg, 2}, {kLane, 3}, {kWarp, 2}}, {{"dim0", 3}, {"dim1", 2}});
    if (!l.is_surjective()) continue;
    ++tested;
    INFO(l.str());
    // Free bits: as many as the input has beyond the rank; the outputs repeat 2^free times.
    int free_bits = 0;
    for (auto& [n, m] : l.free_variable_masks()) free_bits += __builtin_popcount(m);
    CHECK(free_bits == l.total_in_bits() - l.rank());
    CHECK(distinct_outputs(l) == static_cast<size_t>(l.total_out_size()));
    // A right inverse: l(p(y)) == y, and p picks free bits as 0.
    auto p = l.pseudo_invert();
    for_each_input(p, [&](const Coord& y, const Coord& x) {
      CHECK(l.apply(x) == y);
      auto masks = l.free_variable_masks();
      for (size_t d = 0; d < x.size(); ++d) CHECK((static_cast<uint32_t>(x[d]) & masks[d].second) == 0u);
    });
    // invert_and_compose: a second layout on the same tile; outer(C(x)) == this(x).
    auto a = random_layout(rng, {{kReg, 3}, {kLane, 2}}, {{"dim0", 3}, {"dim1", 2}});
    auto c = a.invert_and_compose(l);
    CHECK(c.out_dim_names() == l.in_dim_names());
    for_each_input(a, [&](const Coord& x, const Coord& y) { CHECK(l.apply(c.apply(x)) == y); });
  }
  CHECK(tested == 40);
  // Not contained in the image: throws.
  auto narrow = LinearLayout({{kReg, {{1, 0}}}}, {{"dim0", 2}, {"dim1", 2}});
  auto wide = LinearLayout({{kReg, {{0, 1}}}}, {{"dim0", 2}, {"dim1", 2}});
  CHECK_THROWS_AS(wide.invert_and_compose(narrow), InternalError);
}

TEST_CASE("layout: sublayout, reshape and transpose of outputs", "[layout]") {
  std::mt19937 rng(5);
  for (int iter = 0; iter < 30; ++iter) {
    auto l = random_layout(rng, {{kReg, 2}, {kLane, 3}, {kWarp, 1}}, {{"dim0", 2}, {"dim1", 3}, {"dim2", 1}});
    // reshape_outs: row-major flattening (last dimension minor).
    auto flat = l.reshape_outs({{"dim0", 64}});
    auto re = l.reshape_outs({{"dim0", 8}, {"dim1", 8}});
    for_each_input(l, [&](const Coord& x, const Coord& y) {
      int32_t f = (y[0] * 8 + y[1]) * 2 + y[2];
      CHECK(flat.apply(x) == Coord{f});
      CHECK(re.apply(x) == Coord{f / 8, f % 8});
    });
    CHECK(re.reshape_outs(l.out_dims()) == l);
    // transpose_outs reorders the coordinates only.
    auto t = l.transpose_outs({"dim2", "dim0", "dim1"});
    for_each_input(l, [&](const Coord& x, const Coord& y) { CHECK(t.apply(x) == Coord{y[2], y[0], y[1]}); });
    CHECK(t.transpose_outs(l.out_dim_names()) == l);
    CHECK(t.equivalent(l));
    CHECK_FALSE(t == l);
    // sublayout: other inputs fixed to 0, other outputs dropped.
    auto s = l.sublayout({kLane, kReg}, {"dim1"});
    CHECK(s.in_dim_names() == std::vector<std::string>{kReg, kLane});
    for (int r = 0; r < 4; ++r)
      for (int ln = 0; ln < 8; ++ln) CHECK(s.apply({r, ln}) == Coord{l.apply({r, ln, 0})[1]});
  }
  CHECK_THROWS_AS(LinearLayout::identity_1d(8, kReg, "dim0").reshape_outs({{"dim0", 4}}), InternalError);
}

TEST_CASE("layout: free variables of a non-power-of-two-stride layout", "[layout]") {
  // reg bit 1 = reg bit 0 ^ lane bit 0: not a zero basis, but still free (dependent on earlier bits).
  LinearLayout l({{kLane, {{1}, {2}}}, {kReg, {{3}}}}, {{"dim0", 4}});
  CHECK(l.zero_basis_mask(kReg) == 0u);
  CHECK(l.free_variable_mask(kReg) == 1u);
  CHECK(l.free_variable_mask(kLane) == 0u);
  CHECK(l.rank() == 2);
  CHECK(l.is_surjective());
  CHECK_FALSE(l.is_injective());
}

// =================================================================================================
// blocked
// =================================================================================================

TEST_CASE("layout: blocked [4,8] spt [1,2] tpw [2,16]: hand-computed table", "[layout]") {
  // 16 lanes x 2 elements cover 32 columns of an 8-column row: lane bits 2,3 wrap (broadcast);
  // 2 lane rows cover 2 of the 4 rows: one extra register bit repeats the CTA tile downwards.
  auto l = blocked({4, 8}, {1, 2}, {2, 16}, {1, 1}, {1, 0});
  CHECK(l.in_dim_names() == std::vector<std::string>{kReg, kLane, kWarp, kBlock});
  CHECK(l.out_dims() == std::vector<DimSize>{{"dim0", 4}, {"dim1", 8}});
  CHECK(l.bases(kReg) == std::vector<Basis>{{0, 1}, {2, 0}});
  CHECK(l.bases(kLane) == std::vector<Basis>{{0, 2}, {0, 4}, {0, 0}, {0, 0}, {1, 0}});
  CHECK(l.bases(kWarp).empty());
  CHECK(l.zero_basis_mask(kLane) == 0b01100u);
  CHECK(l.num_regs() == 4);
  // The lowest (lane, reg) owning each element, written out by hand.
  const int lane_of[4][8] = {{0, 0, 1, 1, 2, 2, 3, 3},
                             {16, 16, 17, 17, 18, 18, 19, 19},
                             {0, 0, 1, 1, 2, 2, 3, 3},
                             {16, 16, 17, 17, 18, 18, 19, 19}};
  const int reg_of[4][8] = {{0, 1, 0, 1, 0, 1, 0, 1},
                            {0, 1, 0, 1, 0, 1, 0, 1},
                            {2, 3, 2, 3, 2, 3, 2, 3},
                            {2, 3, 2, 3, 2, 3, 2, 3}};
  std::map<Coord, std::pair<int, int>> first;
  std::map<Coord, int> copies;
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 4; ++reg) {
      Coord c = l.apply({reg, lane, 0, 0});
      if (!first.count(c)) first[c] = {lane, reg};
      copies[c]++;
    }
  REQUIRE(first.size() == 32);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) {
      CHECK(first[{r, c}] == std::make_pair(lane_of[r][c], reg_of[r][c]));
      CHECK(copies[{r, c}] == 4);  // lane bits 2 and 3 replicate
    }
}

TEST_CASE("layout: blocked with warps and both orders: hand-computed bases", "[layout]") {
  // [16,16], spt [2,2], tpw [4,8], wpc [2,1]: the CTA tile is exactly the tile.
  auto rm = blocked({16, 16}, {2, 2}, {4, 8}, {2, 1}, {1, 0});
  CHECK(rm.bases(kReg) == std::vector<Basis>{{0, 1}, {1, 0}});
  CHECK(rm.bases(kLane) == std::vector<Basis>{{0, 2}, {0, 4}, {0, 8}, {2, 0}, {4, 0}});
  CHECK(rm.bases(kWarp) == std::vector<Basis>{{8, 0}});
  CHECK(rm.is_invertible());
  // Lane 13 = 0b01101, reg 3, warp 1: (0,1)^(1,0) ^ (0,2)^(0,8)^(2,0) ^ (8,0) = (11, 11).
  CHECK(rm.apply({3, 13, 1, 0}) == Coord{11, 11});
  auto cm = blocked({16, 16}, {2, 2}, {4, 8}, {2, 1}, {0, 1});
  CHECK(cm.bases(kReg) == std::vector<Basis>{{1, 0}, {0, 1}});
  CHECK(cm.bases(kLane) == std::vector<Basis>{{2, 0}, {4, 0}, {0, 2}, {0, 4}, {0, 8}});
  CHECK(cm.bases(kWarp) == std::vector<Basis>{{8, 0}});
  // The example at the top of linear_layout.hpp, including its printed form.
  auto doc = blocked({4, 8}, {1, 2}, {8, 4}, {1, 1}, {1, 0});
  CHECK(doc.str() ==
        "[reg:2, lane:32, warp:1, block:1] -> [dim0:4, dim1:8]\n"
        "  reg  : (0,1)\n  lane : (0,2) (0,4) (1,0) (2,0) (0,0)\n  warp : -\n  block: -\n");
  CHECK(doc.apply({1, 5, 0, 0}) == Coord{1, 3});
  CHECK(doc.apply({1, 21, 0, 0}) == Coord{1, 3});
  // Larger shape: registers repeat along order[0] first. [32,64] with the row-major one:
  auto big = blocked({32, 64}, {2, 2}, {4, 8}, {2, 1}, {1, 0});
  CHECK(big.bases(kReg) == std::vector<Basis>{{0, 1}, {1, 0}, {0, 16}, {0, 32}, {16, 0}});
  CHECK(big.num_regs() == 32);
  // Smaller shape: [2,4] with 4 warps: lanes and warps wrap.
  auto small = blocked({2, 4}, {1, 1}, {4, 8}, {2, 2}, {1, 0});
  CHECK(small.bases(kReg).empty());
  CHECK(small.bases(kLane) == std::vector<Basis>{{0, 1}, {0, 2}, {0, 0}, {1, 0}, {0, 0}});
  CHECK(small.bases(kWarp) == std::vector<Basis>{{0, 0}, {0, 0}});
  CHECK(small.zero_basis_mask(kLane) == 0b10100u);
  CHECK(small.zero_basis_mask(kWarp) == 0b11u);
  CHECK(small.free_variable_mask(kWarp) == 0b11u);
  CHECK(small.is_surjective());
  CHECK_FALSE(small.is_injective());
}

TEST_CASE("layout: blocked properties over random parameters", "[layout]") {
  std::mt19937 rng(2024);
  for (int iter = 0; iter < 300; ++iter) {
    int rank = 1 + iter % 3;
    BlockedParams p = random_blocked(rng, rank);
    LinearLayout l = make(p);
    INFO(l.str());
    REQUIRE(l.num_out_dims() == rank);
    for (int d = 0; d < rank; ++d) CHECK(l.out_dims()[d].size == p.shape[d]);
    CHECK(l.num_lanes() == 32);
    int64_t warps = 1, cells = 1, regs = 1;
    bool injective = true;
    for (int d = 0; d < rank; ++d) {
      warps *= p.wpc[d];
      cells *= p.shape[d];
      int64_t threads = int64_t{p.tpw[d]} * p.wpc[d];
      regs *= std::max<int64_t>(std::min<int64_t>(p.spt[d], p.shape[d]), p.shape[d] / threads);
      if (int64_t{p.spt[d]} * threads > p.shape[d] && threads > 1) injective = false;
    }
    CHECK(l.num_warps() == warps);
    CHECK(l.num_regs() == regs);
    // Covers the tile; injective exactly when no thread level is wider than the tile.
    CHECK(l.is_surjective());
    CHECK(distinct_outputs(l) == static_cast<size_t>(cells));
    CHECK(l.is_injective() == injective);
    // Broadcast bits are exactly the free bits (power-of-two strides), and the copies multiply out.
    int free_bits = 0;
    for (auto& [n, m] : l.free_variable_masks()) {
      CHECK(m == l.zero_basis_mask(n));
      free_bits += __builtin_popcount(m);
    }
    CHECK((l.total_in_size() >> free_bits) == cells);
    // Ownership matches Triton's definition: thread (t, w) owns the spt sub-tile at
    // spt * (t + tpw * w), repeated every CTA tile, all coordinates modulo the shape.
    for (int warp = 0; warp < l.num_warps(); ++warp)
      for (int lane = 0; lane < 32; ++lane) {
        auto t = delinearize(lane, p.tpw, p.order), w = delinearize(warp, p.wpc, p.order);
        // Per dimension: c is owned iff c == spt*(t + tpw*w) + i + k*cta (mod shape) for some
        // i < spt and k >= 0; the owned set is the product over the dimensions.
        std::set<Coord> want{Coord{}}, got;
        for (int d = 0; d < rank; ++d) {
          int64_t cta = int64_t{p.spt[d]} * p.tpw[d] * p.wpc[d];
          int64_t start = int64_t{p.spt[d]} * (t[d] + int64_t{p.tpw[d]} * w[d]);
          std::set<int32_t> owned;
          for (int64_t i = 0; i < p.spt[d]; ++i)
            for (int64_t k = 0; k * cta < std::max<int64_t>(p.shape[d], cta); ++k)
              owned.insert(static_cast<int32_t>((start + i + k * cta) % p.shape[d]));
          std::set<Coord> next;
          for (const Coord& c : want)
            for (int32_t v : owned) {
              Coord e = c;
              e.push_back(v);
              next.insert(e);
            }
          want = next;
        }
        for (int reg = 0; reg < l.num_regs(); ++reg) got.insert(l.apply({reg, lane, warp, 0}));
        REQUIRE(got == want);
        // Register 0 is the first element of the thread's sub-tile; register 1 steps along order[0].
        Coord r0 = l.apply({0, lane, warp, 0});
        for (int d = 0; d < rank; ++d)
          CHECK(r0[d] == (int64_t{p.spt[d]} * (t[d] + int64_t{p.tpw[d]} * w[d])) % p.shape[d]);
        if (l.num_regs() > 1 && std::min<int64_t>(p.spt[p.order[0]], p.shape[p.order[0]]) > 1) {
          Coord r1 = l.apply({1, lane, warp, 0});
          Coord exp = r0;
          exp[p.order[0]] ^= 1;
          CHECK(r1 == exp);
        }
      }
    // The layout of the same tile through the inverse: every element back to one owner.
    if (l.is_invertible()) {
      auto inv = l.invert();
      CHECK(inv.compose(l) == LinearLayout::identity(l.in_dims()));
      CHECK(l.compose(inv) == LinearLayout::identity(l.out_dims()));
    } else {
      auto pinv = l.pseudo_invert();
      CHECK(l.compose(pinv) == LinearLayout::identity(l.out_dims()));
    }
  }
}

TEST_CASE("layout: blocked rejects bad parameters with clear messages", "[layout]") {
  CHECK_THROWS_WITH(blocked({6, 8}, {1, 1}, {4, 8}, {1, 1}, {1, 0}), Catch::Contains("not a power of two"));
  CHECK_THROWS_WITH(blocked({8, 8}, {3, 1}, {4, 8}, {1, 1}, {1, 0}), Catch::Contains("size_per_thread"));
  CHECK_THROWS_WITH(blocked({8, 8}, {1, 1}, {4, 4}, {1, 1}, {1, 0}), Catch::Contains("not 32"));
  CHECK_THROWS_WITH(blocked({8, 8}, {1, 1}, {4, 8}, {1, 1}, {1, 1}), Catch::Contains("not a permutation"));
  CHECK_THROWS_WITH(blocked({8, 8}, {1}, {4, 8}, {1, 1}, {1, 0}), Catch::Contains("same rank"));
  CHECK_THROWS_AS(blocked({2, 8}, {1, 1}, {4, 8}, {1, 1}, {1, 0}).invert(), InternalError);  // replicated
}

// =================================================================================================
// slice
// =================================================================================================

TEST_CASE("layout: slice of blocked, hand-computed", "[layout]") {
  auto l = blocked({4, 8}, {1, 2}, {2, 16}, {1, 1}, {1, 0});
  auto s = slice(l, 1);  // reduce along the columns: one value per row
  CHECK(s.out_dims() == std::vector<DimSize>{{"dim0", 4}});
  CHECK(s.bases(kReg) == std::vector<Basis>{{2}});  // the column register is gone
  CHECK(s.bases(kLane) == std::vector<Basis>{{0}, {0}, {0}, {0}, {1}});
  auto s0 = slice(l, 0);  // reduce along the rows
  CHECK(s0.out_dims() == std::vector<DimSize>{{"dim0", 8}});
  CHECK(s0.bases(kReg) == std::vector<Basis>{{1}});
  CHECK(s0.bases(kLane) == std::vector<Basis>{{2}, {4}, {0}, {0}, {0}});
  CHECK_THROWS_AS(slice(l, 2), InternalError);
}

TEST_CASE("layout: slice of blocked is what a reduction needs", "[layout]") {
  std::mt19937 rng(77);
  for (int iter = 0; iter < 150; ++iter) {
    int rank = 1 + iter % 3;
    BlockedParams p = random_blocked(rng, rank);
    LinearLayout parent = make(p);
    int dim = std::uniform_int_distribution<int>(0, rank - 1)(rng);
    LinearLayout s = slice(parent, dim);
    INFO(parent.str() << "slice " << dim << "\n" << s.str());
    REQUIRE(s.num_out_dims() == rank - 1);
    CHECK(s.num_lanes() == parent.num_lanes());
    CHECK(s.num_warps() == parent.num_warps());
    CHECK(s.is_surjective());
    auto project = [&](Coord c) { c.erase(c.begin() + dim); return c; };
    for (int warp = 0; warp < parent.num_warps(); ++warp)
      for (int lane = 0; lane < 32; ++lane) {
        // After the in-thread and cross-thread reductions each thread holds exactly the reduced
        // rows it contributed to: the projections of its parent elements, each in one register.
        std::set<Coord> contributed;
        for (int reg = 0; reg < parent.num_regs(); ++reg)
          contributed.insert(project(parent.apply({reg, lane, warp, 0})));
        std::vector<Coord> held;
        for (int reg = 0; reg < s.num_regs(); ++reg) held.push_back(s.apply({reg, lane, warp, 0}));
        CHECK(std::set<Coord>(held.begin(), held.end()) == contributed);
        CHECK(held.size() == contributed.size());  // no register holds a duplicate
      }
    // expand_dims then broadcast back: the sliced layout is the parent with the dimension dropped.
    CHECK(slice(parent, dim).in_dim_names() == parent.in_dim_names());
  }
}

// =================================================================================================
// mma.sync m16n8k16 fragments (PTX ISA 9.7.14.5.8)
// =================================================================================================

namespace {

// The PTX ISA fragment tables, written from the ISA text (groupID = lane >> 2,
// threadID_in_group = lane % 4), for one warp and one instruction.
Coord ptx_acc(int lane, int i) {  // c0..c3 of m16n8 (f32 / f16 accumulators)
  int g = lane >> 2, t = lane % 4;
  int row = (i < 2) ? g : g + 8;
  int col = t * 2 + (i & 1);
  return {row, col};
}
Coord ptx_a_f16(int lane, int i) {  // a0..a7 of m16n8k16 .f16/.bf16
  int g = lane >> 2, t = lane % 4;
  int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
  int col = (i < 4) ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8;
  return {row, col};
}
Coord ptx_b_f16(int lane, int i) {  // b0..b3 of m16n8k16 .f16/.bf16 (rows = k)
  int g = lane >> 2, t = lane % 4;
  int row = (i < 2) ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8;
  return {row, g};
}
Coord ptx_a_tf32(int lane, int i) {  // a0..a3 of m16n8k8 .tf32
  int g = lane >> 2, t = lane % 4;
  int row = (i == 0 || i == 2) ? g : g + 8;
  int col = (i < 2) ? t : t + 4;
  return {row, col};
}
Coord ptx_b_tf32(int lane, int i) {  // b0..b1 of m16n8k8 .tf32
  int g = lane >> 2, t = lane % 4;
  return {i == 0 ? t : t + 4, g};
}
Coord ptx_a_i8(int lane, int i) {  // a0..a15 of m16n8k32 .s8/.u8/.e4m3
  int g = lane >> 2, t = lane % 4;
  int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
  int col = (i < 8) ? t * 4 + (i & 3) : t * 4 + (i & 3) + 16;
  return {row, col};
}
Coord ptx_b_i8(int lane, int i) {  // b0..b7 of m16n8k32
  int g = lane >> 2, t = lane % 4;
  int row = (i < 4) ? t * 4 + (i & 3) : t * 4 + (i & 3) + 16;
  return {row, g};
}
// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans): thread `lane` receives, in destination
// register d_j, the two 16-bit elements (lane / 4, 2 * (lane % 4) + {0,1}) of 8x8 matrix j.
// Matrix j of a 16x16 A tile loaded with row addresses from lanes 8j..8j+7 pointing at
// rows (j % 2) * 8 + r and column block (j / 2) * 8.
Coord ldmatrix_x4_a(int lane, int elem) {
  int j = elem / 2, half = elem % 2;
  return {(j % 2) * 8 + lane / 4, (j / 2) * 8 + 2 * (lane % 4) + half};
}

}  // namespace

TEST_CASE("layout: mma_v2 accumulator of one warp matches the PTX table", "[layout]") {
  auto l = mma_v2_accumulator({16, 8}, {1, 1});
  CHECK(l.num_regs() == 4);
  CHECK(l.is_invertible());
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      INFO("lane " << lane << " c" << i);
      CHECK(l.apply({i, lane, 0, 0}) == ptx_acc(lane, i));
    }
}

TEST_CASE("layout: mma_v2 operands of one warp match the PTX tables", "[layout]") {
  auto a = mma_v2_operand(0, {16, 16}, {1, 1}, 16);
  auto b = mma_v2_operand(1, {16, 8}, {1, 1}, 16);
  REQUIRE(a.num_regs() == 8);
  REQUIRE(b.num_regs() == 4);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      CHECK(a.apply({i, lane, 0, 0}) == ptx_a_f16(lane, i));
      CHECK(a.apply({i, lane, 0, 0}) == ldmatrix_x4_a(lane, i));  // ldmatrix.x4 feeds A directly
    }
    for (int i = 0; i < 4; ++i) CHECK(b.apply({i, lane, 0, 0}) == ptx_b_f16(lane, i));
  }
  CHECK(a.is_invertible());
  CHECK(b.is_invertible());
  auto a32 = mma_v2_operand(0, {16, 8}, {1, 1}, 32), b32 = mma_v2_operand(1, {8, 8}, {1, 1}, 32);
  auto a8 = mma_v2_operand(0, {16, 32}, {1, 1}, 8), b8 = mma_v2_operand(1, {32, 8}, {1, 1}, 8);
  REQUIRE(a32.num_regs() == 4);
  REQUIRE(b32.num_regs() == 2);
  REQUIRE(a8.num_regs() == 16);
  REQUIRE(b8.num_regs() == 8);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) CHECK(a32.apply({i, lane, 0, 0}) == ptx_a_tf32(lane, i));
    for (int i = 0; i < 2; ++i) CHECK(b32.apply({i, lane, 0, 0}) == ptx_b_tf32(lane, i));
    for (int i = 0; i < 16; ++i) CHECK(a8.apply({i, lane, 0, 0}) == ptx_a_i8(lane, i));
    for (int i = 0; i < 8; ++i) CHECK(b8.apply({i, lane, 0, 0}) == ptx_b_i8(lane, i));
  }
}

TEST_CASE("layout: mma_v2 accumulator over many warps and repeats", "[layout]") {
  std::mt19937 rng(31);
  for (int iter = 0; iter < 60; ++iter) {
    int64_t M = int64_t{16} << std::uniform_int_distribution<int>(0, 3)(rng);
    int64_t N = int64_t{8} << std::uniform_int_distribution<int>(0, 4)(rng);
    int32_t wm = pow2_below(rng, 2), wn = pow2_below(rng, 2);
    auto l = mma_v2_accumulator({M, N}, {wm, wn});
    INFO(M << "x" << N << " warps " << wm << "x" << wn << "\n" << l.str());
    CHECK(l.is_surjective());
    CHECK(l.num_warps() == wm * wn);
    CHECK(l.is_injective() == (16 * wm <= M && 8 * wn <= N));
    // Reference: the instruction tile, warps along M first, repeats along N first (mod shape).
    int64_t cta_m = 16 * wm, cta_n = 8 * wn;
    int64_t rep_n = std::max<int64_t>(1, N / cta_n);
    REQUIRE(l.num_regs() == 4 * rep_n * std::max<int64_t>(1, M / cta_m));
    for (int warp = 0; warp < wm * wn; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < l.num_regs(); ++reg) {
          Coord base = ptx_acc(lane, reg & 3);
          int rep = reg >> 2;
          int64_t row = base[0] + 16 * (warp % wm) + cta_m * (rep / rep_n);
          int64_t col = base[1] + 8 * (warp / wm) + cta_n * (rep % rep_n);
          CHECK(l.apply({reg, lane, warp, 0}) == Coord{static_cast<int32_t>(row % M), static_cast<int32_t>(col % N)});
        }
  }
  CHECK_THROWS_WITH(mma_v2_accumulator({8, 8}, {1, 1}), Catch::Contains("smaller than one 16x8"));
  CHECK_THROWS_WITH(mma_v2_accumulator({48, 8}, {1, 1}), Catch::Contains("not a power of two"));
}

TEST_CASE("layout: mma_v2 operands line up with the accumulator in every warp", "[layout]") {
  // A warp must hold the A rows and B columns of its own accumulator tile (and all of K).
  for (int bitwidth : {8, 16, 32}) {
    int kk = 8 * 32 / bitwidth;
    for (int64_t M : {16, 64})
      for (int64_t N : {8, 32})
        for (int64_t K : {int64_t{kk}, int64_t{4 * kk}})
          for (auto w : std::vector<std::vector<int32_t>>{{1, 1}, {2, 2}, {4, 1}, {1, 4}, {2, 4}}) {
            auto acc = mma_v2_accumulator({M, N}, w);
            auto a = mma_v2_operand(0, {M, K}, w, bitwidth);
            auto b = mma_v2_operand(1, {K, N}, w, bitwidth);
            INFO("bitwidth " << bitwidth << " M " << M << " N " << N << " K " << K << " warps " << w[0] << "x" << w[1]);
            CHECK(a.is_surjective());
            CHECK(b.is_surjective());
            // A is replicated over the wn warps (B over wm) and nothing else when the tile is big enough.
            if (16 * w[0] <= M) CHECK(__builtin_popcount(a.free_variable_mask(kWarp)) == __builtin_ctz(w[1]));
            if (8 * w[1] <= N) CHECK(__builtin_popcount(b.free_variable_mask(kWarp)) == __builtin_ctz(w[0]));
            CHECK(a.free_variable_mask(kReg) == 0u);
            CHECK(a.free_variable_mask(kLane) == 0u);
            for (int warp = 0; warp < w[0] * w[1]; ++warp) {
              // Per warp: the A rows and B columns are those of the warp's accumulator tile, and
              // both operands hold all of K.
              std::set<int32_t> acc_rows, acc_cols, a_rows, b_cols, a_k, b_k;
              for (int lane = 0; lane < 32; ++lane) {
                std::set<int32_t> lane_acc_rows, lane_a_rows;
                for (int r = 0; r < acc.num_regs(); ++r) {
                  Coord c = acc.apply({r, lane, warp, 0});
                  acc_rows.insert(c[0]);
                  acc_cols.insert(c[1]);
                  lane_acc_rows.insert(c[0]);
                }
                for (int r = 0; r < a.num_regs(); ++r) {
                  Coord c = a.apply({r, lane, warp, 0});
                  a_rows.insert(c[0]);
                  a_k.insert(c[1]);
                  lane_a_rows.insert(c[0]);
                }
                for (int r = 0; r < b.num_regs(); ++r) {
                  Coord c = b.apply({r, lane, warp, 0});
                  b_k.insert(c[0]);
                  b_cols.insert(c[1]);
                }
                // Per lane (PTX): A rows and D rows are both groupID and groupID + 8.
                CHECK(lane_a_rows == lane_acc_rows);
              }
              CHECK(a_rows == acc_rows);
              CHECK(b_cols == acc_cols);
              CHECK(a_k.size() == static_cast<size_t>(K));
              CHECK(b_k.size() == static_cast<size_t>(K));
            }
          }
  }
  CHECK_THROWS_WITH(mma_v2_operand(2, {16, 16}, {1, 1}), Catch::Contains("op_idx"));
  CHECK_THROWS_WITH(mma_v2_operand(0, {16, 16}, {1, 1}, 4), Catch::Contains("bitwidth"));
  CHECK_THROWS_WITH(mma_v2_operand(0, {16, 8}, {1, 1}, 16), Catch::Contains("smaller than one 16x16"));
}

TEST_CASE("layout: mma_v2 operand registers repeat along K first", "[layout]") {
  auto a = mma_v2_operand(0, {32, 64}, {1, 1}, 16);  // 2 M tiles x 4 K tiles
  REQUIRE(a.num_regs() == 8 * 8);
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 64; ++reg) {
      Coord base = ptx_a_f16(lane, reg & 7);
      int rep = reg >> 3;
      CHECK(a.apply({reg, lane, 0, 0}) == Coord{base[0] + 16 * (rep / 4), base[1] + 16 * (rep % 4)});
    }
}

// =================================================================================================
// swizzled shared memory
// =================================================================================================

namespace {
// Triton's SwizzledSharedEncoding in integer arithmetic, for a 2-D tile with order {1, 0}.
int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols, int vec, int per_phase, int max_phase) {
  int64_t phase = (r / per_phase) % max_phase;
  int64_t group = ((c / vec) ^ phase) % std::max<int64_t>(cols / vec, 1);
  int64_t col = cols >= vec ? group * vec + c % vec : c;
  return r * cols + col;
}
}  // namespace

TEST_CASE("layout: shared_swizzled matches the swizzle formula and is a bijection", "[layout]") {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 200; ++iter) {
    int64_t rows = pow2_below(rng, 6), cols = pow2_below(rng, 7);
    int vec = pow2_below(rng, 3), per_phase = pow2_below(rng, 2), max_phase = pow2_below(rng, 3);
    bool col_major = iter % 2;  // order {0,1}: dim0 is contiguous
    std::vector<int64_t> shape = col_major ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{rows, cols};
    auto l = shared_swizzled(shape, vec, per_phase, max_phase, col_major ? std::vector<int32_t>{0, 1} : std::vector<int32_t>{1, 0});
    INFO(rows << "x" << cols << " vec " << vec << " per_phase " << per_phase << " max_phase " << max_phase
              << (col_major ? " col-major\n" : "\n") << l.str());
    REQUIRE(l.out_dims() == std::vector<DimSize>{{kOffset, static_cast<int32_t>(rows * cols)}});
    CHECK(l.is_invertible());
    auto inv = l.invert();
    std::set<int32_t> all;
    for (int64_t r = 0; r < rows; ++r) {
      std::set<int32_t> row;
      for (int64_t c = 0; c < cols; ++c) {
        Coord in = col_major ? Coord{int32_t(c), int32_t(r)} : Coord{int32_t(r), int32_t(c)};
        Coord off = l.apply(in);
        CHECK(off[0] == swizzled_offset(r, c, cols, vec, per_phase, max_phase));
        CHECK(inv.apply(off) == in);
        row.insert(off[0]);
        all.insert(off[0]);
      }
      // Each row is permuted within its own slice of the buffer.
      CHECK(row.size() == static_cast<size_t>(cols));
      CHECK(*row.begin() == r * cols);
      CHECK(*row.rbegin() == r * cols + cols - 1);
    }
    CHECK(all.size() == static_cast<size_t>(rows * cols));
    // The point of the swizzle: one vec-group column over max_phase phases (rows step per_phase)
    // lands in max_phase different vec-group slots, as long as the row has that many groups.
    int64_t groups = std::max<int64_t>(cols / vec, 1);
    if (rows >= int64_t{per_phase} * max_phase)
      for (int64_t g = 0; g < groups; ++g) {
        std::set<int64_t> slots;
        for (int64_t ph = 0; ph < max_phase; ++ph) {
          int64_t r = ph * per_phase;
          Coord in = col_major ? Coord{int32_t(g * vec % cols), int32_t(r)} : Coord{int32_t(r), int32_t(g * vec % cols)};
          slots.insert((l.apply(in)[0] - r * cols) / std::min<int64_t>(vec, cols));
        }
        CHECK(slots.size() == static_cast<size_t>(std::min<int64_t>(max_phase, groups)));
      }
  }
}

TEST_CASE("layout: shared_swizzled hand-computed 4x8, vec 2, per_phase 1, max_phase 4", "[layout]") {
  auto l = shared_swizzled({4, 8}, 2, 1, 4, {1, 0});
  // Row r permutes its 4 vec-groups by XOR r: offsets written out by hand.
  const int expect[4][8] = {{0, 1, 2, 3, 4, 5, 6, 7},
                            {10, 11, 8, 9, 14, 15, 12, 13},
                            {20, 21, 22, 23, 16, 17, 18, 19},
                            {30, 31, 28, 29, 26, 27, 24, 25}};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) CHECK(l.apply({r, c}) == Coord{expect[r][c]});
  // 3-D: the outer dimension is stacked without swizzle.
  auto l3 = shared_swizzled({2, 4, 8}, 2, 1, 4, {2, 1, 0});
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) CHECK(l3.apply({1, r, c}) == Coord{32 + expect[r][c]});
  // Composing after a register layout gives (reg, lane, warp, block) -> offset directly.
  auto reg = blocked({4, 8}, {1, 2}, {4, 8}, {1, 1}, {1, 0});
  auto addr = l.compose(reg);
  CHECK(addr.in_dim_names() == reg.in_dim_names());
  for_each_input(reg, [&](const Coord& x, const Coord& y) { CHECK(addr.apply(x) == Coord{expect[y[0]][y[1]]}); });
  CHECK_THROWS_WITH(shared_swizzled({4, 8}, 3, 1, 4, {1, 0}), Catch::Contains("not a power of two"));
}

// =================================================================================================
// transpose / reshape of tiles
// =================================================================================================

TEST_CASE("layout: transpose_tile and reshape_tile relabel coordinates", "[layout]") {
  auto l = blocked({8, 16, 4}, {1, 2, 2}, {2, 4, 4}, {2, 1, 2}, {2, 1, 0});
  auto t = transpose_tile(l, {2, 0, 1});
  CHECK(t.out_dims() == std::vector<DimSize>{{"dim0", 4}, {"dim1", 8}, {"dim2", 16}});
  auto r = reshape_tile(l, {128, 4});
  for_each_input(l, [&](const Coord& x, const Coord& y) {
    CHECK(t.apply(x) == Coord{y[2], y[0], y[1]});
    CHECK(r.apply(x) == Coord{y[0] * 16 + y[1], y[2]});
  });
  CHECK_THROWS_AS(reshape_tile(l, {128, 8}), InternalError);
}

// =================================================================================================
// conversions
// =================================================================================================

namespace {

/// The cheapest kind by brute force: for every destination position, the set of source positions
/// holding the same element; a level is kept if every destination position has a source at the
/// same lane (warp, block) - written without the GF(2) machinery.
ConversionKind brute_kind(const LinearLayout& src, const LinearLayout& dst) {
  if (src == dst) return ConversionKind::Identity;
  std::map<Coord, std::vector<Coord>> holders;
  for_each_input(src, [&](const Coord& x, const Coord& y) { holders[y].push_back(x); });
  int needed = 0;  // coarsest level that must move: 0 reg only, 1 lane, 2 warp, 3 block
  for_each_input(dst, [&](const Coord& x, const Coord& y) {
    int best = 4;
    for (const Coord& s : holders[y]) {
      int lvl = 0;
      for (int l = 1; l <= 3; ++l)
        if (s[l] != x[l]) lvl = l;
      best = std::min(best, lvl);
    }
    needed = std::max(needed, best);
  });
  static const ConversionKind kinds[] = {ConversionKind::RegisterPermute, ConversionKind::WarpShuffle,
                                         ConversionKind::SharedMemory, ConversionKind::CrossCta};
  return kinds[needed];
}

void check_plan(const LinearLayout& src, const LinearLayout& dst, const ConversionPlan& plan) {
  INFO("plan " << name(plan.kind) << "\nsrc " << src.str() << "dst " << dst.str() << "map " << plan.dst_to_src.str());
  CHECK(plan.kind == brute_kind(src, dst));
  int kept_from = plan.kind == ConversionKind::Identity ? 0
                  : plan.kind == ConversionKind::RegisterPermute ? 1
                  : plan.kind == ConversionKind::WarpShuffle ? 2
                  : plan.kind == ConversionKind::SharedMemory ? 3 : 4;
  for_each_input(dst, [&](const Coord& x, const Coord& y) {
    Coord s = plan.dst_to_src.apply(x);
    CHECK(src.apply(s) == y);
    for (int l = kept_from; l < 4; ++l) CHECK(s[l] == x[l]);
  });
}

}  // namespace

TEST_CASE("layout: conversion classification, named cases", "[layout]") {
  auto a = blocked({64, 64}, {1, 4}, {8, 4}, {2, 2}, {1, 0});
  // Same layout: nothing to do.
  auto same = plan_conversion(a, blocked({64, 64}, {1, 4}, {8, 4}, {2, 2}, {1, 0}));
  CHECK(same.kind == ConversionKind::Identity);
  CHECK(same.dst_to_src == LinearLayout::identity(a.in_dims()));
  // Order swapped: warps own different parts of the tile -> shared memory.
  auto swapped = blocked({64, 64}, {1, 4}, {8, 4}, {2, 2}, {0, 1});
  auto p1 = plan_conversion(a, swapped);
  CHECK(p1.kind == ConversionKind::SharedMemory);
  check_plan(a, swapped, p1);
  // Same warp tiles, different lane arrangement -> shuffles.
  auto s1 = blocked({64, 32}, {4, 1}, {4, 8}, {4, 1}, {1, 0});
  auto s2 = blocked({64, 32}, {2, 2}, {8, 4}, {4, 1}, {1, 0});
  auto p2 = plan_conversion(s1, s2);
  CHECK(p2.kind == ConversionKind::WarpShuffle);
  check_plan(s1, s2, p2);
  // Registers listed in another order -> register permutation.
  auto regs = a.bases(kReg);
  std::reverse(regs.begin(), regs.end());
  auto permuted = a.with_bases(kReg, regs);
  auto p3 = plan_conversion(a, permuted);
  CHECK(p3.kind == ConversionKind::RegisterPermute);
  check_plan(a, permuted, p3);
  // dst_to_src of a register permutation: reg index bits reversed, lane/warp untouched.
  const int reg_bits = a.in_dim_bits(kReg);
  REQUIRE(reg_bits == 5);
  for (int r = 0; r < a.num_regs(); ++r) {
    int rev = 0;
    for (int b = 0; b < reg_bits; ++b) rev |= ((r >> b) & 1) << (reg_bits - 1 - b);
    CHECK(p3.dst_to_src.apply({r, 5, 3, 0}) == Coord{rev, 5, 3, 0});
  }
  // A one-warp mma accumulator to a one-warp blocked layout: shuffles, and back.
  auto acc = mma_v2_accumulator({16, 16}, {1, 1});
  auto blk = blocked({16, 16}, {1, 8}, {16, 2}, {1, 1}, {1, 0});
  check_plan(acc, blk, plan_conversion(acc, blk));
  CHECK(plan_conversion(acc, blk).kind == ConversionKind::WarpShuffle);
  CHECK(plan_conversion(blk, acc).kind == ConversionKind::WarpShuffle);
  // With 4 warps arranged differently: shared memory.
  auto acc4 = mma_v2_accumulator({64, 64}, {2, 2});
  auto blk4 = blocked({64, 64}, {1, 8}, {4, 8}, {4, 1}, {1, 0});
  CHECK(plan_conversion(acc4, blk4).kind == ConversionKind::SharedMemory);
  check_plan(acc4, blk4, plan_conversion(acc4, blk4));
  // From a replicated layout to a non-replicated one: register-local when every thread already
  // has the element; the other way round the copies must be made, through shared memory.
  auto row = blocked({4, 32}, {1, 1}, {1, 32}, {4, 1}, {1, 0});  // warp w holds row w
  auto bcast = blocked({4, 32}, {1, 1}, {1, 32}, {1, 4}, {1, 0});  // warps wrap: every warp holds all
  CHECK(plan_conversion(bcast, row).kind == ConversionKind::RegisterPermute);
  check_plan(bcast, row, plan_conversion(bcast, row));
  CHECK(plan_conversion(row, bcast).kind == ConversionKind::SharedMemory);
  check_plan(row, bcast, plan_conversion(row, bcast));
  // Cross-CTA: the block dimension moves.
  LinearLayout c1({{kReg, {}}, {kLane, {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {16, 0}}}, {kWarp, {}}, {kBlock, {{0, 1}}}},
                  {{"dim0", 32}, {"dim1", 2}});
  LinearLayout c2({{kReg, {{0, 1}}}, {kLane, {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {0, 0}}}, {kWarp, {}}, {kBlock, {{16, 0}}}},
                  {{"dim0", 32}, {"dim1", 2}});
  CHECK(plan_conversion(c1, c2).kind == ConversionKind::CrossCta);
  check_plan(c1, c2, plan_conversion(c1, c2));
  // Different tiles: an error.
  CHECK_THROWS_AS(plan_conversion(a, blocked({64, 32}, {1, 4}, {8, 4}, {2, 2}, {1, 0})), InternalError);
}

TEST_CASE("layout: conversion classification agrees with brute force", "[layout]") {
  std::mt19937 rng(4242);
  std::map<ConversionKind, int> seen;
  for (int iter = 0; iter < 250; ++iter) {
    int rank = 1 + iter % 2;
    BlockedParams p = random_blocked(rng, rank);
    BlockedParams q = random_blocked(rng, rank);
    q.shape = p.shape;
    if (iter % 3 == 0) q.wpc = p.wpc;  // same warps more often: exercises the shuffle case
    if (iter % 5 == 0) {
      q = p;
      q.order = random_order(rng, rank);
    }
    LinearLayout src = make(p), dst = make(q);
    if (src.num_warps() != dst.num_warps()) {  // one kernel has one warp count
      CHECK_THROWS_WITH(plan_conversion(src, dst), Catch::Contains("numbers of"));
      continue;
    }
    auto plan = plan_conversion(src, dst);
    seen[plan.kind]++;
    check_plan(src, dst, plan);
    // Registers shuffled at random: always a register permutation (or identity).
    auto regs = src.bases(kReg);
    std::shuffle(regs.begin(), regs.end(), rng);
    auto shuffled = src.with_bases(kReg, regs);
    auto rp = plan_conversion(src, shuffled);
    CHECK((rp.kind == ConversionKind::Identity || rp.kind == ConversionKind::RegisterPermute));
    check_plan(src, shuffled, rp);
  }
  CHECK(seen[ConversionKind::Identity] > 0);
  CHECK(seen[ConversionKind::RegisterPermute] > 0);
  CHECK(seen[ConversionKind::WarpShuffle] > 0);
  CHECK(seen[ConversionKind::SharedMemory] > 0);
}

TEST_CASE("vector_dim / consecutive_reg_bits: register runs along one dim", "[layout]") {
  // 4 consecutive elements per thread along dim 1, then 2 along dim 0 (size_per_thread {2, 4}).
  auto l = blocked({16, 64}, {2, 4}, {4, 8}, {2, 1}, {1, 0});
  CHECK(consecutive_reg_bits(l, 1) == 2);
  CHECK(consecutive_reg_bits(l, 0) == 0);
  CHECK(vector_dim(l, 2) == 1);
  CHECK(vector_dim(l, 4) == 1);
  CHECK(vector_dim(l, 8) == -1);  // register 4 is the next row, not column 4
  CHECK(vector_dim(l, 1) == -1);
  CHECK(vector_dim(l, 3) == -1);
  // Order {0, 1}: the runs are along dim 0.
  auto t = blocked({64, 16}, {4, 1}, {8, 4}, {1, 2}, {0, 1});
  CHECK(vector_dim(t, 4) == 0);
  CHECK(consecutive_reg_bits(t, 0) == 2);
  // One register per thread: no run.
  auto dup = blocked({1, 32}, {1, 1}, {1, 32}, {1, 1}, {1, 0});
  CHECK(vector_dim(dup, 2) == -1);
}

TEST_CASE("cp_async_dim: 4, 8 or 16-byte vectors along a dim, both dims >= 8", "[layout]") {
  auto l = blocked({16, 64}, {2, 4}, {4, 8}, {2, 1}, {1, 0});  // 4-element runs along dim 1
  CHECK(cp_async_dim(l, {16, 64}, 4, 2) == 1);   // 8 bytes
  CHECK(cp_async_dim(l, {16, 64}, 2, 2) == 1);   // 4 bytes
  CHECK(cp_async_dim(l, {16, 64}, 4, 4) == 1);   // 16 bytes
  CHECK(cp_async_dim(l, {16, 64}, 4, 8) == -1);  // 32 bytes: no such cp.async
  CHECK(cp_async_dim(l, {16, 64}, 2, 1) == -1);  // 2 bytes
  CHECK(cp_async_dim(l, {16, 64}, 8, 2) == -1);  // registers 4.. are the next row
  auto t = blocked({64, 16}, {4, 1}, {8, 4}, {1, 2}, {0, 1});  // runs along dim 0
  CHECK(cp_async_dim(t, {64, 16}, 4, 2) == 0);
  auto thin = blocked({4, 64}, {1, 4}, {2, 16}, {2, 1}, {1, 0});
  CHECK(cp_async_dim(thin, {4, 64}, 4, 2) == -1);  // 4 rows: fewer than 8
  CHECK(cp_async_dim(l, {16, 64, 1}, 4, 2) == -1);  // not 2-D
}
