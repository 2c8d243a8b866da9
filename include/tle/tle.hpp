// tle/tle.hpp - the one header users include.
//
// tle is a tile-programming library with its own JIT compiler: kernels are C++ lambdas over
// tiles (tle/tile.hpp), made into kernels with tle::jit and launched on a grid (tle/kernel.hpp).
// Without a GPU, kernels run on the CPU, compiled by LLVM's ORC JIT.
#pragma once
#include "tle/dtype.hpp"
#include "tle/error.hpp"
#include "tle/kernel.hpp"
#include "tle/tile.hpp"
