// The op walk, run / run_donated contracts, input checking, determinism and fusion.
#include <omp.h>

#include "kernel_test_util.h"
#include "tlaloc/runtime/host/plan.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;
using runtime::host::compile;

TEST(HostRuntime, EveryOpHasAKernelTest) {
  for (Op op : ir::kAllOps) {
    if (op == Op::parameter) continue;
    EXPECT_TRUE(tested_ops().count(op))
        << "op '" << ir::op_name(op) << "' has no host kernel test (add a KERNEL_TEST)";
  }
}

// p' = p - lr * g, m' = 0.9 m + g  (aliases p' <- p, m' <- m); also returns a read-only input.
ir::Function update_fn(int64_t n) {
  ir::Builder b("update");
  auto p = b.parameter({DType::f32, {n}}, "p");
  auto m = b.parameter({DType::f32, {n}}, "m");
  auto g = b.parameter({DType::f32, {n}}, "g");
  auto lr = b.parameter({DType::f32, {}}, "lr");
  auto bc = [&](ir::ValueId s) { return b.broadcast_in_dim(s, {n}, {}); };
  auto m2 = b.binary(Op::add, b.binary(Op::multiply, bc(b.scalar(DType::f32, 0.9)), m), g);
  auto p2 = b.binary(Op::subtract, p, b.binary(Op::multiply, bc(lr), m2));
  auto f = b.build({p2, m2, g}, {"p", "m", "g"});
  f.aliases = {{0, 0}, {1, 1}};
  return f;
}

TEST(HostRuntime, RunDonatedUpdatesInPlace) {
  for (bool fuse : {true, false}) {
    auto exe = compile(update_fn(3), {.fuse = fuse});
    std::vector<Array> in = {Array::from<float>({3}, {1, 2, 3}),
                             Array::from<float>({3}, {10, 20, 30}),
                             Array::from<float>({3}, {1, 1, 1}), Array::scalar(0.5f)};
    const void* p_storage = in[0].raw();
    const void* m_storage = in[1].raw();
    auto out = exe->run_donated(in);
    EXPECT_EQ(out[0].raw(), p_storage);
    EXPECT_EQ(out[1].raw(), m_storage);
    expect_values(out[1], {10, 19, 28});           // 0.9 m + g
    expect_values(out[0], {-4, -7.5, -11}, 1e-6);  // p - 0.5 m'
    expect_values(out[2], {1, 1, 1});
    EXPECT_TRUE(in[0].empty());
    EXPECT_FALSE(in[2].empty());  // not donated: only read
    // Reusing a donated input is an error naming it.
    try {
      exe->run_donated(in);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("donated input 0 (p)"), std::string::npos) << e.what();
    }
    // Feeding outputs back in continues in place.
    std::vector<Array> next;
    next.push_back(std::move(out[0]));
    next.push_back(std::move(out[1]));
    next.push_back(Array::from<float>({3}, {0, 0, 0}));
    next.push_back(Array::scalar(1.0f));
    auto out2 = exe->run_donated(next);
    EXPECT_EQ(out2[0].raw(), p_storage);
    expect_values(out2[1], {9, 17.1, 25.2}, 1e-6);
  }
}

TEST(HostRuntime, RunMatchesRunDonated) {
  auto exe = compile(update_fn(100000));
  std::vector<Array> in = {Array::filled(DType::f32, {100000}, 1.5),
                           Array::filled(DType::f32, {100000}, -2),
                           Array::filled(DType::f32, {100000}, 0.25), Array::scalar(0.125f)};
  auto a = exe->run(in);
  auto b = exe->run_donated(in);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(a[size_t(i)].bitwise_equal(b[size_t(i)]));
}

TEST(HostRuntime, DonationThatCannotBeInPlaceStillUsesDonatedStorage) {
  // out0 = transpose(p) aliased to p: p is read through a transpose, so not element-wise.
  ir::Builder b;
  auto p = b.parameter({DType::f32, {2, 2}}, "p");
  auto t = b.transpose(p, {1, 0});
  auto f = b.build({b.binary(Op::add, t, p)});
  f.aliases = {{0, 0}};
  auto exe = compile(f);
  std::vector<Array> in = {Array::from<float>({2, 2}, {1, 2, 3, 4})};
  const void* s = in[0].raw();
  auto out = exe->run_donated(in);
  EXPECT_EQ(out[0].raw(), s);
  expect_values(out[0], {2, 5, 5, 8});
}

