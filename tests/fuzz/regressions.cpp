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

// ---- GPU stage (tle_fuzz --gpu), second device run 2026-12-01: the GPU counted every value of a
// histogram twice (1 vs 2 in all 16 bins of 3 programs) at 4 warps, stages 3: the producer
// warpgroup of the warp-specialized K loop ran the histogram's atomics before the loop too.
// Fixed in Lowerer::owner (docs/testing.md, bug 6).
// tle_fuzz --gpu --seed 1596 --count 1: stage gpu w4 s3
// buffer 10 (out i32): 48 of 3120 elements differ; first [0]: 1 vs 2
TEST_CASE("fuzz gpu: seed 1596", "[.gpu][fuzz-gpu][regression]") {
  auto kernel = tle::jit("fuzz_1596", [](tle::Tile<int32_t> a0, tle::Tile<int32_t> a1, tle::Ptr<double> a2, tle::Ptr<int32_t> a3, tle::Ptr<tle::f16> a4, tle::Ptr<tle::f16> a5, tle::Ptr<tle::bf16> a6, tle::Ptr<tle::bf16> a7, tle::Ptr<tle::bf16> a8, tle::Ptr<int8_t> a9, tle::Ptr<float> a10, tle::Ptr<double> a11, tle::Ptr<int32_t> a12, tle::Ptr<tle::f16> a13, tle::Ptr<tle::bf16> a14, tle::Ptr<bool> a15) {
    tle::Tile<int32_t> v2 = tle::program_id(0);
    tle::Tile<int32_t> v3 = tle::program_id(1);
    tle::Tile<int32_t> v4 = tle::program_id(2);
    tle::Tile<int32_t> v5 = tle::num_programs(0);
    tle::Tile<int32_t> v6 = tle::num_programs(1);
    tle::Tile<int32_t> v7 = v6 * v4;
    tle::Tile<int32_t> v8 = v3 + v7;
    tle::Tile<int32_t> v9 = v5 * v8;
    tle::Tile<int32_t> v10 = v2 + v9;
    tle::Tile<int8_t> v11 = tle::Tile<int8_t>(int64_t(2));
    tle::Tile<float> v12 = tle::bitcast<float>(v10);
    tle::Tile<float> v13 = tle::bitcast<float>(a0);
    tle::Tile<int32_t> v16 = tle::arange(0, 4096);
    tle::Tile<int32_t> v17 = tle::reshape(v16, {16, 16, 16});
    tle::Ptr<int32_t> v18 = a3 + v17;
    tle::Tile<int32_t> v19 = tle::load(v18);
    tle::Tile<uint32_t> v20 = v19.to<uint32_t>();
    tle::Ptr<double> v21 = a2 + v20;
    tle::Tile<double> v22 = tle::load(v21);
    tle::Tile<int32_t> v23 = tle::histogram(v16, 16);
    tle::Tile<int32_t> v26 = tle::arange(0, 64);
    tle::Tile<int32_t> v27 = tle::reshape(v26, {64, 1});
    tle::Tile<int32_t> v28 = tle::Tile<int32_t>(int64_t(32));
    tle::Tile<int32_t> v29 = v27 * v28;
    tle::Tile<int32_t> v30 = tle::arange(0, 16);
    tle::Tile<int32_t> v31 = tle::reshape(v30, {1, 16});
    tle::Tile<int32_t> v32 = v29 + v31;
    tle::Tile<int32_t> v33 = tle::arange(0, 16);
    tle::Tile<int32_t> v34 = tle::reshape(v33, {16, 1});
    tle::Tile<int32_t> v35 = tle::Tile<int32_t>(int64_t(32));
    tle::Tile<int32_t> v36 = v34 * v35;
    tle::Tile<int32_t> v37 = tle::arange(0, 32);
    tle::Tile<int32_t> v38 = tle::reshape(v37, {1, 32});
    tle::Tile<int32_t> v39 = v36 + v38;
    tle::Tile<int32_t> v40 = tle::arange(0, 16);
    tle::Tile<int32_t> v41 = tle::reshape(v40, {1, 16});
    tle::Tile<int32_t> v42 = tle::broadcast_to(v41, {64, 16});
    tle::Tile<float> v43 = tle::full<float>({64, 32}, 0x0p+0);
    for (auto v44 : tle::range(0, 2, 1)) {
      tle::Tile<int32_t> v45 = tle::Tile<int32_t>(int64_t(16));
      tle::Tile<int32_t> v46 = v44 * v45;
      tle::Tile<int32_t> v47 = v32 + v46;
      tle::Ptr<tle::f16> v48 = a4 + v47;
      tle::Tile<tle::f16> v49 = tle::load(v48);
      tle::Tile<int32_t> v50 = tle::Tile<int32_t>(int64_t(32));
      tle::Tile<int32_t> v51 = v46 * v50;
      tle::Tile<int32_t> v52 = v39 + v51;
      tle::Ptr<tle::f16> v53 = a5 + v52;
      tle::Tile<tle::f16> v54 = tle::load(v53);
      tle::Tile<float> v55 = tle::dot(v49, v54, v43, tle::Precision::IEEE);
      v43 = v55;
    }
    tle::Tile<tle::f16> v56 = v43.to<tle::f16>();
    tle::Tile<int32_t> v59 = tle::arange(0, 32);
    tle::Tile<int32_t> v60 = tle::reshape(v59, {32, 1});
    tle::Tile<int32_t> v61 = tle::Tile<int32_t>(int64_t(128));
    tle::Tile<int32_t> v62 = v60 * v61;
    tle::Tile<int32_t> v63 = tle::arange(0, 32);
    tle::Tile<int32_t> v64 = tle::reshape(v63, {1, 32});
    tle::Tile<int32_t> v65 = v62 + v64;
    tle::Tile<int32_t> v66 = tle::arange(0, 32);
    tle::Tile<int32_t> v67 = tle::reshape(v66, {32, 1});
    tle::Tile<int32_t> v68 = tle::Tile<int32_t>(int64_t(32));
    tle::Tile<int32_t> v69 = v67 * v68;
    tle::Tile<int32_t> v70 = tle::arange(0, 32);
    tle::Tile<int32_t> v71 = tle::reshape(v70, {1, 32});
    tle::Tile<int32_t> v72 = v69 + v71;
    tle::Tile<int32_t> v73 = tle::arange(0, 32);
    tle::Tile<int32_t> v74 = tle::reshape(v73, {1, 32});
    tle::Tile<int32_t> v75 = tle::broadcast_to(v74, {32, 32});
    tle::Tile<float> v76 = tle::full<float>({32, 32}, 0x1.8p+1);
    for (auto v77 : tle::range(0, 4, 1)) {
      tle::Tile<int32_t> v78 = tle::Tile<int32_t>(int64_t(32));
      tle::Tile<int32_t> v79 = v77 * v78;
      tle::Tile<int32_t> v80 = tle::Tile<int32_t>(int64_t(128));
      tle::Tile<int32_t> v81 = v80 - a0;
      tle::Tile<int32_t> v82 = v75 + v79;
      tle::Tile<bool> v83 = v82 < v81;
      tle::Tile<int32_t> v84 = tle::arange(0, 32);
      tle::Tile<int32_t> v85 = tle::reshape(v84, {32, 1});
      tle::Tile<int32_t> v86 = v85 + v79;
      tle::Tile<bool> v87 = v86 < v81;
      tle::Tile<int32_t> v88 = v65 + v79;
      tle::Ptr<tle::bf16> v89 = a6 + v88;
      tle::Tile<tle::bf16> v90 = tle::load(v89, v83);
      tle::Tile<int32_t> v91 = tle::Tile<int32_t>(int64_t(32));
      tle::Tile<int32_t> v92 = v79 * v91;
      tle::Tile<int32_t> v93 = v72 + v92;
      tle::Ptr<tle::bf16> v94 = a7 + v93;
      tle::Tile<tle::bf16> v95 = tle::load(v94, v87);
      tle::Tile<float> v96 = tle::dot(v90, v95, v76, tle::Precision::IEEE);
      v76 = v96;
    }
    tle::Tile<tle::bf16> v97 = v76.to<tle::bf16>();
    tle::Tile<int32_t> v98 = ~v42;
    tle::Tile<bool> v99 = v12 == v12;
    tle::Tile<int32_t> v100 = tle::arange(0, 4);
    tle::Tile<int32_t> v101 = tle::reshape(v100, {1, 4});
    tle::Tile<int32_t> v102 = tle::arange(0, 8);
    tle::Tile<int32_t> v103 = tle::reshape(v102, {8, 1});
    tle::Tile<int32_t> v104 = tle::Tile<int32_t>(int64_t(4));
    tle::Tile<int32_t> v105 = v103 * v104;
    tle::Tile<int32_t> v106 = v101 + v105;
    tle::Ptr<tle::bf16> v107 = a6 + v106;
    tle::Tile<tle::bf16> v108 = tle::load(v107);
    tle::Tile<int32_t> v110 = tle::arange(0, 4);
    tle::Tile<int32_t> v111 = tle::reshape(v110, {1, 4});
    tle::Tile<int32_t> v112 = tle::arange(0, 4);
    tle::Tile<int32_t> v113 = tle::reshape(v112, {4, 1});
    tle::Tile<int32_t> v114 = tle::Tile<int32_t>(int64_t(4));
    tle::Tile<int32_t> v115 = v113 * v114;
    tle::Tile<int32_t> v116 = v111 + v115;
    tle::Ptr<tle::bf16> v117 = a8 + v116;
    tle::Tile<tle::bf16> v118 = tle::load(v117);
    tle::Tile<float> v119 = tle::full<float>({8, 4}, 0x1p+1);
    tle::Tile<float> v120 = tle::dot(v108, v118, v119, tle::Precision::IEEE);
    tle::Tile<int32_t> v122 = tle::Tile<int32_t>(int64_t(0));
    tle::Tile<int32_t> v123 = tle::Tile<int32_t>(int64_t(1));
    tle::Tile<int32_t> v124 = v10 * v123;
    tle::Tile<int32_t> v125 = v124 + v122;
    tle::Ptr<int8_t> v126 = a9 + v125;
    tle::store(v126, v11);
    tle::Ptr<float> v128 = a10 + v125;
    tle::store(v128, v13);
    tle::Tile<int32_t> v130 = tle::arange(0, 16);
    tle::Tile<int32_t> v131 = tle::reshape(v130, {1, 1, 16});
    tle::Tile<int32_t> v132 = tle::arange(0, 16);
    tle::Tile<int32_t> v133 = tle::reshape(v132, {1, 16, 1});
    tle::Tile<int32_t> v134 = tle::Tile<int32_t>(int64_t(16));
    tle::Tile<int32_t> v135 = v133 * v134;
    tle::Tile<int32_t> v136 = v131 + v135;
    tle::Tile<int32_t> v137 = tle::arange(0, 16);
    tle::Tile<int32_t> v138 = tle::reshape(v137, {16, 1, 1});
    tle::Tile<int32_t> v139 = tle::Tile<int32_t>(int64_t(256));
    tle::Tile<int32_t> v140 = v138 * v139;
    tle::Tile<int32_t> v141 = v136 + v140;
    tle::Tile<int32_t> v142 = tle::Tile<int32_t>(int64_t(4096));
    tle::Tile<int32_t> v143 = v10 * v142;
    tle::Tile<int32_t> v144 = v143 + v141;
    tle::Tile<uint32_t> v145 = v144.to<uint32_t>();
    tle::Ptr<double> v146 = a11 + v145;
    tle::store(v146, v22);
    tle::Tile<int32_t> v148 = tle::arange(0, 16);
    tle::Tile<int32_t> v149 = tle::Tile<int32_t>(int64_t(16));
    tle::Tile<int32_t> v150 = v10 * v149;
    tle::Tile<int32_t> v151 = tle::multiple_of(v150, 16);
    tle::Tile<int32_t> v152 = v151 + v148;
    tle::Ptr<int32_t> v153 = a12 + v152;
    tle::store(v153, v23);
    tle::Tile<int32_t> v155 = tle::arange(0, 2048);
    tle::Tile<int32_t> v156 = tle::reshape(v155, {64, 32});
    tle::Tile<int32_t> v157 = tle::Tile<int32_t>(int64_t(2047));
    tle::Tile<int32_t> v158 = v157 - v156;
    tle::Tile<int32_t> v159 = tle::Tile<int32_t>(int64_t(2048));
    tle::Tile<int32_t> v160 = v10 * v159;
    tle::Tile<int32_t> v161 = v160 + v158;
    tle::Ptr<tle::f16> v162 = a13 + v161;
    tle::store(v162, v56);
    tle::Tile<int32_t> v164 = tle::arange(0, 1024);
    tle::Tile<int32_t> v165 = tle::reshape(v164, {32, 32});
    tle::Tile<int32_t> v166 = tle::permute(v165, {1, 0});
    tle::Tile<int32_t> v167 = tle::Tile<int32_t>(int64_t(1024));
    tle::Tile<int32_t> v168 = v10 * v167;
    tle::Tile<int32_t> v169 = v168 + v166;
    tle::Ptr<tle::bf16> v170 = a14 + v169;
    tle::store(v170, v97, v99);
    tle::Tile<int32_t> v171 = tle::arange(0, 16);
    tle::Tile<int32_t> v172 = tle::reshape(v171, {1, 16});
    tle::Tile<int32_t> v173 = tle::arange(0, 64);
    tle::Tile<int32_t> v174 = tle::reshape(v173, {64, 1});
    tle::Tile<int32_t> v175 = tle::Tile<int32_t>(int64_t(16));
    tle::Tile<int32_t> v176 = v174 * v175;
    tle::Tile<int32_t> v177 = v172 + v176;
    tle::Tile<int32_t> v178 = tle::Tile<int32_t>(int64_t(1024));
    tle::Tile<int32_t> v179 = v10 * v178;
    tle::Tile<int32_t> v180 = v179 + v177;
    tle::Tile<int32_t> v181 = tle::Tile<int32_t>(int64_t(48));
    tle::Tile<int32_t> v182 = v180 + v181;
    tle::Tile<bool> v183 = v177 < a0;
    tle::Ptr<int32_t> v184 = a12 + v182;
    tle::store(v184, v98, v183);
    tle::Ptr<bool> v186 = a15 + v125;
    tle::store(v186, v99);
    tle::Tile<int32_t> v187 = tle::arange(0, 32);
    tle::Tile<int32_t> v188 = tle::reshape(v187, {4, 8});
    tle::Tile<int32_t> v189 = tle::permute(v188, {1, 0});
    tle::Tile<int32_t> v190 = tle::Tile<int32_t>(int64_t(32));
    tle::Tile<int32_t> v191 = v10 * v190;
    tle::Tile<int32_t> v192 = v191 + v189;
    tle::Tile<int32_t> v193 = tle::Tile<int32_t>(int64_t(3));
    tle::Tile<int32_t> v194 = v192 + v193;
    tle::Ptr<float> v195 = a10 + v194;
    tle::store(v195, v120);
  });
  fuzz::Program p;
  p.seed = 1596ull;
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f64, 32, fuzz::Buffer::Special, 0, 0});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::i32, 4096, fuzz::Buffer::Index, 0, 31});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f16, 2048, fuzz::Buffer::Index, -4, 4});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::f16, 1024, fuzz::Buffer::Index, -4, 4});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::bf16, 4096, fuzz::Buffer::Index, -4, 4});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::bf16, 4096, fuzz::Buffer::Index, -4, 4});
  p.buffers.push_back({fuzz::Buffer::In, tle::DType::bf16, 64, fuzz::Buffer::Index, -4, 4});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i8, 3, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f32, 99, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f64, 12288, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i32, 3120, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::f16, 6144, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::bf16, 3072, fuzz::Buffer::Sentinel, 0, 0});
  p.buffers.push_back({fuzz::Buffer::Out, tle::DType::i1, 3, fuzz::Buffer::Sentinel, 0, 0});
  fuzz::expect_gpu_agrees(p, {{1, 3}, {4, 3}, {8, 3}, {4, 1}, {8, 2}}, [&](tle::Backend backend, fuzz::Memory& m, fuzz::DeviceConfig c) {
    kernel(tle::Grid(3, 1, 1).backend(backend).with_warps(c.num_warps).with_stages(c.num_stages), int32_t(12), int32_t(2), m.ptr<double>(0), m.ptr<int32_t>(1), m.ptr<tle::f16>(2), m.ptr<tle::f16>(3), m.ptr<tle::bf16>(4), m.ptr<tle::bf16>(5), m.ptr<tle::bf16>(6), m.ptr<int8_t>(7), m.ptr<float>(8), m.ptr<double>(9), m.ptr<int32_t>(10), m.ptr<tle::f16>(11), m.ptr<tle::bf16>(12), m.ptr<bool>(13));
  });
}
