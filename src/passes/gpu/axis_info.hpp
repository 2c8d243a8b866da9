// src/passes/gpu/axis_info.hpp - per-dimension facts about integer and pointer tiles, used to
// choose coalesced layouts and vector widths (the idea of Triton's AxisInfo analysis; our code).
//
// For a value of shape s and each dim d (a scalar is treated as one virtual dim of size 1):
//  - contig[d]: the values form runs of contig[d] consecutive integers (+1 per step along d;
//    pointers: +1 element) in aligned blocks [k*contig, (k+1)*contig) along d;
//  - div[d]: the first value of every such run is a multiple of div[d] (pointers: the address in
//    bytes). With contig[d] == 1 every value is a multiple of div[d]; all powers of two;
//  - cst[d]: the values are equal over aligned blocks of cst[d] elements along d.
// Values with no facts get contig = div = cst = 1 (always true). All three are powers of two.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/ir.hpp"

namespace tle::passes::axis {

struct Info {
  std::vector<int64_t> contig, div, cst;  // one entry per dim (1 for a scalar)
  std::optional<int64_t> value;           // a known integer splat value
  bool operator==(const Info& o) const {
    return contig == o.contig && div == o.div && cst == o.cst && value == o.value;
  }
};

/// Runs the analysis over the whole function (loops to a fixpoint, conservatively bounded).
std::unordered_map<const ir::Value*, Info> analyze(const ir::Function& f);

}  // namespace tle::passes::axis
