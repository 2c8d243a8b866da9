// tests/fuzz/regressions.cpp - every fuzz program that ever failed, as a named regression test
// (tag [fuzz][regression]). Each test case is what `tle_fuzz` printed for the reduced failing
// program (fuzz::to_cpp): the kernel as C++ source, its buffers, and a launch on the interpreter
// and on the CPU backend whose outputs must agree (integers and floats bit for bit, NaN = NaN).
// docs/testing.md lists the bug behind each one.
#include "fuzz/regression.hpp"

// ---- regressions (appended by hand from tle_fuzz's output)
//
// No difference between the interpreter and the CPU backend has come from a real bug yet
// (docs/testing.md lists the runs). The three below are the reduced programs of bugs planted, one
// at a time, to check that the fuzzer catches them; each fails with its bug back in place
// (checked with all three planted) and guards that corner.

// tle_fuzz --seed 13 --reduce, with the CPU backend giving masked-off lanes 0 instead of `other`
// (src/backend/cpu/lower_memory.cpp): +0.0 where -0.0 was asked for.
TEST_CASE("fuzz regression: a fully masked load yields its other value -0.0 (planted in the CPU backend)", "[fuzz][regression]") {
  auto kernel = tle::jit("fuzz_13", [](tle::Ptr<tle::f16> a0, tle::Ptr<tle::f16> a1) {
    tle::Tile<int32_t> v26 = tle::full<int32_t>({5}, int64_t(0));
    tle::Tile<bool> v32 = tle::full<bool>({5}, false);
    tle::Ptr<tle::f16> v33 = a0 + v26;
    tle::Tile<tle::f16> v34 = tle::load(v33, v32, -0x0p+0);
    tle::Tile<int32_t> v39 = tle::full<int32_t>({5}, int64_t(0));
    tle::Ptr<tle::f16> v40 = a1 + v39;
    tle::store(v40, v34);
  });
  fuzz::Program p;
  p.seed = 13ull;
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f16, 100, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f16, 46, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(1, 1, 1).backend(backend), m.ptr<tle::f16>(0), m.ptr<tle::f16>(1));
  });
}

// tle_fuzz --seed 3 --reduce, with ScalarEmitter computing a signed x % 0 as 0 instead of x (rule E04).
// The divisor is 0 only at run time (num_programs(0) * program_id(1) with one program), so folding
// cannot see it.
TEST_CASE("fuzz regression: INT_MAX % a run-time 0 is INT_MAX (planted in ScalarEmitter)", "[fuzz][regression]") {
  auto kernel = tle::jit("fuzz_3", [](tle::Ptr<int32_t> a0) {
    tle::Tile<int32_t> v3 = tle::program_id(1);
    tle::Tile<int32_t> v5 = tle::num_programs(0);
    tle::Tile<int32_t> v7 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v8 = v3 + v7;
    tle::Tile<int32_t> v9 = v5 * v8;
    tle::Tile<int32_t> v68 = tle::Tile<int32_t>(int64_t(2147483647));
    tle::Tile<int32_t> v69 = v68 % v9;
    tle::Tile<int32_t> v99 = tle::Tile<int32_t>(int64_t(0));
    tle::Ptr<int32_t> v100 = a0 + v99;
    tle::store(v100, v69);
  });
  fuzz::Program p;
  p.seed = 3ull;
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i32, 8, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(1, 1, 1).backend(backend), m.ptr<int32_t>(0));
  });
}

