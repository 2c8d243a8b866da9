// tests/test_dlpack.cpp - DLPack tensors (tle/dlpack.hpp) as Ptr<T> arguments: DLTensor views of
// host vectors on the CPU backend (with byte_offset, ragged sizes, every dtype of the mapping,
// DLManagedTensor), and every check (dtype, bits, lanes, device, alignment, null data, null
// tensor) as a tle::UserError with its phrase, this file and the Grid's line. The [.gpu] case at
// the end passes kDLCUDA tensors over DeviceBuffers on the GPU backend.
#include <catch2/catch.hpp>
#include <dlpack/dlpack.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "error_util.hpp"
#include "tle/dlpack.hpp"
#include "tle/tle.hpp"

using namespace tle;

namespace {

constexpr uint8_t kBool = 6;  // DLPack's kDLBool (newer than Debian's DLPack 0.6)


/// A 1-d DLTensor over `n` elements at `data` (+ byte_offset), dtype {code, bits, lanes}.
struct View {
  int64_t shape[1];
  DLTensor t{};
  View(void* data, int64_t n, DLDataType dt, uint64_t byte_offset = 0, DLDeviceType dev = kDLCPU, int dev_id = 0) {
    shape[0] = n;
    t.data = data;
    t.device = DLDevice{dev, dev_id};
    t.ndim = 1;
    t.dtype = dt;
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = byte_offset;
  }
  View(const View&) = delete;
};

DLDataType f32() { return DLDataType{kDLFloat, 32, 1}; }

auto& vadd() {
  static auto k = jit("dl_vadd", [](Ptr<float> x, Ptr<float> y, Ptr<float> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile<bool> m = o < n;
    store(out + o, load(x + o, m) + load(y + o, m), m);
  });
  return k;
}

Grid cpu(int64_t g, std::source_location l = std::source_location::current()) { return std::move(Grid(g, 1, 1, l).backend(Backend::CPU)); }

/// Runs f, which must throw tle::UserError whose message contains every phrase, at this file and
/// at `line`; then checks that a correct DLPack launch still works.
template <class F> void expect_error(F&& f, const std::vector<std::string>& phrases, const int& line) {
  errtest::expect_user_error(f, phrases, "test_dlpack.cpp", line);
  std::vector<float> x{1, 2, 3}, y{10, 20, 30}, out(3, 0);
  View vx(x.data(), 3, f32()), vy(y.data(), 3, f32()), vo(out.data(), 3, f32());
  vadd()(cpu(1), &vx.t, &vy.t, &vo.t, 3, 16);
  CHECK(out == std::vector<float>{11, 22, 33});
}

}  // namespace

TEST_CASE("dlpack: vector add through DLTensor views with byte_offset, ragged sizes", "[dlpack]") {
  for (int n : {1, 17, 1001}) {
    INFO("n = " << n);
    // x starts 3 floats into its vector, out 1 float in; y has no offset. Canaries around.
    std::vector<float> x(n + 3, -1.0f), y(n), out(n + 2, -7.0f);
    for (int i = 0; i < n; ++i) x[i + 3] = float(i) * 0.5f, y[i] = float(3 * i + 1);
    View vx(x.data(), n, f32(), 3 * sizeof(float));
    View vy(y.data(), n, f32());
    View vo(out.data(), n, f32(), sizeof(float));
    const DLTensor* cx = &vx.t;  // const DLTensor* is accepted too
    vadd()(cpu(cdiv(n, 256)), cx, &vy.t, &vo.t, n, 256);
    CHECK(out[0] == -7.0f);
    CHECK(out[n + 1] == -7.0f);
    for (int i = 0; i < n; ++i) CHECK(out[i + 1] == float(i) * 0.5f + float(3 * i + 1));
    // Mixed with raw pointers; the offset pointer is data + byte_offset.
    std::vector<float> out2(n, 0.0f);
    vadd()(cpu(cdiv(n, 256)), &vx.t, y.data(), out2.data(), n, 256);
    for (int i = 0; i < n; ++i) CHECK(out2[i] == out[i + 1]);
  }
}

