// tests/compile_fail/dlpack_without_header.cpp - a DLTensor* passed to a kernel without
// tle/dlpack.hpp must not compile (it would otherwise pass as an untyped pointer to the DLTensor
// struct, not to its data); the diagnostic names tle/dlpack.hpp. dlpack_with_header.cpp defines
// TLE_DLPACK_CONTROL and includes this file: with the header the same call compiles.
#include <dlpack/dlpack.h>

#ifdef TLE_DLPACK_CONTROL
#include <tle/dlpack.hpp>
#endif
#include <tle/kernel.hpp>

using namespace tle;

void launch(DLTensor* t) {
  auto k = jit("k", [](Ptr<float> x) { store(x, load(x)); });
  k(Grid(1), t);
}