TEST(HostRuntime, WrongInputsNameInputAndTypes) {
  auto exe = compile(update_fn(3));
  auto expect_error = [&](std::vector<Array> in, std::vector<std::string> parts) {
    try {
      exe->run(in);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (auto& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  Array v3 = Array::from<float>({3}, {1, 2, 3});
  expect_error({v3, v3, v3}, {"expected 4 inputs, got 3"});
  expect_error({v3, v3, Array::from<float>({2}, {1, 2}), Array::scalar(1.0f)},
               {"input 2 (g)", "f32[2]", "f32[3]"});
  expect_error({v3, Array::from<double>({3}, {1, 2, 3}), v3, Array::scalar(1.0f)},
               {"input 1 (m)", "f64[3]"});
  // Verification errors come out of compile.
  ir::Function bad = update_fn(3);
  bad.nodes.back().type.shape = Shape{4};
  EXPECT_THROW(compile(bad), Error);
}

// An iota of f32[2^31, 2^31] (2^64 bytes) edited in past the Builder: compile used to precompute
// it into an Array whose size wrapped to 0 and write past it; now verification refuses it.
TEST(HostRuntime, ValueOver64BitsOfBytesIsAnErrorNotACrash) {
  ir::Builder b;
  auto i = b.iota({DType::f32, {4, 4}}, 0);
  ir::Function f = b.build({i});
  f.nodes[size_t(i)].type.shape = Shape{int64_t(1) << 31, int64_t(1) << 31};
  try {
    compile(f);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iota: result f32[2147483648,2147483648] is too large"),
              std::string::npos)
        << e.what();
  }
}

TEST(HostRuntime, OutputsThatAreInputsConstantsOrRepeated) {
  ir::Builder b;
  auto x = b.parameter({DType::s32, {2}}, "x");
  auto c = b.constant(Array::from<int32_t>({2}, {7, 8}));
  auto y = b.binary(Op::add, x, c);
  auto f = b.build({x, c, y, y, x});
  auto out = run_all(f, {Array::from<int32_t>({2}, {1, 2})});
  expect_values(out[0], {1, 2});
  expect_values(out[1], {7, 8});
  expect_values(out[2], {8, 10});
  expect_values(out[3], {8, 10});
  expect_values(out[4], {1, 2});
}

// A small MLP forward + softmax cross-entropy-like reduction: fused, unfused, 1 and 2 threads
// all bitwise equal, and equal to a naive f64 evaluation within tolerance.
TEST(HostRuntime, MlpForwardFusedMatchesUnfusedAndNaive) {
  const int64_t B = 64, I = 33, H = 40;
  ir::Builder b;
  auto x = b.parameter({DType::f32, {B, I}}, "x");
  auto w = b.parameter({DType::f32, {H, I}}, "w");  // PyTorch layout: x @ w^T
  auto bias = b.parameter({DType::f32, {H}}, "b");
  auto h = b.dot_general(x, w, {{}, {}, {1}, {1}});
  h = b.binary(Op::add, h, b.broadcast_in_dim(bias, {B, H}, {1}));
  auto zero = b.broadcast_in_dim(b.scalar(DType::f32, 0), {B, H}, {});
  h = b.binary(Op::maximum, h, zero);
  auto mx = b.reduce(h, ir::ReduceKind::max, {1});
  auto e = b.unary(Op::exponential, b.binary(Op::subtract, h, b.broadcast_in_dim(mx, {B, H}, {0})));
  auto s = b.reduce(e, ir::ReduceKind::sum, {1});
  auto lse = b.binary(Op::add, b.unary(Op::log, s), mx);
  auto loss = b.reduce(lse, ir::ReduceKind::sum, {0});
  auto f = b.build({loss, h});
  std::vector<double> xs, ws, bs;
  for (int64_t i = 0; i < B * I; ++i) xs.push_back(std::sin(double(i)));
  for (int64_t i = 0; i < H * I; ++i) ws.push_back(0.2 * std::cos(double(i) * 0.7));
  for (int64_t i = 0; i < H; ++i) bs.push_back(0.01 * double(i) - 0.2);
  std::vector<Array> in = {Array::from_doubles(DType::f32, {B, I}, xs),
                           Array::from_doubles(DType::f32, {H, I}, ws),
                           Array::from_doubles(DType::f32, {H}, bs)};
  auto out = run_all(f, in);
  auto xv = in[0].to_doubles(), wv = in[1].to_doubles(), bv = in[2].to_doubles();
  double total = 0;
  std::vector<double> hs;
  for (int64_t r = 0; r < B; ++r) {
    std::vector<double> row;
    for (int64_t j = 0; j < H; ++j) {
      double a = bv[size_t(j)];
      for (int64_t k = 0; k < I; ++k) a += xv[size_t(r * I + k)] * wv[size_t(j * I + k)];
      row.push_back(std::max(a, 0.0));
    }
    double m = *std::max_element(row.begin(), row.end()), acc = 0;
    for (double v : row) acc += std::exp(v - m);
    total += std::log(acc) + m;
    hs.insert(hs.end(), row.begin(), row.end());
  }
  expect_values(out[0], {total}, 1e-5);
  expect_values(out[1], hs, 1e-5);
}

TEST(HostRuntime, LargeWorkIsBitwiseEqualAcrossThreadCounts) {
  const int64_t n = 1 << 18;
  ir::Builder b;
  auto x = b.parameter({DType::f32, {n}}, "x");
  auto y = b.unary(Op::tanh, b.binary(Op::multiply, x, x));
  auto s = b.reduce(y, ir::ReduceKind::sum, {0});
  auto m = b.reshape(x, {512, 512});
  auto mm = b.dot_general(m, m, {{}, {}, {1}, {0}});
  auto f = b.build({y, s, mm});
  std::vector<double> xs;
  for (int64_t i = 0; i < n; ++i) xs.push_back(std::sin(0.001 * double(i)));
  run_all(f, {Array::from_doubles(DType::f32, {n}, xs)});
}

// num_threads = 0 is OpenMP's default thread count as it was before the first compile (the
// OpenMP build of OpenBLAS, told to run single-threaded there, sets the calling thread's count to
// 1): run alone, as ctest does, this test holds the process's first compile. A large
// elementwise op then runs on the team: ok, and bitwise the result of 1 thread.
TEST(HostRuntime, DefaultThreadCountIsReadBeforeOpenBlasChangesIt) {
  omp_set_num_threads(2);
  const int64_t n = 1 << 20;
  ir::Builder b;
  auto x = b.parameter({DType::f32, {n}}, "x");
  auto f = b.build({b.unary(Op::tanh, x)});
  std::vector<double> xs(size_t(n), 0.25);
  std::vector<Array> in{Array::from_doubles(DType::f32, {n}, xs)};
  runtime::host::Options o0, o1;
  o1.num_threads = 1;
  auto e0 = runtime::host::compile(f, o0);
  EXPECT_EQ(runtime::host::num_threads_of(*e0), 2);
  auto e1 = runtime::host::compile(f, o1);
  EXPECT_EQ(runtime::host::num_threads_of(*e1), 1);
  EXPECT_EQ(runtime::host::num_threads_of(*runtime::host::compile(f, o0)), 2);  // a later compile
  EXPECT_TRUE(e0->run(in)[0].bitwise_equal(e1->run(in)[0]));
  omp_set_num_threads(omp_get_num_procs());
}

TEST(HostRuntime, CompileCountCounts) {
  int64_t before = runtime::host::compile_count();
  compile(update_fn(2));
  EXPECT_EQ(runtime::host::compile_count(), before + 1);
}

}  // namespace
}  // namespace tlaloc::host_test

