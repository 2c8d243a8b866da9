// tle/kernel.hpp - turning a lambda into a kernel, and launching it.
//
//   auto add = tle::jit("add", [](tle::Ptr<float> x, tle::Ptr<float> y, tle::Tile<int32_t> n,
//                                 tle::Constexpr<int> BLOCK) { ... });
//   add(tle::Grid(tle::cdiv(n, 1024)), x_ptr, y_ptr, n, 1024);
//
// Parameters are Ptr<T> (host passes T*, a tle::DeviceBuffer<T>, a tle::ManagedBuffer<T>, or, with tle/dlpack.hpp, a DLPack
// DLTensor* / DLManagedTensor* whose dtype, device and alignment are checked), Tile<T> (host passes a scalar;
// converted exactly or rejected), Constexpr<T> (host passes a value; part of the
// specialization), and TensorDescriptor<T, Rank> (host passes one; tle/tensor_descriptor.hpp). A launch is specialized, as in Triton, on constexpr values, on the alignment of
// each pointer and on which integer arguments equal 1 or are multiples of 2, 4, 8 or 16 (Triton: 16)
// (and, on the GPU, on num_warps, num_stages and maxnreg; the CPU backend ignores those three); each specialization
// is traced and compiled once and cached in memory, so later launches neither trace nor compile.
// JitOptions::do_not_specialize turns the pointer and integer specializations off per parameter.
//
// Kernel lambdas capture nothing (a capture does not compile): the lambda runs once per
// specialization, so a captured variable would be read at the first launch and never again. What
// changes between launches is a parameter. Host variables the lambda reads without capturing
// them (globals, statics) are likewise read while tracing only.
//
// A pointer argument must point to T for a Ptr<T> parameter (void* does not compile; cast it) and
// be aligned to sizeof(T) (UserError at the launch otherwise).
//
// Backends: a launch runs on grid.backend(...) if given, else on tle::default_backend() (GPU when a
// CUDA driver and device are usable; TLE_BACKEND=cpu|gpu|interp forces one). On the CPU (and on the
// interpreter, Backend::Interp, which runs the traced kernel with src/interp/) a launch is
// synchronous. On the GPU it is ASYNCHRONOUS: it is queued on the Grid's stream (.on(stream), else
// the legacy default stream) and returns; results are visible after tle::synchronize(),
// Stream::synchronize() or a DeviceBuffer copy ordered after it, and a fault while the kernel runs
// is reported there (RuntimeError); with TLE_LAUNCH_BLOCKING=1 every GPU launch waits for its kernel
// and reports a fault itself. GPU pointer arguments must be memory the GPU addresses (DeviceBuffer,
// ManagedBuffer, cudaMalloc, pinned host memory); a plain host pointer is a UserError at the Grid's
// file:line.
//
//   add(tle::Grid(cdiv(n, 1024)).with_warps(8).on(stream), x_buf, y_buf, out_buf, n, 1024);
#pragma once
#include <array>
#include <memory>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tle/device.hpp"
#include "tle/tile.hpp"