TEST_CASE("dlpack: strides are not checked (the kernel indexes memory itself), kDLCUDAHost runs on the CPU",
          "[dlpack]") {
  // A 4x3 row-major matrix seen through a transposed 3x4 view (strides {1, 3}): the kernel gets the
  // base pointer and walks it flat.
  std::vector<float> a(12), b(12, 1.0f), out(12, 0.0f);
  for (int i = 0; i < 12; ++i) a[i] = float(i);
  int64_t shape[2] = {3, 4}, strides[2] = {1, 3};
  DLTensor t{};
  t.data = a.data(), t.device = DLDevice{kDLCUDAHost, 0}, t.ndim = 2, t.dtype = f32();
  t.shape = shape, t.strides = strides, t.byte_offset = 0;
  vadd()(cpu(1), &t, b.data(), out.data(), 12, 16);
  for (int i = 0; i < 12; ++i) CHECK(out[i] == float(i) + 1.0f);
}

namespace {
template <class T> void copy_roundtrip(DLDataType dt, std::initializer_list<T> in) {
  static auto k = jit("dl_copy", [](Ptr<T> x, Ptr<T> out, Tile<int32_t> n, Constexpr<int> BLOCK) {
    Tile<int32_t> o = arange(0, BLOCK);
    Tile<bool> m = o < n;
    store(out + o, load(x + o, m), m);
  });
  const int n = static_cast<int>(in.size());
  std::unique_ptr<T[]> src(new T[n]), dst(new T[n]);  // not std::vector: vector<bool> has no data()
  std::copy(in.begin(), in.end(), src.get());
  std::memset(static_cast<void*>(dst.get()), 0, n * sizeof(T));
  View vx(src.get(), n, dt), vo(dst.get(), n, dt);
  k(cpu(1), &vx.t, &vo.t, n, 8);
  CHECK(std::memcmp(dst.get(), src.get(), n * sizeof(T)) == 0);
}
}  // namespace

TEST_CASE("dlpack: every dtype of the mapping is accepted", "[dlpack]") {
  copy_roundtrip<float>({kDLFloat, 32, 1}, {1.5f, -2.0f, 3.25f});
  copy_roundtrip<double>({kDLFloat, 64, 1}, {1.5, -2.0, 1e300});
  copy_roundtrip<f16>({kDLFloat, 16, 1}, {f16(1.5f), f16(-2.0f)});
  copy_roundtrip<bf16>({kDLBfloat, 16, 1}, {bf16(1.5f), bf16(-2.0f)});
  copy_roundtrip<int8_t>({kDLInt, 8, 1}, {-128, 127, 5});
  copy_roundtrip<int16_t>({kDLInt, 16, 1}, {-32768, 32767});
  copy_roundtrip<int32_t>({kDLInt, 32, 1}, {INT32_MIN, 7});
  copy_roundtrip<int64_t>({kDLInt, 64, 1}, {INT64_MIN, INT64_MAX});
  copy_roundtrip<uint8_t>({kDLUInt, 8, 1}, {0, 255});
  copy_roundtrip<uint16_t>({kDLUInt, 16, 1}, {0, 65535});
  copy_roundtrip<uint32_t>({kDLUInt, 32, 1}, {0, UINT32_MAX});
  copy_roundtrip<uint64_t>({kDLUInt, 64, 1}, {0, UINT64_MAX});
  copy_roundtrip<bool>({kBool, 8, 1}, {true, false, true});
}

TEST_CASE("dlpack: DLManagedTensor is accepted, tle never calls its deleter", "[dlpack]") {
  static int deleted = 0;
  std::vector<float> x{1, 2, 3, 4, 5}, y{1, 1, 1, 1, 1}, out(5, 0.0f);
  View vx(x.data(), 5, f32(), sizeof(float));  // x[1..4]
  DLManagedTensor m{};
  m.dl_tensor = vx.t;
  m.manager_ctx = nullptr;
  m.deleter = [](DLManagedTensor*) { ++deleted; };
  vadd()(cpu(1), &m, y.data(), out.data(), 4, 16);
  CHECK(out == std::vector<float>{3, 4, 5, 6, 0});
  const DLManagedTensor* cm = &m;
  vadd()(cpu(1), cm, cm, out.data(), 4, 16);
  CHECK(out == std::vector<float>{4, 6, 8, 10, 0});
  CHECK(deleted == 0);
}

