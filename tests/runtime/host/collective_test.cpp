// all_reduce / all_gather host kernels. One process: groups of one replica copy the operand.
// Across "two ranks": a test double of the process group (distributed::set_world) whose other
// rank holds values the test chose, so the kernels' reduce-in-place and their layout of the
// gathered pieces along a dimension are checked against hand values without MPI (the real
// two-process runs are tests/distributed).
#include <cstring>

#include "kernel_test_util.h"
#include "tlaloc/distributed/communicator.h"
#include "tlaloc/passes/evaluate.h"

namespace tlaloc::host_test {
namespace {

using distributed::Reduction;
using ir::ReduceKind;

// Rank 0 of two; rank 1's operand is `peer` (bytes of the operand's dtype).
class TwoRanks final : public distributed::Communicator {
 public:
  explicit TwoRanks(Array peer) : peer_(std::move(peer)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "test double, 2 ranks"; }
  void all_reduce(void* data, int64_t count, DType dtype, Reduction op) override {
    if (dtype != DType::f32 && dtype != DType::s32)
      throw Error("test double: f32 / s32 only");  // bf16 / f16 arrive widened to f32
    const std::vector<double> other = peer_.to_doubles();
    ASSERT_EQ(int64_t(other.size()), count);
    for (int64_t i = 0; i < count; ++i) {
      double a =
          dtype == DType::f32 ? static_cast<float*>(data)[i] : static_cast<int32_t*>(data)[i];
      const double b = other[size_t(i)];
      a = op == Reduction::sum ? a + b : op == Reduction::max ? std::max(a, b) : std::min(a, b);
      if (dtype == DType::f32)
        static_cast<float*>(data)[i] = float(a);
      else
        static_cast<int32_t*>(data)[i] = int32_t(a);
    }
  }
  void all_gather(const void* in, void* out, int64_t bytes) override {
    ASSERT_EQ(bytes, int64_t(peer_.nbytes()));
    std::memmove(out, in, size_t(bytes));
    std::memcpy(static_cast<char*>(out) + bytes, peer_.raw(), size_t(bytes));
  }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}

 private:
  Array peer_;
};

struct WorldGuard {
  explicit WorldGuard(Array peer) { distributed::set_world(std::make_unique<TwoRanks>(peer)); }
  ~WorldGuard() { distributed::set_world(nullptr); }
};

Array f32s(Shape s, std::vector<float> v) { return Array::from(std::move(s), v); }

KERNEL_TEST(all_reduce, one_replica_copies) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::s32, DType::u32}) {
    SCOPED_TRACE(name(t));
    Array x = Array::from_doubles(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    for (ReduceKind k : {ReduceKind::sum, ReduceKind::max, ReduceKind::min}) {
      auto f = one_op({{t, {2, 3}}},
                      [&](ir::Builder& b, auto& p) { return b.all_reduce(p[0], k, {{0}}); });
      expect_values(run_all(f, {x})[0], {1, 2, 3, 4, 5, 6});
    }
  }
  // Empty operands and several groups of one replica.
  auto f = one_op({{DType::f32, {0, 3}}}, [&](ir::Builder& b, auto& p) {
    return b.all_reduce(p[0], ReduceKind::sum, {{0}, {1}});
  });
  EXPECT_EQ(run_all(f, {Array(DType::f32, {0, 3})})[0].numel(), 0);
}

KERNEL_TEST(all_reduce, two_ranks_in_place_of_a_copy) {
  WorldGuard w(f32s({4}, {10, -1, 0.5f, 8}));
  auto x = f32s({4}, {1, 2, 3, 4});
  for (auto [k, want] : {std::pair{ReduceKind::sum, std::vector<double>{11, 1, 3.5, 12}},
                         std::pair{ReduceKind::max, std::vector<double>{10, 2, 3, 8}},
                         std::pair{ReduceKind::min, std::vector<double>{1, -1, 0.5, 4}}}) {
    SCOPED_TRACE(ir::name(k));
    // The operand stays the operand: x + all_reduce(x) reads both.
    auto f = one_op({{DType::f32, {4}}}, [&](ir::Builder& b, auto& p) {
      return b.binary(ir::Op::add, p[0], b.all_reduce(p[0], k, ir::all_replicas(2)));
    });
    std::vector<double> plus_x = want;
    for (size_t i = 0; i < 4; ++i) plus_x[i] += i + 1;
    expect_values(run_all(f, {x})[0], plus_x);
    expect_values(passes::interpret(f, std::vector<Array>{x})[0], plus_x);
  }
  // bf16: the double sees f32 (widened), the result rounds back to bf16.
  auto h = one_op({{DType::bf16, {4}}}, [&](ir::Builder& b, auto& p) {
    return b.all_reduce(p[0], ReduceKind::sum, ir::all_replicas(2));
  });
  Array hb = Array::from_doubles(DType::bf16, {4}, {1, 2, 3, 4});
  expect_values(run_all(h, {hb})[0], {11, 1, 3.5, 12});
}

KERNEL_TEST(all_gather, one_replica_copies) {
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(name(t));
    Array x = Array::from_doubles(t, {2, 3}, {1, 0, 1, 1, 0, 0});
    for (int64_t d : {0, 1}) {
      auto f = one_op({{t, {2, 3}}},
                      [&](ir::Builder& b, auto& p) { return b.all_gather(p[0], d, {{0}}); });
      expect_values(run_all(f, {x})[0], {1, 0, 1, 1, 0, 0});
    }
  }
}

KERNEL_TEST(all_gather, two_ranks_along_each_dimension) {
  WorldGuard w(f32s({2, 3}, {7, 8, 9, 10, 11, 12}));
  auto x = f32s({2, 3}, {1, 2, 3, 4, 5, 6});
  auto gather = [&](int64_t d) {
    auto f = one_op({{DType::f32, {2, 3}}}, [&](ir::Builder& b, auto& p) {
      return b.all_gather(p[0], d, ir::all_replicas(2));
    });
    EXPECT_EQ(f.output_type(0).shape, d == 0 ? Shape({4, 3}) : Shape({2, 6}));
    const Array got = run_all(f, {x})[0];
    const Array ref = passes::interpret(f, std::vector<Array>{x})[0];
    EXPECT_TRUE(got.bitwise_equal(ref));
    return got;
  };
  expect_values(gather(0), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  expect_values(gather(1), {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12});
}

TEST(HostKernel, collectives_refuse_groups_the_world_does_not_have) {
  auto f = one_op({{DType::f32, {3}}}, [&](ir::Builder& b, auto& p) {
    return b.all_reduce(p[0], ReduceKind::sum, ir::all_replicas(2));
  });
  try {
    runtime::host::compile(f)->run(std::vector<Array>{f32s({3}, {1, 2, 3})});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "all_reduce over replica groups [[0, 1]] (2 replicas), but this process group "
                 "has 1 process (run it with mpirun -np 2)");
  }
  WorldGuard w(f32s({2}, {0, 0}));
  auto g = one_op({{DType::f32, {2}}}, [&](ir::Builder& b, auto& p) {
    return b.all_gather(p[0], 0, {{1, 0}});
  });
  try {
    runtime::host::compile(g)->run(std::vector<Array>{f32s({2}, {1, 2})});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "all_gather over replica groups [[1, 0]]: the host lane runs one group of all 2 "
                 "processes in rank order ([[0, 1]]) or groups of one replica");
  }
}

}  // namespace
}  // namespace tlaloc::host_test
