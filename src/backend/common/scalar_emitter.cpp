// src/backend/common/scalar_emitter.cpp - one element of every elementwise op, as LLVM IR, shared by
// the CPU and GPU backends so both give the same answers (docs/ir.md arithmetic rules).
//
// f16 and bf16 are computed in f32 and rounded once per op. Rounding to f16 uses LLVM's
// `fptrunc float to half`; rounding to bf16 is emitted as integer code. From f64, values are
// first rounded to f32 with round-to-odd, which makes the second rounding exact (24 >= 11 + 2
// bits), so f64 -> f16/bf16 rounds exactly once (E26).
#include "backend/common/scalar_emitter.hpp"

#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <functional>
#include <optional>

#include "support/half.hpp"

namespace tle::backend {

using llvm::Value;

ScalarEmitter::ScalarEmitter(llvm::Module& m) : mod(m), ctx(m.getContext()), B(m.getContext()) {}

void ScalarEmitter::fail(const ir::Op& op, const std::string& msg) const {
  std::string where;
  if (op.loc.known()) where = fmt::format(" (traced at {}:{})", op.loc.file, op.loc.line);
  throw RuntimeError("tle::lower", fmt::format("op '{}': {}{}", ir::op_mnemonic(op.kind), msg, where));
}

llvm::Type* ScalarEmitter::elem_ty(DType d) const {
  switch (d) {
    case DType::i1: return llvm::Type::getInt1Ty(ctx);
    case DType::i8: case DType::u8: return llvm::Type::getInt8Ty(ctx);
    case DType::i16: case DType::u16: return llvm::Type::getInt16Ty(ctx);
    case DType::i32: case DType::u32: return llvm::Type::getInt32Ty(ctx);
    case DType::i64: case DType::u64: return llvm::Type::getInt64Ty(ctx);
    // f16/bf16 travel as their bits: no FP move can quiet a signaling NaN (bitcast round trips).
    case DType::f16: case DType::bf16: return llvm::Type::getInt16Ty(ctx);
    case DType::f8e4m3: case DType::f8e5m2: return llvm::Type::getInt8Ty(ctx);
    case DType::f32: return llvm::Type::getFloatTy(ctx);
    case DType::f64: return llvm::Type::getDoubleTy(ctx);
    case DType::ptr: return llvm::PointerType::get(ctx, 0);
  }
  throw InternalError("tle backend: bad dtype");
}

llvm::Type* ScalarEmitter::mem_ty(DType d) const { return d == DType::i1 ? llvm::Type::getInt8Ty(ctx) : elem_ty(d); }

llvm::Type* ScalarEmitter::compute_ty(DType d) const {
  if (d == DType::f16 || d == DType::bf16 || is_fp8(d)) return llvm::Type::getFloatTy(ctx);
  return elem_ty(d);
}

Value* ScalarEmitter::to_compute(Value* v, DType d) {
  if (d == DType::f16) return B.CreateFPExt(B.CreateBitCast(v, B.getHalfTy()), B.getFloatTy());
  if (d == DType::bf16) {
    Value* bits = B.CreateZExt(v, B.getInt32Ty());
    return B.CreateBitCast(B.CreateShl(bits, 16), B.getFloatTy());
  }
  if (is_fp8(d)) return fp8_to_f32(v, d);
  return v;
}

namespace {
// f64 -> f32 rounding to odd: the truncation toward zero with the lowest bit set when inexact.
Value* f64_to_f32_odd(llvm::IRBuilder<>& B, Value* d) {
  Value* f = B.CreateFPTrunc(d, B.getFloatTy());
  Value* back = B.CreateFPExt(f, B.getDoubleTy());
  Value* exact = B.CreateFCmpUEQ(back, d);  // also true for NaN
  Value* bits = B.CreateBitCast(f, B.getInt32Ty());
  Value* odd = B.CreateTrunc(bits, B.getInt1Ty());
  llvm::Function* fabs = llvm::Intrinsic::getDeclaration(B.GetInsertBlock()->getModule(), llvm::Intrinsic::fabs, {B.getDoubleTy()});
  Value* away = B.CreateFCmpOGT(B.CreateCall(fabs, {back}), B.CreateCall(fabs, {d}));  // rounded away from zero
  Value* adj = B.CreateSelect(away, B.CreateSub(bits, B.getInt32(1)), B.CreateAdd(bits, B.getInt32(1)));
  Value* keep = B.CreateOr(exact, odd);
  return B.CreateBitCast(B.CreateSelect(keep, bits, adj), B.getFloatTy());
}
}  // namespace

Value* ScalarEmitter::f32_to_bf16(Value* f) {
  Value* bits = B.CreateBitCast(f, B.getInt32Ty());
  Value* lsb = B.CreateAnd(B.CreateLShr(bits, 16), B.getInt32(1));
  Value* rounded = B.CreateLShr(B.CreateAdd(bits, B.CreateAdd(lsb, B.getInt32(0x7FFF))), 16);
  Value* nan = B.CreateOr(B.CreateLShr(bits, 16), B.getInt32(0x40));
  Value* isnan = B.CreateFCmpUNO(f, f);
  return B.CreateTrunc(B.CreateSelect(isnan, nan, rounded), B.getInt16Ty());
}

// OCP OFP8 rev. 1.0: E4M3 bias 7, 3 mantissa bits, max S.1111.110 = 448, NaN S.1111.111; E5M2
// bias 15, 2 mantissa bits, max S.11110.11 = 57344, inf S.11111.00. Written on the f32 bits: a
// magnitude at or above the max (inf too) saturates; fp8 normals rebias the exponent and round
// the mantissa to nearest even by adding half an ulp minus one plus the kept lsb (a carry moves
// into the exponent); fp8 subnormals (and zero) shift the 24-bit significand right by
// 24 - bias - mbits - e (e: the unbiased f32 exponent; clamped to 31, which leaves 0) and round
// the shifted-out bits to nearest even.
Value* ScalarEmitter::f32_to_fp8(Value* f, DType d) {
  const bool e4 = d == DType::f8e4m3;
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const uint32_t max_bits = e4 ? 0x43E00000u : 0x47600000u;  // 448.0f, 57344.0f
  const uint32_t maxcode = e4 ? 0x7E : 0x7B;
  llvm::Type* i32 = B.getInt32Ty();
  auto c = [&](uint32_t x) { return B.getInt32(x); };
  Value* bits = B.CreateBitCast(f, i32);
  Value* sign = B.CreateAnd(B.CreateLShr(bits, 24), c(0x80));
  Value* mag = B.CreateAnd(bits, c(0x7FFFFFFF));
  Value* isnan = B.CreateICmpUGT(mag, c(0x7F800000));
  Value* sat = B.CreateICmpUGE(mag, c(max_bits));
  // normal fp8
  const int sh = 23 - mbits;
  Value* v = B.CreateSub(mag, c(uint32_t(127 - bias) << 23));
  Value* lsb = B.CreateAnd(B.CreateLShr(v, sh), c(1));
  Value* rn = B.CreateLShr(B.CreateAdd(v, B.CreateAdd(lsb, c((1u << (sh - 1)) - 1))), sh);
  // subnormal fp8
  Value* e = B.CreateLShr(mag, 23);
  Value* m = B.CreateOr(B.CreateAnd(mag, c(0x7FFFFF)), c(0x800000));
  Value* shs = B.CreateSub(c(uint32_t(151 - bias - mbits)), e);
  // 1..31: larger (or, for the normals this path does not serve, 0 and below) becomes 31
  shs = B.CreateSelect(B.CreateICmpUGT(B.CreateSub(shs, c(1)), c(30)), c(31), shs);
  Value* q = B.CreateLShr(m, shs);
  Value* rem = B.CreateAnd(m, B.CreateSub(B.CreateShl(c(1), shs), c(1)));
  Value* half = B.CreateShl(c(1), B.CreateSub(shs, c(1)));
  Value* odd = B.CreateICmpNE(B.CreateAnd(q, c(1)), c(0));
  Value* up = B.CreateOr(B.CreateICmpUGT(rem, half), B.CreateAnd(B.CreateICmpEQ(rem, half), odd));
  Value* rs = B.CreateAdd(q, B.CreateZExt(up, i32));
  Value* normal = B.CreateICmpUGE(mag, c(uint32_t(128 - bias) << 23));
  Value* code = B.CreateSelect(sat, c(maxcode), B.CreateSelect(normal, rn, rs));
  code = B.CreateSelect(isnan, c(0x7F), code);
  return B.CreateTrunc(B.CreateOr(code, sign), B.getInt8Ty());
}

// Exact: normals rebias the exponent; subnormals are m * 2^(1 - bias - mbits), an exact product
// of small integers and a power of two that is a normal f32.
Value* ScalarEmitter::fp8_to_f32(Value* b, DType d) {
  const bool e4 = d == DType::f8e4m3;
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  llvm::Type* i32 = B.getInt32Ty();
  auto c = [&](uint32_t x) { return B.getInt32(x); };
  Value* x = B.CreateZExt(b, i32);
  Value* sign = B.CreateShl(B.CreateAnd(x, c(0x80)), 24);
  Value* mag = B.CreateAnd(x, c(0x7F));
  Value* e = B.CreateLShr(mag, mbits);
  Value* m = B.CreateAnd(mag, c((1u << mbits) - 1));
  Value* normal = B.CreateOr(B.CreateShl(B.CreateAdd(e, c(127 - bias)), 23), B.CreateShl(m, 23 - mbits));
  Value* sub = B.CreateFMul(B.CreateUIToFP(m, B.getFloatTy()),
                            llvm::ConstantFP::get(B.getFloatTy(), std::ldexp(1.0, 1 - bias - mbits)));
  Value* r = B.CreateSelect(B.CreateICmpEQ(e, c(0)), B.CreateBitCast(sub, i32), normal);
  if (e4) {
    r = B.CreateSelect(B.CreateICmpEQ(mag, c(0x7F)), c(0x7FC00000), r);
  } else {
    Value* special = B.CreateICmpEQ(e, c(31));
    r = B.CreateSelect(special, B.CreateSelect(B.CreateICmpEQ(m, c(0)), c(0x7F800000), c(0x7FC00000)), r);
  }
  return B.CreateBitCast(B.CreateOr(r, sign), B.getFloatTy());
}

Value* ScalarEmitter::from_compute(Value* v, DType d) {
  bool dbl = v->getType()->isDoubleTy();
  switch (d) {
    case DType::f16:
      if (dbl) v = f64_to_f32_odd(B, v);
      return B.CreateBitCast(B.CreateFPTrunc(v, B.getHalfTy()), B.getInt16Ty());
    case DType::bf16:
      if (dbl) v = f64_to_f32_odd(B, v);
      return f32_to_bf16(v);
    case DType::f8e4m3: case DType::f8e5m2:
      // f64 -> f32 to odd keeps the one rounding exact (24 >= 3 + 2 bits) and the saturation
      // monotone: the f32 is above the max finite value exactly when the f64 is
      if (dbl) v = f64_to_f32_odd(B, v);
      return f32_to_fp8(v, d);
    case DType::f32: return dbl ? B.CreateFPTrunc(v, B.getFloatTy()) : v;
    case DType::f64: return dbl ? v : B.CreateFPExt(v, B.getDoubleTy());
    default: return v;
  }
}

llvm::Constant* ScalarEmitter::constant(DType d, const ir::Attr& value, const ir::Op& op) {
  const bool is_i = std::holds_alternative<int64_t>(value);
  if (!is_i && !std::holds_alternative<double>(value)) fail(op, "value attribute is neither an integer nor a float");
  if (is_float(d)) {
    double v = is_i ? static_cast<double>(std::get<int64_t>(value)) : std::get<double>(value);
    switch (d) {
      case DType::f16: return B.getInt16(f64_to_f16_bits(v));
      case DType::bf16: return B.getInt16(f64_to_bf16_bits(v));
      case DType::f8e4m3: case DType::f8e5m2: return B.getInt8(f64_to_fp8_bits(v, d));
      case DType::f32: return llvm::ConstantFP::get(B.getFloatTy(), static_cast<double>(static_cast<float>(v)));
      default: return llvm::ConstantFP::get(B.getDoubleTy(), v);
    }
  }
  int64_t iv;
  if (is_i) {
    iv = std::get<int64_t>(value);
  } else {
    double v = std::get<double>(value);
    iv = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : static_cast<int64_t>(v);
  }
  if (d == DType::ptr) {
    if (iv == 0) return llvm::ConstantPointerNull::get(B.getPtrTy());
    return llvm::ConstantExpr::getIntToPtr(B.getInt64(static_cast<uint64_t>(iv)), B.getPtrTy());
  }
  if (d == DType::i1) iv = iv != 0;
  return llvm::ConstantInt::get(elem_ty(d), static_cast<uint64_t>(iv), /*isSigned=*/false);
}

Value* ScalarEmitter::call_libm(const char* f32name, const char* f64name, std::vector<Value*> args) {
  llvm::Type* t = args[0]->getType();
  const char* name = t->isDoubleTy() ? f64name : f32name;
  std::vector<llvm::Type*> ps(args.size(), t);
  llvm::FunctionCallee callee = mod.getOrInsertFunction(name, llvm::FunctionType::get(t, ps, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    fn->addFnAttr(llvm::Attribute::WillReturn);
    fn->setMemoryEffects(llvm::MemoryEffects::none());
  }
  auto* call = B.CreateCall(callee, args);
  call->setDoesNotAccessMemory();
  return call;
}

Value* ScalarEmitter::float_max_min(bool is_max, Value* a, Value* b) {
  // NaN-propagating (E02); -0 < +0. Written as compares and selects rather than llvm.maximum /
  // llvm.minimum: InstCombine narrows those to half vectors, whose x86 lowering (no AVX512-FP16)
  // was seen to drop the NaN of minimum(-0, NaN).
  Value* better = is_max ? B.CreateFCmpOGT(a, b) : B.CreateFCmpOLT(a, b);
  Value* r = B.CreateSelect(better, a, b);
  // Equal values: identical bits, or +0/-0 where max takes the AND of the bits (+0), min the OR (-0).
  llvm::Type* it = B.getIntNTy(a->getType()->getPrimitiveSizeInBits().getFixedValue());
  Value* ai = B.CreateBitCast(a, it);
  Value* bi = B.CreateBitCast(b, it);
  Value* z = B.CreateBitCast(is_max ? B.CreateAnd(ai, bi) : B.CreateOr(ai, bi), a->getType());
  r = B.CreateSelect(B.CreateFCmpOEQ(a, b), z, r);
  return B.CreateSelect(B.CreateFCmpUNO(a, b), B.CreateFAdd(a, b), r);  // a + b is a quiet NaN
}

Value* ScalarEmitter::binary(ir::BinaryOp op, DType d, Value* a, Value* b, const ir::Op* where) {
  using O = ir::BinaryOp;
  auto bad = [&]() -> Value* {
    if (where) fail(*where, fmt::format("'{}' is not defined on {}", ir::name(op), dtype_name(d)));
    throw InternalError("tle backend: bad binary op");
  };
  if (is_float(d)) {
    Value* x = to_compute(a, d);
    Value* y = to_compute(b, d);
    Value* r;
    switch (op) {
      case O::Add: r = B.CreateFAdd(x, y); break;
      case O::Sub: r = B.CreateFSub(x, y); break;
      case O::Mul: r = B.CreateFMul(x, y); break;
      case O::Div: r = B.CreateFDiv(x, y); break;
      // C fmod (docs/ir.md: exact, sign of the dividend). Not frem: NVPTX expands it as
      // x - trunc(x / y) * y, which loses the sign of a zero result and is inexact for large x / y.
      case O::Rem: r = call_libm("fmodf", "fmod", {x, y}); break;
      case O::Min: r = float_max_min(false, x, y); break;
      case O::Max: r = float_max_min(true, x, y); break;
      case O::Pow: r = call_libm("powf", "pow", {x, y}); break;
      case O::Atan2: r = call_libm("atan2f", "atan2", {x, y}); break;
      default: return bad();
    }
    return from_compute(r, d);
  }
  if (!is_int(d)) return bad();
  const bool sgn = is_signed_int(d);
  const unsigned w = a->getType()->getIntegerBitWidth();
  llvm::Type* t = a->getType();
  auto zero = llvm::ConstantInt::get(t, 0);
  switch (op) {
    case O::Add: return B.CreateAdd(a, b);
    case O::Sub: return B.CreateSub(a, b);
    case O::Mul: return B.CreateMul(a, b);
    case O::Div: case O::Rem: {
      // x/0 == 0, x%0 == x, MIN/-1 == MIN, MIN%-1 == 0: divide by 1 in the special cases.
      Value* bz = B.CreateICmpEQ(b, zero);
      Value* special = bz;
      if (sgn) {
        Value* ovf = B.CreateAnd(B.CreateICmpEQ(a, llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(w))),
                                 B.CreateICmpEQ(b, llvm::ConstantInt::getAllOnesValue(t)));
        special = B.CreateOr(bz, ovf);
      }
      Value* sb = B.CreateSelect(special, llvm::ConstantInt::get(t, 1), b);
      if (op == O::Div) return B.CreateSelect(bz, zero, sgn ? B.CreateSDiv(a, sb) : B.CreateUDiv(a, sb));
      return B.CreateSelect(bz, a, sgn ? B.CreateSRem(a, sb) : B.CreateURem(a, sb));
    }
    case O::And: return B.CreateAnd(a, b);
    case O::Or: return B.CreateOr(a, b);
    case O::Xor: return B.CreateXor(a, b);
    case O::Shl: case O::Shr: {
      // Amount >= width, or negative (huge when unsigned): 0, or the sign fill for signed Shr.
      Value* oob = B.CreateICmpUGE(b, llvm::ConstantInt::get(t, w));
      if (op == O::Shl) return B.CreateSelect(oob, zero, B.CreateShl(a, B.CreateSelect(oob, zero, b)));
      if (sgn) return B.CreateAShr(a, B.CreateSelect(oob, llvm::ConstantInt::get(t, w - 1), b));
      return B.CreateSelect(oob, zero, B.CreateLShr(a, B.CreateSelect(oob, zero, b)));
    }
    case O::Min: return B.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a, b);
    case O::Max: return B.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a, b);
    default: return bad();
  }
}

