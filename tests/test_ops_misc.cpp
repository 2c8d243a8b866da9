// tests/test_ops_misc.cpp - CPU numerical tests through the public API, part 3: shape ops, atomics,
// cdiv, hints, device loops and if_, helper functions, specialization/caching and kernel.ir().
#include <algorithm>
#include <set>

#include "ops_util.hpp"

using namespace tle;
using namespace opstest;

// A fixed ragged tile size of the tests below (the GPU pads it: src/passes/gpu/pad_shapes.cpp).
static const int N17 = 17;

// ============================================================ shape ops

TEST_CASE("ops: expand_dims, broadcast_to, reshape, trans, permute", "[ops]") {
  auto k = jit("shapes", [](Ptr<int32_t> x, Ptr<int32_t> out, Constexpr<int> M, Constexpr<int> N) {
    Tile<int32_t> i = arange(0, M), j = arange(0, N);
    Tile<int32_t> ci = expand_dims(i, 1), rj = expand_dims(j, 0), rj2 = expand_dims(j, -2);
    CHECK(ci.shape() == Shape{M, 1});
    CHECK(rj.shape() == Shape{1, N});
    CHECK(rj2.shape() == Shape{1, N});
    const int MN = M * N;
    Tile<int32_t> v = load(x + ci * N + rj);  // [M, N]
    Tile<int32_t> o = ci * N + rj;
    // broadcast_to: a row, a column and a scalar
    store(out + o, broadcast_to(load(x + rj), {M, N}));
    store(out + MN + o, broadcast_to(load(x + ci), {M, N}));
    store(out + 2 * MN + o, broadcast_to(load(x), {M, N}));
    // reshape [M, N] -> [M * N] -> [N, M]: same row-major order
    Tile<int32_t> flat = reshape(v, {M * N});
    store(out + 3 * MN + arange(0, M * N), flat);
    Tile<int32_t> r = reshape(flat, {N, M});
    Tile<int32_t> ti = expand_dims(arange(0, N), 1), tj = expand_dims(arange(0, M), 0);
    store(out + 4 * MN + ti * M + tj, r);
    // trans: [N, M] with t[a, b] = v[b, a]
    Tile<int32_t> t = trans(v);
    CHECK(t.shape() == Shape{N, M});
    store(out + 5 * MN + ti * M + tj, t);
    // expand_dims at 0 of a 2-D tile, then reshape back
    Tile<int32_t> e = expand_dims(v, 0);
    CHECK(e.shape() == Shape{1, M, N});
    store(out + 6 * MN + o, reshape(e, {M, N}) * 2);
  });
  for (auto [M0_, N0_] : {std::pair{1, 1}, std::pair{17, 1}, std::pair{1, 17}, std::pair{17, 33}, std::pair{4, 1001}}) {
    const int M = M0_, N = N0_;
    CAPTURE(M, N);
    size_t mn = size_t(M) * N;
    Buf<int32_t> x = random_full<int32_t>(std::max<size_t>(mn, 1), 1);
    Buf<int32_t> out(7 * mn);
    std::vector<int32_t> w(7 * mn);
    for (int a = 0; a < M; ++a)
      for (int b = 0; b < N; ++b) {
        size_t o = size_t(a) * N + b;
        w[o] = x[b], w[mn + o] = x[a], w[2 * mn + o] = x[0];
        w[3 * mn + o] = x[o], w[4 * mn + o] = x[o];
        w[5 * mn + size_t(b) * M + a] = x[o];
        w[6 * mn + o] = int32_t(uint32_t(x[o]) * 2u);
      }
    k(Grid(1), x.data(), out.data(), M, N);
    CHECK(diffs(out, w) == "");
  }
}

TEST_CASE("ops: permute a 3-D tile", "[ops]") {
  auto k = jit("permute3", [](Ptr<float> x, Ptr<float> out, Constexpr<int> A, Constexpr<int> B, Constexpr<int> C,
                              Constexpr<int> ORDER) {
    Tile<int32_t> a = expand_dims(expand_dims(arange(0, A), 1), 2);  // [A,1,1]
    Tile<int32_t> b = expand_dims(expand_dims(arange(0, B), 0), 2);  // [1,B,1]
    Tile<int32_t> c = expand_dims(expand_dims(arange(0, C), 0), 0);  // [1,1,C]
    Tile<float> v = load(x + (a * B + b) * C + c);                   // [A,B,C]
    std::vector<int> order = {ORDER / 100, ORDER / 10 % 10, ORDER % 10};
    Tile<float> p = permute(v, order);
    int dims[3] = {A, B, C};
    CHECK(p.shape() == Shape{dims[order[0]], dims[order[1]], dims[order[2]]});
    // store p row-major: p's dims are (d0, d1, d2) = dims[order[.]]
    int d0 = dims[order[0]], d1 = dims[order[1]], d2 = dims[order[2]];
    Tile<int32_t> r0 = expand_dims(expand_dims(arange(0, d0), 1), 2);
    Tile<int32_t> r1 = expand_dims(expand_dims(arange(0, d1), 0), 2);
    Tile<int32_t> r2 = expand_dims(expand_dims(arange(0, d2), 0), 0);
    store(out + (r0 * d1 + r1) * d2 + r2, p);
  });
  const int A = 2, B = 3, C = N17;
  Buf<float> x = random_buf<float>(A * B * C, 9);
  for (int order : {12, 21, 102, 120, 201, 210}) {  // 012 is written 12
    CAPTURE(order);
    int o[3] = {order / 100, order / 10 % 10, order % 10};
    int dims[3] = {A, B, C};
    Buf<float> out(A * B * C);
    std::vector<float> w(A * B * C);
    for (int a = 0; a < A; ++a)
      for (int b = 0; b < B; ++b)
        for (int c = 0; c < C; ++c) {
          int idx[3] = {a, b, c};
          // result index r_i = idx[order[i]]
          int r0 = idx[o[0]], r1 = idx[o[1]], r2 = idx[o[2]];
          w[(size_t(r0) * dims[o[1]] + r1) * dims[o[2]] + r2] = x[(size_t(a) * B + b) * C + c];
        }
    k(Grid(1), x.data(), out.data(), A, B, C, order);
    CHECK(diffs(out, w) == "");
  }
}

// ============================================================ atomics

TEST_CASE("ops: atomic_add from many programs onto few counters (i32, f32, masks)", "[ops]") {
  auto k = jit("atomic_add", [](Ptr<int32_t> ci, Ptr<float> cf, Ptr<int64_t> cl, Tile<int32_t> n,
                                Constexpr<int> BLOCK, Constexpr<int> NC) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    // many lanes of one tile hit the same counter
    atomic_add(ci + offs % NC, 1, m);
    atomic_add(cf + offs % NC, 0.5f, m);
    atomic_add(cl + offs % NC, offs.to<int64_t>() * 1000000, m);
    // one scalar atomic per program
    atomic_add(ci + NC, 1);
  });
  for (int n : kSizes) {
    for (int block : {1, 16, 128}) {
      CAPTURE(n, block);
      const int NC = 3;
      int grid = int(cdiv(n, block));
      Buf<int32_t> ci(NC + 1, 0);
      Buf<float> cf(NC, 0.f);
      Buf<int64_t> cl(NC, 0);
      std::vector<int32_t> wi(NC + 1, 0);
      std::vector<float> wf(NC, 0.f);
      std::vector<int64_t> wl(NC, 0);
      for (int i = 0; i < n; ++i) wi[i % NC] += 1, wf[i % NC] += 0.5f, wl[i % NC] += int64_t(i) * 1000000;
      wi[NC] = grid;
      k(Grid(grid), ci.data(), cf.data(), cl.data(), n, block, NC);
      CHECK(diffs(ci, wi) == "");
      CHECK(diffs(cf, wf) == "");  // exact: multiples of 0.5 far below 2^24
      CHECK(diffs(cl, wl) == "");
    }
  }
}