namespace tle {

/// A launch grid: number of programs along x, y, z. Limits are CUDA's (x < 2^31, y and z < 2^16) on
/// every backend; a grid with a 0 axis launches nothing (rule E08). The source position of the
/// Grid's construction is where launch errors are reported.
///
/// Optional launch options, chained on the grid (each returns the grid itself):
///   .on(stream) / .on_stream(cu_stream)  GPU: queue the launch on this stream (default: the legacy
///                                        default stream). Ignored on the CPU.
///   .with_warps(w)                       GPU: w warps (32 * w threads) per program; a power of two
///                                        from 1 to 32, default 4; part of the specialization.
///                                        Checked on every backend, used on the GPU only.
///   .with_stages(s)                      GPU: software-pipelining depth of K loops (cp.async
///                                        multistage, sm_80 and newer): a qualifying load of
///                                        iteration k + s - 1 is issued while iteration k computes,
///                                        into s shared-memory buffers. 1 to 8, default 3; 1 turns
///                                        pipelining off. Part of the specialization; checked on
///                                        every backend (UserError outside 1..8), used on the GPU.
///   .with_maxnreg(r)                     GPU: at most r registers per thread (PTX ISA 11.4.1,
///                                        `.maxnreg`; Triton's `maxnreg`): 24 to 255, or 0 (the
///                                        default) for no limit. ptxas spills what does not fit
///                                        to local memory; fewer registers let more programs
///                                        share an SM (65536 registers each). Part of the
///                                        specialization; checked on every backend (UserError
///                                        outside 0 / 24..255), used on the GPU. Raw kernels
///                                        reject it (UserError): their CUDA source says it
///                                        (__launch_bounds__, __maxnreg__, -maxrregcount).
///   .backend(Backend::CPU|GPU|Interp)    run on this backend instead of default_backend().
/// Options of tle::jit.
struct JitOptions {
  /// Parameters (0-based indices in the lambda's order) left out of the specialization, as
  /// Triton's `do_not_specialize`: an integer Tile<T> scalar is no longer specialized on being 1
  /// or a multiple of 2, 4, 8 or 16, a Ptr<T> on its alignment. One compiled kernel then serves
  /// every value (e.g. batch sizes 1..40 compile once instead of six times), at the price of what the
  /// specialization allowed (a constant 1, vector accesses the alignment proves). Only integer
  /// scalars and pointers have such specializations: another index is a UserError at jit's line.
  std::vector<int> do_not_specialize;
};

/// A plain value (the target sm of Kernel::ptx, the `optimized` flag of Kernel::ir) that converts
/// implicitly from T and records where the call was written, so that a UserError about the call's
/// arguments or options names the caller's file:line.
template <class T> struct Located {
  T value;
  SrcLoc loc;
  Located(T v, loc_t l = loc_t::current()) : value(v), loc(l) {}
};

struct Grid {
  int64_t x = 1, y = 1, z = 1;
  SrcLoc loc;
  void* stream = nullptr;  ///< CUstream (null: the legacy default stream)
  int num_warps = 4;
  int num_stages = 3;
  int maxnreg = 0;
  /// The backend asked for with .backend(); `has_backend` false means default_backend().
  Backend backend_choice = Backend::CPU;
  bool has_backend = false;

  Grid(int64_t gx, int64_t gy = 1, int64_t gz = 1, loc_t l = loc_t::current()) : x(gx), y(gy), z(gz), loc(l) {}