Value* ScalarEmitter::compare(ir::CmpPred p, DType d, Value* a, Value* b) {
  using P = ir::CmpPred;
  if (is_float(d)) {
    Value* x = to_compute(a, d);
    Value* y = to_compute(b, d);
    switch (p) {
      case P::Eq: return B.CreateFCmpOEQ(x, y);
      case P::Ne: return B.CreateFCmpUNE(x, y);
      case P::Lt: return B.CreateFCmpOLT(x, y);
      case P::Le: return B.CreateFCmpOLE(x, y);
      case P::Gt: return B.CreateFCmpOGT(x, y);
      case P::Ge: return B.CreateFCmpOGE(x, y);
    }
  }
  const bool sgn = is_signed_int(d);
  switch (p) {
    case P::Eq: return B.CreateICmpEQ(a, b);
    case P::Ne: return B.CreateICmpNE(a, b);
    case P::Lt: return sgn ? B.CreateICmpSLT(a, b) : B.CreateICmpULT(a, b);
    case P::Le: return sgn ? B.CreateICmpSLE(a, b) : B.CreateICmpULE(a, b);
    case P::Gt: return sgn ? B.CreateICmpSGT(a, b) : B.CreateICmpUGT(a, b);
    case P::Ge: return sgn ? B.CreateICmpSGE(a, b) : B.CreateICmpUGE(a, b);
  }
  throw InternalError("tle backend: bad cmp predicate");
}

