// all_reduce / all_gather under the passes: never folded (not a function of the operand
// alone), never merged by cse, dropped by dce when unused.
#include <gtest/gtest.h>

#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/passes.h"

using namespace tlaloc;
using namespace tlaloc::ir;

namespace {

int count(const Function& f, Op op) {
  int n = 0;
  for (auto& nd : f.nodes) n += nd.op == op;
  return n;
}

}  // namespace

TEST(Collectives, FoldLeavesThemOnConstants) {
  Builder b;
  auto c = b.constant(Array::from(Shape{3}, std::vector<float>{1, 2, 3}));
  auto r = b.all_reduce(c, ReduceKind::sum, {{0}});
  auto g = b.all_gather(c, 0, {{0}});
  Function f = passes::fold_constants(b.build({r, g}));
  EXPECT_EQ(count(f, Op::all_reduce), 1);
  EXPECT_EQ(count(f, Op::all_gather), 1);
  EXPECT_EQ(f.nodes[size_t(f.results[0])].op, Op::all_reduce);
  EXPECT_EQ(f.nodes[size_t(f.results[1])].op, Op::all_gather);
}

TEST(Collectives, CseKeepsEachCallDceDropsUnused) {
  Builder b;
  auto x = b.parameter({DType::f32, {4}});
  auto r1 = b.all_reduce(x, ReduceKind::sum, all_replicas(1));
  auto r2 = b.all_reduce(x, ReduceKind::sum, all_replicas(1));
  b.all_gather(x, 0, {{0}});  // unused
  Function f = passes::simplify(b.build({b.binary(Op::add, r1, r2)}));
  EXPECT_EQ(count(f, Op::all_reduce), 2);
  EXPECT_EQ(count(f, Op::all_gather), 0);
}

TEST(Collectives, AttrsCompareGroupsAndChannel) {
  Attrs a, b;
  a.replica_groups = b.replica_groups = all_replicas(2);
  EXPECT_TRUE(a == b);
  b.channel_id = 1;
  EXPECT_FALSE(a == b);
  b.channel_id = 0;
  b.replica_groups = {{0}, {1}};
  EXPECT_FALSE(a == b);
  EXPECT_EQ(all_replicas(3), (std::vector<std::vector<int64_t>>{{0, 1, 2}}));
}
