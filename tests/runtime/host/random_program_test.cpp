// Random programs mixing fusible and non-fusible ops: fused and unfused plans, 1 and 2 threads,
// run and run_donated must all agree bitwise. The unfused plan runs one kernel per op (each
// checked against independent values by the kernel tests), so this checks the planner:
// grouping, views, fused reductions, liveness and in-place donation.
#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;

struct Rng {
  uint32_t s;
  uint32_t next() {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  }
  int pick(int n) { return int(next() % uint32_t(n)); }
};

ir::Function random_program(uint32_t seed) {
  Rng r{seed};
  ir::Builder b("random");
  const Shape S{4, 6};
  std::vector<ir::ValueId> pool;
  for (int i = 0; i < 3; ++i) pool.push_back(b.parameter({DType::f32, S}, fmt::format("x{}", i)));
  auto any = [&] { return pool[size_t(r.pick(int(pool.size())))]; };
  auto recent = [&] {
    return pool[pool.size() - 1 - size_t(r.pick(std::min<int>(4, int(pool.size()))))];
  };
  int nops = 6 + r.pick(25);
  for (int k = 0; k < nops; ++k) {
    ir::ValueId a = recent(), c = any(), v;
    switch (r.pick(12)) {
      case 0:
        v = b.unary(Op::tanh, a);
        break;
      case 1:
        v = b.binary(Op::add, a, c);
        break;
      case 2:
        v = b.binary(Op::multiply, a, c);
        break;
      case 3:
        v = b.binary(Op::maximum, a, b.unary(Op::negate, c));
        break;
      case 4:
        v = b.broadcast_in_dim(b.reduce(a, ir::ReduceKind::sum, {1}), S, {0});
        break;
      case 5:
        v = b.broadcast_in_dim(b.reduce(b.binary(Op::multiply, a, a), ir::ReduceKind::max, {0, 1}),
                               S, {});
        break;
      case 6:
        v = b.reshape(b.transpose(a, {1, 0}), {4, 6});
        break;
      case 7:
        v = b.concatenate({b.slice(a, {0, 3}, {4, 6}), b.slice(c, {0, 0}, {4, 3})}, 1);
        break;
      case 8: {
        auto d = b.dot_general(a, c, {{}, {}, {1}, {1}});  // [4,4]
        v = b.unary(Op::tanh, b.dot_general(b.transpose(d, {1, 0}), a, {{}, {}, {1}, {0}}));
        break;
      }
      case 9:
        v = b.select(b.compare(a, c, ir::Comparison::GT), a, c);
        break;
      case 10:
        v = b.convert(b.binary(Op::subtract, b.convert(a, DType::bf16), b.convert(c, DType::bf16)),
                      DType::f32);
        break;
      default: {
        auto s = b.reduce(a, ir::ReduceKind::sum, {0, 1});
        v = b.binary(Op::multiply, c, b.broadcast_in_dim(b.unary(Op::logistic, s), S, {}));
      }
    }
    pool.push_back(v);
  }
  std::vector<ir::ValueId> outs = {pool.back(), any(), recent()};
  ir::Function f = b.build(outs);
  if (r.pick(2) == 0) f.aliases = {{0, 0}};
  if (r.pick(2) == 0) f.aliases.push_back({1, 1});
  return f;
}

TEST(HostRuntime, RandomProgramsAgreeFusedUnfusedDonated) {
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    ir::Function f = random_program(seed);
    std::vector<Array> in;
    for (int i = 0; i < 3; ++i) {
      std::vector<double> v;
      for (int j = 0; j < 24; ++j) v.push_back(std::sin(double(seed * 31 + uint32_t(i * 24 + j))));
      in.push_back(Array::from_doubles(DType::f32, {4, 6}, v));
    }
    auto want = run_all(f, in);
    for (bool fuse : {true, false}) {
      auto exe = runtime::host::compile(f, {.fuse = fuse});
      std::vector<Array> donated = in;
      auto got = exe->run_donated(donated);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(got[i].bitwise_equal(want[i])) << "output " << i << " fuse=" << fuse << "\n"
                                                   << ir::print(f);
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