Value* ScalarEmitter::convert(Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::Type* tt = elem_ty(to);
  if (to == DType::i1) {
    if (is_float(from)) return B.CreateFCmpUNE(to_compute(v, from), llvm::ConstantFP::get(compute_ty(from), 0.0));
    if (from == DType::ptr) return B.CreateICmpNE(v, llvm::ConstantPointerNull::get(B.getPtrTy()));
    return B.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (from == DType::ptr) return B.CreatePtrToInt(v, tt);
  if (to == DType::ptr) return B.CreateIntToPtr(v, tt);
  const bool src_signed = is_signed_int(from);
  if (is_int(from) && is_int(to)) return B.CreateIntCast(v, tt, src_signed);
  if (is_int(from)) {  // int -> float
    switch (to) {
      case DType::f32: case DType::f64:
        return src_signed ? B.CreateSIToFP(v, tt) : B.CreateUIToFP(v, tt);
      case DType::f16: {
        // Every integer below f16's overflow threshold is exact in f32, so one rounding happens.
        Value* f = src_signed ? B.CreateSIToFP(v, B.getFloatTy()) : B.CreateUIToFP(v, B.getFloatTy());
        return from_compute(f, DType::f16);
      }
      case DType::bf16: {
        if (bit_width(from) <= 32) {  // exact in f64, then round once
          Value* dv = src_signed ? B.CreateSIToFP(v, B.getDoubleTy()) : B.CreateUIToFP(v, B.getDoubleTy());
          return from_compute(dv, DType::bf16);
        }
        return int64_to_bf16(v, src_signed);
      }
      case DType::f8e4m3: case DType::f8e5m2: {
        // Exact in f64 up to 2^53; anything larger saturates (max finite <= 57344) either way.
        Value* dv = src_signed ? B.CreateSIToFP(v, B.getDoubleTy()) : B.CreateUIToFP(v, B.getDoubleTy());
        return from_compute(dv, to);
      }
      default: break;
    }
  }
  if (is_float(from) && is_int(to)) {  // saturating, NaN -> 0
    Value* x = to_compute(v, from);
    auto id = is_signed_int(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
    llvm::Function* sat = llvm::Intrinsic::getDeclaration(&mod, id, {tt, x->getType()});
    return B.CreateCall(sat, {x});
  }
  if (is_float(from) && is_float(to)) {
    Value* x = to_compute(v, from);  // f32 or f64, exact
    Value* r = from_compute(x, to);
    if (from == DType::f16 && is_fp8(to)) {
      // A NaN keeps its sign (sign | 0x7F): taken from the f16 bits, since the GPU's f16 -> f32
      // (cvt.f32.f16) makes every NaN the canonical, positive one.
      Value* mag = B.CreateAnd(v, B.getInt16(0x7FFF));
      Value* nan = B.CreateOr(B.CreateTrunc(B.CreateLShr(v, 8), B.getInt8Ty()), B.getInt8(0x7F));
      r = B.CreateSelect(B.CreateICmpUGT(mag, B.getInt16(0x7C00)), nan, r);
    }
    return r;
  }
  throw InternalError(fmt::format("tle backend: no conversion {} -> {}", dtype_name(from), dtype_name(to)));
}

Value* ScalarEmitter::unary(ir::UnaryOp uop, DType d0, Value* a, const ir::Op& op) {
  using U = ir::UnaryOp;
  if (is_float(d0)) {
    Value* x = to_compute(a, d0);
    Value* r = nullptr;
    auto intr = [&](llvm::Intrinsic::ID id) { return B.CreateUnaryIntrinsic(id, x); };
    switch (uop) {
      case U::Neg: r = B.CreateFNeg(x); break;
      case U::Exp: case U::Exp2: case U::Log: case U::Log2: case U::Sin: case U::Cos: r = transcendental(uop, x); break;
      case U::Sqrt: r = intr(llvm::Intrinsic::sqrt); break;
      case U::Rsqrt: r = B.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), intr(llvm::Intrinsic::sqrt)); break;
      case U::Abs: r = intr(llvm::Intrinsic::fabs); break;
      case U::Floor: r = intr(llvm::Intrinsic::floor); break;
      case U::Ceil: r = intr(llvm::Intrinsic::ceil); break;
      case U::Round: r = intr(llvm::Intrinsic::round); break;
      case U::Rint: r = intr(llvm::Intrinsic::rint); break;
      case U::Tanh: r = call_libm("tanhf", "tanh", {x}); break;
      case U::Erf: r = call_libm("erff", "erf", {x}); break;
      default: fail(op, fmt::format("'{}' is not defined on {}", ir::name(uop), dtype_name(d0)));
    }
    return from_compute(r, d0);
  }
  if (!is_int(d0)) fail(op, fmt::format("'{}' is not defined on {}", ir::name(uop), dtype_name(d0)));
  switch (uop) {
    case U::Neg: return B.CreateNeg(a);
    case U::Not: return B.CreateNot(a);
    case U::Abs:
      if (!is_signed_int(d0)) return a;
      return B.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a, B.getFalse());
    case U::Floor: case U::Ceil: case U::Round: case U::Rint: return a;
    default: break;
  }
  fail(op, fmt::format("'{}' is not defined on {}", ir::name(uop), dtype_name(d0)));
  return nullptr;  // not reached: fail throws
}

