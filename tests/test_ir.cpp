// tests/test_ir.cpp - the IR printer's exact text and the verifier's checks.
#include <catch2/catch.hpp>

#include <limits>

#include "ir/builder.hpp"
#include "ir/ir.hpp"

using namespace tle;
using namespace tle::ir;

namespace {

Type ty(DType d, Shape s = {}) { Type t; t.dtype = d; t.shape = std::move(s); return t; }
Type ptr_ty(DType pointee, Shape s = {}) { Type t = ty(DType::ptr, std::move(s)); t.pointee = pointee; return t; }

// A function whose body block is ready for a Builder.
struct Fn {
  Function f;
  Builder b;
  Fn(const char* name = "k") : b(&f.entry()) { f.name = name; }
  Value* arg(Type t) {
    f.arg_info.push_back({"a" + std::to_string(f.arg_info.size()), false});
    return f.entry().add_arg(std::move(t));
  }
};

// for lo, hi, step iter(inits) with `body(builder, iv, carried)` returning the yielded values.
template <class Body>
Op* make_for(Builder& b, Value* lo, Value* hi, Value* step, std::vector<Value*> inits, Body body) {
  std::vector<Value*> ops{lo, hi, step};
  std::vector<Type> res;
  for (auto* v : inits) { ops.push_back(v); res.push_back(v->type); }
  Op* op = b.create(OpKind::For, ops, res, {}, {}, 1);
  Block& blk = op->region().body();
  Value* iv = blk.add_arg(lo->type);
  std::vector<Value*> carried;
  for (auto* v : inits) carried.push_back(blk.add_arg(v->type));
  Builder in(&blk);
  in.yield(body(in, iv, carried));
  return op;
}

}  // namespace

TEST_CASE("printer: a kernel with for, if, reduce, load and store", "[ir]") {
  Fn k("vadd");
  Value* x = k.arg(ptr_ty(DType::f32));
  Value* y = k.arg(ptr_ty(DType::f32));
  Value* n = k.arg(ty(DType::i32));
  k.f.arg_info[0].divisibility = 16;
  Builder& b = k.b;
  Value* pid = b.create(OpKind::ProgramId, {}, {ty(DType::i32)}, {{"axis", int64_t(0)}})->result();
  Value* half = b.constant(ty(DType::f32), 0.5);
  Value* zero = b.constant(ty(DType::i32), int64_t(0));
  Value* one = b.constant(ty(DType::i32), int64_t(1));
  Op* loop = make_for(b, zero, n, one, {half}, [&](Builder& in, Value* iv, std::vector<Value*> c) {
    Value* lt = in.cmp(CmpPred::Lt, iv, pid);
    Op* br = in.create(OpKind::If, {lt}, {ty(DType::f32)}, {}, {}, 2);
    Builder t(&br->region(0).body());
    t.yield({t.binary(BinaryOp::Add, c[0], half)});
    Builder e(&br->region(1).body());
    e.yield({c[0]});
    return std::vector<Value*>{br->result()};
  });
  Value* r = b.create(OpKind::Arange, {}, {ty(DType::i32, {4})}, {{"start", int64_t(0)}, {"end", int64_t(4)}})->result();
  Value* x1 = b.create(OpKind::ExpandDims, {x}, {ptr_ty(DType::f32, {1})}, {{"axis", int64_t(0)}})->result();
  Value* xb = b.create(OpKind::Broadcast, {x1}, {ptr_ty(DType::f32, {4})})->result();
  Value* p = b.create(OpKind::AddPtr, {xb, r}, {ptr_ty(DType::f32, {4})})->result();
  Value* v = b.create(OpKind::Load, {p}, {ty(DType::f32, {4})}, {{"cache", std::string("ca")}})->result();
  Op* red = b.create(OpKind::Reduce, {v}, {ty(DType::f32)},
                     {{"axis", int64_t(0)}, {"kind", int64_t(ReduceKind::Combine)}}, {}, 1);
  {
    Block& blk = red->region().body();
    Value* acc = blk.add_arg(ty(DType::f32));
    Value* nx = blk.add_arg(ty(DType::f32));
    Builder in(&blk);
    in.yield({in.binary(BinaryOp::Max, acc, nx)});
  }
  Value* s = b.binary(BinaryOp::Add, red->result(), loop->result());
  b.create(OpKind::Store, {y, s}, {});

  const char* expected =
      "func @vadd(%0: ptr<f32> {div16}, %1: ptr<f32>, %2: i32) {\n"
      "  %3 = program_id {axis=0} : i32\n"
      "  %4 = constant {value=0.5} : f32\n"
      "  %5 = constant {value=0} : i32\n"
      "  %6 = constant {value=1} : i32\n"
      "  %7 = for %5, %2, %6 iter(%4) : (i32, i32, i32, f32) -> f32 {\n"
      "  ^(%8: i32, %9: f32):\n"
      "    %10 = cmp %8, %3 {pred=lt} : (i32, i32) -> i1\n"
      "    %11 = if %10 : (i1) -> f32 {\n"
      "      %12 = binary %9, %4 {op=add} : (f32, f32) -> f32\n"
      "      yield %12\n"
      "    } else {\n"
      "      yield %9\n"
      "    }\n"
      "    yield %11\n"
      "  }\n"
      "  %13 = arange {end=4, start=0} : i32[4]\n"
      "  %14 = expand_dims %0 {axis=0} : (ptr<f32>) -> ptr<f32>[1]\n"
      "  %15 = broadcast %14 : (ptr<f32>[1]) -> ptr<f32>[4]\n"
      "  %16 = addptr %15, %13 : (ptr<f32>[4], i32[4]) -> ptr<f32>[4]\n"
      "  %17 = load %16 {cache=\"ca\"} : (ptr<f32>[4]) -> f32[4]\n"
      "  %18 = reduce %17 {axis=0, kind=combine} : (f32[4]) -> f32 {\n"
      "  ^(%19: f32, %20: f32):\n"
      "    %21 = binary %19, %20 {op=max} : (f32, f32) -> f32\n"
      "    yield %21\n"
      "  }\n"
      "  %22 = binary %18, %7 {op=add} : (f32, f32) -> f32\n"
      "  store %1, %22 : (ptr<f32>, f32)\n"
      "}\n";
  CHECK(print(k.f) == expected);
  REQUIRE_NOTHROW(verify(k.f));
}