TEST_CASE("ops: atomics return the old values (0 where masked off)", "[ops]") {
  auto k = jit("atomic_old", [](Ptr<int32_t> c, Ptr<int32_t> old, Ptr<float> cf, Ptr<float> oldf, Tile<int32_t> n,
                                Constexpr<int> BLOCK) {
    Tile<int32_t> r = arange(0, BLOCK);
    Tile<bool> m = r < n;
    store(old + r, atomic_add(c + r, r + 1, m));
    store(oldf + r, atomic_max(cf + r, 2.5f, m));
  });
  const int block = 32;
  for (int n : {1, 17, 32}) {
    CAPTURE(n);
    Buf<int32_t> c = random_buf<int32_t>(block, 1, 1, 100), old(block, -1);
    Buf<float> cf = random_buf<float>(block, 2, 0, 5), oldf(block, -1.f);
    std::vector<int32_t> wc(block), wo(block);
    std::vector<float> wcf(block), wof(block);
    for (int i = 0; i < block; ++i) {
      bool in = i < n;
      wo[i] = in ? c[i] : 0, wc[i] = in ? c[i] + i + 1 : c[i];
      wof[i] = in ? cf[i] : 0.f, wcf[i] = in ? std::max(cf[i], 2.5f) : cf[i];
    }
    k(Grid(1), c.data(), old.data(), cf.data(), oldf.data(), n, block);
    CHECK(diffs(old, wo) == "");
    CHECK(diffs(c, wc) == "");
    CHECK(diffs(oldf, wof) == "");
    CHECK(diffs(cf, wcf) == "");
  }
}

// Old values as slots: the lanes adding 1 to one counter get distinct old values, a compaction in
// some order (the GPU may aggregate a warp's adds to one address: one add of the count, each lane's
// old value the leader's plus its rank), through global counters shared by the programs and a
// shared-memory counter of each program.
TEST_CASE("ops: atomic_add old values are distinct slots (compaction through a counter)", "[ops]") {
  auto k = jit("atomic_slots", [](Ptr<int32_t> ctr, Ptr<int32_t> out, Ptr<int32_t> local_out, Tile<int32_t> n,
                                  Tile<int32_t> cap, Constexpr<int> BLOCK, Constexpr<int> NC) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> keep = (offs < n) & ((offs * 7 + offs / 5) % 3 != 0);
    Tile<int32_t> c = offs % NC;
    Tile<int32_t> slot = atomic_add(ctr + c, 1, keep);
    store(out + (c * cap + slot), offs, keep);
    auto lc = gpu::alloc<int32_t>({1}, gpu::scope::shared);
    lc.store(zeros<int32_t>({1}));
    Tile<int32_t> pos = atomic_add(gpu::local_ptr(lc, {zeros<int32_t>({BLOCK})}), 1, keep);
    store(local_out + (program_id(0) * BLOCK + pos), offs, keep);
  });
  for (int n : kSizes) {
    for (int block : {32, 256}) {
      CAPTURE(n, block);
      const int NC = 3, grid = int(cdiv(n, block)), cap = n;
      Buf<int32_t> ctr(NC, 0), out(size_t(NC) * cap, -1), local_out(size_t(grid) * block, -1);
      k(Grid(grid), ctr.data(), out.data(), local_out.data(), n, cap, block, NC);
      std::vector<std::vector<int32_t>> want(NC), got(NC);
      for (int i = 0; i < n; ++i)
        if ((i * 7 + i / 5) % 3 != 0) want[i % NC].push_back(i);
      for (int c = 0; c < NC; ++c) {
        CHECK(ctr[c] == int32_t(want[c].size()));
        for (int s = 0; s < std::min<int>(ctr[c], cap); ++s) got[c].push_back(out[size_t(c) * cap + s]);
        std::sort(got[c].begin(), got[c].end());
        CHECK(got[c] == want[c]);
      }
      for (int p = 0; p < grid; ++p) {
        std::vector<int32_t> w, g;
        for (int i = p * block; i < std::min(n, (p + 1) * block); ++i)
          if ((i * 7 + i / 5) % 3 != 0) w.push_back(i);
        for (size_t s = 0; s < w.size(); ++s) g.push_back(local_out[size_t(p) * block + s]);
        std::sort(g.begin(), g.end());
        CHECK(g == w);
        for (int s = int(w.size()); s < block; ++s) CHECK(local_out[size_t(p) * block + s] == -1);
      }
    }
  }
}

