// tests/compile_fail/e25_chained.cpp - edge case E25: C++ reads `a < b < c` as `(a < b) < c`; with
// tle tiles that must not compile (a Tile<bool> has no ordering with a number or a tile). The
// CTest test e25_chained_comparison_does_not_compile compiles this file and expects a diagnostic
// naming operator<; e25_control.cpp defines TLE_E25_CONTROL and includes this file, so the only
// difference is the comparison itself, and expects it to compile.
#include <tle/tle.hpp>

using namespace tle;

void e25_kernel_body(Ptr<float> pa, Ptr<float> pb, Ptr<float> pc, Ptr<bool> out) {
  Tile<int32_t> o = arange(0, 16);
  Tile<float> a = load(pa + o), b = load(pb + o), c = load(pc + o);
#ifdef TLE_E25_CONTROL
  store(out + o, (a < b) && (b < c));
  store(out + o, (a < b) && (b < 2.0f));
#else
  store(out + o, a < b < c);     // must not compile: Tile<bool> < Tile<float>
  store(out + o, a < b < 2.0f);  // must not compile: Tile<bool> < float
#endif
}