Value* ScalarEmitter::fma(DType rd, const std::vector<Value*>& v) {
  llvm::Type* ct = rd == DType::f32 ? B.getFloatTy() : B.getDoubleTy();
  std::vector<Value*> xs;
  for (Value* e : v) {
    Value* x = to_compute(e, rd);
    xs.push_back(x->getType() == ct ? x : B.CreateFPExt(x, ct));
  }
  if (rd == DType::f32 || rd == DType::f64) {
    llvm::Function* fma = llvm::Intrinsic::getDeclaration(&mod, llvm::Intrinsic::fma, {ct});
    return B.CreateCall(fma, xs);
  }
  // f16/bf16: the exact a*b+c rounded to odd in f64, then rounded once to the dtype (the rule and
  // why: fold.cpp, fma_round_to_odd). The product is exact; TwoSum gives the sum's error e.
  Value* p = B.CreateFMul(xs[0], xs[1]);
  Value* s = B.CreateFAdd(p, xs[2]);
  Value* bb = B.CreateFSub(s, p);
  Value* e = B.CreateFAdd(B.CreateFSub(p, B.CreateFSub(s, bb)), B.CreateFSub(xs[2], bb));
  Value* sb = B.CreateBitCast(s, B.getInt64Ty());
  Value* eb = B.CreateBitCast(e, B.getInt64Ty());
  Value* inexact = B.CreateFCmpONE(e, llvm::ConstantFP::get(ct, 0.0));  // false for NaN (s not finite)
  Value* even = B.CreateICmpEQ(B.CreateAnd(sb, B.getInt64(1)), B.getInt64(0));
  Value* same_sign = B.CreateICmpSGE(B.CreateXor(sb, eb), B.getInt64(0));
  Value* toward = B.CreateSelect(same_sign, B.CreateAdd(sb, B.getInt64(1)), B.CreateSub(sb, B.getInt64(1)));
  Value* odd = B.CreateBitCast(B.CreateSelect(B.CreateAnd(inexact, even), toward, sb), ct);
  return from_compute(odd, rd);
}