TEST_CASE("printer: attribute values and enum names", "[ir]") {
  Fn k("attrs");
  Builder& b = k.b;
  b.constant(ty(DType::f32, {2, 3}), 1.0);
  b.constant(ty(DType::f64), -0.0);
  b.constant(ty(DType::f64), 1e20);
  b.constant(ty(DType::f32), std::numeric_limits<double>::quiet_NaN());
  b.constant(ty(DType::f32), -std::numeric_limits<double>::infinity());
  b.constant(ty(DType::u64), int64_t(-1));
  b.constant(ty(DType::i64), int64_t(-1));
  Value* a = b.constant(ty(DType::f16, {2, 3}), 2.0);
  Value* t = b.create(OpKind::Permute, {a}, {ty(DType::f16, {3, 2})}, {{"order", std::vector<int64_t>{1, 0}}})->result();
  Value* acc = b.constant(ty(DType::f32, {2, 2}), 0.0);
  Value* c = b.cast(a, DType::f32);
  Value* ct = b.cast(t, DType::f32);
  b.create(OpKind::Dot, {c, ct, acc}, {ty(DType::f32, {2, 2})}, {{"precision", int64_t(Precision::TF32)}});
  b.create(OpKind::Scan, {c}, {ty(DType::f32, {2, 3})},
           {{"axis", int64_t(1)}, {"reverse", int64_t(0)}, {"kind", int64_t(ScanKind::Cumsum)}});
  Value* u = b.unary(UnaryOp::Exp2, c);
  b.create(OpKind::Hint, {u}, {u->type}, {{"multiple_of", int64_t(16)}});
  const char* expected =
      "func @attrs() {\n"
      "  %0 = constant {value=1.0} : f32[2,3]\n"
      "  %1 = constant {value=-0.0} : f64\n"
      "  %2 = constant {value=1e+20} : f64\n"
      "  %3 = constant {value=nan} : f32\n"
      "  %4 = constant {value=-inf} : f32\n"
      "  %5 = constant {value=18446744073709551615} : u64\n"
      "  %6 = constant {value=-1} : i64\n"
      "  %7 = constant {value=2.0} : f16[2,3]\n"
      "  %8 = permute %7 {order=[1, 0]} : (f16[2,3]) -> f16[3,2]\n"
      "  %9 = constant {value=0.0} : f32[2,2]\n"
      "  %10 = cast %7 : (f16[2,3]) -> f32[2,3]\n"
      "  %11 = cast %8 : (f16[3,2]) -> f32[3,2]\n"
      "  %12 = dot %10, %11, %9 {precision=tf32} : (f32[2,3], f32[3,2], f32[2,2]) -> f32[2,2]\n"
      "  %13 = scan %10 {axis=1, kind=cumsum, reverse=0} : (f32[2,3]) -> f32[2,3]\n"
      "  %14 = unary %10 {op=exp2} : (f32[2,3]) -> f32[2,3]\n"
      "  %15 = hint %14 {multiple_of=16} : (f32[2,3]) -> f32[2,3]\n"
      "}\n";
  CHECK(print(k.f) == expected);
  REQUIRE_NOTHROW(verify(k.f));
}

