// The runtime::Executable interface on the host lane: lane buffers are the arrays themselves
// (upload / a donating run / download move them, never copy), donation empties exactly the
// aliased arguments, and every misuse -- an empty (already donated) input in any slot, a
// wrong type, a device buffer on the host lane -- is a tlaloc::Error naming the input, with the
// arguments left as they were. (The pjrt lane's side: tests/runtime/pjrt/buffer_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "support/error_of.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using namespace tlaloc::ir;

using tlaloc::testing::error_of;

namespace {

// step(w f32[4], count f32[], x f32[4]) = (w - x, count + 1, sum(w)); w and count are donated.
Function counting_step() {
  Builder b("counting");
  auto w = b.parameter({DType::f32, {4}}, "w");
  auto count = b.parameter({DType::f32, {}}, "count");
  auto x = b.parameter({DType::f32, {4}}, "x");
  auto one = b.constant(Array::scalar(1.0f));
  Function f = b.build({b.binary(Op::subtract, w, x), b.binary(Op::add, count, one),
                        b.reduce(w, ReduceKind::sum, {0})},
                       {"w", "count", "sum"});
  f.aliases.push_back({0, 0});
  f.aliases.push_back({1, 1});
  return f;
}

std::vector<Array> inputs() {
  return {Array::from<float>({4}, {1, 2, 3, 4}), Array::scalar(0.0f),
          Array::from<float>({4}, {1, 1, 1, 1})};
}

}  // namespace

// Issue 18: a donated input is left as an empty Array, whose default type is f32[]: passed again
// (to run, or to a slot that is not donated) it matched a scalar f32 input and the run read
// through a null pointer. Now every run names it.
TEST(RuntimeInterface, AnAlreadyDonatedInputIsANamedErrorInEverySlot) {
  auto exe = runtime::host::compile(counting_step());
  std::vector<Array> in = inputs();
  exe->run_donated(in);
  ASSERT_TRUE(in[1].empty());  // count was donated
  EXPECT_NE(error_of([&] { exe->run(in); }).find("input 0 (w) is empty (already donated?)"),
            std::string::npos);
  in = inputs();
  in[1] = Array();  // what donation leaves: an f32[] array without storage
  EXPECT_NE(error_of([&] { exe->run(in); }).find("input 1 (count) is empty (already donated?)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->run_donated(in); }).find("input 1 (count) is empty"),
            std::string::npos);
  // A non-donated slot (x) given an empty array: run_donated used to check donated slots only.
  in = inputs();
  in[2] = Array();
  std::string e = error_of([&] { exe->run_donated(in); });
  EXPECT_NE(e.find("counting: input 2 (x) is empty (already donated?)"), std::string::npos) << e;
  EXPECT_FALSE(in[0].empty());  // nothing was consumed
  EXPECT_FALSE(in[1].empty());
  // Scalar functions too: the case that crashed.
  Builder b("scalar");
  auto s = b.parameter({DType::f32, {}}, "s");
  auto exe2 = runtime::host::compile(b.build({b.binary(Op::add, s, s)}, {"twice"}));
  std::vector<Array> none{Array()};
  EXPECT_NE(error_of([&] { exe2->run(none); }).find("input 0 (s) is empty"), std::string::npos);
}

TEST(RuntimeInterface, HostBuffersAreTheArraysAndDonationEmptiesTheAliasedOnes) {
  auto exe = runtime::host::compile(counting_step());
  std::vector<Array> in = inputs();
  const void* w_storage = in[0].raw();
  const void* x_storage = in[2].raw();
  std::vector<runtime::Buffer> args;
  for (Array& a : in) args.push_back(exe->upload(std::move(a)));
  EXPECT_TRUE(args[0].on_host());
  EXPECT_EQ(args[0].array().raw(), w_storage);  // no copy
  EXPECT_EQ(args[1].type(), (TensorType{DType::f32, Shape{}}));

  // Not donating: every argument stays.
  std::vector<runtime::Buffer> kept = exe->run(args, false);
  for (const auto& a : args) EXPECT_FALSE(a.empty());
  EXPECT_EQ(exe->download(kept[2]).at(0), 10.0);  // sum(w)
  EXPECT_FALSE(kept[2].empty());                  // download(const&) copies

  for (int step = 1; step <= 3; ++step) {
    std::vector<runtime::Buffer> out = exe->run(args, true);
    EXPECT_TRUE(args[0].empty());  // donated
    EXPECT_TRUE(args[1].empty());
    EXPECT_EQ(args[2].array().raw(), x_storage);  // read only, left in place
    EXPECT_EQ(out[0].array().raw(), w_storage);   // updated in place
    args[0] = std::move(out[0]);
    args[1] = std::move(out[1]);
  }
  EXPECT_EQ(exe->download(args[1]).at(0), 3.0);
  Array w = exe->download(std::move(args[0]));  // moved out, not copied
  EXPECT_EQ(w.raw(), w_storage);
  EXPECT_TRUE(args[0].empty());
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-2, -1, 0, 1}));
}

TEST(RuntimeInterface, BadBufferArgumentsAreNamedAndLeaveTheArgumentsAlone) {
  auto exe = runtime::host::compile(counting_step());
  std::vector<runtime::Buffer> args;
  for (Array& a : inputs()) args.emplace_back(std::move(a));
  args[2] = runtime::Buffer();
  EXPECT_NE(error_of([&] { exe->run(args, true); }).find("input 2 (x) is empty (already donated?)"),
            std::string::npos);
  EXPECT_FALSE(args[0].empty());  // nothing consumed
  args[2] = runtime::Buffer(Array::from<int32_t>({4}, {1, 1, 1, 1}));
  EXPECT_NE(error_of([&] {
              exe->run(args, true);
            }).find("input 2 (x) is s32[4] but the function takes f32[4]"),
            std::string::npos);
  EXPECT_FALSE(args[1].empty());
  args.pop_back();
  EXPECT_NE(error_of([&] { exe->run(args, false); }).find("expected 3 inputs, got 2"),
            std::string::npos);
  EXPECT_THROW(exe->upload(Array()), Error);
  EXPECT_THROW(exe->download(runtime::Buffer()), Error);
  EXPECT_THROW(runtime::Buffer().type(), Error);
  EXPECT_THROW(runtime::Buffer(Array::scalar(1.0f)).device(), Error);
  EXPECT_THROW(runtime::Buffer().take_array(), Error);
}