Value* ScalarEmitter::atomic_rmw(ir::AtomicOp aop, DType pd, Value* ptr, Value* val, const ir::Op& op) {
  using A = ir::AtomicOp;
  using R = llvm::AtomicRMWInst;
  const llvm::Align align(static_cast<uint64_t>(byte_size(pd)));
  const auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
  const bool flt = is_float(pd);
  const bool sgn = is_signed_int(pd);
  llvm::Type* et = elem_ty(pd);
  std::optional<R::BinOp> bin;
  std::function<Value*(Value*, Value*)> combine;
  switch (aop) {
    case A::Add:
      if (pd == DType::f32 || pd == DType::f64) bin = R::FAdd;
      else if (flt) combine = [&](Value* o, Value* x) { return from_compute(B.CreateFAdd(to_compute(o, pd), to_compute(x, pd)), pd); };
      else bin = pd == DType::i1 ? R::Or : R::Add;
      break;
    case A::Max: case A::Min:
      if (flt) combine = [&, aop](Value* o, Value* x) {
        return from_compute(float_max_min(aop == A::Max, to_compute(o, pd), to_compute(x, pd)), pd);
      };
      else if (aop == A::Max) bin = sgn ? R::Max : R::UMax;
      else bin = sgn ? R::Min : R::UMin;
      break;
    case A::Xchg:
      if (pd == DType::f16 || pd == DType::bf16) combine = [](Value*, Value* x) { return x; };
      else bin = R::Xchg;
      break;
    case A::And: case A::Or: case A::Xor:
      if (flt) fail(op, fmt::format("atomic '{}' is not defined on {}", ir::name(aop), dtype_name(pd)));
      bin = aop == A::And ? R::And : aop == A::Or ? R::Or : R::Xor;
      break;
  }
  if (bin) {
    Value* mv = pd == DType::i1 ? B.CreateZExt(val, B.getInt8Ty()) : val;
    Value* old = B.CreateAtomicRMW(*bin, ptr, mv, align, seq);
    return pd == DType::i1 ? B.CreateICmpNE(old, B.getInt8(0)) : old;
  }
  // cmpxchg loop on the integer bits.
  llvm::Type* it = B.getIntNTy(static_cast<unsigned>(bit_width(pd)));
  Value* first = B.CreateAlignedLoad(it, ptr, align);
  llvm::cast<llvm::LoadInst>(first)->setAtomic(llvm::AtomicOrdering::Monotonic);
  llvm::BasicBlock* pre = B.GetInsertBlock();
  llvm::Function* fn = pre->getParent();
  auto* retry = llvm::BasicBlock::Create(ctx, "cas.retry", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "cas.done", fn);
  B.CreateBr(retry);
  B.SetInsertPoint(retry);
  auto* old = B.CreatePHI(it, 2);
  old->addIncoming(first, pre);
  Value* nv = B.CreateBitCast(combine(B.CreateBitCast(old, et), val), it);
  auto* cx = B.CreateAtomicCmpXchg(ptr, old, nv, align, seq, seq);
  old->addIncoming(B.CreateExtractValue(cx, 0), retry);
  B.CreateCondBr(B.CreateExtractValue(cx, 1), done, retry);
  B.SetInsertPoint(done);
  return B.CreateBitCast(old, et);
}