TEST_CASE("printer: output is deterministic and renumbers after edits", "[ir]") {
  Fn k;
  Value* a = k.arg(ty(DType::i32));
  Value* c = k.b.constant(ty(DType::i32), int64_t(3));
  Value* s = k.b.binary(BinaryOp::Add, a, c);
  k.b.binary(BinaryOp::Mul, s, s);
  std::string first = print(k.f);
  CHECK(first == print(k.f));
  k.f.entry().ops.pop_back();
  k.f.entry().ops.pop_back();
  CHECK(print(k.f) == "func @k(%0: i32) {\n  %1 = constant {value=3} : i32\n}\n");
}

// ---- verifier
namespace {
void expect_error(const Function& f, const std::string& what) {
  try {
    verify(f);
    FAIL("verify accepted invalid IR; expected: " << what);
  } catch (const InternalError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find(what) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("verifier: elementwise operand types must match", "[ir]") {
  Fn k;
  Value* a = k.b.constant(ty(DType::f32, {128}), 1.0);
  Value* c = k.b.constant(ty(DType::f32, {64}), 1.0);
  k.b.create(OpKind::Binary, {a, c}, {a->type}, {{"op", int64_t(BinaryOp::Add)}});
  expect_error(k.f, "'binary' at line 4 (%2): rhs type differs from the result: f32[64] vs f32[128]");
}

TEST_CASE("verifier: message names the op, its line and its traced location", "[ir]") {
  Fn k;
  Value* a = k.b.constant(ty(DType::i32), int64_t(1));
  SrcLoc loc;
  loc.file = "user.cpp";
  loc.line = 42;
  k.b.create(OpKind::Binary, {a, a}, {ty(DType::i64)}, {{"op", int64_t(BinaryOp::Add)}}, loc);
  expect_error(k.f, "IR verifier: @k: 'binary' at line 3 (%1) [traced at user.cpp:42]: lhs type differs");
  expect_error(k.f, "  %1 = binary %0, %0 {op=add} : (i32, i32) -> i64\n");  // the function follows
}

TEST_CASE("verifier: per-op typing rules", "[ir]") {
  SECTION("binary: bitwise op on floats") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32), 1.0);
    k.b.binary(BinaryOp::And, a, a);
    expect_error(k.f, "and needs integer operands");
  }
  SECTION("binary: missing op attribute") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32), 1.0);
    k.b.create(OpKind::Binary, {a, a}, {a->type});
    expect_error(k.f, "missing integer attribute 'op'");
  }
  SECTION("binary: wrong operand count") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32), 1.0);
    k.b.create(OpKind::Binary, {a}, {a->type}, {{"op", int64_t(0)}});
    expect_error(k.f, "expects 2 operands, has 1");
  }
  SECTION("histogram and histogram_ranks result types") {
    Fn k;
    Value* x = k.b.constant(ty(DType::i32, {16}), int64_t(1));
    k.b.create(OpKind::Histogram, {x}, {ty(DType::i32, {16})}, {{"bins", int64_t(8)}});
    expect_error(k.f, "result must be i32[8], is i32[16]");
    Fn r;
    Value* y = r.b.constant(ty(DType::i32, {16}), int64_t(1));
    r.b.create(OpKind::HistogramRanks, {y}, {ty(DType::i32, {8})}, {{"bins", int64_t(8)}});
    expect_error(r.f, "result must be i32[16], is i32[8]");
    Fn f;
    Value* z = f.b.constant(ty(DType::f32, {16}), 1.0);
    f.b.create(OpKind::HistogramRanks, {z}, {ty(DType::i32, {16})}, {{"bins", int64_t(8)}});
    expect_error(f.f, "input must be a 1-D integer tile");
  }
  SECTION("cmp result must be i1") {
    Fn k;
    Value* a = k.b.constant(ty(DType::i32, {4}), int64_t(1));
    k.b.create(OpKind::Compare, {a, a}, {ty(DType::i32, {4})}, {{"pred", int64_t(CmpPred::Eq)}});
    expect_error(k.f, "result must be i1 of the operand shape");
  }
  SECTION("select condition must be i1") {
    Fn k;
    Value* a = k.b.constant(ty(DType::i32, {4}), int64_t(1));
    k.b.create(OpKind::Select, {a, a, a}, {a->type});
    expect_error(k.f, "condition must be i1");
  }
  SECTION("select condition shape") {
    Fn k;
    Value* c = k.b.constant(ty(DType::i1, {2}), int64_t(1));
    Value* a = k.b.constant(ty(DType::i32, {4}), int64_t(1));
    k.b.create(OpKind::Select, {c, a, a}, {a->type});
    expect_error(k.f, "condition shape differs");
  }
  SECTION("addptr needs pointer + integer") {
    Fn k;
    Value* p = k.arg(ptr_ty(DType::f32));
    Value* o = k.b.constant(ty(DType::f32), 1.0);
    k.b.create(OpKind::AddPtr, {p, o}, {p->type});
    expect_error(k.f, "offset must be an integer");
  }
  SECTION("addptr on a non-pointer") {
    Fn k;
    Value* o = k.b.constant(ty(DType::i32), int64_t(1));
    k.b.create(OpKind::AddPtr, {o, o}, {o->type});
    expect_error(k.f, "operand 0 must be a pointer");
  }
  SECTION("load result is the pointee") {
    Fn k;
    Value* p = k.arg(ptr_ty(DType::f32));
    k.b.create(OpKind::Load, {p}, {ty(DType::f16)});
    expect_error(k.f, "result type is not the pointee type");
  }
  SECTION("load mask shape") {
    Fn k;
    Value* p = k.arg(ptr_ty(DType::f32));
    Value* pp = k.b.create(OpKind::Broadcast, {k.b.create(OpKind::ExpandDims, {p}, {ptr_ty(DType::f32, {1})},
                                                          {{"axis", int64_t(0)}})->result()},
                           {ptr_ty(DType::f32, {8})})->result();
    Value* m = k.b.constant(ty(DType::i1, {4}), int64_t(1));
    k.b.create(OpKind::Load, {pp, m}, {ty(DType::f32, {8})});
    expect_error(k.f, "mask shape differs from the pointer shape");
  }
  SECTION("load mask dtype") {
    Fn k;
    Value* p = k.arg(ptr_ty(DType::f32));
    Value* m = k.b.constant(ty(DType::i32), int64_t(1));
    k.b.create(OpKind::Load, {p, m}, {ty(DType::f32)});
    expect_error(k.f, "mask operand 1 must be i1");
  }
  SECTION("store value type") {
    Fn k;
    Value* p = k.arg(ptr_ty(DType::f32));
    Value* v = k.b.constant(ty(DType::i32), int64_t(1));
    k.b.create(OpKind::Store, {p, v}, {});
    expect_error(k.f, "stored value type is not the pointee type");
  }
  SECTION("dot shapes") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f16, {16, 32}), 1.0);
    Value* b = k.b.constant(ty(DType::f16, {16, 8}), 1.0);
    Value* c = k.b.constant(ty(DType::f32, {16, 8}), 0.0);
    k.b.create(OpKind::Dot, {a, b, c}, {c->type}, {{"precision", int64_t(Precision::IEEE)}});
    expect_error(k.f, "shapes f16[16,32] @ f16[16,8] + f32[16,8] do not match");
  }
  SECTION("dot precision") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f16, {16, 16}), 1.0);
    Value* c = k.b.constant(ty(DType::f32, {16, 16}), 0.0);
    k.b.create(OpKind::Dot, {a, a, c}, {c->type});
    expect_error(k.f, "missing integer attribute 'precision'");
    k.f.entry().ops.back()->attrs["precision"] = int64_t(Precision::TF32x3);
    expect_error(k.f, "tf32 precisions need f32 inputs");
    k.f.entry().ops.back()->attrs["precision"] = int64_t(Precision::IEEE);
    REQUIRE_NOTHROW(verify(k.f));
  }
  SECTION("bitcast width, i1 and ptr") {
    Fn k;
    Value* p = k.arg(ptr_ty(DType::f32));
    k.b.create(OpKind::Bitcast, {p}, {ty(DType::i64)});
    expect_error(k.f, "bitcast ptr -> i64 changes the bit width or involves i1 or ptr");
    k.f.entry().ops.clear();
    Value* x = k.b.constant(ty(DType::f32), 1.0);
    k.b.create(OpKind::Bitcast, {x}, {ty(DType::i16)});
    expect_error(k.f, "bitcast f32 -> i16");
  }
  SECTION("dot accumulator dtype") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f16, {16, 16}), 1.0);
    Value* c = k.b.constant(ty(DType::f16, {16, 16}), 0.0);
    k.b.create(OpKind::Dot, {a, a, c}, {c->type}, {{"precision", int64_t(Precision::IEEE)}});
    expect_error(k.f, "f16 inputs need an f32 accumulator");
  }
  SECTION("reduce axis") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {4, 8}), 1.0);
    k.b.create(OpKind::Reduce, {a}, {ty(DType::f32, {4})}, {{"axis", int64_t(2)}, {"kind", int64_t(ReduceKind::Sum)}});
    expect_error(k.f, "axis 2 out of range for f32[4,8]");
  }
  SECTION("reduce result shape") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {4, 8}), 1.0);
    k.b.create(OpKind::Reduce, {a}, {ty(DType::f32, {4})}, {{"axis", int64_t(0)}, {"kind", int64_t(ReduceKind::Sum)}});
    expect_error(k.f, "result type: f32[8] vs f32[4]");
  }
  SECTION("combine over several operands: shapes, region arity, yields") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {4, 8}), 1.0);
    Value* i = k.b.constant(ty(DType::i32, {4, 8}), int64_t(1));
    Value* j = k.b.constant(ty(DType::i32, {8}), int64_t(1));
    auto combine = [&](std::vector<Value*> xs, int args, int yields) {
      std::vector<Type> rts;
      for (Value* x : xs) rts.push_back(ty(x->type.dtype, {4}));
      Op* r =
          k.b.create(OpKind::Reduce, xs, rts, {{"axis", int64_t(1)}, {"kind", int64_t(ReduceKind::Combine)}}, {}, 1);
      Block& blk = r->region().body();
      std::vector<Value*> as;
      for (int q = 0; q < args; ++q) as.push_back(blk.add_arg(ty(xs[size_t(q) % xs.size()]->type.dtype)));
      Builder in(&blk);
      in.yield(std::vector<Value*>(as.begin(), as.begin() + yields));
    };
    SECTION("one shape") {
      combine({a, j}, 4, 2);
      expect_error(k.f, "operand 1: shapes f32[4,8] vs i32[8]");
    }
    SECTION("2n region arguments") {
      combine({a, i}, 2, 2);
      expect_error(k.f, "combine region must take 4 scalars");
    }
    SECTION("n yields") {
      combine({a, i}, 4, 1);
      expect_error(k.f, "region 0 yields 1 values, expected 2");
    }
  }
  SECTION("argmax gives i32") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {8}), 1.0);
    k.b.create(OpKind::Reduce, {a}, {ty(DType::f32)}, {{"axis", int64_t(0)}, {"kind", int64_t(ReduceKind::Argmax)}});
    expect_error(k.f, "result type: i32 vs f32");
  }
  SECTION("broadcast dims") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {2, 4}), 1.0);
    k.b.create(OpKind::Broadcast, {a}, {ty(DType::f32, {4, 4})});
    expect_error(k.f, "cannot broadcast f32[2,4] to f32[4,4] (dim 0)");
  }
  SECTION("reshape element count") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {2, 4}), 1.0);
    k.b.create(OpKind::Reshape, {a}, {ty(DType::f32, {6})});
    expect_error(k.f, "cannot reshape f32[2,4] to f32[6]");
  }
  SECTION("constant kind must match the dtype") {
    Fn k;
    k.b.constant(ty(DType::f32), int64_t(1));
    expect_error(k.f, "a float constant's value must be a double attribute");
  }
  SECTION("no dim <= 0") {
    Fn k;
    k.b.constant(ty(DType::f32, {4, 0}), 1.0);
    expect_error(k.f, "result 0 has type f32[4,0] with a dimension <= 0");
  }
  SECTION("sort: k within the axis, two results of the kept shape") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {4, 8}), 1.0);
    k.b.create(OpKind::Sort, {a}, {ty(DType::f32, {4, 9}), ty(DType::i32, {4, 9})},
               {{"axis", int64_t(1)}, {"descending", int64_t(0)}, {"k", int64_t(9)}});
    expect_error(k.f, "k = 9 is outside 1..8 (dim 1 of f32[4,8])");
  }
  SECTION("sort: indices are i32") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {8}), 1.0);
    k.b.create(OpKind::Sort, {a}, {ty(DType::f32, {2}), ty(DType::i64, {2})},
               {{"axis", int64_t(0)}, {"descending", int64_t(1)}, {"k", int64_t(2)}});
    expect_error(k.f, "indices type: i64[2] vs i32[2]");
  }
  SECTION("gather: integer index of the input's dims off the axis") {
    Fn k;
    Value* a = k.b.constant(ty(DType::f32, {4, 8}), 1.0);
    Value* f = k.b.constant(ty(DType::f32, {2, 8}), 1.0);
    k.b.create(OpKind::Gather, {a, f}, {ty(DType::f32, {2, 8})}, {{"axis", int64_t(0)}});
    expect_error(k.f, "index must be an integer tile, is f32[2,8]");
    Fn k2;
    Value* b = k2.b.constant(ty(DType::f32, {4, 8}), 1.0);
    Value* i = k2.b.constant(ty(DType::i32, {2, 4}), int64_t(0));
    k2.b.create(OpKind::Gather, {b, i}, {ty(DType::f32, {2, 4})}, {{"axis", int64_t(0)}});
    expect_error(k2.f, "index i32[2,4] and input f32[4,8] differ in dim 1");
  }
  SECTION("no dim <= 0 on block arguments") {
    Fn k;
    k.f.entry().add_arg(ty(DType::i32, {-1}));
    expect_error(k.f, "block argument 0 has type i32[-1] with a dimension <= 0");
  }
}

