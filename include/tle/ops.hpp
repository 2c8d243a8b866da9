// tle/ops.hpp - the library kernels written in tle (include/tle/ops/): tle::ops::topk,
// tle::ops::moe_align_block_size, tle::ops::expert_count. Header only; each kernel compiles at its
// first use. Not included by tle/tle.hpp: include this (or one of its headers) to use them.
#pragma once
#include "tle/ops/moe_align.hpp"
#include "tle/ops/topk.hpp"