Value* ScalarEmitter::atomic_cas(DType pd, Value* ptr, Value* cmp, Value* val) {
  llvm::Type* mt = mem_ty(pd);
  llvm::Type* it = pd == DType::ptr ? mt : B.getIntNTy(static_cast<unsigned>(byte_size(pd) * 8));
  auto to_mem = [&](Value* v) { return pd == DType::i1 ? B.CreateZExt(v, B.getInt8Ty()) : v; };
  Value* c = to_mem(cmp);
  Value* nv = to_mem(val);
  if (c->getType() != it) {
    c = B.CreateBitCast(c, it);
    nv = B.CreateBitCast(nv, it);
  }
  const llvm::Align align(static_cast<uint64_t>(byte_size(pd)));
  const auto seq = llvm::AtomicOrdering::SequentiallyConsistent;
  Value* old = B.CreateExtractValue(B.CreateAtomicCmpXchg(ptr, c, nv, align, seq, seq), 0);
  if (old->getType() != mt) old = B.CreateBitCast(old, mt);
  return pd == DType::i1 ? B.CreateICmpNE(old, B.getInt8(0)) : old;
}

llvm::Type* ScalarEmitter::sort_key_ty(DType d) const {
  return bit_width(d) > 32 ? llvm::Type::getInt64Ty(ctx) : llvm::Type::getInt32Ty(ctx);
}

