// src/ir/builder.hpp - creates ops at an insertion point (the end of a block).
#pragma once
#include <initializer_list>

#include "ir/ir.hpp"

namespace tle::ir {

class Builder {
 public:
  explicit Builder(Block* b = nullptr) : block_(b) {}
  void set_insertion_block(Block* b) { block_ = b; }
  Block* insertion_block() const { return block_; }

  /// Appends an op of `kind` with `operands`, one result per entry of `results`, `attrs`, and
  /// `num_regions` empty regions (each with one empty block).
  Op* create(OpKind kind, std::vector<Value*> operands, std::vector<Type> results,
             std::map<std::string, Attr> attrs = {}, SrcLoc loc = {}, unsigned num_regions = 0);

  /// Shorthands returning the single result.
  Value* constant(const Type& t, Attr value, SrcLoc loc = {});
  Value* binary(BinaryOp op, Value* a, Value* b, SrcLoc loc = {});
  Value* unary(UnaryOp op, Value* x, SrcLoc loc = {});
  Value* cmp(CmpPred p, Value* a, Value* b, SrcLoc loc = {});
  Value* cast(Value* x, DType to, SrcLoc loc = {});
  Op* yield(std::vector<Value*> values, SrcLoc loc = {});

 private:
  Block* block_;
};

/// Scalar type of a dtype.
inline Type scalar_type(DType d, DType pointee = DType::f32) { Type t; t.dtype = d; t.pointee = pointee; return t; }

}  // namespace tle::ir