  Grid& on(const Stream& s) & { stream = s.handle(); return *this; }
  Grid&& on(const Stream& s) && { return std::move(on(s)); }
  Grid& on_stream(void* cu_stream) & { stream = cu_stream; return *this; }
  Grid&& on_stream(void* cu_stream) && { return std::move(on_stream(cu_stream)); }
  Grid& with_warps(int w) & { num_warps = w; return *this; }
  Grid&& with_warps(int w) && { return std::move(with_warps(w)); }
  Grid& with_stages(int s) & { num_stages = s; return *this; }
  Grid&& with_stages(int s) && { return std::move(with_stages(s)); }
  Grid& with_maxnreg(int r) & { maxnreg = r; return *this; }
  Grid&& with_maxnreg(int r) && { return std::move(with_maxnreg(r)); }
  Grid& backend(Backend b) & { backend_choice = b, has_backend = true; return *this; }
  Grid&& backend(Backend b) && { return std::move(backend(b)); }
};

namespace detail {
template <class> inline constexpr bool dependent_false = false;

/// A kernel parameter type tle does not take: the static_asserts say what to declare instead.
template <class P> struct param_spec {
  static_assert(!std::is_pointer_v<P>, "tle::jit: a kernel parameter is declared as a raw pointer T*; declare it as "
                                       "tle::Ptr<T> instead (float* -> Ptr<float>); the host still passes a T*");
  static_assert(std::is_pointer_v<P> || !std::is_arithmetic_v<P>,
                "tle::jit: a kernel parameter is declared as a plain C++ number; declare tle::Tile<T> for a runtime "
                "scalar argument or tle::Constexpr<T> for a compile-time one (part of the specialization)");
  static_assert(std::is_pointer_v<P> || std::is_arithmetic_v<P> || dependent_false<P>,
                "tle::jit: kernel parameters are tle::Ptr<T>, tle::Tile<T> (a scalar) or tle::Constexpr<T>");
  static ParamSpec get() { return {}; }
};
template <class T> struct param_spec<Tile<ptr_t<T>>> {
  static ParamSpec get() { return {ParamSpec::Pointer, dtype_of<T>::value}; }
};
template <ScalarElement T> struct param_spec<Tile<T>> {
  static ParamSpec get() { return {ParamSpec::Scalar, dtype_of<T>::value}; }
};
template <class T> struct param_spec<Constexpr<T>> {
  static ParamSpec get() {
    if constexpr (std::is_same_v<T, bool>) return {ParamSpec::ConstexprBool, DType::i1};
    else if constexpr (std::is_integral_v<T>) {
      // The C++ type's range (checked at launch): its width and signedness.
      constexpr int w = sizeof(T);
      constexpr bool s = std::is_signed_v<T>;
      constexpr DType d = w == 1 ? (s ? DType::i8 : DType::u8)
                        : w == 2 ? (s ? DType::i16 : DType::u16)
                        : w == 4 ? (s ? DType::i32 : DType::u32)
                                 : (s ? DType::i64 : DType::u64);
      return {ParamSpec::ConstexprInt, d};
    }
    else return {ParamSpec::ConstexprFloat, DType::f64};
  }
};
template <class P> struct param_spec<const P&> : param_spec<P> {};
template <class P> struct param_spec<P&> : param_spec<P> {};
template <class P> struct param_spec<const P> : param_spec<P> {};

template <class P> struct make_param {
  static P get(const TraceParam&);  // never defined: param_spec<P> already rejected P
};
template <class T> struct make_param<Tile<T>> {
  static Tile<T> get(const TraceParam& p) { return Tile<T>(p.value); }
};
template <class T> struct make_param<Constexpr<T>> {
  static Constexpr<T> get(const TraceParam& p) {
    if constexpr (std::is_integral_v<T>) return Constexpr<T>{static_cast<T>(p.i)};
    else return Constexpr<T>{static_cast<T>(p.f)};
  }
};

template <class F> struct signature : signature<decltype(&F::operator())> {};
template <class C, class R, class... A> struct signature<R (C::*)(A...) const> { using args = std::tuple<std::decay_t<A>...>; };
template <class C, class R, class... A> struct signature<R (C::*)(A...)> { using args = std::tuple<std::decay_t<A>...>; };
template <class R, class... A> struct signature<R (*)(A...)> { using args = std::tuple<std::decay_t<A>...>; };

template <class T> HostArg host_arg(const DeviceBuffer<T>& b) {
  HostArg h{};
  h.kind = HostArg::Pointer;
  h.p = b.data();
  h.device_buffer = true;
  if constexpr (Element<T> && !is_ptr<T>::value) h.pointee = dtype_of<T>::value;
  else if constexpr (std::is_same_v<T, long long>) h.pointee = DType::i64;
  else if constexpr (std::is_same_v<T, unsigned long long>) h.pointee = DType::u64;
  else if constexpr (std::is_same_v<T, char>) h.pointee = std::is_signed_v<char> ? DType::i8 : DType::u8;
  else h.untyped_pointer = true;
  h.type_name = "tle::DeviceBuffer";
  return h;
}

/// Extension point for other host argument types: a specialization with `static HostArg get(const
/// A&)` makes A a kernel argument (tle/dlpack.hpp adds DLTensor* and DLManagedTensor* this way).
template <class A> struct host_arg_ext {
  static constexpr bool enabled = false;
};
/// A DLPack tensor type (DLTensor or DLManagedTensor), recognized by its members so that kernel.hpp
/// needs no <dlpack/dlpack.h>: passing one without tle/dlpack.hpp must not compile (it would
/// otherwise become an untyped pointer to the struct, not to the data).
template <class E> concept dlpack_like =
    requires(E* t) { t->data; t->device; t->dtype; t->byte_offset; t->strides; } ||
    requires(E* t) { t->dl_tensor; t->manager_ctx; t->deleter; };

template <class A> HostArg host_arg(const A& a) {
  HostArg h{};
  using D = std::decay_t<A>;
  if constexpr (host_arg_ext<D>::enabled) {
    h = host_arg_ext<D>::get(a);
  } else if constexpr (std::is_pointer_v<D> && dlpack_like<std::remove_cv_t<std::remove_pointer_t<D>>>) {
    static_assert(sizeof(D) == 0, "pass DLPack tensors (DLTensor*, DLManagedTensor*) after #include <tle/dlpack.hpp>");
  } else if constexpr (std::is_pointer_v<D> || std::is_null_pointer_v<D>) {
    h.kind = HostArg::Pointer;
    h.p = static_cast<const void*>(a);
    if constexpr (std::is_null_pointer_v<D>) {
      h.untyped_pointer = true;
      h.type_name = "nullptr";
    } else {
      using E = std::remove_cv_t<std::remove_pointer_t<D>>;
      if constexpr (Element<E> && !is_ptr<E>::value) h.pointee = dtype_of<E>::value;
      else if constexpr (std::is_same_v<E, long long>) h.pointee = DType::i64;
      else if constexpr (std::is_same_v<E, unsigned long long>) h.pointee = DType::u64;
      else if constexpr (std::is_same_v<E, char>) h.pointee = std::is_signed_v<char> ? DType::i8 : DType::u8;
      else h.untyped_pointer = true;
      h.type_name = "pointer";
    }
  } else if constexpr (std::is_same_v<D, bool>) {
    h.kind = HostArg::Bool, h.b = a, h.type_name = "bool";
  } else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
    h.kind = HostArg::Int, h.i = static_cast<int64_t>(a), h.type_name = "signed integer";
  } else if constexpr (std::is_integral_v<D>) {
    h.kind = HostArg::UInt, h.u = static_cast<uint64_t>(a), h.type_name = "unsigned integer";
  } else if constexpr (std::is_floating_point_v<D>) {
    h.kind = HostArg::Float, h.f = static_cast<double>(a), h.type_name = std::is_same_v<D, float> ? "float" : "double";
  } else if constexpr (std::is_same_v<D, f16>) {
    h.kind = HostArg::Half, h.h = a.bits, h.type_name = "tle::f16";
  } else if constexpr (std::is_same_v<D, bf16>) {
    h.kind = HostArg::BFloat, h.h = a.bits, h.type_name = "tle::bf16";
  } else if constexpr (std::is_same_v<D, f8e4m3> || std::is_same_v<D, f8e5m2>) {
    // exact in double; packing into an fp8 parameter gives the same bits back
    h.kind = HostArg::Float, h.f = static_cast<double>(static_cast<float>(a));
    h.type_name = std::is_same_v<D, f8e4m3> ? "tle::f8e4m3" : "tle::f8e5m2";
  } else if constexpr (dlpack_like<D>) {
    static_assert(sizeof(D) == 0, "pass a DLPack tensor by pointer (&tensor), after #include <tle/dlpack.hpp>");
  } else {
    static_assert(sizeof(D) == 0, "tle kernel arguments are T* pointers, arithmetic values, tle::f16, tle::bf16, "
                                    "tle::f8e4m3 or tle::f8e5m2");
  }
  return h;
}
/// A ManagedBuffer passes its address (host and GPU launches both take it).
template <class T> HostArg host_arg(const ManagedBuffer<T>& b) {
  HostArg h = host_arg(static_cast<const T*>(b.data()));
  h.type_name = "tle::ManagedBuffer";
  return h;
}

/// Host element types a pointer argument may point to: tle's element types, plus long long,
/// unsigned long long and char, which host_arg maps to i64, u64 and i8/u8.
template <class E> inline constexpr bool typed_pointee =
    (Element<E> && !is_ptr<E>::value) || std::is_same_v<E, long long> || std::is_same_v<E, unsigned long long> ||
    std::is_same_v<E, char>;
/// A host argument that is an address whose element type is unknown: void*, a pointer to a
/// struct, or a DeviceBuffer/ManagedBuffer of one. nullptr and DLPack tensors are not.
template <class A> struct untyped_address : std::false_type {};
template <class E> struct untyped_address<E*>
    : std::bool_constant<!typed_pointee<std::remove_cv_t<E>> && !dlpack_like<std::remove_cv_t<E>> &&
                         !host_arg_ext<E*>::enabled && !host_arg_ext<std::remove_cv_t<E>*>::enabled> {};
template <class T> struct untyped_address<DeviceBuffer<T>> : std::bool_constant<!typed_pointee<T>> {};
template <class T> struct untyped_address<ManagedBuffer<T>> : std::bool_constant<!typed_pointee<T>> {};

/// Is kernel parameter P a pointer? Tile kernels declare Ptr<T>, raw kernels T*.
template <class P> struct pointer_param : std::bool_constant<std::is_pointer_v<P>> {};
template <class T> struct pointer_param<Tile<ptr_t<T>>> : std::true_type {};

/// One argument against its parameter, at compile time.
template <class P, class A> constexpr bool check_argument() {
  static_assert(!(pointer_param<P>::value && untyped_address<std::decay_t<A>>::value),
                "tle: a void* (or a pointer to a type that is not a tle element type) is passed for a pointer "
                "parameter; its element type could not be checked against the parameter's, so cast it to the "
                "element type first (static_cast<float*>(p) for a Ptr<float> parameter)");
  return true;
}
/// Compile-time checks of a launch: one argument per parameter (the diagnostic's instantiation of
/// kernel_call<std::tuple<PARAMETERS...>, std::tuple<ARGUMENTS...>> shows both lists), and no
/// untyped address for a pointer parameter.
template <class Params, class Args> struct kernel_call;
template <class... P, class... A> struct kernel_call<std::tuple<P...>, std::tuple<A...>> {
  static_assert(sizeof...(P) == sizeof...(A),
                "tle: wrong number of kernel arguments: a kernel takes one argument per parameter of its lambda, in "
                "order, a value for every Constexpr<T> included; the expected parameters are the first "
                "std::tuple<...> of kernel_call<std::tuple<PARAMETERS...>, std::tuple<ARGUMENTS...>> in this "
                "diagnostic, the arguments passed the second");
  static constexpr bool check() {
    if constexpr (sizeof...(P) == sizeof...(A)) return (check_argument<P, A>() && ...);
    else return false;
  }
  static constexpr bool ok = check();
};
/// The launch options a Grid carries (stream, num_warps, num_stages, maxnreg, backend).
inline LaunchOptions launch_options(const Grid& grid) {
  LaunchOptions o;
  o.stream = grid.stream;
  o.num_warps = grid.num_warps;
  o.num_stages = grid.num_stages;
  o.maxnreg = grid.maxnreg;
  o.backend = grid.has_backend ? static_cast<int>(grid.backend_choice) : -1;
  return o;
}
}  // namespace detail