Value* ScalarEmitter::sort_key(Value* v, DType d) {
  llvm::Type* kt = sort_key_ty(d);
  if (d == DType::i1 || is_unsigned_int(d)) return B.CreateZExt(v, kt);
  const unsigned w = static_cast<unsigned>(bit_width(d));
  const llvm::APInt sign = llvm::APInt::getSignMask(w);
  if (is_signed_int(d)) return B.CreateZExt(B.CreateXor(v, B.getInt(sign)), kt);
  if (!is_float(d)) throw InternalError(fmt::format("sort_key: dtype {} has no order", dtype_name(d)));
  // f16/bf16 travel as their bits; f32/f64 as floats.
  Value* bits = d == DType::f32 || d == DType::f64 ? B.CreateBitCast(v, B.getIntNTy(w)) : v;
  const uint64_t inf = d == DType::f16 ? 0x7C00 : d == DType::bf16 ? 0x7F80 : d == DType::f32 ? 0x7F800000
                                                                                               : 0x7FF0000000000000;
  Value* mag = B.CreateAnd(bits, B.getInt(~sign));
  Value* is_nan = B.CreateICmpUGT(mag, llvm::ConstantInt::get(bits->getType(), inf));
  bits = B.CreateSelect(B.CreateICmpEQ(bits, B.getInt(sign)), llvm::ConstantInt::get(bits->getType(), 0), bits);
  Value* neg = B.CreateICmpNE(B.CreateAnd(bits, B.getInt(sign)), llvm::ConstantInt::get(bits->getType(), 0));
  Value* key = B.CreateZExt(B.CreateSelect(neg, B.CreateNot(bits), B.CreateOr(bits, B.getInt(sign))), kt);
  return B.CreateSelect(is_nan, llvm::Constant::getAllOnesValue(kt), key);
}

