// Dense views (a reshape of contiguous data, a slice of leading rows) that a kernel needs as
// storage are read in place (Storage::alias) instead of copied: the values are right, no copy
// step is planned, the source stays live and unchanged while the alias is read (arena reuse,
// a donated input overwritten in place), and aliases of aliases resolve. Values by hand.
#include "kernel_test_util.h"
#include "tlaloc/runtime/host/plan.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;
using runtime::host::Storage;

ir::ValueId reshape(ir::Builder& b, ir::ValueId x, Shape s) { return b.reshape(x, s); }

int copy_steps(const ir::Function& f) {
  auto p = runtime::host::make_plan(f, {.num_threads = 1});
  int n = 0;
  for (const auto& k : p.steps)
    if (k->label.rfind("reshape", 0) == 0 || k->label.rfind("slice", 0) == 0) ++n;
  return n;
}

// x [3, 4] -> rows 1..2 (a slice of leading rows after row 0: offset 4) -> [8] -> a dot with w.
TEST(HostAlias, SliceOfRowsReshapedFeedsADotInPlace) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {3, 4}}, "x");
  auto w = b.parameter({DType::f32, {8}}, "w");
  auto e = b.unary(Op::exponential, b.unary(Op::log, x));  // stored in the arena
  auto r = reshape(b, b.slice(e, {1, 0}, {3, 4}), Shape{8});
  auto d = b.dot_general(r, w, {{}, {}, {0}, {0}});
  auto f = b.build({d});
  EXPECT_EQ(copy_steps(f), 0);
  auto p = runtime::host::make_plan(f, {.num_threads = 1});
  EXPECT_EQ(p.storage[size_t(r)], Storage::alias);
  std::vector<float> xv(12), wv(8);
  double want = 0;
  for (int i = 0; i < 12; ++i) xv[size_t(i)] = float(i + 1);
  for (int i = 0; i < 8; ++i) {
    wv[size_t(i)] = float(i % 3) - 0.5f;
    want += double(xv[size_t(i + 4)]) * wv[size_t(i)];
  }
  auto out = run_all(f, {Array::from(Shape{3, 4}, xv), Array::from(Shape{8}, wv)});
  expect_values(out[0], {want}, 1e-5);
}

// t = x·w (a dot: stored) is read only through an alias, by the last step; in between, values
// as large as t are made and die, so the arena would reuse t's bytes if the alias did not keep
// t live.
TEST(HostAlias, SourceStaysLiveWhileItsAliasIsRead) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {8, 4}}, "x");
  auto w = b.parameter({DType::f32, {4, 8}}, "w");
  auto t = b.dot_general(x, w, {{}, {}, {1}, {0}});  // [8, 8]
  auto rt = reshape(b, t, Shape{64});
  ir::ValueId acc = b.reduce(x, ir::ReduceKind::sum, {0, 1});
  for (int i = 0; i < 4; ++i) {  // arena churn: each u [8, 8] dies right after its reduce
    auto u = b.dot_general(x, b.binary(Op::add, w, w), {{}, {}, {1}, {0}});
    auto v = b.binary(Op::add, u, b.broadcast_in_dim(acc, {8, 8}, {}));
    acc = b.reduce(b.dot_general(v, v, {{}, {}, {1}, {0}}), ir::ReduceKind::max, {0, 1});
  }
  auto s = b.reduce(rt, ir::ReduceKind::sum, {0});
  auto f = b.build({s, acc});
  EXPECT_EQ(runtime::host::make_plan(f, {.num_threads = 1}).storage[size_t(rt)], Storage::alias);
  std::vector<float> xv(32), wv(32);
  for (int i = 0; i < 32; ++i) {
    xv[size_t(i)] = float(i % 5) - 2;
    wv[size_t(i)] = float(i % 3) * 0.5f;
  }
  double want = 0;  // Σ_ij (x w)_ij
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c)
      for (int k = 0; k < 4; ++k) want += double(xv[size_t(r * 4 + k)]) * wv[size_t(k * 8 + c)];
  auto out = run_all(f, {Array::from(Shape{8, 4}, xv), Array::from(Shape{4, 8}, wv)});
  expect_values(out[0], {want}, 1e-6);
}

// out = x * 2 is donated x's storage and is done (its sum is needed) before a dot reads x
// through a reshape. The alias makes that dot x's last reader, so the update is not done in
// place and the dot sees the old x.
TEST(HostAlias, AliasOfADonatedInputReadAfterTheUpdate) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {2, 3}}, "x");
  auto two = b.broadcast_in_dim(b.constant(Array::scalar(2.0f)), {2, 3}, {});
  auto out = b.binary(Op::multiply, x, two);
  auto total = b.reduce(out, ir::ReduceKind::sum, {0, 1});
  auto wide = b.dot_general(b.broadcast_in_dim(total, {1}, {}), b.broadcast_in_dim(total, {1}, {}),
                            {{}, {}, {0}, {0}});
  auto d = b.dot_general(b.reshape(x, Shape{6}), b.reshape(x, Shape{6}), {{}, {}, {0}, {0}});
  auto f = b.build({out, d, wide});
  f.aliases = {{0, 0}};
  for (bool donated : {false, true}) {
    auto exe = runtime::host::compile(f, {.num_threads = 1});
    std::vector<Array> in = {Array::from<float>({2, 3}, {1, 2, 3, 4, 5, 6})};
    auto r = donated ? exe->run_donated(in) : exe->run(in);
    expect_values(r[0], {2, 4, 6, 8, 10, 12});
    expect_values(r[1], {91});    // 1 + 4 + 9 + 16 + 25 + 36: the old x
    expect_values(r[2], {1764});  // 42²
  }
}

// A reshape of a reshape of a slice: the alias's source is itself an alias.
TEST(HostAlias, AliasOfAnAlias) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {4, 6}}, "x");
  auto e = b.unary(Op::abs, x);
  auto r1 = reshape(b, b.slice(e, {2, 0}, {4, 6}), Shape{3, 4});
  auto r2 = reshape(b, r1, Shape{12});
  auto d1 = b.dot_general(r1, b.parameter({DType::f32, {4}}, "w"), {{}, {}, {1}, {0}});
  auto d2 = b.reduce(r2, ir::ReduceKind::max, {0});
  auto f = b.build({d1, d2});
  std::vector<float> xv(24);
  for (int i = 0; i < 24; ++i) xv[size_t(i)] = float(i % 2 ? i : -i);
  auto out = run_all(f, {Array::from(Shape{4, 6}, xv), Array::from<float>({4}, {1, 0, 0, 1})});
  // rows 2..3 of |x| = 12..23; as [3, 4]: d1[r] = v[4r] + v[4r + 3].
  expect_values(out[0], {12 + 15, 16 + 19, 20 + 23});
  expect_values(out[1], {23});
}

}  // namespace
}  // namespace tlaloc::host_test
