// The smallest program using tle from another project: scale a vector by 2 and check it.
#include <tle/tle.hpp>

#include <cstdio>
#include <vector>

int main() {
  using namespace tle;
  auto scale = jit("scale", [](Ptr<float> x, Tile<int32_t> n, Constexpr<int> B) {
    Tile<int32_t> i = program_id(0) * B + arange(0, B);
    store(x + i, load(x + i, i < n) * 2.0f, i < n);
  });
  std::vector<float> v(1001, 1.5f);
  scale(Grid(cdiv(1001, 128)), v.data(), 1001, 128);
  for (float f : v)
    if (f != 3.0f) return std::puts("consumer: wrong result"), 1;
  std::puts("consumer: ok");
  return 0;
}
