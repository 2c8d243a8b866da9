// tle/tle.hpp - the one header users include.
//
// tle is a tile-programming library with its own JIT compiler: kernels are C++ lambdas over
// tiles (tle/tile.hpp), made into kernels with tle::jit and launched on a grid (tle/kernel.hpp).
// Kernels run on the GPU (PTX through the CUDA Driver API, asynchronously on a stream) when a
// driver and device are usable, else on the CPU, compiled by LLVM's ORC JIT (tle/device.hpp:
// backend choice, device memory, streams). Pointer parameters also take DLPack tensors
// (tle/dlpack.hpp, <dlpack/dlpack.h> from libdlpack-dev).
#pragma once
#include "tle/device.hpp"
#include "tle/dlpack.hpp"
#include "tle/dtype.hpp"
#include "tle/error.hpp"
#include "tle/kernel.hpp"
#include "tle/mesh.hpp"
#include "tle/pipe.hpp"
#include "tle/random.hpp"
#include "tle/struct.hpp"
#include "tle/tensor_descriptor.hpp"
#include "tle/raw.hpp"
#include "tle/tile.hpp"