TEST_CASE("dlpack: a null data pointer is fine for an empty tensor", "[dlpack]") {
  std::vector<float> out(4, -7.0f);
  View vx(nullptr, 0, f32()), vy(nullptr, 0, f32());
  vadd()(cpu(1), &vx.t, &vy.t, out.data(), 0, 16);
  CHECK(out == std::vector<float>(4, -7.0f));
}

TEST_CASE("dlpack: errors name the argument and what to change, at the Grid's line", "[dlpack][errors]") {
  std::vector<float> x(8, 1.0f), y(8, 2.0f), out(8, 0.0f);
  int line = 0;
  SECTION("wrong dtype code") {
    std::vector<int32_t> xi(8, 1);
    View vx(xi.data(), 8, DLDataType{kDLInt, 32, 1});
    expect_error([&] { line = __LINE__; vadd()(cpu(1), &vx.t, y.data(), out.data(), 8, 16); },
                 {"argument 1 of kernel dl_vadd", "Ptr<f32>", "DLTensor* of dtype int32",
                  "pass a tensor of float32 (DLDataType {kDLFloat, 32, 1})"},
                 line);
  }
  SECTION("wrong bits") {
    std::vector<double> xd(8, 1.0);
    View vy(xd.data(), 8, DLDataType{kDLFloat, 64, 1});
    expect_error([&] { line = __LINE__; vadd()(cpu(1), x.data(), &vy.t, out.data(), 8, 16); },
                 {"argument 2 of kernel dl_vadd", "dtype float64 (code 2, bits 64)", "pass a tensor of float32"}, line);
  }
  SECTION("lanes 2") {
    View vo(out.data(), 4, DLDataType{kDLFloat, 32, 2});
    expect_error([&] { line = __LINE__; vadd()(cpu(1), x.data(), y.data(), &vo.t, 8, 16); },
                 {"argument 3 of kernel dl_vadd", "vector dtype float32x2 (lanes 2)", "with lanes 1"}, line);
  }
  SECTION("bool parameter wants kDLBool, not kDLUInt 8") {
    static auto kb = jit("dl_bool", [](Ptr<bool> p) { store(p, load(p)); });
    std::vector<uint8_t> b(1, 1);
    View vb(b.data(), 1, DLDataType{kDLUInt, 8, 1});
    expect_error([&] { line = __LINE__; kb(cpu(1), &vb.t); },
                 {"argument 1 of kernel dl_bool", "dtype uint8", "pass a tensor of bool (DLDataType {kDLBool, 8, 1})"},
                 line);
  }
  SECTION("kDLCUDA tensor on the CPU backend") {
    View vx(x.data(), 8, f32(), 0, kDLCUDA, 0);
    expect_error([&] { line = __LINE__; vadd()(cpu(1), &vx.t, y.data(), out.data(), 8, 16); },
                 {"argument 1 of kernel dl_vadd", "is on kDLCUDA (device 0)", "runs on the CPU",
                  "pass a host tensor", "backend(tle::Backend::GPU)"},
                 line);
  }
  SECTION("kDLCUDAManaged and other devices on the CPU backend") {
    View vx(x.data(), 8, f32(), 0, kDLCUDAManaged, 0);
    expect_error([&] { line = __LINE__; vadd()(cpu(1), &vx.t, y.data(), out.data(), 8, 16); },
                 {"is on kDLCUDAManaged", "runs on the CPU"}, line);
    View vv(x.data(), 8, f32(), 0, kDLVulkan, 0);
    expect_error([&] { line = __LINE__; vadd()(cpu(1), x.data(), &vv.t, out.data(), 8, 16); },
                 {"argument 2", "is on kDLVulkan", "pass a host tensor"}, line);
  }
  SECTION("misaligned byte_offset") {
    View vx(x.data(), 7, f32(), 2);
    expect_error([&] { line = __LINE__; vadd()(cpu(1), &vx.t, y.data(), out.data(), 7, 16); },
                 {"argument 1 of kernel dl_vadd", "not aligned to the 4-byte size of f32",
                  "make data and byte_offset multiples of 4"},
                 line);
  }
  SECTION("null data with a nonzero size") {
    View vx(nullptr, 8, f32());
    expect_error([&] { line = __LINE__; vadd()(cpu(1), &vx.t, y.data(), out.data(), 8, 16); },
                 {"argument 1 of kernel dl_vadd", "data is null", "pass allocated memory"}, line);
  }
  SECTION("null DLTensor* and DLManagedTensor*") {
    DLTensor* none = nullptr;
    expect_error([&] { line = __LINE__; vadd()(cpu(1), x.data(), none, out.data(), 8, 16); },
                 {"argument 2 of kernel dl_vadd", "got a null DLTensor*"}, line);
    DLManagedTensor* mnone = nullptr;
    expect_error([&] { line = __LINE__; vadd()(cpu(1), x.data(), y.data(), mnone, 8, 16); },
                 {"argument 3 of kernel dl_vadd", "got a null DLManagedTensor*"}, line);
  }
  SECTION("a Ptr<Ptr<T>> parameter takes no DLPack tensor") {
    static auto kp = jit("dl_ptrptr", [](Ptr<ptr_t<float>> p) { (void)p; });
    View vx(x.data(), 8, DLDataType{kDLUInt, 64, 1});
    expect_error([&] { line = __LINE__; kp(cpu(1), &vx.t); }, {"DLPack has no pointer dtype"}, line);
  }
  CHECK(line != 0);
}