// tle_fuzz --seed 375 --reduce, with canonicalize rewriting x - x to 0 for floats as for integers
// (src/passes/canonicalize.cpp). The interpreter runs the traced IR; the CPU backend runs it after the
// passes, so a wrong rewrite shows as a difference.
TEST_CASE("fuzz regression: x - x of f16 inf and NaN is NaN, not 0 (planted in canonicalize)", "[fuzz][regression]") {
  auto kernel = tle::jit("fuzz_375", [](tle::Ptr<tle::f16> a0, tle::Ptr<tle::f16> a1) {
    tle::Tile<int32_t> v43 = tle::arange(0, 32);
    tle::Tile<int32_t> v44 = tle::reshape(v43, {4, 8});
    tle::Tile<int32_t> v45 = tle::permute(v44, {1, 0});
    tle::Tile<int32_t> v47 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v48 = v47 + v45;
    tle::Tile<int32_t> v69 = tle::arange(0, 32);
    tle::Tile<int32_t> v70 = tle::reshape(v69, {8, 4});
    tle::Ptr<tle::f16> v71 = a0 + v70;
    tle::Tile<tle::f16> v72 = tle::load(v71);
    tle::Tile<tle::f16> v73 = v72 - v72;
    tle::Ptr<tle::f16> v111 = a1 + v48;
    tle::store(v111, v73);
  });
  fuzz::Program p;
  p.seed = 375ull;
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f16, 32, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f16, 192, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(1, 1, 1).backend(backend), m.ptr<tle::f16>(0), m.ptr<tle::f16>(1));
  });
}
// tle_fuzz --gpu-compile --portable --seed 805 (the fuzzer's first device run, 2026-12-01): LLVM
// 19's NVPTX back end aborted the process on "f16 = bitcast bf16" (an f32 -> bf16 conversion
// written as fptrunc to LLVM's bfloat, whose bits the program bitcasts to f16). Fixed by emitting
// cvt.rn.bf16.f32 as inline asm on 16-bit registers (src/backend/gpu/lower.cpp, f32_to_bf16).
TEST_CASE("fuzz regression: bf16 bits bitcast to f16 compile for sm_90a (seed 805 aborted LLVM)", "[fuzz][regression][ptx]") {
  auto kernel = tle::jit("fuzz_805", [](tle::Tile<int32_t> a0, tle::Tile<int32_t> a1, tle::Ptr<int32_t> a2, tle::Ptr<int8_t> a3, tle::Ptr<int64_t> a4, tle::Ptr<int32_t> a5, tle::Ptr<bool> a6, tle::Ptr<int8_t> a7, tle::Ptr<uint32_t> a8, tle::Ptr<int32_t> a9, tle::Ptr<uint32_t> a10, tle::Ptr<int32_t> a11, tle::Ptr<uint32_t> a12, tle::Ptr<int64_t> a13) {
    tle::Tile<int32_t> v2 = tle::program_id(0);
    tle::Tile<int32_t> v3 = tle::program_id(1);
    tle::Tile<int32_t> v4 = tle::program_id(2);
    tle::Tile<int32_t> v5 = tle::num_programs(0);
    tle::Tile<int32_t> v6 = tle::num_programs(1);
    tle::Tile<int32_t> v7 = v6 * v4;
    tle::Tile<int32_t> v8 = v3 + v7;
    tle::Tile<int32_t> v9 = v5 * v8;
    tle::Tile<int32_t> v10 = v2 + v9;
    tle::Tile<int32_t> v11 = tle::arange(0, 2);
    tle::Tile<int32_t> v12 = tle::reshape(v11, {1, 2});
    tle::Tile<int32_t> v13 = tle::arange(0, 2);
    tle::Tile<int32_t> v14 = tle::reshape(v13, {2, 1});
    tle::Tile<int32_t> v15 = tle::Tile<int32_t>(int64_t(2));
    tle::Tile<int32_t> v16 = v14 * v15;
    tle::Tile<int32_t> v17 = v12 + v16;
    tle::Ptr<int32_t> v19 = a2 + v17;
    tle::Tile<uint8_t> v20 = tle::Tile<uint8_t>(uint64_t(1ull));
    for (auto v21 : tle::range(-1, a1, 1)) {
      tle::Tile<int32_t> v22 = tle::load(v19);
      tle::Tile<bool> v23 = v10 < v2;
      tle::Tile<int32_t> v26 = tle::arange(0, 8);
      tle::Tile<int32_t> v27 = tle::reshape(v26, {1, 8});
      tle::Tile<int32_t> v28 = tle::arange(0, 4);
      tle::Tile<int32_t> v29 = tle::reshape(v28, {4, 1});
      tle::Tile<int32_t> v30 = tle::Tile<int32_t>(int64_t(8));
      tle::Tile<int32_t> v31 = v29 * v30;
      tle::Tile<int32_t> v32 = v27 + v31;
      tle::Ptr<int64_t> v33 = a4 + v32;
      tle::Tile<int64_t> v34 = tle::load(v33);
      tle::Ptr<int8_t> v35 = a3 + v34;
      tle::Tile<int8_t> v36 = tle::load(v35);
      tle::Tile<int8_t> v37 = v36 << v36;
      tle::Tile<int32_t> v38 = tle::reshape(v3, {1});
      tle::Tile<int32_t> v39 = tle::permute(v27, {0, 1});
      tle::Tile<int32_t> v40 = tle::maximum(v8, v4);
      tle::Tile<int32_t> v41 = v2 - v40;
      v8 = v40;
      tle::Ptr<int32_t> v42 = v19 + v20;
      v19 = v42;
      tle::Tile<int32_t> v44 = tle::arange(0, 4);
      tle::Tile<int32_t> v45 = tle::reshape(v44, {2, 2});
      tle::Tile<int32_t> v46 = tle::Tile<int32_t>(int64_t(3));
      tle::Tile<int32_t> v47 = v46 - v45;
      tle::Tile<int32_t> v48 = tle::Tile<int32_t>(int64_t(4));
      tle::Tile<int32_t> v49 = v10 * v48;
      tle::Tile<int32_t> v50 = v49 + v47;
      tle::Tile<int64_t> v51 = v50.to<int64_t>();
      tle::Ptr<int32_t> v52 = a5 + v51;
      tle::store(v52, v22);
      tle::Tile<int32_t> v54 = tle::Tile<int32_t>(int64_t(0));
      tle::Tile<int32_t> v55 = tle::Tile<int32_t>(int64_t(1));
      tle::Tile<int32_t> v56 = v10 * v55;
      tle::Tile<int32_t> v57 = v56 + v54;
      tle::Ptr<bool> v58 = a6 + v57;
      tle::store(v58, v23);
      tle::Tile<int32_t> v60 = tle::arange(0, 32);
      tle::Tile<int32_t> v61 = tle::reshape(v60, {4, 8});
      tle::Tile<int32_t> v62 = tle::Tile<int32_t>(int64_t(32));
      tle::Tile<int32_t> v63 = v10 * v62;
      tle::Tile<int32_t> v64 = tle::multiple_of(v63, 32);
      tle::Tile<int32_t> v65 = v64 + v61;
      tle::Ptr<int8_t> v66 = a7 + v65;
      tle::store(v66, v37);
      tle::Tile<int32_t> v67 = tle::arange(0, 1);
      tle::Tile<int32_t> v68 = tle::Tile<int32_t>(int64_t(1));
      tle::Tile<int32_t> v69 = v10 * v68;
      tle::Tile<int32_t> v70 = v69 + v67;
      tle::Tile<int32_t> v71 = tle::Tile<int32_t>(int64_t(24));
      tle::Tile<int32_t> v72 = v70 + v71;
      tle::Ptr<int32_t> v73 = a5 + v72;
      tle::store(v73, v38);
      tle::Tile<int32_t> v74 = tle::arange(0, 8);
      tle::Tile<int32_t> v75 = tle::reshape(v74, {1, 8});
      tle::Tile<int32_t> v76 = tle::Tile<int32_t>(int64_t(7));
      tle::Tile<int32_t> v77 = v76 - v75;
      tle::Tile<int32_t> v78 = tle::Tile<int32_t>(int64_t(8));
      tle::Tile<int32_t> v79 = v10 * v78;
      tle::Tile<int32_t> v80 = v79 + v77;
      tle::Tile<int32_t> v81 = tle::Tile<int32_t>(int64_t(30));
      tle::Tile<int32_t> v82 = v80 + v81;
      tle::Ptr<int32_t> v83 = a5 + v82;
      tle::store(v83, v39);
      tle::Tile<int32_t> v84 = tle::Tile<int32_t>(int64_t(0));
      tle::Tile<int32_t> v85 = tle::Tile<int32_t>(int64_t(1));
      tle::Tile<int32_t> v86 = v10 * v85;
      tle::Tile<int32_t> v87 = tle::multiple_of(v86, 1);
      tle::Tile<int32_t> v88 = v87 + v84;
      tle::Tile<int32_t> v89 = tle::Tile<int32_t>(int64_t(78));
      tle::Tile<int32_t> v90 = v88 + v89;
      tle::Ptr<int32_t> v91 = a5 + v90;
      tle::store(v91, v41);
    }
    tle::Tile<int32_t> v92 = tle::Tile<int32_t>(int64_t(1));
    tle::Tile<bool> v93 = v10 >= v92;
    tle::if_(v93, [&] {
      tle::Tile<int32_t> v95 = tle::arange(0, 4);
      tle::Tile<int32_t> v96 = tle::max_contiguous(v95, 4);
      tle::Tile<int32_t> v97 = tle::Tile<int32_t>(int64_t(17));
      tle::Tile<int32_t> v98 = v96 + v97;
      tle::Tile<int64_t> v99 = v98.to<int64_t>();
      tle::Ptr<uint32_t> v100 = a8 + v99;
      tle::Tile<uint32_t> v101 = tle::load(v100);
      tle::Tile<uint32_t> v102 = tle::Tile<uint32_t>(uint64_t(4294967295ull));
      tle::Tile<bool> v103 = v102 < v101;
      tle::Tile<int32_t> v104 = v4 / v2;
      tle::Tile<int32_t> v105 = tle::arange(0, 4);
      tle::Tile<int32_t> v106 = tle::Tile<int32_t>(int64_t(3));
      tle::Tile<int32_t> v107 = v106 - v105;
      tle::Tile<int32_t> v108 = tle::Tile<int32_t>(int64_t(4));
      tle::Tile<int32_t> v109 = v10 * v108;
      tle::Tile<int32_t> v110 = v109 + v107;
      tle::Tile<int32_t> v111 = tle::Tile<int32_t>(int64_t(6));
      tle::Tile<int32_t> v112 = v110 + v111;
      tle::Ptr<bool> v113 = a6 + v112;
      tle::store(v113, v103);
      tle::Tile<int32_t> v114 = tle::Tile<int32_t>(int64_t(0));
      tle::Tile<int32_t> v115 = tle::Tile<int32_t>(int64_t(1));
      tle::Tile<int32_t> v116 = v10 * v115;
      tle::Tile<int32_t> v117 = v116 + v114;
      tle::Tile<int32_t> v118 = tle::Tile<int32_t>(int64_t(84));
      tle::Tile<int32_t> v119 = v117 + v118;
      tle::Ptr<int32_t> v120 = a5 + v119;
      tle::store(v120, v104);
    }, [&] {
    });
    tle::Tile<int32_t> v123 = tle::arange(0, 32);
    tle::Tile<int32_t> v124 = tle::reshape(v123, {4, 8});
    tle::Ptr<uint32_t> v125 = a10 + v124;
    tle::Tile<uint32_t> v126 = tle::load(v125);
    tle::Ptr<int32_t> v127 = a9 + v126;
    tle::Tile<int32_t> v128 = tle::load(v127, v93);
    tle::Tile<int32_t> v129 = tle::where(v93, v9, v7);
    tle::Tile<int32_t> v131 = tle::Tile<int32_t>(int64_t(0));
    tle::Ptr<int32_t> v132 = a11 + v131;
    tle::Tile<int32_t> v133 = tle::load(v132, v93, a1);
    tle::Tile<int32_t> v134 = tle::abs(v129);
    tle::Tile<int32_t> v136 = tle::arange(0, 4);
    tle::Ptr<uint32_t> v137 = a12 + v136;
    tle::Tile<uint32_t> v138 = tle::load(v137);
    tle::Tile<bool> v139 = v136 < a0;
    tle::Ptr<int32_t> v140 = a11 + v138;
    tle::Tile<int32_t> v141 = tle::load(v140, v139);
    tle::Tile<tle::bf16> v142 = v126.to<tle::bf16>();
    tle::Tile<bool> v143 = v142 != v142;
    tle::Tile<tle::bf16> v144 = tle::Tile<tle::bf16>(0x0p+0);
    tle::Tile<tle::bf16> v145 = tle::where(v143, v144, v142);
    tle::Tile<tle::f16> v146 = tle::bitcast<tle::f16>(v145);
    tle::Tile<int32_t> v147 = tle::reduce(v13, 0, [](tle::Tile<int32_t> p, tle::Tile<int32_t> q) { return p ^ q; }, false);
    tle::Tile<int64_t> v148 = v146.to<int64_t>();
    tle::Tile<int64_t> v149 = v148 & v148;
    tle::Tile<int32_t> v150 = tle::arange(0, 8);
    tle::Tile<int32_t> v151 = tle::reshape(v150, {1, 8});
    tle::Tile<int32_t> v152 = tle::arange(0, 4);
    tle::Tile<int32_t> v153 = tle::reshape(v152, {4, 1});
    tle::Tile<int32_t> v154 = tle::Tile<int32_t>(int64_t(8));
    tle::Tile<int32_t> v155 = v153 * v154;
    tle::Tile<int32_t> v156 = v151 + v155;
    tle::Tile<int32_t> v157 = tle::Tile<int32_t>(int64_t(32));
    tle::Tile<int32_t> v158 = v10 * v157;
    tle::Tile<int32_t> v159 = tle::multiple_of(v158, 32);
    tle::Tile<int32_t> v160 = v159 + v156;
    tle::Tile<int32_t> v161 = tle::Tile<int32_t>(int64_t(90));
    tle::Tile<int32_t> v162 = v160 + v161;
    tle::Ptr<int32_t> v163 = a5 + v162;
    tle::store(v163, v128);
    tle::Tile<int32_t> v164 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v165 = tle::Tile<int32_t>(int64_t(1));
    tle::Tile<int32_t> v166 = v10 * v165;
    tle::Tile<int32_t> v167 = tle::multiple_of(v166, 1);
    tle::Tile<int32_t> v168 = v167 + v164;
    tle::Tile<int32_t> v169 = tle::Tile<int32_t>(int64_t(282));
    tle::Tile<int32_t> v170 = v168 + v169;
    tle::Ptr<int32_t> v171 = a5 + v170;
    tle::store(v171, v133);
    tle::Tile<int32_t> v172 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v173 = tle::Tile<int32_t>(int64_t(1));
    tle::Tile<int32_t> v174 = v10 * v173;
    tle::Tile<int32_t> v175 = tle::multiple_of(v174, 1);
    tle::Tile<int32_t> v176 = v175 + v172;
    tle::Tile<int32_t> v177 = tle::Tile<int32_t>(int64_t(288));
    tle::Tile<int32_t> v178 = v176 + v177;
    tle::Ptr<int32_t> v179 = a5 + v178;
    tle::store(v179, v134, v93);
    tle::Tile<int32_t> v180 = tle::arange(0, 4);
    tle::Tile<int32_t> v181 = tle::max_contiguous(v180, 4);
    tle::Tile<int32_t> v182 = tle::Tile<int32_t>(int64_t(4));
    tle::Tile<int32_t> v183 = v10 * v182;
    tle::Tile<int32_t> v184 = tle::multiple_of(v183, 4);
    tle::Tile<int32_t> v185 = v184 + v181;
    tle::Tile<int32_t> v186 = tle::Tile<int32_t>(int64_t(294));
    tle::Tile<int32_t> v187 = v185 + v186;
    tle::Ptr<int32_t> v188 = a5 + v187;
    tle::store(v188, v141);
    tle::Tile<int32_t> v189 = tle::Tile<int32_t>(int64_t(318));
    tle::Tile<int32_t> v190 = v176 + v189;
    tle::Tile<bool> v191 = v172 < a0;
    tle::Ptr<int32_t> v192 = a5 + v190;
    tle::store(v192, v147, v191);
    tle::Tile<bool> v194 = v156 < a0;
    tle::Ptr<int64_t> v195 = a13 + v160;
    tle::store(v195, v149, v194);
  });
  fuzz::Program p;
  p.seed = 805ull;
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::i32, 28, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::i8, 64, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::i64, 64, fuzz::Buffer::Index, 0, 63});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i32, 324, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i1, 30, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i8, 192, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::u32, 256, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::i32, 64, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::u32, 64, fuzz::Buffer::Index, 0, 63});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::i32, 256, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::u32, 64, fuzz::Buffer::Index, 0, 255});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i64, 192, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_backends_agree(p, [&](tle::Backend backend, fuzz::Memory& m) {
    kernel(tle::Grid(3, 2, 1).backend(backend), int32_t(1), int32_t(3), m.ptr<int32_t>(0), m.ptr<int8_t>(1), m.ptr<int64_t>(2), m.ptr<int32_t>(3), m.ptr<bool>(4), m.ptr<int8_t>(5), m.ptr<uint32_t>(6), m.ptr<int32_t>(7), m.ptr<uint32_t>(8), m.ptr<int32_t>(9), m.ptr<uint32_t>(10), m.ptr<int64_t>(11));
  });
  for (int w : {1, 4, 8}) {
    CAPTURE(w);
    std::string ptx;
    REQUIRE_NOTHROW(ptx = kernel.ptx(90, tle::Grid(3, 2, 1).with_warps(w), int32_t(1), int32_t(3), reinterpret_cast<int32_t*>(uintptr_t{0x10000} * (0 + 1)), reinterpret_cast<int8_t*>(uintptr_t{0x10000} * (1 + 1)), reinterpret_cast<int64_t*>(uintptr_t{0x10000} * (2 + 1)), reinterpret_cast<int32_t*>(uintptr_t{0x10000} * (3 + 1)), reinterpret_cast<bool*>(uintptr_t{0x10000} * (4 + 1)), reinterpret_cast<int8_t*>(uintptr_t{0x10000} * (5 + 1)), reinterpret_cast<uint32_t*>(uintptr_t{0x10000} * (6 + 1)), reinterpret_cast<int32_t*>(uintptr_t{0x10000} * (7 + 1)), reinterpret_cast<uint32_t*>(uintptr_t{0x10000} * (8 + 1)), reinterpret_cast<int32_t*>(uintptr_t{0x10000} * (9 + 1)), reinterpret_cast<uint32_t*>(uintptr_t{0x10000} * (10 + 1)), reinterpret_cast<int64_t*>(uintptr_t{0x10000} * (11 + 1))));
    CHECK(ptx.find(".entry") != std::string::npos);
  }
}