TEST_CASE("ops: atomic_max / atomic_min from many programs (i32, u32, f32, i64)", "[ops]") {
  auto k = jit("atomic_mm", [](Ptr<int32_t> x, Ptr<float> xf, Ptr<uint32_t> xu, Ptr<int64_t> xl, Ptr<int32_t> ri,
                               Ptr<float> rf, Ptr<uint32_t> ru, Ptr<int64_t> rl, Tile<int32_t> n,
                               Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<int32_t> v = load(x + offs, m);
    atomic_max(ri, v, m);  // a scalar pointer broadcast over the lanes
    atomic_min(ri + 1, v, m);
    Tile<float> vf = load(xf + offs, m);
    atomic_max(rf + 0 * offs, vf, m);
    atomic_min(rf + 1 + 0 * offs, vf, m);
    Tile<uint32_t> vu = load(xu + offs, m);
    atomic_max(ru, vu, m);
    atomic_min(ru + 1, vu, m);
    Tile<int64_t> vl = load(xl + offs, m);
    atomic_max(rl, vl, m);
    atomic_min(rl + 1, vl, m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<int32_t> x = random_full<int32_t>(n, 1);
    Buf<float> xf = random_buf<float>(n, 2, -1000, 1000);
    Buf<uint32_t> xu = random_full<uint32_t>(n, 3);
    Buf<int64_t> xl = random_full<int64_t>(n, 4);
    Buf<int32_t> ri(2);
    Buf<float> rf(2);
    Buf<uint32_t> ru(2);
    Buf<int64_t> rl(2);
    ri[0] = std::numeric_limits<int32_t>::min(), ri[1] = std::numeric_limits<int32_t>::max();
    rf[0] = -INFINITY, rf[1] = INFINITY, ru[0] = 0, ru[1] = ~0u;
    rl[0] = std::numeric_limits<int64_t>::min(), rl[1] = std::numeric_limits<int64_t>::max();
    std::vector<int32_t> wi = {*std::max_element(x.data(), x.data() + n), *std::min_element(x.data(), x.data() + n)};
    std::vector<float> wf = {*std::max_element(xf.data(), xf.data() + n), *std::min_element(xf.data(), xf.data() + n)};
    std::vector<uint32_t> wu = {*std::max_element(xu.data(), xu.data() + n), *std::min_element(xu.data(), xu.data() + n)};
    std::vector<int64_t> wl = {*std::max_element(xl.data(), xl.data() + n), *std::min_element(xl.data(), xl.data() + n)};
    k(Grid(cdiv(n, 16)), x.data(), xf.data(), xu.data(), xl.data(), ri.data(), rf.data(), ru.data(), rl.data(), n, 16);
    CHECK(diffs(ri, wi) == "");
    CHECK(diffs(rf, wf) == "");
    CHECK(diffs(ru, wu) == "");
    CHECK(diffs(rl, wl) == "");
  }
}

template <class H> void half_atomics_case(unsigned seed) {
  // max/min of many programs onto two counters (NaN propagates, -0 < +0: rule E02), and xchg
  // handing every value on exactly once; f16/bf16 are compare-and-swap loops on both backends.
  auto k = jit("half_atomics", [](Ptr<H> x, Ptr<H> r, Ptr<H> slot, Ptr<H> olds, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<H> v = load(x + offs, m);
    atomic_max(r + 0 * offs, v, m);
    atomic_min(r + 1 + 0 * offs, v, m);
    store(olds + offs, atomic_xchg(slot + 0 * offs, v, m), m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<H> x(n);
    for (int i = 0; i < n; ++i) x[i] = H(double(int((i * 7919u + seed) % 2001) - 1000) / 8);  // distinct per 2001
    if (n > 3) x[1] = H(-0.0), x[2] = H(0.0);
    Buf<H> r(2), slot(1), olds(n);
    r[0] = H(-INFINITY), r[1] = H(INFINITY), slot[0] = H(12345.0);
    k(Grid(cdiv(n, 16)), x.data(), r.data(), slot.data(), olds.data(), n, 16);
    double mx = -INFINITY, mn = INFINITY;
    for (int i = 0; i < n; ++i) mx = std::max(mx, to_d(x[i])), mn = std::min(mn, to_d(x[i]));
    CHECK(to_d(r[0]) == mx);
    CHECK(to_d(r[1]) == mn);
    // xchg: the old values and the final slot are a permutation of the initial slot and the inputs
    std::vector<uint16_t> got = {slot[0].bits}, want = {H(12345.0).bits};
    for (int i = 0; i < n; ++i) got.push_back(olds[i].bits), want.push_back(x[i].bits);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    CHECK(got == want);
  }
  // NaN propagates into max and min
  Buf<H> x(4), r(2), slot(1), olds(4);
  x[0] = H(1.0), x[1] = H(NAN), x[2] = H(-3.0), x[3] = H(2.0);
  r[0] = H(0.0), r[1] = H(0.0);
  k(Grid(1), x.data(), r.data(), slot.data(), olds.data(), 4, 16);
  CHECK(std::isnan(to_d(r[0])));
  CHECK(std::isnan(to_d(r[1])));
}

TEST_CASE("ops: f16 atomic_max / atomic_min / atomic_xchg", "[ops]") { half_atomics_case<f16>(1); }
TEST_CASE("ops: bf16 atomic_max / atomic_min / atomic_xchg", "[ops]") { half_atomics_case<bf16>(2); }

TEST_CASE("ops: atomic_cas elects exactly one winner, per-lane cas", "[ops]") {
  auto k = jit("cas", [](Ptr<int32_t> flag, Ptr<int32_t> olds) {
    Tile<int32_t> pid = program_id(0);
    store(olds + pid, atomic_cas(flag, 0, pid + 1));
  });
  auto k2 = jit("cas_lanes", [](Ptr<int32_t> p, Ptr<int64_t> q, Ptr<int32_t> old, Ptr<int64_t> oldq) {
    Tile<int32_t> r = arange(0, N17);
    store(old + r, atomic_cas(p + r, r, r * 10));  // swaps where p[i] == i
    store(oldq + r, atomic_cas(q + r, r.to<int64_t>() << 40, -1));
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<int32_t> flag(1, 0), olds(n, -5);
    k(Grid(n), flag.data(), olds.data());
    int zeros = 0, winner = -1;
    for (int i = 0; i < n; ++i)
      if (olds[i] == 0) ++zeros, winner = i;
    CHECK(zeros == 1);
    CHECK(flag[0] == winner + 1);
    for (int i = 0; i < n; ++i)
      if (i != winner) CHECK(olds[i] == winner + 1);
  }
  Buf<int32_t> p(N17), old(N17);
  Buf<int64_t> q(N17), oldq(N17);
  std::vector<int32_t> wp(N17), wo(N17);
  std::vector<int64_t> wq(N17), woq(N17);
  for (int i = 0; i < N17; ++i) {
    p[i] = i % 3 == 0 ? i : i + 100, q[i] = i % 2 ? int64_t(i) << 40 : i;
    wo[i] = p[i], wp[i] = p[i] == i ? i * 10 : p[i];
    woq[i] = q[i], wq[i] = q[i] == (int64_t(i) << 40) ? -1 : q[i];
  }
  k2(Grid(1), p.data(), q.data(), old.data(), oldq.data());
  CHECK(diffs(p, wp) == "");
  CHECK(diffs(old, wo) == "");
  CHECK(diffs(q, wq) == "");
  CHECK(diffs(oldq, woq) == "");
}

TEST_CASE("ops: atomic_xchg hands every value on exactly once", "[ops]") {
  auto k = jit("xchg", [](Ptr<int32_t> slot, Ptr<int32_t> olds, Ptr<float> fslot, Ptr<float> folds) {
    Tile<int32_t> pid = program_id(0);
    store(olds + pid, atomic_xchg(slot, pid + 1));
    store(folds + pid, atomic_xchg(fslot, pid.to<float>() + 0.5f));
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<int32_t> slot(1, 0), olds(n, -1);
    Buf<float> fslot(1, -1.f), folds(n, -2.f);
    k(Grid(n), slot.data(), olds.data(), fslot.data(), folds.data());
    std::vector<int32_t> all(olds.data(), olds.data() + n);
    all.push_back(slot[0]);
    std::sort(all.begin(), all.end());
    std::vector<int32_t> want(n + 1);
    for (int i = 0; i <= n; ++i) want[i] = i;
    CHECK(diffs(all, want) == "");
    std::vector<float> fall(folds.data(), folds.data() + n);
    fall.push_back(fslot[0]);
    std::sort(fall.begin(), fall.end());
    std::vector<float> fwant(n + 1);
    fwant[0] = -1.f;
    for (int i = 0; i < n; ++i) fwant[i + 1] = float(i) + 0.5f;
    CHECK(diffs(fall, fwant) == "");
  }
}

TEST_CASE("ops: atomic_and / atomic_or / atomic_xor and masked xchg", "[ops]") {
  auto k = jit("atomic_bits", [](Ptr<uint32_t> p, Ptr<int64_t> q, Ptr<int32_t> x, Tile<int32_t> n,
                                 Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<uint32_t> bit = full<uint32_t>({BLOCK}, 1u) << (offs % 32).to<uint32_t>();
    atomic_or(p, bit, m);
    atomic_and(p + 1, ~bit, m);
    atomic_xor(p + 2, bit, m);
    atomic_xor(q, (offs.to<int64_t>() + 1) * 0x10001, m);
    atomic_xchg(x + offs, -offs, offs % 2 == 0 && m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<uint32_t> p(3);
    p[0] = 0, p[1] = ~0u, p[2] = 0x12345678u;
    Buf<int64_t> q(1, 0);
    Buf<int32_t> x(1024, 7);
    std::vector<uint32_t> wp = {0, ~0u, 0x12345678u};
    int64_t wq = 0;
    std::vector<int32_t> wx(1024, 7);
    for (int i = 0; i < n; ++i) {
      uint32_t b = 1u << (i % 32);
      wp[0] |= b, wp[1] &= ~b, wp[2] ^= b, wq ^= (int64_t(i) + 1) * 0x10001;
      if (i % 2 == 0) wx[i] = -i;
    }
    k(Grid(cdiv(n, 64)), p.data(), q.data(), x.data(), n, 64);
    CHECK(diffs(p, wp) == "");
    CHECK(q[0] == wq);
    CHECK(diffs(x, wx) == "");
  }
}

// ============================================================ cdiv

TEST_CASE("ops: cdiv for constexpr values and tiles", "[ops]") {
  static_assert(cdiv(1001, 256) == 4);
  static_assert(cdiv(1024, 256) == 4);
  static_assert(cdiv(1, 256) == 1);
  static_assert(cdiv(0, 5) == 0);
  static_assert(cdiv(-36, 5) == -7);
  static_assert(cdiv(36, -5) == -7);
  static_assert(cdiv(-36, -5) == 8);
  CHECK(cdiv(17, 17) == 1);
  CHECK(cdiv(18, 17) == 2);

  auto k = jit("cdiv", [](Ptr<int32_t> a, Ptr<int32_t> b, Ptr<int32_t> out, Ptr<int64_t> out64, Tile<int32_t> n,
                          Tile<int32_t> d, Constexpr<int> BLOCK, Constexpr<int> CD) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<int32_t> x = load(a + offs, m), y = load(b + offs, m, 1);
    store(out + offs, cdiv(x, y), m);
    store(out + n + offs, cdiv(x, 7), m);
    store(out + 2 * n + offs, cdiv(x, d), m);
    store(out + 3 * n + offs, full<int32_t>({BLOCK}, cdiv(CD, 8)), m);  // constexpr cdiv in a kernel
    store(out64 + offs, cdiv(x.to<int64_t>() * 3, int64_t(-5)), m);
  });
  auto ref = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) == (b < 0))) ++q;
    return q;
  };
  for (int n : kSizes) {
    for (int d : {1, 3, -4}) {
      CAPTURE(n, d);
      Buf<int32_t> a = random_buf<int32_t>(n, 1, -1000000, 1000000), b = random_buf<int32_t>(n, 2, -50, 50);
      for (int i = 0; i < n; ++i)
        if (b[i] == 0) b[i] = 9;
      if (n > 3) a[0] = 0, a[1] = 14, b[1] = 7, a[2] = -14, b[2] = 7;
      Buf<int32_t> out(4 * size_t(n));
      Buf<int64_t> out64(n);
      std::vector<int32_t> w(4 * size_t(n));
      std::vector<int64_t> w64(n);
      for (int i = 0; i < n; ++i) {
        w[i] = int32_t(ref(a[i], b[i])), w[n + i] = int32_t(ref(a[i], 7)), w[2 * n + i] = int32_t(ref(a[i], d));
        w[3 * n + i] = int32_t(cdiv(1001, 8)), w64[i] = ref(int64_t(a[i]) * 3, -5);
      }
      k(Grid(cdiv(n, 128)), a.data(), b.data(), out.data(), out64.data(), n, d, 128, 1001);
      CHECK(diffs(out, w) == "");
      CHECK(diffs(out64, w64) == "");
    }
  }
}

// ============================================================ hints

TEST_CASE("ops: multiple_of / max_contiguous leave the results unchanged", "[ops]") {
  auto k = jit("hints", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> start = multiple_of(program_id(0) * BLOCK, BLOCK);
    Tile<int32_t> offs = max_contiguous(multiple_of(start + arange(0, BLOCK), BLOCK), BLOCK);
    Tile<bool> m = offs < n;
    store(out + offs, load(x + offs, m) * 2.0f + 1.0f, m);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(n, 1), out(n, 0.f);
    std::vector<float> w(n);
    for (int i = 0; i < n; ++i) w[i] = x[i] * 2.0f + 1.0f;
    k(Grid(cdiv(n, 64)), x.data(), out.data(), n, 64);
    CHECK(diffs(out, w) == "");
  }
  std::string ir = k.ir(false, (float*)nullptr, (float*)nullptr, 1001, 64);
  CHECK_THAT(ir, Catch::Contains("hint"));
}

// ============================================================ device loops and if_

TEST_CASE("ops: device loop sums a runtime-length vector in chunks", "[ops]") {
  auto k = jit("loop_sum", [](Ptr<float> x, Ptr<float> out, Ptr<int32_t> iout, Tile<int32_t> n,
                              Constexpr<int> BLOCK) {
    Tile<float> acc = zeros<float>({BLOCK});
    Tile<int32_t> trips = 0;
    for (auto s : range(0, n, BLOCK)) {
      Tile<int32_t> offs = s + arange(0, BLOCK);
      acc += load(x + offs, offs < n);
      trips = trips + 1;
    }
    store(out, sum(acc, 0));
    store(iout, trips);
  });
  for (int n : {0, 1, 17, 1001, 4096}) {
    for (int block : {16, 256}) {
      CAPTURE(n, block);
      Buf<float> x = random_buf<float>(std::max(n, 1), 3), out(1, -1.f);
      Buf<int32_t> iout(1, -1);
      double s = 0, sa = 0;
      for (int i = 0; i < n; ++i) s += x[i], sa += std::fabs(x[i]);
      k(Grid(1), x.data(), out.data(), iout.data(), n, block);
      CHECK(std::fabs(out[0] - s) <= 1e-6 * sa + 1e-30);
      CHECK(iout[0] == cdiv(n, block));
    }
  }
}

TEST_CASE("ops: nested device loops with carried scalars", "[ops]") {
  auto k = jit("nested", [](Ptr<float> x, Ptr<float> rows, Ptr<int64_t> out, Tile<int32_t> R, Tile<int32_t> C,
                            Constexpr<int> BLOCK) {
    // row sums of an R x C matrix: outer loop over rows, inner loop over column chunks
    for (auto r : range(0, R)) {
      Tile<float> acc = zeros<float>({BLOCK});
      for (auto c0 : range(0, C, BLOCK)) {
        Tile<int32_t> c = c0 + arange(0, BLOCK);
        acc = acc + load(x + r * C + c, c < C);
      }
      store(rows + r, sum(acc, 0));
    }
    // sum_{i<R} sum_{j<C} i*j + 1 in an i64 carried scalar
    Tile<int64_t> t = 0;
    for (auto i : range(0, R)) {
      for (auto j : range(0, C)) t += (i * j).to<int64_t>() + 1;
    }
    store(out, t);
  });
  struct S { int R, C; };
  for (S s : {S{1, 1}, S{3, 17}, S{17, 1001}, S{0, 5}, S{4, 0}}) {
    CAPTURE(s.R, s.C);
    Buf<float> x = random_buf<float>(std::max(1, s.R * s.C), 4);
    Buf<float> rows(std::max(1, s.R), -1.f);
    Buf<int64_t> out(1, -1);
    std::vector<double> w(std::max(1, s.R), -1.0);
    int64_t wt = 0;
    for (int r = 0; r < s.R; ++r) {
      double acc = 0;
      for (int c = 0; c < s.C; ++c) acc += x[size_t(r) * s.C + c], wt += int64_t(r) * c + 1;
      w[r] = acc;
    }
    k(Grid(1), x.data(), rows.data(), out.data(), s.R, s.C, 64);
    CHECK(diffs(rows, w, 1e-5, 1e-5) == "");
    CHECK(out[0] == wt);
  }
}

TEST_CASE("ops: range with runtime bounds and steps of either sign (no overflow)", "[ops]") {
  auto k = jit("range_rt", [](Ptr<int64_t> out, Tile<int32_t> lo, Tile<int32_t> hi, Tile<int32_t> step) {
    Tile<int64_t> trips = 0, s = 0;
    Tile<int32_t> last = -12345;
    for (auto i : range(lo, hi, step)) {
      trips += 1;
      s += i.to<int64_t>();
      last = i;
    }
    store(out, trips);
    store(out + 1, s);
    store(out + 2, last.to<int64_t>());
  });
  auto k64 = jit("range64", [](Ptr<int64_t> out, Tile<int64_t> lo, Tile<int64_t> hi, Tile<int64_t> step) {
    Tile<int64_t> trips = 0, last = 0;
    for (auto i : range(lo, hi, step)) {
      static_assert(std::is_same_v<decltype(i), Tile<int64_t>>);
      trips += 1;
      last = i;
    }
    store(out, trips);
    store(out + 1, last);
  });
  const int32_t MN = std::numeric_limits<int32_t>::min(), MX = std::numeric_limits<int32_t>::max();
  struct R { int32_t lo, hi, step; };
  for (R r : {R{0, 10, 3}, R{10, 0, -3}, R{0, 0, 1}, R{5, 0, 1}, R{0, 5, -1}, R{0, 10, 0}, R{-7, 17, 1},
              R{MN, MX, 1 << 30}, R{MX, MN, -(1 << 30)}, R{MN, MX, MX}, R{0, 1, 1}, R{MX - 2, MX, 1}}) {
    CAPTURE(r.lo, r.hi, r.step);
    int64_t trips = 0, s = 0, last = -12345;
    if (r.step > 0)
      for (int64_t i = r.lo; i < r.hi; i += r.step) ++trips, s += i, last = i;
    if (r.step < 0)
      for (int64_t i = r.lo; i > r.hi; i += r.step) ++trips, s += i, last = i;
    Buf<int64_t> out(3, -1);
    k(Grid(1), out.data(), r.lo, r.hi, r.step);
    CHECK(out[0] == trips);
    CHECK(out[1] == s);
    CHECK(out[2] == last);
  }
  const int64_t LMN = std::numeric_limits<int64_t>::min(), LMX = std::numeric_limits<int64_t>::max();
  struct R64 { int64_t lo, hi, step, trips, last; };
  for (R64 r : {R64{0, int64_t(1) << 40, int64_t(1) << 38, 4, 3 * (int64_t(1) << 38)},
                R64{LMN, LMX, int64_t(1) << 62, 4, int64_t(1) << 62}, R64{LMX, LMN, LMN, 2, -1},
                R64{LMN, LMX, LMX, 3, LMX - 1}}) {
    CAPTURE(r.lo, r.hi, r.step);
    Buf<int64_t> out(2, -1);
    k64(Grid(1), out.data(), r.lo, r.hi, r.step);
    CHECK(out[0] == r.trips);
    CHECK(out[1] == r.last);
  }
}

TEST_CASE("ops: several carried tiles (fibonacci) and a loop over a constexpr range", "[ops]") {
  auto k = jit("fib", [](Ptr<int64_t> out, Ptr<float> vout, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int64_t> a = 0, b = 1;
    for (auto i : range(0, n)) {
      (void)i;
      Tile<int64_t> t = a + b;
      a = b;
      b = t;
    }
    store(out, a);
    store(out + 1, b);
    // a carried tile together with a C++ (trace-time) loop inside the device loop
    Tile<float> v = full<float>({BLOCK}, 1.0f);
    for (auto i : range(1, 4)) {
      for (int rep = 0; rep < 2; ++rep) v = v * 2.0f;
      v = v + i.to<float>();
    }
    store(vout + arange(0, BLOCK), v);
  });
  for (int n : {0, 1, N17, 90}) {
    CAPTURE(n);
    int64_t a = 0, b = 1;
    for (int i = 0; i < n; ++i) {
      int64_t t = a + b;
      a = b, b = t;
    }
    Buf<int64_t> out(2);
    Buf<float> vout(N17);
    k(Grid(1), out.data(), vout.data(), n, N17);
    CHECK(out[0] == a);
    CHECK(out[1] == b);
    float v = 1;
    for (int i = 1; i < 4; ++i) v = v * 4 + float(i);
    CHECK(diffs(vout, std::vector<float>(N17, v)) == "");
  }
}

TEST_CASE("ops: data-dependent if_ with and without else", "[ops]") {
  auto k = jit("if", [](Ptr<float> x, Ptr<float> out, Ptr<int32_t> flags, Tile<int32_t> ncols,
                        Constexpr<int> BLOCK) {
    Tile<int32_t> row = program_id(0);
    Tile<int32_t> c = arange(0, BLOCK);
    Tile<bool> m = c < ncols;
    Tile<float> v = load(x + row * ncols + c, m);
    Tile<float> s = sum(v, 0);
    Tile<float> r;  // assigned in both branches
    Tile<int32_t> flag = 0;
    if_(s > 0.0f,
        [&] {
          r = v * 2.0f;
          flag = Tile<int32_t>(1);  // `flag = 1` is ambiguous: see the assignment test below
        },
        [&] { r = -v; });
    store(out + row * ncols + c, r, m);
    // without else: only assigned when the condition holds
    Tile<int32_t> big = -1;
    if_(max(v, 0) > 0.9f, [&] { big = argmax(v, 0); });
    store(flags + row * 2, flag);
    store(flags + row * 2 + 1, big);
    // an if_ with only a side effect
    if_(row == 0, [&] { store(flags + 2 * num_programs(0), 42); });
  });
  const int rows = 9;
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(size_t(rows) * n, n);
    Buf<float> out(size_t(rows) * n);
    Buf<int32_t> flags(2 * rows + 1, -7);
    std::vector<float> w(size_t(rows) * n);
    std::vector<int32_t> wf(2 * rows + 1);
    for (int r = 0; r < rows; ++r) {
      float s = 0, mx = -INFINITY;
      int am = 0;
      for (int c = 0; c < n; ++c) {
        float v = x[size_t(r) * n + c];
        s += v;
        if (v > mx) mx = v, am = c;
      }
      for (int c = 0; c < n; ++c) w[size_t(r) * n + c] = s > 0 ? x[size_t(r) * n + c] * 2 : -x[size_t(r) * n + c];
      wf[2 * r] = s > 0, wf[2 * r + 1] = mx > 0.9f ? am : -1;
    }
    wf[2 * rows] = 42;
    k(Grid(rows), x.data(), out.data(), flags.data(), n, 1024);
    CHECK(diffs(out, w) == "");
    CHECK(diffs(flags, wf) == "");
  }
}

TEST_CASE("ops: assigning a C++ scalar or a promotable tile to an existing Tile", "[ops]") {
  // tile.hpp declares Tile& operator=(Operand<T>) for this, but the copy assignment through the
  // converting constructors Tile(U) / Tile(const Tile<U>&) competes with it: the call is ambiguous.
  CHECK(std::is_assignable_v<Tile<int32_t>&, int>);
  CHECK(std::is_assignable_v<Tile<float>&, double>);
  CHECK(std::is_assignable_v<Tile<float>&, const Tile<int32_t>&>);
  CHECK(std::is_assignable_v<Tile<float>&, const Tile<float>&>);
}

TEST_CASE("ops: if_ inside a device loop and a loop inside if_", "[ops]") {
  auto k = jit("if_loop", [](Ptr<int32_t> out, Tile<int32_t> n) {
    Tile<int32_t> evens = 0, odds = 0;
    for (auto i : range(0, n)) {
      if_((i % 2) == 0, [&] { evens += i; }, [&] { odds = odds + 1; });
    }
    store(out, evens);
    store(out + 1, odds);
    Tile<int32_t> t = 0;
    if_(n > 10, [&] {
      for (auto i : range(0, n, 5)) t += i;
    });
    store(out + 2, t);
  });
  for (int n : {0, 1, 17, 1001}) {
    CAPTURE(n);
    int e = 0, o = 0, t = 0;
    for (int i = 0; i < n; ++i) (i % 2 == 0 ? e += i : ++o);
    if (n > 10)
      for (int i = 0; i < n; i += 5) t += i;
    Buf<int32_t> out(3, -1);
    k(Grid(1), out.data(), n);
    CHECK(out[0] == e);
    CHECK(out[1] == o);
    CHECK(out[2] == t);
  }
}

// ============================================================ helper functions

namespace {
template <class T> Tile<T> softplus(const Tile<T>& x) { return log(1.0f + exp(x)); }
Tile<float> axpy(const Tile<float>& a, Tile<float> x, const Tile<float>& y) { return a * x + y; }
Tile<int32_t> block_offsets(int block) { return program_id(0) * block + arange(0, block); }
struct MaskedRow {
  Tile<int32_t> offs;
  Tile<bool> mask;
};
MaskedRow masked_row(const Tile<int32_t>& n, int block) {
  Tile<int32_t> o = block_offsets(block);
  return {o, o < n};
}
void store_twice(Ptr<float> p, const Tile<float>& v, const Tile<bool>& m, const Tile<int32_t>& n) {
  store(p, v, m);
  store(p + n, v * v, m);
}
}  // namespace

TEST_CASE("ops: plain C++ helper functions taking and returning tiles", "[ops]") {
  auto k = jit("helpers", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Tile<float> a, Tile<int32_t> n,
                             Constexpr<int> BLOCK) {
    MaskedRow row = masked_row(n, BLOCK);
    Tile<float> xv = load(x + row.offs, row.mask), yv = load(y + row.offs, row.mask);
    Tile<float> r = axpy(a, softplus(xv), yv);
    store_twice(out + row.offs, r, row.mask, n);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    Buf<float> x = random_buf<float>(n, 1, -3, 3), y = random_buf<float>(n, 2), out(2 * size_t(n));
    std::vector<double> w(2 * size_t(n));
    for (int i = 0; i < n; ++i) {
      double r = 1.5 * std::log(1.0 + std::exp(double(x[i]))) + y[i];
      w[i] = r, w[n + i] = r * r;
    }
    k(Grid(cdiv(n, 32)), x.data(), y.data(), out.data(), 1.5f, n, 32);
    CHECK(diffs(out, w, 1e-5, 1e-6) == "");
  }
}

// ============================================================ specialization and caching

TEST_CASE("ops: specialization cache (constexpr, alignment, ints equal to 1 or multiples of 2, 4, 8, 16)", "[ops]") {
  auto k = jit("spec", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Tile<int32_t> stride,
                          Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    store(out + offs, load(x + offs * stride, m) * 3.0f, m);
  });
  const int cap = 3 * 1001 + 2;
  Buf<float> x = random_buf<float>(cap, 7);
  auto run = [&](float* xp, int n, int stride, int block) {
    Buf<float> out(n + 1, -1.f);
    std::vector<float> w(n + 1, -1.f);
    for (int i = 0; i < n; ++i) w[i] = xp[size_t(i) * stride] * 3.0f;
    k(Grid(cdiv(n, block)), xp, out.data(), n, stride, block);
    return diffs(out, w);
  };
  CHECK(k.num_compiled() == 0);
  CHECK(run(x.data(), 1001, 2, 128) == "");
  CHECK(k.num_compiled() == 1);
  CHECK(run(x.data(), 1001, 2, 128) == "");  // same key: no recompilation
  CHECK(run(x.data(), 17, 6, 128) == "");    // other runtime values, same key (odd n, stride 2 * odd)
  CHECK(k.num_compiled() == 1);
  CHECK(run(x.data(), 1001, 2, 64) == "");  // another constexpr
  CHECK(k.num_compiled() == 2);
  CHECK(run(x.data() + 1, 1001, 2, 64) == "");  // a pointer aligned to 4 bytes, not 16
  CHECK(k.num_compiled() == 3);
  CHECK(run(x.data() + 1, 17, 6, 64) == "");
  CHECK(k.num_compiled() == 3);
  CHECK(run(x.data() + 4, 17, 6, 64) == "");  // 16-byte aligned again: back to the first key of BLOCK=64
  CHECK(k.num_compiled() == 3);
  CHECK(run(x.data(), 1001, 1, 64) == "");  // stride == 1 specializes
  CHECK(k.num_compiled() == 4);
  CHECK(run(x.data(), 1, 2, 64) == "");  // n == 1 specializes
  CHECK(k.num_compiled() == 5);
  CHECK(run(x.data(), 1, 1, 64) == "");  // both equal 1
  CHECK(k.num_compiled() == 6);
  CHECK(run(x.data() + 1, 1, 1, 64) == "");
  CHECK(k.num_compiled() == 7);
  CHECK(run(x.data(), 1001, 1, 64) == "");  // cached
  CHECK(run(x.data(), 1001, 2, 128) == "");
  CHECK(k.num_compiled() == 7);
  CHECK(run(x.data(), 17, 3, 64) == "");  // an odd stride: another divisibility
  CHECK(k.num_compiled() == 8);
  CHECK(run(x.data(), 17, 4, 64) == "");  // a multiple of 4
  CHECK(k.num_compiled() == 9);
  CHECK(run(x.data(), 17, 12, 64) == "");  // 4 * odd: the same key
  CHECK(run(x.data() + 2, 17, 12, 64) == "");  // 8-byte aligned
  CHECK(k.num_compiled() == 10);
  // ir() traces but does not compile
  std::string ir = k.ir(true, x.data(), x.data(), 1001, 2, 256);
  CHECK(k.num_compiled() == 10);
  CHECK_FALSE(ir.empty());
}

TEST_CASE("ops: do_not_specialize turns the integer and pointer specializations off per parameter", "[ops]") {
  auto body = [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Tile<int32_t> stride, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    store(out + offs, load(x + offs * stride, m) * 3.0f, m);
  };
  auto spec = jit("spec_all", body);
  auto nospec = jit("spec_none", body, {.do_not_specialize = {0, 1, 2, 3}});
  Buf<float> x = random_buf<float>(3 * 64 + 8, 11);
  auto run = [&](auto& k, float* xp, int n, int stride) {
    Buf<float> out(n + 1, -1.f);
    std::vector<float> w(n + 1, -1.f);
    for (int i = 0; i < n; ++i) w[i] = xp[size_t(i) * stride] * 3.0f;
    k(Grid(cdiv(n, 64)), xp, out.data(), n, stride, 64);
    return diffs(out, w);
  };
  // Batch sizes 1..40 with stride 1: six specializations (n == 1, odd, and the largest of 2, 4, 8,
  // 16 that divides n) ...
  for (int n = 1; n <= 40; ++n) CHECK(run(spec, x.data(), n, 1) == "");
  CHECK(spec.num_compiled() == 6);
  // ... or one, with the same results, for every n, stride and pointer alignment.
  for (int n = 1; n <= 40; ++n) CHECK(run(nospec, x.data(), n, 1) == "");
  CHECK(run(nospec, x.data() + 1, 33, 3) == "");
  CHECK(run(nospec, x.data() + 4, 16, 2) == "");
  CHECK(nospec.num_compiled() == 1);
  // The kernel reads n and stride at run time: no constant 1, no divisibility facts.
  std::string ir1 = nospec.ir(true, x.data(), x.data(), 1, 1, 64);
  std::string ir5 = nospec.ir(true, x.data() + 1, x.data(), 5, 16, 64);
  CHECK(ir1 == ir5);
  CHECK(spec.ir(true, x.data(), x.data(), 1, 1, 64) != spec.ir(true, x.data(), x.data(), 5, 3, 64));
}

TEST_CASE("ops: Kernel::stats compiles the specialization once without launching, CPU facts", "[ops]") {
  auto k = jit("stats_kernel", [](Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = arange(0, BLOCK);
    store(out + offs, offs.to<float>(), offs < n);
  });
  Buf<float> out(64, -1.0f);
  KernelStats s = k.stats(Grid(1).backend(Backend::CPU), out.data(), 64, 64);
  CHECK(s.backend == Backend::CPU);
  CHECK(s.registers == 0);
  CHECK(s.local_bytes == 0);
  CHECK(k.num_compiled() == 1);
  CHECK(out[0] == -1.0f);  // nothing ran
  k(Grid(1).backend(Backend::CPU), out.data(), 64, 64);  // the same specialization: no compile
  CHECK(k.num_compiled() == 1);
  CHECK(out[63] == 63.0f);
  // bad arguments throw as a launch would, at the Grid's line
  const int line = __LINE__ + 1;
  CHECK_THROWS_MATCHES(k.stats(Grid(1).backend(Backend::CPU).with_warps(3), out.data(), 64, 64), UserError,
                       Catch::Predicate<UserError>([&](const UserError& e) { return int(e.line()) == line; }));
}

TEST_CASE("ops: different constexpr types and values give correct results", "[ops]") {
  auto k = jit("spec_types", [](Ptr<float> out, Constexpr<float> SCALE, Constexpr<bool> NEG, Constexpr<int64_t> OFF) {
    Tile<float> v = arange(0, N17).to<float>() * SCALE + float(OFF);
    if (NEG) v = -v;  // trace-time branch on a constexpr
    store(out + arange(0, N17), v);
  });
  struct P { float s; bool neg; int64_t off; };
  size_t expect = 0;
  for (P p : {P{1.0f, false, 0}, P{0.5f, false, 0}, P{0.5f, true, 0}, P{0.5f, true, 3}, P{1.0f, false, 0}}) {
    CAPTURE(p.s, p.neg, p.off);
    Buf<float> out(N17);
    std::vector<float> w(N17);
    for (int i = 0; i < N17; ++i) w[i] = (p.neg ? -1.f : 1.f) * (float(i) * p.s + float(p.off));
    k(Grid(1), out.data(), p.s, p.neg, p.off);
    CHECK(diffs(out, w) == "");
    expect = std::min<size_t>(expect + 1, 4);
    CHECK(k.num_compiled() == expect);
  }
}

// ============================================================ kernel.ir()

TEST_CASE("ops: kernel.ir() shows the traced and the optimized IR", "[ops]") {
  auto k = jit("ir_kernel", [](Ptr<float> x, Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<float> v = load(x + offs, m, 0.0f);
    Tile<float> acc = 0.0f;
    for (auto i : range(0, n)) acc = acc + i.to<float>();
    if_(acc > 1.0f, [&] { v = exp(v); });
    store(out + offs, v + sum(v, 0) + acc, m);
  });
  Buf<float> x(16), out(16);
  for (bool opt : {false, true}) {
    CAPTURE(opt);
    std::string ir = k.ir(opt, x.data(), out.data(), 1001, 16);
    for (const char* op : {"func @ir_kernel", "program_id", "arange", "addptr", "cmp", "load", "store", "for", "if",
                           "yield", "reduce", "unary", "binary", "cast"})
      CHECK_THAT(ir, Catch::Contains(op));
    CHECK_THAT(ir, Catch::Contains("{div16}"));
  }
  // the specialization is visible: a misaligned pointer loses {div16}; n == 1 becomes a constant
  std::string mis = k.ir(false, x.data() + 1, out.data() + 1, 1001, 16);
  CHECK_THAT(mis, !Catch::Contains("{div16}"));
  std::string one = k.ir(false, x.data(), out.data(), 1, 16);
  std::string many = k.ir(false, x.data(), out.data(), 1001, 16);
  CHECK(one != many);
  CHECK(many == k.ir(false, x.data(), out.data(), 17, 16));  // same specialization, same text
  // pointers and integers are specialized on the power of two (<= 16) they are multiples of
  CHECK_THAT(mis, Catch::Contains("%0: ptr<f32> {div4}"));
  std::string n4100 = k.ir(false, x.data(), out.data(), 4100, 16);
  CHECK_THAT(n4100, Catch::Contains("%2: i32 {div4}"));
  CHECK(n4100 == k.ir(false, x.data(), out.data(), 4108, 16));
  CHECK(n4100 != k.ir(false, x.data(), out.data(), 4104, 16));  // {div8}
  CHECK_THAT(k.ir(false, x.data(), out.data(), 4096, 16), Catch::Contains("%2: i32 {div16}"));
  CHECK(k.num_compiled() == 0);
  // and the kernel still runs correctly
  for (int i = 0; i < 16; ++i) x[i] = float(i) / 16;
  k(Grid(1), x.data(), out.data(), 3, 16);  // acc = 0 + 1 + 2 = 3 > 1: v = exp(v) on the 3 valid lanes
  double s = 0;
  for (int i = 0; i < 3; ++i) s += std::exp(double(x[i]));
  for (int i = 0; i < 3; ++i) CHECK(out[i] == Approx(std::exp(double(x[i])) + s + 3.0 + 13 * 1.0).epsilon(1e-5));
}

// ============================================================ histogram

TEST_CASE("ops: histogram ignores out-of-range values and masked lanes", "[ops]") {
  auto k = jit("hist", [](Ptr<int32_t> x, Ptr<int32_t> counts, Tile<int32_t> n, Constexpr<int> BLOCK,
                          Constexpr<int> BINS) {
    Tile<int32_t> offs = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = offs < n;
    Tile<int32_t> h = histogram(load(x + offs, m, -1), BINS, m);
    atomic_add(counts + arange(0, BINS), h);
    Tile<int32_t> h2 = histogram(load(x + offs, m, 0), BINS);  // no mask: lanes past n count as 0
    atomic_add(counts + BINS + arange(0, BINS), h2);
  });
  for (int n : kSizes) {
    CAPTURE(n);
    const int bins = N17, block = 64;
    Buf<int32_t> x = random_buf<int32_t>(n, 3, -3, bins + 3), counts(2 * bins, 0);
    std::vector<int32_t> w(2 * bins, 0);
    int grid = int(cdiv(n, block));
    for (int i = 0; i < n; ++i)
      if (x[i] >= 0 && x[i] < bins) w[x[i]] += 1, w[bins + x[i]] += 1;
    w[bins] += grid * block - n;
    k(Grid(grid), x.data(), counts.data(), n, block, bins);
    CHECK(diffs(counts, w) == "");
  }
}

TEST_CASE("ops: if_ whose then-branch leaves a Tile handle alive keeps results paired", "[ops]") {
  // A handle made in the then-branch that outlives it (here: copied into an outer vector) must not
  // shift which then-value is paired with which else-value.
  auto k = jit("if_escape", [](Ptr<int32_t> out, Tile<int32_t> flag) {
    Tile<int32_t> a = 1, b = 2, c = 3;
    std::vector<Tile<int32_t>> keep;
    if_(flag > 0, [&] { a = a + 10; keep.push_back(a); keep.push_back(c); }, [&] { b = b + 20; c = c + 30; });
    store(out, a);
    store(out + 1, b);
    store(out + 2, c);
  });
  for (int flag : {0, 1}) {
    Buf<int32_t> out(3, -1);
    k(Grid(1), out.data(), flag);
    if (flag) CHECK(diffs(out, std::vector<int32_t>{11, 2, 3}) == "");
    else CHECK(diffs(out, std::vector<int32_t>{1, 22, 33}) == "");
  }
}

// ============================================================ examples' kernels

#include "../examples/kernels.hpp"

TEST_CASE("ops: the layernorm example's persistent kernel, one row per program or looping over rows", "[ops]") {
  // 19 rows of 777 (BLOCK 1024, a masked tail); 19 programs (one row each), 4 (rows p, p+4, ...:
  // 5 or 4 rows each) and 1 (all rows); against a double-precision reference.
  const int rows = 19, cols = 777, block = 1024;
  const float eps = 1e-5f;
  Buf<float> x = random_buf<float>(size_t(rows) * cols, 4, -2, 2), w = random_buf<float>(cols, 5), b = random_buf<float>(cols, 6);
  std::vector<double> want(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c) mean += x[size_t(r) * cols + c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (x[size_t(r) * cols + c] - mean) * (x[size_t(r) * cols + c] - mean);
    var /= cols;
    for (int c = 0; c < cols; ++c)
      want[size_t(r) * cols + c] = (x[size_t(r) * cols + c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
  }
  auto ln = ex::make_layernorm<float>();
  for (int programs : {rows, 4, 1}) {
    CAPTURE(programs);
    Buf<float> y(size_t(rows) * cols, -7.0f);
    ln(Grid(programs), x.data(), y.data(), w.data(), b.data(), rows, cols, eps, block);
    CHECK(diffs(y, want, 1e-5, 1e-5) == "");
  }
}

namespace {
/// y = 2x over [nrows, ncols] in blocks of R x C rows/columns, program p taking blocks p, p + P, ...
/// in a loop hinted with range(..., {.num_stages = 3}); acc_out[p] = the sum of p's x blocks
/// (a value carried through the loop from the pipelined load).
template <class T> auto hinted_blocks() {
  return jit("hinted_blocks", [](Ptr<T> x, Ptr<T> y, Ptr<T> acc_out, Tile<int32_t> nrows, Tile<int32_t> ncols,
                                 Tile<int32_t> nblocks, Constexpr<int> R, Constexpr<int> C) {
    Tile<int32_t> rr = arange(0, R), cc = arange(0, C);
    Tile<T> acc = zeros<T>({R, C});
    for (auto blk : range(program_id(0), nblocks, num_programs(0), {.num_stages = 3})) {
      Tile<int32_t> rows = blk * R + rr;
      Tile<bool> m = expand_dims(rows < nrows, 1) & expand_dims(cc < ncols, 0);
      Tile<int64_t> off = expand_dims(rows.to<int64_t>(), 1) * ncols + expand_dims(cc, 0);
      Tile<T> t = load(x + off, m, 0);
      store(y + off, t + t, m);
      acc = acc + t;
    }
    store(acc_out + program_id(0) * (R * C) + expand_dims(rr, 1) * C + expand_dims(cc, 0), acc);
  });
}
}  // namespace

TEST_CASE("ops: hinted device loops (range num_stages): 2-D tiles, dtypes, carried values", "[ops]") {
  // Integer-valued data (|x| <= 4, at most 13 blocks per program), so every dtype adds exactly and
  // the result does not depend on the backend.
  auto run = [](auto tag) {
    using T = decltype(tag);
    auto k = hinted_blocks<T>();
    const int R = 8, C = 64;
    for (int nrows : {1, 17, 100})
      for (int ncols : {1, 17, 64})
        for (int programs : {1, 3}) {
          INFO(dtype_name(detail::dtype_of<T>::value) << " nrows " << nrows << " ncols " << ncols << " programs " << programs);
          const int nblocks = (nrows + R - 1) / R;
          Buf<int> xi = random_buf<int>(size_t(nrows) * ncols, 21, -4, 4);
          Buf<T> x(xi.size()), y(xi.size(), T(-1)), acc(size_t(programs) * R * C, T(-1));
          for (size_t i = 0; i < xi.size(); ++i) x[i] = T(xi[i]);
          k(Grid(programs), x.data(), y.data(), acc.data(), nrows, ncols, nblocks, R, C);
          int bad = 0;
          for (size_t i = 0; i < xi.size(); ++i) bad += double(y[i]) != 2.0 * xi[i];
          for (int p = 0; p < programs; ++p)
            for (int r = 0; r < R; ++r)
              for (int c = 0; c < C; ++c) {
                double want = 0;
                for (int b = p; b < nblocks; b += programs)
                  if (b * R + r < nrows && c < ncols) want += xi[size_t(b * R + r) * ncols + c];
                bad += double(acc[(size_t(p) * R + r) * C + c]) != want;
              }
          CHECK(bad == 0);
        }
  };
  run(float{});
  run(f16{});
  run(int8_t{});
  run(int32_t{});
  run(double{});
}

TEST_CASE("ops: a hinted loop with a negative step, i64 bounds and a loaded value carried to the next trip",
          "[ops]") {
  // y[r] = x[r] + x[r + 1] (x[nrows] = 0), walking the rows backwards and carrying the last row.
  auto k = jit("hinted_reverse", [](Ptr<float> x, Ptr<float> y, Tile<int64_t> nrows, Tile<int32_t> ncols,
                                    Constexpr<int> C) {
    Tile<int32_t> cc = arange(0, C);
    Tile<bool> m = cc < ncols;
    Tile<float> prev = zeros<float>({C});
    for (auto r : range(nrows - 1, int64_t{-1}, int64_t{-1}, {.num_stages = 2})) {
      Tile<int64_t> off = r * ncols + cc;
      Tile<float> t = load(x + off, m, 0.0f);
      store(y + off, t + prev, m);
      prev = t;
    }
  });
  for (int64_t nrows : {1, 2, 17, 1001})
    for (int ncols : {1, 17, 128}) {
      INFO("nrows " << nrows << " ncols " << ncols);
      Buf<float> x = random_buf<float>(size_t(nrows) * ncols, 22, -8, 8), y(size_t(nrows) * ncols, -1.0f);
      k(Grid(1), x.data(), y.data(), nrows, ncols, 128);
      int bad = 0;
      for (int64_t r = 0; r < nrows; ++r)
        for (int c = 0; c < ncols; ++c) {
          const float next = r + 1 < nrows ? x[size_t(r + 1) * ncols + c] : 0.0f;
          bad += y[size_t(r) * ncols + c] != x[size_t(r) * ncols + c] + next;
        }
      CHECK(bad == 0);
    }
}