namespace tlaloc::host_test {
namespace {

// Zero-element values flow through every kind of step without touching memory they do not own.
// A GELU-like forward group whose cheap intermediates a later group (after a reduction, as a
// backward after its loss) reads: those are recomputed there, not stored, and every output is
// bitwise what the unfused program gives (run_all) and what a hand computation gives.
TEST(HostRuntime, CheapValuesReadByLaterGroupsAreRecomputedNotStored) {
  const int64_t n = 8;
  ir::Builder b("remat");
  auto x = b.parameter({DType::f32, {n}}, "x");
  auto w = b.parameter({DType::f32, {n}}, "w");
  auto mul = [&](ir::ValueId p, ir::ValueId q) { return b.binary(Op::multiply, p, q); };
  auto h = b.binary(Op::add, x, w);                // cheap, from inputs
  auto s = mul(h, h);                              // cheap, from h
  auto t = b.unary(Op::tanh, mul(s, h));           // not cheap: stored
  auto a = b.binary(Op::add, t, h);                // cheap, from t (stored) and h
  auto y = b.reduce(t, ir::ReduceKind::sum, {0});  // ends the group for the later one
  auto r = b.broadcast_in_dim(y, {n}, {});
  // After the reduction: reads s, a, h (recomputed) and t (stored; not cheap to recompute).
  auto z = b.binary(Op::add, mul(mul(r, s), a), b.binary(Op::add, h, t));
  auto f = b.build({z, y});
  std::vector<Array> in = {Array::from<float>({n}, {0.5f, -1, 2, 0, 0.25f, -0.75f, 1.5f, 3}),
                           Array::from<float>({n}, {0.1f, 0.2f, -0.3f, 0.4f, 0, 1, -2, 0.5f})};

  runtime::host::Plan p = runtime::host::make_plan(f, {.num_threads = 1});
  using runtime::host::Storage;
  for (ir::ValueId v : {h, s, a})
    EXPECT_EQ(p.storage[size_t(v)], Storage::none) << "%" << v << " was stored";
  EXPECT_NE(p.storage[size_t(t)], Storage::none);

  auto out = run_all(f, in);
  // By hand: y = sum of tanh((h h) h) (checked in f64; the runtime's f32 tanh is its own
  // polynomial), then each z from the runtime's y in f32, op by op as the program says.
  const float* xv = in[0].data<float>();
  const float* wv = in[1].data<float>();
  const float* zv = out[0].data<float>();
  const float yv = out[1].data<float>()[0];
  double want_y = 0;
  for (int64_t i = 0; i < n; ++i) {
    float hv = xv[i] + wv[i];
    want_y += std::tanh(double((hv * hv) * hv));
  }
  EXPECT_NEAR(yv, want_y, 1e-5);
  for (int64_t i = 0; i < n; ++i) {
    float hv = xv[i] + wv[i], sv = hv * hv;
    float tv = float(std::tanh(double(sv * hv)));
    float want = (yv * sv) * (tv + hv) + (hv + tv);
    EXPECT_NEAR(zv[i], want, 4e-6 * (std::fabs(want) + 1)) << i;
  }
}

TEST(HostRuntime, EmptyArrays) {
  ir::Builder b;
  auto x = b.parameter({DType::f32, {0, 3}}, "x");
  auto w = b.parameter({DType::f32, {3, 2}}, "w");
  auto i = b.parameter({DType::s32, {0}}, "i");
  auto y = b.unary(Op::exponential,
                   b.binary(Op::add, x, b.broadcast_in_dim(b.scalar(DType::f32, 1), {0, 3}, {})));
  auto d = b.dot_general(y, w, {{}, {}, {1}, {0}});                    // [0,2]
  auto s = b.reduce(y, ir::ReduceKind::max, {0});                      // [3] = -inf
  auto c = b.concatenate({x, b.transpose(w, {1, 0})}, 0);              // [2,3]
  auto g = b.gather(w, i);                                             // [0,2]
  auto p = b.pad(x, b.scalar(DType::f32, 7), {1, 0}, {0, 0}, {2, 0});  // [1,3]
  auto f = b.build({d, s, c, g, p});
  auto out = run_all(f, {Array(DType::f32, {0, 3}), Array::from<float>({3, 2}, {1, 2, 3, 4, 5, 6}),
                         Array(DType::s32, {0})});
  EXPECT_EQ(out[0].shape(), (Shape{0, 2}));
  expect_values(out[1], {-kInf, -kInf, -kInf});
  expect_values(out[2], {1, 3, 5, 2, 4, 6});
  EXPECT_EQ(out[3].numel(), 0);
  expect_values(out[4], {7, 7, 7});
}

}  // namespace
}  // namespace tlaloc::host_test