/// What the compiler made of one specialization (Kernel::stats). On the CPU backend and the
/// interpreter only `backend` is set.
struct KernelStats {
  Backend backend = Backend::CPU;
  int num_warps = 0;     ///< warps per program at launch (GPU; with a warp-specialized K loop, 4 more than asked)
  int registers = 0;     ///< registers per thread (GPU; cuFuncGetAttribute NUM_REGS)
  /// Local memory per thread in bytes (GPU; LOCAL_SIZE_BYTES): registers spilled by ptxas and
  /// stack frames (of libdevice calls, local arrays). A kernel spills when ptxas says "bytes spill
  /// stores" in jit_log (or, with jit_log empty, when it has local memory and its registers are at
  /// their cap); tle prints a warning when it compiles one. Fewer elements per thread (smaller
  /// tiles, more warps) or a lower .with_stages usually fix it.
  int local_bytes = 0;
  int shared_bytes = 0;  ///< dynamic shared memory per program in bytes (GPU)
  /// The driver JIT's info log (ptxas: registers, spill stores and loads); empty when the driver
  /// took the module from its own JIT cache (~/.nv/ComputeCache, CUDA_CACHE_DISABLE=1 turns it off).
  std::string jit_log;
  /// GPU: convert_layout ops left after the layout pass (counted in the IR, docs/ir.md "GPU
  /// layouts"), and how many it would leave with its conversion elimination off (forward layout
  /// inference only: passes::count_conversions_without_elimination). TLE_STATS prints both.
  int conversions = 0;
  int conversions_without_elimination = 0;
  /// GPU: of those, the ones lowered by writing the tile to shared memory and reading it back (not
  /// register renumberings, nor ldmatrix reads of a pipelined load's stage buffer, which cp.async
  /// filled already), and the bytes they write there; counted once per place, not per execution.
  int conversions_through_shared = 0;
  int64_t conversion_shared_bytes = 0;
  /// GPU: CTA or warp-role barriers (bar.sync / barrier.sync) in the emitted code, counted once
  /// per place, not per execution; mbarrier waits are not counted.
  int barriers = 0;
  /// GPU: global loads the load-reordering pass issued earlier than the kernel wrote them: above a
  /// reduction, a conversion or other work without side effects (passes/gpu/reorder_loads.cpp).
  int loads_reordered = 0;
};

