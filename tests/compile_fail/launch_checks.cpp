// tests/compile_fail/launch_checks.cpp - mistakes in a kernel's declaration or in a launch's
// argument list that the C++ types already show, so they must not compile (issue 18: items 3, 6
// and 12). tests/CMakeLists.txt compiles this file once per TLE_CF_CASE and checks that the
// diagnostic says what to change; case 0, the control, holds the same code without the mistake and
// must compile.
#include <tle/tle.hpp>

using namespace tle;

void launch_checks(float* x, void* untyped) {
  auto k = jit("k", [](Ptr<float> p, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    store(p + o, 1.0f, o < n);
  });
  auto raw = raw_kernel<void(float, const float*, float*, int)>("saxpy", "extern \"C\" __global__ void saxpy() {}");
  (void)untyped;
  (void)raw;
#if TLE_CF_CASE == 0
  k(Grid(1), x, 16, 16);
  (void)k.ir(true, x, 16, 16);
  (void)k.ptx(90, 4, static_cast<float*>(untyped), 16, 16);
  raw(Grid(1), 2.0f, x, x, 16);
  int scale = 2;
  auto byvalue = jit("byvalue", [](Ptr<float> p, Tile<float> s) { store(p, load(p) * s); });
  byvalue(Grid(1), x, scale);
#elif TLE_CF_CASE == 1  // a Constexpr argument is missing: the diagnostic lists parameters and arguments
  k(Grid(1), x, 16);
#elif TLE_CF_CASE == 2  // the same through Kernel::ir
  (void)k.ir(true, x, 16);
#elif TLE_CF_CASE == 3  // a raw kernel's argument is missing
  raw(Grid(1), 2.0f, x);
#elif TLE_CF_CASE == 4  // void* for Ptr<float>: the element type cannot be checked
  k(Grid(1), untyped, 16, 16);
#elif TLE_CF_CASE == 5  // a pointer to a struct for Ptr<float>
  struct S { float a, b; };
  S* s = nullptr;
  k(Grid(1), s, 16, 16);
#elif TLE_CF_CASE == 6  // a kernel parameter declared float* instead of Ptr<float>
  auto bad = jit("bad", [](float* p) { (void)p; });
  bad(Grid(1), x);
#elif TLE_CF_CASE == 7  // a kernel parameter declared as a plain int
  auto bad = jit("bad", [](Ptr<float> p, int n) { (void)p, (void)n; });
  bad(Grid(1), x, 3);
#elif TLE_CF_CASE == 8  // a lambda capturing by reference would freeze the value at its first launch
  int scale = 2;
  auto bad = jit("bad", [&scale](Ptr<float> p) { store(p, load(p) * float(scale)); });
  bad(Grid(1), x);
#elif TLE_CF_CASE == 9  // ... and so would a capture by value
  int scale = 2;
  auto bad = jit("bad", [scale](Ptr<float> p) { store(p, load(p) * float(scale)); });
  bad(Grid(1), x);
#endif
}