TEST_CASE("verifier: for loops", "[ir]") {
  auto base = [](Fn& k, DType carried_type, bool bad_yield) {
    Value* lo = k.b.constant(ty(DType::i32), int64_t(0));
    Value* hi = k.b.constant(ty(DType::i32), int64_t(8));
    Value* init = k.b.constant(ty(carried_type), 0.0);
    return make_for(k.b, lo, hi, lo, {init}, [&](Builder& in, Value* iv, std::vector<Value*> c) {
      if (bad_yield) return std::vector<Value*>{iv};
      return std::vector<Value*>{in.binary(BinaryOp::Add, c[0], c[0])};
    });
  };
  SECTION("valid") {
    Fn k;
    base(k, DType::f32, false);
    REQUIRE_NOTHROW(verify(k.f));
  }
  SECTION("yield type differs from the carried type") {
    Fn k;
    base(k, DType::f32, true);
    expect_error(k.f, "'for' at line 5 (%3): region 0 yield value 0 has type i32, expected f32");
  }
  SECTION("result type differs from the init") {
    Fn k;
    Op* f = base(k, DType::f32, false);
    f->result()->type = ty(DType::f64);
    expect_error(k.f, "init 0 type differs from result 0");
  }
  SECTION("body argument count") {
    Fn k;
    Op* f = base(k, DType::f32, false);
    f->region().body().add_arg(ty(DType::f32));
    expect_error(k.f, "body has 3 arguments, expected 2 (iv + carried)");
  }
  SECTION("bounds must be integer scalars of one type") {
    Fn k;
    Op* f = base(k, DType::f32, false);
    f->operands[1] = f->operands[3];  // hi := f32 init
    expect_error(k.f, "hi type differs from lo");
  }
  SECTION("region must end in yield") {
    Fn k;
    Op* f = base(k, DType::f32, false);
    f->region().body().ops.pop_back();
    expect_error(k.f, "region 0 does not end in yield");
  }
  SECTION("yield in the middle of a block") {
    Fn k;
    Op* f = base(k, DType::f32, false);
    Block& body = f->region().body();
    Builder in(&body);
    in.constant(ty(DType::f32), 1.0);  // after the yield
    expect_error(k.f, "region 0 does not end in yield");
    body.ops.pop_back();
    in.yield({});  // [add, yield, yield]: move the new one to the front
    auto y = std::move(body.ops.back());
    body.ops.pop_back();
    body.ops.push_front(std::move(y));
    expect_error(k.f, "yield is not the last op of its block");
  }
  SECTION("yield at the top level") {
    Fn k;
    k.b.yield({});
    expect_error(k.f, "the function body must not end in yield");
  }
}