/// A kernel made from a lambda by tle::jit. Callable as kernel(grid, args...). Thread-safe: several
/// threads may launch it at once. Not copyable (its specialization cache is owned here).
template <class F> class Kernel {
  using Args = typename detail::signature<F>::args;
  static constexpr size_t N = std::tuple_size_v<Args>;
  // The specialization rule (docs/semantics.md, "Specialization"): a kernel is traced once per
  // specialization, so whatever a lambda captured would be read once, at its first launch, and
  // later changes ignored. Values that vary between launches are parameters.
  static_assert(std::is_empty_v<F> || std::is_pointer_v<F>,
                "tle::jit: the kernel lambda captures variables (or the function object has data members); a "
                "kernel is traced once per specialization, so a captured value would be frozen at its first launch. "
                "Write a captureless lambda ([](...) { ... }) and pass what varies as parameters: Constexpr<T> for a "
                "compile-time value (part of the specialization), Tile<T> for a runtime scalar");

 public:
  Kernel(const char* name, F fn, const SrcLoc& loc, const JitOptions& opts = {}) : fn_(std::move(fn)) {
    std::vector<detail::ParamSpec> specs;
    add_specs(specs, std::make_index_sequence<N>());
    state_ = detail::kernel_create(name, specs, &trace_thunk, loc, opts.do_not_specialize);
  }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  ~Kernel() { detail::kernel_destroy(state_); }

  /// Launches the kernel on `grid` with arguments `args` (one per lambda parameter). On the CPU
  /// backend it waits for the programs (run on a thread pool); on the GPU backend it queues the
  /// kernel on the grid's stream and returns at once (asynchronous: see the top of this file).
  /// Throws UserError (at the Grid's file:line) for a wrong argument count or type, an argument
  /// that does not fit its parameter, a grid beyond the limits, a bad num_warps, num_stages or
  /// maxnreg, or a host
  /// pointer passed to a GPU launch; RuntimeError if compiling, loading or launching fails.
  template <class... A> void operator()(const Grid& grid, const A&... args) const {
    (void)detail::kernel_call<Args, std::tuple<A...>>::ok;  // compile-time argument checks
    std::array<detail::HostArg, sizeof...(A)> h{detail::host_arg(args)...};
    detail::kernel_launch(state_, &fn_, detail::Grid3{grid.x, grid.y, grid.z}, detail::launch_options(grid), h.data(),
                          h.size(), grid.loc);
  }
  /// The PTX of the specialization these arguments select, compiled for sm_<target_sm> (80 or newer;
  /// 90 means sm_90a; above 90, sm_90 PTX without the `a` features - LLVM 19 emits nothing newer,
  /// and a launch on such a device JIT-compiles that PTX forward) with `num_warps` warps per program and the default 3 pipeline stages (K loops
  /// feeding tensor-core dots get cp.async copies; the Grid overload below chooses). Needs no GPU and no driver: pointer arguments may
  /// be host pointers (only their 16-byte alignment matters). Nothing is cached or launched. For
  /// tests and inspection; throws as a launch would for bad arguments (UserError at the caller's
  /// line, e.g. for a target before sm_80 or num_warps not a power of two from 1 to 32).
  template <class... A> std::string ptx(Located<int> target_sm, int num_warps, const A&... args) const {
    (void)detail::kernel_call<Args, std::tuple<A...>>::ok;  // compile-time argument checks
    std::array<detail::HostArg, sizeof...(A)> h{detail::host_arg(args)...};
    detail::LaunchOptions o;
    o.num_warps = num_warps;
    return detail::kernel_ptx(state_, &fn_, target_sm.value, o, h.data(), h.size(), target_sm.loc);
  }
  /// As above with the launch options of `launch` (its num_warps, num_stages and maxnreg; grid
  /// size, stream and backend are ignored). Throws UserError (at the Grid's line) for bad options.
  template <class... A> std::string ptx(Located<int> target_sm, const Grid& launch, const A&... args) const {
    (void)detail::kernel_call<Args, std::tuple<A...>>::ok;  // compile-time argument checks
    std::array<detail::HostArg, sizeof...(A)> h{detail::host_arg(args)...};
    return detail::kernel_ptx(state_, &fn_, target_sm.value, detail::launch_options(launch), h.data(), h.size(),
                              launch.loc);
  }
  /// The tile IR of the specialization these arguments select: after the pass pipeline
  /// (optimized = true) or right after tracing. For tests and inspection; nothing is compiled.
  /// Bad arguments throw UserError at the caller's line.
  template <class... A> std::string ir(Located<bool> optimized, const A&... args) const {
    (void)detail::kernel_call<Args, std::tuple<A...>>::ok;  // compile-time argument checks
    std::array<detail::HostArg, sizeof...(A)> h{detail::host_arg(args)...};
    return detail::kernel_ir(state_, &fn_, h.data(), h.size(), optimized.value, optimized.loc);
  }
  /// How many specializations have been compiled (each once).
  size_t num_compiled() const { return detail::kernel_num_compiled(state_); }
  /// Compiles (once, cached as a launch would) the specialization that a launch on `launch` with
  /// these arguments selects, without launching it, and returns what the compiler made of it:
  /// registers, spilled (local) bytes, shared memory, warps (KernelStats). Throws as a launch
  /// would for bad arguments or options (UserError at the Grid's line) or a failed compile.
  template <class... A> KernelStats stats(const Grid& launch, const A&... args) const {
    (void)detail::kernel_call<Args, std::tuple<A...>>::ok;  // compile-time argument checks
    std::array<detail::HostArg, sizeof...(A)> h{detail::host_arg(args)...};
    detail::KernelStatsData d =
        detail::kernel_stats(state_, &fn_, detail::launch_options(launch), h.data(), h.size(), launch.loc);
    KernelStats s;
    s.backend = static_cast<Backend>(d.backend);
    s.num_warps = d.num_warps, s.registers = d.registers, s.local_bytes = d.local_bytes;
    s.shared_bytes = d.shared_bytes, s.jit_log = std::move(d.jit_log);
    s.conversions = d.conversions, s.conversions_without_elimination = d.conversions_without_elimination;
    s.conversions_through_shared = d.conversions_through_shared, s.conversion_shared_bytes = d.conversion_shared_bytes;
    s.barriers = d.barriers, s.loads_reordered = d.loads_reordered;
    return s;
  }

 private:
  template <size_t... I> static void add_specs(std::vector<detail::ParamSpec>& s, std::index_sequence<I...>) {
    (s.push_back(detail::param_spec<std::tuple_element_t<I, Args>>::get()), ...);
  }
  template <size_t... I> static void call(const F& f, const detail::TraceParam* p, std::index_sequence<I...>) {
    f(detail::make_param<std::tuple_element_t<I, Args>>::get(p[I])...);
  }
  static void trace_thunk(const void* fn, const detail::TraceParam* params) {
    call(*static_cast<const F*>(fn), params, std::make_index_sequence<N>());
  }
  F fn_;
  detail::KernelState* state_;
};

/// Makes a kernel from a captureless lambda (or function pointer) whose parameters are Ptr<T>,
/// Tile<T> scalars, Constexpr<T> and TensorDescriptor<T, Rank>. Nothing is traced until the first launch. `opts` (JitOptions)
/// turns specializations off per parameter: `jit("k", fn, {.do_not_specialize = {3}})`; an index
/// that is not an integer scalar or pointer parameter is a UserError at this line.
template <class F> Kernel<std::decay_t<F>> jit(const char* name, F&& fn, JitOptions opts = {}, loc_t l = loc_t::current()) {
  return Kernel<std::decay_t<F>>(name, std::forward<F>(fn), l, opts);
}
template <class F> Kernel<std::decay_t<F>> jit(const char* name, F&& fn, loc_t l) {
  return Kernel<std::decay_t<F>>(name, std::forward<F>(fn), l);
}

}  // namespace tle