Value* ScalarEmitter::round_tf32(Value* x) {
  Value* bits = B.CreateBitCast(x, B.getInt32Ty());
  Value* lsb = B.CreateAnd(B.CreateLShr(bits, 13), B.getInt32(1));
  Value* rounded = B.CreateAnd(B.CreateAdd(bits, B.CreateAdd(lsb, B.getInt32(0xFFF))), B.getInt32(~0x1FFFu));
  Value* special = B.CreateICmpEQ(B.CreateAnd(bits, B.getInt32(0x7F800000)), B.getInt32(0x7F800000));
  return B.CreateBitCast(B.CreateSelect(special, bits, rounded), B.getFloatTy());
}

ScalarEmitter::Trips ScalarEmitter::trip_count(Value* lo_in, Value* hi_in, Value* step_in, DType d) {
  const bool sgn = is_signed_int(d);
  auto ext = [&](Value* v) { return sgn ? B.CreateSExt(v, B.getInt64Ty()) : B.CreateZExt(v, B.getInt64Ty()); };
  auto c = [&](int64_t v) { return B.getInt64(static_cast<uint64_t>(v)); };
  Value* lo = ext(lo_in);
  Value* hi = ext(hi_in);
  Value* step = ext(step_in);
  // Differences in unsigned 64-bit arithmetic never overflow when the loop runs.
  Value* pos = sgn ? B.CreateICmpSGT(step, c(0)) : B.CreateICmpNE(step, c(0));
  Value* neg = sgn ? B.CreateICmpSLT(step, c(0)) : B.getFalse();
  Value* runs_pos = B.CreateAnd(pos, sgn ? B.CreateICmpSLT(lo, hi) : B.CreateICmpULT(lo, hi));
  Value* runs_neg = B.CreateAnd(neg, B.CreateICmpSGT(lo, hi));
  Value* runs = B.CreateOr(runs_pos, runs_neg);
  Value* diff = B.CreateSelect(pos, B.CreateSub(hi, lo), B.CreateSub(lo, hi));
  Value* mag = B.CreateSelect(pos, step, B.CreateNeg(step));
  Value* safe_mag = B.CreateSelect(B.CreateICmpEQ(mag, c(0)), c(1), mag);
  Value* trips_if_runs = B.CreateAdd(B.CreateUDiv(B.CreateSub(diff, c(1)), safe_mag), c(1));
  return {B.CreateSelect(runs, trips_if_runs, c(0), "trips"), lo, step};
}

Value* ScalarEmitter::transcendental(ir::UnaryOp uop, Value* x) {
  using U = ir::UnaryOp;
  switch (uop) {
    case U::Exp: return call_libm("expf", "exp", {x});
    case U::Exp2: return call_libm("exp2f", "exp2", {x});
    case U::Log: return call_libm("logf", "log", {x});
    case U::Log2: return call_libm("log2f", "log2", {x});
    case U::Sin: return call_libm("sinf", "sin", {x});
    case U::Cos: return call_libm("cosf", "cos", {x});
    default: throw InternalError("tle backend: not a transcendental");
  }
}

Value* ScalarEmitter::bitcast(Value* v, DType from, DType to) {
  llvm::Type* tt = elem_ty(to);
  if (from == DType::ptr) return B.CreatePtrToInt(v, tt);
  if (to == DType::ptr) return B.CreateIntToPtr(v, tt);
  return B.CreateBitCast(v, tt);
}

}  // namespace tle::backend