TEST_CASE("dlpack: Kernel::ir takes a kDLCUDA tensor without a device check", "[dlpack]") {
  std::vector<float> x(8);
  View vx(x.data(), 8, f32(), 0, kDLCUDA, 0);
  std::string ir = vadd().ir(false, &vx.t, &vx.t, &vx.t, 8, 16);
  CHECK_THAT(ir, Catch::Contains("dl_vadd"));
}

// ---------------------------------------------------------------------------- GPU

TEST_CASE("dlpack gpu: kDLCUDA tensors over DeviceBuffers on the GPU backend", "[.gpu][dlpack-gpu]") {
  if (!gpu_info()) {
    WARN("no usable GPU: [.gpu] case skipped");
    return;
  }
  const int n = 1001;
  std::vector<float> hx(n + 1), hy(n);
  for (int i = 0; i < n; ++i) hx[i + 1] = float(i), hy[i] = float(2 * i);
  DeviceBuffer<float> x(hx), y(hy), out(n);
  View vx(x.data(), n, f32(), sizeof(float), kDLCUDA, 0);  // skip hx[0]
  View vy(y.data(), n, f32(), 0, kDLCUDAManaged, 0);        // device memory labelled managed: still addressable
  View vo(out.data(), n, f32(), 0, kDLCUDA, 0);
  vadd()(Grid(cdiv(n, 256)).backend(Backend::GPU), &vx.t, &vy.t, &vo.t, n, 256);
  synchronize();
  std::vector<float> got(n);
  out.copy_to_host(got.data(), n);
  for (int i = 0; i < n; ++i) CHECK(got[i] == float(3 * i));

  // A kDLCPU tensor on the GPU backend, and a kDLCUDA tensor of another device.
  std::vector<float> host(n);
  View vh(host.data(), n, f32());
  int line = __LINE__; CHECK_THROWS_WITH(vadd()(Grid(1).backend(Backend::GPU), &vh.t, &vy.t, &vo.t, n, 256),
                                         Catch::Contains("is on kDLCPU, but this launch runs on the GPU") &&
                                             Catch::Contains(":" + std::to_string(line) + ":"));
  View vd(out.data(), n, f32(), 0, kDLCUDA, 7);
  CHECK_THROWS_WITH(vadd()(Grid(1).backend(Backend::GPU), &vx.t, &vy.t, &vd.t, n, 256),
                    Catch::Contains("is on kDLCUDA (device 7), but tle's CUDA context is on device"));
}