TEST_CASE("verifier: if", "[ir]") {
  auto make_if = [](Fn& k, Value* cond, Type t1, Type t2) {
    Op* op = k.b.create(OpKind::If, {cond}, {ty(DType::f32)}, {}, {}, 2);
    Builder a(&op->region(0).body());
    a.yield({a.constant(t1, 1.0)});
    Builder b(&op->region(1).body());
    b.yield({b.constant(t2, 2.0)});
    return op;
  };
  SECTION("valid") {
    Fn k;
    make_if(k, k.b.constant(ty(DType::i1), int64_t(1)), ty(DType::f32), ty(DType::f32));
    REQUIRE_NOTHROW(verify(k.f));
  }
  SECTION("condition must be an i1 scalar") {
    Fn k;
    make_if(k, k.b.constant(ty(DType::i1, {2}), int64_t(1)), ty(DType::f32), ty(DType::f32));
    expect_error(k.f, "condition must be an i1 scalar, is i1[2]");
  }
  SECTION("condition dtype") {
    Fn k;
    make_if(k, k.b.constant(ty(DType::i32), int64_t(1)), ty(DType::f32), ty(DType::f32));
    expect_error(k.f, "condition must be an i1 scalar, is i32");
  }
  SECTION("both branches must yield the result types") {
    Fn k;
    make_if(k, k.b.constant(ty(DType::i1), int64_t(1)), ty(DType::f32), ty(DType::f64));
    expect_error(k.f, "region 1 yield value 0 has type f64, expected f32");
  }
  SECTION("yield count") {
    Fn k;
    Op* op = make_if(k, k.b.constant(ty(DType::i1), int64_t(1)), ty(DType::f32), ty(DType::f32));
    op->region(0).body().terminator()->operands.clear();
    expect_error(k.f, "region 0 yields 0 values, expected 1");
  }
}

