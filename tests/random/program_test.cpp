// The in-program threefry: which IR ops it is made of, and its errors. (Its values against the
// host functions: program_run_test.cpp.)
#include <gtest/gtest.h>

#include <set>

#include "tlaloc/random/program.h"

using namespace tlaloc;
using namespace tlaloc::random;

TEST(ProgramRandom, BuiltFromPlainIntegerOps) {
  ir::Function f = trace::capture(
      [](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {bits(in[0], {3, 5}), uniform(in[0], {7}, -1, 1, Mode::legacy),
                bernoulli(fold_in(in[0], in[1]), 0.9, {4}), split(in[0], 3)};
      },
      {{DType::u32, {2}}, {DType::s32, {}}});
  ir::verify(f);
  const std::set<ir::Op> allowed = {
      ir::Op::parameter, ir::Op::constant, ir::Op::iota,        ir::Op::add,
      ir::Op::xor_,      ir::Op::or_,      ir::Op::shift_left,  ir::Op::shift_right_logical,
      ir::Op::reshape,   ir::Op::slice,    ir::Op::concatenate, ir::Op::broadcast_in_dim,
      ir::Op::convert,   ir::Op::multiply, ir::Op::maximum,     ir::Op::compare};
  std::set<ir::Op> used;
  for (const ir::Node& n : f.nodes) used.insert(n.op);
  for (ir::Op op : used) EXPECT_TRUE(allowed.count(op)) << ir::op_name(op);
  for (ir::Op op :
       {ir::Op::add, ir::Op::xor_, ir::Op::or_, ir::Op::shift_left, ir::Op::shift_right_logical})
    EXPECT_TRUE(used.count(op)) << ir::op_name(op);
  EXPECT_EQ(f.output_type(0), (ir::TensorType{DType::u32, {3, 5}}));
  EXPECT_EQ(f.output_type(1), (ir::TensorType{DType::f32, {7}}));
  EXPECT_EQ(f.output_type(2), (ir::TensorType{DType::i1, {4}}));
  EXPECT_EQ(f.output_type(3), (ir::TensorType{DType::u32, {3, 2}}));
}

TEST(ProgramRandom, RejectsBadKeysAndData) {
  auto expect_error = [](const trace::TraceFn& fn, std::vector<ir::TensorType> in) {
    EXPECT_THROW(trace::capture(fn, in), Error);
  };
  expect_error(
      [](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {bits(in[0], {3})};
      },
      {{DType::u32, {3}}});
  expect_error(
      [](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {bits(in[0], {3})};
      },
      {{DType::s32, {2}}});
  expect_error(
      [](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {fold_in(in[0], in[1])};
      },
      {{DType::u32, {2}}, {DType::f32, {}}});
  expect_error(
      [](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {split(in[0], 0)};
      },
      {{DType::u32, {2}}});
}
