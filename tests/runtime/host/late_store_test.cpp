// Stores that run after the block ("late": the stored value's storage may be a donated input)
// and values passed through from an input (a select on a scalar flag, resolved per run): a
// pass-through's store must read its input before another late store overwrites that input's
// storage, and two pass-throughs that swap their donors must not be written in place at all.
// Found while attacking the fused Adam instruction; the first case failed before it too.
#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {
using ir::Op;

// a = 2x (donated from x); s = flag ? x : a + y (donated from y, or from z). With the flag set
// s must be x; donated, it comes out as 2x.
TEST(HostProgramLateStores, LateStoreOfAPassThroughAfterALateStoreOverwroteIt) {
  const int64_t n = 1000;
  for (int donor_of_s : {1, 2})
    for (bool flag : {false, true}) {
      SCOPED_TRACE(fmt::format("s donated from input {}, flag {}", donor_of_s, flag));
      ir::Builder b("late_pass_through");
      auto x = b.parameter({DType::f32, {n}}, "x");
      auto y = b.parameter({DType::f32, {n}}, "y");
      b.parameter({DType::f32, {n}}, "z");
      auto fl = b.parameter({DType::i1, {}}, "flag");
      auto a = b.binary(Op::multiply, x, b.broadcast_in_dim(b.scalar(DType::f32, 2.0), {n}, {}));
      auto s = b.select(b.broadcast_in_dim(fl, {n}, {}), x, b.binary(Op::add, a, y));
      ir::Function f = b.build({a, s});
      f.aliases = {{0, 0}, {1, donor_of_s}};
      std::vector<Array> in = {Array::filled(DType::f32, {n}, 1.5),
                               Array::filled(DType::f32, {n}, 0.25),
                               Array::filled(DType::f32, {n}, 7.0), Array::scalar(flag)};
      auto want = run_all(f, in);  // not donated
      expect_values(want[0], std::vector<double>(size_t(n), 3.0));
      expect_values(want[1], std::vector<double>(size_t(n), flag ? 1.5 : 3.25));
      for (int threads : {1, 2}) {
        std::vector<Array> d = in;
        auto out = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
        EXPECT_EQ(out[0].at(0), 3.0) << "threads " << threads;
        EXPECT_EQ(out[1].at(0), flag ? 1.5 : 3.25) << "threads " << threads;
        EXPECT_TRUE(out[1].bitwise_equal(want[1])) << "threads " << threads;
      }
    }
}

// Two pass-throughs crossing: t = x + y, s1 = flag ? y : t donated from x, s2 = flag ? x : t·t
// donated from y. With the flag set the outputs swap x and y, which no order of the two stores
// after the block can do in place: the kernel leaves those inputs to the plan, which writes aside
// and copies.
TEST(HostProgramLateStores, CrossedPassThroughsSwapTheirDonors) {
  const int64_t n = 1000;
  for (bool flag : {false, true}) {
    SCOPED_TRACE(fmt::format("flag {}", flag));
    ir::Builder b("crossed");
    auto x = b.parameter({DType::f32, {n}}, "x");
    auto y = b.parameter({DType::f32, {n}}, "y");
    auto fl = b.broadcast_in_dim(b.parameter({DType::i1, {}}, "flag"), {n}, {});
    auto t = b.binary(Op::add, x, y);  // shared: one fused group
    auto s1 = b.select(fl, y, t);
    auto s2 = b.select(fl, x, b.binary(Op::multiply, t, t));
    ir::Function f = b.build({s1, s2});
    f.aliases = {{0, 0}, {1, 1}};
    std::vector<Array> in = {Array::filled(DType::f32, {n}, 1.5),
                             Array::filled(DType::f32, {n}, 0.25), Array::scalar(flag)};
    for (int threads : {1, 2}) {
      std::vector<Array> d = in;
      auto out = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
      expect_values(out[0], std::vector<double>(size_t(n), flag ? 0.25 : 1.75));
      expect_values(out[1], std::vector<double>(size_t(n), flag ? 1.5 : 3.0625));
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