TEST_CASE("verifier: dominance", "[ir]") {
  SECTION("use before definition in the same block") {
    Fn k;
    Value* a = k.b.constant(ty(DType::i32), int64_t(1));
    Op* add = k.b.create(OpKind::Binary, {a, a}, {a->type}, {{"op", int64_t(0)}});
    Value* later = k.b.constant(ty(DType::i32), int64_t(2));
    add->operands[1] = later;
    expect_error(k.f, "'binary' at line 3 (%1): operand 1 does not dominate its use");
  }
  SECTION("an op using its own result") {
    Fn k;
    Value* a = k.b.constant(ty(DType::i32), int64_t(1));
    Op* add = k.b.create(OpKind::Binary, {a, a}, {a->type}, {{"op", int64_t(0)}});
    add->operands[0] = add->result();
    expect_error(k.f, "operand 0 does not dominate its use");
  }
  SECTION("a value from a nested region used outside") {
    Fn k;
    Value* c = k.b.constant(ty(DType::i1), int64_t(1));
    Op* op = k.b.create(OpKind::If, {c}, {}, {}, {}, 2);
    Builder t(&op->region(0).body());
    Value* inner = t.constant(ty(DType::i32), int64_t(5));
    t.yield({});
    Builder(&op->region(1).body()).yield({});
    k.b.binary(BinaryOp::Add, inner, inner);
    expect_error(k.f, "'binary' at line 9 (%2): operand 0 does not dominate its use");
  }
  SECTION("a value from a sibling region") {
    Fn k;
    Value* c = k.b.constant(ty(DType::i1), int64_t(1));
    Op* op = k.b.create(OpKind::If, {c}, {ty(DType::i32)}, {}, {}, 2);
    Builder t(&op->region(0).body());
    Value* inner = t.constant(ty(DType::i32), int64_t(5));
    t.yield({inner});
    Builder(&op->region(1).body()).yield({inner});
    expect_error(k.f, "'yield' at line 7: operand 0 does not dominate its use");
  }
  SECTION("a for body block argument used after the loop") {
    Fn k;
    Value* lo = k.b.constant(ty(DType::i32), int64_t(0));
    Op* f = make_for(k.b, lo, lo, lo, {}, [](Builder&, Value*, std::vector<Value*>) { return std::vector<Value*>{}; });
    k.b.binary(BinaryOp::Add, f->region().body().arg(0), lo);
    expect_error(k.f, "operand 0 does not dominate its use");
  }
  SECTION("values of enclosing blocks are visible") {
    Fn k;
    Value* a = k.arg(ty(DType::i32));
    Value* lo = k.b.constant(ty(DType::i32), int64_t(0));
    make_for(k.b, lo, a, lo, {a}, [&](Builder& in, Value* iv, std::vector<Value*> c) {
      Op* inner = make_for(in, lo, iv, lo, {c[0]}, [&](Builder& in2, Value* iv2, std::vector<Value*> c2) {
        return std::vector<Value*>{in2.binary(BinaryOp::Add, in2.binary(BinaryOp::Add, c2[0], iv), a)};
      });
      return std::vector<Value*>{inner->result()};
    });
    REQUIRE_NOTHROW(verify(k.f));
  }
}

