// The process group and the collective ops across the processes of this run (N = 2 under
// mpiexec -np 2, N = 1 alone: every case holds for both). Inputs depend on the rank: rank r's
// x[i] = r + 1 + i / 8. Expected values by hand: the sum over ranks is added in rank order
// ((x0 + x1) + x2) + ..., max is rank N - 1's, min rank 0's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/error_of.h"
#include "tlaloc/distributed/communicator.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using distributed::Reduction;
using distributed::world;
using ir::ReduceKind;

namespace {

int N() { return world().size(); }
int R() { return world().rank(); }

double x_of(int rank, int64_t i) { return rank + 1 + double(i) / 8; }

template <typename T>
std::vector<T> inputs(int rank, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = std::is_integral_v<T> ? T(rank + 1 + i) : T(x_of(rank, i));
  return v;
}

template <typename T>
std::vector<T> expected(int64_t n, Reduction op) {
  std::vector<T> want = inputs<T>(0, n);  // min; the start of the sum
  if (op == Reduction::max) return inputs<T>(N() - 1, n);
  if (op == Reduction::sum)
    for (int r = 1; r < N(); ++r) {
      const std::vector<T> xr = inputs<T>(r, n);
      for (int64_t i = 0; i < n; ++i) want[size_t(i)] = T(want[size_t(i)] + xr[size_t(i)]);
    }
  return want;
}

template <typename T>
void check_all_reduce(DType dtype) {
  for (int64_t n : {0, 1, 7}) {
    for (Reduction op : {Reduction::sum, Reduction::max, Reduction::min}) {
      SCOPED_TRACE(::testing::Message() << name(dtype) << " n=" << n << " op=" << int(op));
      std::vector<T> v = inputs<T>(R(), n);
      world().all_reduce(v.data(), n, dtype, op);
      EXPECT_EQ(v, expected<T>(n, op));
    }
  }
}

TEST(Communicator, AllReduceInRankOrder) {
  check_all_reduce<float>(DType::f32);
  check_all_reduce<double>(DType::f64);
  check_all_reduce<int32_t>(DType::s32);
  // The sum's order is fixed: 0.1f + 0.2f + ... rounded step by step from rank 0.
  float s = 0.1f * float(R() + 1), want = 0;
  for (int r = 0; r < N(); ++r) want += 0.1f * float(r + 1);
  world().all_reduce(&s, 1, DType::f32, Reduction::sum);
  EXPECT_EQ(s, want);
  // i1: max is "any", min "all".
  uint8_t any = R() == 0, all = R() == 0;
  world().all_reduce(&any, 1, DType::i1, Reduction::max);
  world().all_reduce(&all, 1, DType::i1, Reduction::min);
  EXPECT_EQ(any, 1);
  EXPECT_EQ(all, N() == 1 ? 1 : 0);
}

TEST(Communicator, AllGatherAndBroadcast) {
  const std::vector<int32_t> mine{R() * 10, R() * 10 + 1, R() * 10 + 2};
  std::vector<int32_t> out(size_t(3 * N()), -1);
  world().all_gather(mine.data(), out.data(), int64_t(3 * sizeof(int32_t)));
  for (int r = 0; r < N(); ++r)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(out[size_t(3 * r + k)], r * 10 + k);
  for (int root : {0, N() - 1}) {
    std::vector<double> b{double(R()), 0.5 + R(), -1.0 * R()};
    world().broadcast(b.data(), int64_t(b.size() * sizeof(double)), root);
    EXPECT_EQ(b, (std::vector<double>{double(root), 0.5 + root, -1.0 * root}));
  }
  world().barrier();
}

// The host lane's kernels and the evaluator in one small function: all_reduce sum / max over
// every process, all_gather along dimensions 0 and 1, and groups of one (a copy).
TEST(CollectiveOps, HostKernelsAndEvaluatorAcrossProcesses) {
  ir::Builder b("collectives");
  auto x = b.parameter({DType::f32, {2, 4}}, "x");
  auto h = b.parameter({DType::bf16, {3}}, "h");
  const auto all = ir::all_replicas(N());
  ir::Function f =
      b.build({b.all_reduce(x, ReduceKind::sum, all), b.all_reduce(x, ReduceKind::max, all),
               b.all_gather(x, 0, all), b.all_gather(x, 1, all),
               b.all_reduce(x, ReduceKind::sum, {{0}}), b.all_reduce(h, ReduceKind::sum, all)});
  const std::vector<float> xs = inputs<float>(R(), 8);
  const Array xa = Array::from(Shape{2, 4}, xs);
  const Array ha = Array::from_doubles(DType::bf16, {3}, {double(R() + 1), 0.5, -2.0 * R()});

  std::vector<float> sum = expected<float>(8, Reduction::sum);
  std::vector<float> mx = expected<float>(8, Reduction::max);
  std::vector<float> g0, g1;  // [2N, 4]: ranks' rows one after another; [2, 4N]: side by side
  for (int r = 0; r < N(); ++r) {
    const std::vector<float> xr = inputs<float>(r, 8);
    g0.insert(g0.end(), xr.begin(), xr.end());
  }
  for (int row = 0; row < 2; ++row)
    for (int r = 0; r < N(); ++r) {
      const std::vector<float> xr = inputs<float>(r, 8);
      g1.insert(g1.end(), xr.begin() + 4 * row, xr.begin() + 4 * row + 4);
    }
  double hsum0 = 0, hsum2 = 0;
  for (int r = 0; r < N(); ++r) {
    hsum0 += r + 1;
    hsum2 += -2.0 * r;
  }
  const std::vector<double> hsum{hsum0, 0.5 * N(), hsum2};

  auto check = [&](const std::vector<Array>& out) {
    ASSERT_EQ(out.size(), 6u);
    EXPECT_EQ(out[0].to_doubles(), Array::from(Shape{2, 4}, sum).to_doubles());
    EXPECT_EQ(out[1].to_doubles(), Array::from(Shape{2, 4}, mx).to_doubles());
    EXPECT_EQ(out[2].shape(), Shape({2 * N(), 4}));
    EXPECT_EQ(out[2].to_doubles(), Array::from(Shape{2 * N(), 4}, g0).to_doubles());
    EXPECT_EQ(out[3].shape(), Shape({2, 4 * N()}));
    EXPECT_EQ(out[3].to_doubles(), Array::from(Shape{2, 4 * N()}, g1).to_doubles());
    EXPECT_EQ(out[4].to_doubles(), xa.to_doubles());  // {{0}}: this rank's own x
    EXPECT_EQ(out[5].to_doubles(), hsum);
  };
  {
    SCOPED_TRACE("host lane");
    check(runtime::host::compile(f)->run(std::vector<Array>{xa, ha}));
  }
  {
    SCOPED_TRACE("host lane, 2 threads, unfused");
    runtime::host::Options o;
    o.num_threads = 2;
    o.fuse = false;
    check(runtime::host::compile(f, o)->run(std::vector<Array>{xa, ha}));
  }
  {
    SCOPED_TRACE("evaluator");
    check(passes::interpret(f, std::vector<Array>{xa, ha}));
  }
}

// Groups the process group does not have: the same error on every rank, before any
// communication (so no rank waits).
TEST(CollectiveOps, GroupsThatDoNotMatchTheWorld) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {3}});
  const int n = N() + 1;
  ir::Function f = b.build({b.all_reduce(x, ReduceKind::sum, ir::all_replicas(n))});
  const Array xa = Array::from(Shape{3}, std::vector<float>{1, 2, 3});
  std::string groups = "[[0";
  for (int r = 1; r < n; ++r) groups += ", " + std::to_string(r);
  groups += "]]";
  const std::string want = "all_reduce over replica groups " + groups + " (" + std::to_string(n) +
                           " replicas), but this process group has " + std::to_string(N()) +
                           (N() == 1 ? " process" : " processes") + " (run it with mpirun -np " +
                           std::to_string(n) + ")";
  EXPECT_EQ(
      tlaloc::testing::error_of([&] { runtime::host::compile(f)->run(std::vector<Array>{xa}); }),
      want);
  EXPECT_EQ(tlaloc::testing::error_of([&] { passes::interpret(f, std::vector<Array>{xa}); }), want);
}

}  // namespace
