// An output donated x's storage that is a concatenate of slices of x (a buffer rolled by rows,
// a row pushed in front): the slices are dense views read in place from x (Storage::alias), so
// the concatenate must not write x's storage while it still reads them. run_donated must give
// what run gives and what a hand computation gives, fused or not, on 1 and 2 threads.
#include <fmt/format.h>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

constexpr int64_t kRows = 4, kCols = 3;

// x [kRows, kCols] = 0, 1, 2, ... row-major; row r is {3r, 3r+1, 3r+2}.
Array iota_rows() {
  std::vector<float> v(size_t(kRows * kCols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return Array::from(Shape{kRows, kCols}, v);
}

ir::ValueId rows(ir::Builder& b, ir::ValueId x, int64_t from, int64_t to) {
  return b.slice(x, {from, 0}, {to, kCols});
}

// Runs f (output 0 donated input 0's storage) with run and run_donated; both must equal `want`.
void expect_donated(const ir::Function& f, const std::vector<Array>& inputs,
                    const std::vector<double>& want) {
  for (bool fuse : {true, false})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("fuse={} threads={}", fuse, threads));
      auto exe = runtime::host::compile(f, {.num_threads = threads, .fuse = fuse});
      expect_values(exe->run(inputs)[0], want);
      std::vector<Array> in = inputs;
      const void* donated = in[0].raw();
      auto out = exe->run_donated(in);
      expect_values(out[0], want);
      EXPECT_EQ(out[0].raw(), donated) << "the output owns the donated storage";
    }
}

// Rows rolled up by `by`: row r of the result is row (r + by) mod kRows of x.
std::vector<double> rolled(int64_t by) {
  std::vector<double> want;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c) want.push_back(double(((r + by) % kRows) * kCols + c));
  return want;
}

TEST(HostDonation, ConcatenateOfSlicesRollsTheDonatedBuffer) {
  for (int64_t by : {1, 2}) {
    SCOPED_TRACE(fmt::format("roll by {}", by));
    ir::Builder b;
    auto x = b.parameter({DType::f32, {kRows, kCols}}, "x");
    auto f = b.build({b.concatenate({rows(b, x, by, kRows), rows(b, x, 0, by)}, 0)});
    f.aliases = {{0, 0}};
    expect_donated(f, {iota_rows()}, rolled(by));
  }
}

TEST(HostDonation, RowPushedInFrontOfTheDonatedBuffer) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {kRows, kCols}}, "x");
  auto row = b.parameter({DType::f32, {1, kCols}}, "row");
  auto f = b.build({b.concatenate({row, rows(b, x, 0, kRows - 1)}, 0)});
  f.aliases = {{0, 0}};
  std::vector<double> want = {-1, -2, -3};  // the new row, then rows 0 .. kRows-2 of x
  for (int64_t i = 0; i < (kRows - 1) * kCols; ++i) want.push_back(double(i));
  expect_donated(f, {iota_rows(), Array::from<float>({1, kCols}, {-1, -2, -3})}, want);
}

}  // namespace
}  // namespace tlaloc::host_test