TEST_CASE("verifier: extract_tile and insert_tile", "[ir][lite]") {
  auto x_of = [](Fn& k) { return k.b.constant(ty(DType::f32, {6, 8}), 1.0); };
  SECTION("well formed: static and dynamic indices, padded real shapes") {
    Fn k;
    Value* x = x_of(k);
    Value* s = k.b.create(OpKind::ExtractTile, {x}, {ty(DType::f32, {2, 4})}, {{"index", int64_t(5)}})->result();
    Value* i = k.b.constant(ty(DType::i32), int64_t(7));
    k.b.create(OpKind::InsertTile, {x, s, i}, {x->type});
    Value* p = k.b.constant(ty(DType::f32, {8, 8}), 1.0);
    k.b.create(OpKind::ExtractTile, {p}, {ty(DType::f32, {4, 8})},
               {{"index", int64_t(1)}, {"real_x", Shape{6, 8}}, {"real_sub", Shape{3, 8}}});
    REQUIRE_NOTHROW(verify(k.f));
  }
  SECTION("a sub-tile that does not divide") {
    Fn k;
    k.b.create(OpKind::ExtractTile, {x_of(k)}, {ty(DType::f32, {4, 4})}, {{"index", int64_t(0)}});
    expect_error(k.f, "sub-tile [4,4] does not divide the tile [6,8]");
  }
  SECTION("a static index outside the grid") {
    Fn k;
    k.b.create(OpKind::ExtractTile, {x_of(k)}, {ty(DType::f32, {2, 4})}, {{"index", int64_t(6)}});
    expect_error(k.f, "index 6 outside the 6 sub-tiles");
  }
  SECTION("insert: another dtype, a non-i32 index") {
    Fn k;
    Value* x = x_of(k);
    k.b.create(OpKind::InsertTile, {x, k.b.constant(ty(DType::i32, {2, 4}), int64_t(0))}, {x->type},
               {{"index", int64_t(0)}});
    expect_error(k.f, "sub-tile element type differs");
    Fn k2;
    Value* x2 = x_of(k2);
    k2.b.create(OpKind::InsertTile, {x2, k2.b.constant(ty(DType::f32, {2, 4}), 0.0), k2.b.constant(ty(DType::i64), int64_t(0))},
                {x2->type});
    expect_error(k2.f, "index must be an i32 scalar");
  }
  SECTION("real shapes that do not pad to the types") {
    Fn k;
    Value* p = k.b.constant(ty(DType::f32, {8, 8}), 1.0);
    k.b.create(OpKind::ExtractTile, {p}, {ty(DType::f32, {4, 8})},
               {{"index", int64_t(0)}, {"real_x", Shape{3, 8}}, {"real_sub", Shape{3, 8}}});
    expect_error(k.f, "do not fit");
  }
}
