// Data-movement kernels, constant, iota and convert against hand-computed values or naive
// index loops written here.
#include <climits>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;

std::vector<double> ramp(int64_t n, double start = 0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(start + double(i));
  return v;
}

KERNEL_TEST(constant, every_dtype) {
  for (DType dt : kAllDTypes) {
    ir::Builder b;
    Array c = Array::from_doubles(dt, {2, 2}, {1, 0, 1, 1});
    auto f = b.build({b.constant(c)});
    expect_values(run_all(f, {})[0], {1, 0, 1, 1});
  }
  // A scalar constant feeding an elementwise op (fused as a broadcast load).
  auto f = one_op({{DType::f32, {3}}}, [](ir::Builder& b, auto& p) {
    auto c = b.broadcast_in_dim(b.scalar(DType::f32, 2.5), {3}, {});
    return b.binary(Op::multiply, p[0], c);
  });
  expect_values(run_all(f, {Array::from<float>({3}, {1, 2, -4})})[0], {2.5, 5, -10});
}

KERNEL_TEST(iota, dims_and_dtypes) {
  for (DType dt : {DType::s32, DType::u32, DType::f32, DType::f64, DType::bf16, DType::f16}) {
    ir::Builder b;
    auto f0 = b.build({b.iota({dt, {2, 3}}, 1)});
    expect_values(run_all(f0, {})[0], {0, 1, 2, 0, 1, 2});
    ir::Builder c;
    auto f1 = c.build({c.iota({dt, {2, 3}}, 0)});
    expect_values(run_all(f1, {})[0], {0, 0, 0, 1, 1, 1});
  }
}

void convert_case(DType from, DType to, const std::vector<double>& in,
                  const std::vector<double>& want) {
  SCOPED_TRACE(std::string(name(from)) + " -> " + std::string(name(to)));
  Shape s{int64_t(in.size())};
  auto f = one_op({{from, s}}, [&](ir::Builder& b, auto& p) { return b.convert(p[0], to); });
  auto out = run_all(f, {Array::from_doubles(from, s, in)});
  EXPECT_EQ(out[0].dtype(), to);
  expect_values(out[0], want);
}

KERNEL_TEST(convert, all_pairs_and_edges) {
  // Small integers are exact in every dtype: every pair round-trips them.
  for (DType a : kAllDTypes)
    for (DType b : kAllDTypes) {
      if (a == DType::i1 || b == DType::i1)
        convert_case(a, b, {0, 1, 1}, {0, 1, 1});
      else if (a == DType::u32 || b == DType::u32)
        convert_case(a, b, {0, 3, 100}, {0, 3, 100});
      else
        convert_case(a, b, {0, -3, 100}, {0, -3, 100});
    }
  // Float -> integer truncates toward zero, saturates, NaN -> 0.
  convert_case(DType::f32, DType::s32, {1.7, -1.7, kNaN, 3e9, -3e9, -0.5},
               {1, -1, 0, INT_MAX, INT_MIN, 0});
  convert_case(DType::f64, DType::u32, {-1.5, 2.5, kNaN, 5e9, 4294967295.0},
               {0, 2, 0, 4294967295.0, 4294967295.0});
  // To i1: x != 0 (NaN is nonzero).
  convert_case(DType::f32, DType::i1, {0.0, -0.0, 2.0, kNaN}, {0, 0, 1, 1});
  convert_case(DType::s32, DType::i1, {0, -7}, {0, 1});
  // Integer <-> integer wraps.
  convert_case(DType::s32, DType::u32, {-1}, {4294967295.0});
  convert_case(DType::u32, DType::s32, {4294967295.0, 2147483648.0}, {-1, double(INT_MIN)});
  // Round to nearest even into bf16 (8 significant bits): 1 + 2^-8 ties down, 1 + 3*2^-8 up.
  convert_case(DType::f32, DType::bf16, {1 + 1.0 / 256, 1 + 3.0 / 256, 1e39, kNaN},
               {1.0, 1 + 4.0 / 256, kInf, kNaN});
  // f64 -> bf16 rounds once: 1 + 2^-8 + 2^-30 is above the tie, so it rounds up.
  convert_case(DType::f64, DType::bf16, {1 + 1.0 / 256 + std::ldexp(1.0, -30)}, {1 + 1.0 / 128});
  // f16: 11 significant bits; 2049 ties to 2048, 2051 to 2052; 65520 overflows to inf.
  convert_case(DType::f32, DType::f16, {2049, 2051, 65520, 1e-8}, {2048, 2052, kInf, 0});
  convert_case(DType::s32, DType::f16, {2049, -2051}, {2048, -2052});
  convert_case(DType::s32, DType::f32, {16777217}, {16777216});
}

KERNEL_TEST(broadcast_in_dim, rows_columns_and_ones) {
  auto f = one_op({{DType::f32, {3}}}, [](ir::Builder& b, auto& p) {
    return b.broadcast_in_dim(p[0], {2, 3}, {1});
  });
  expect_values(run_all(f, {Array::from<float>({3}, {1, 2, 3})})[0], {1, 2, 3, 1, 2, 3});
  auto g = one_op({{DType::s32, {2}}}, [](ir::Builder& b, auto& p) {
    return b.broadcast_in_dim(p[0], {2, 3}, {0});
  });
  expect_values(run_all(g, {Array::from<int32_t>({2}, {7, 9})})[0], {7, 7, 7, 9, 9, 9});
  auto h = one_op({{DType::bf16, {1, 2}}}, [](ir::Builder& b, auto& p) {
    return b.broadcast_in_dim(p[0], {2, 2, 2}, {0, 2});
  });
  expect_values(run_all(h, {Array::from_doubles(DType::bf16, {1, 2}, {1, 2})})[0],
                {1, 2, 1, 2, 1, 2, 1, 2});
  // Broadcast feeding a fused add, and a column broadcast.
  auto k = one_op({{DType::f32, {2, 3}}, {DType::f32, {2}}}, [](ir::Builder& b, auto& p) {
    return b.binary(Op::add, p[0], b.broadcast_in_dim(p[1], {2, 3}, {0}));
  });
  expect_values(run_all(k, {Array::from<float>({2, 3}, {0, 1, 2, 3, 4, 5}),
                            Array::from<float>({2}, {10, 20})})[0],
                {10, 11, 12, 23, 24, 25});
}

KERNEL_TEST(reshape, plain_and_in_fused_chain) {
  auto f = one_op({{DType::u32, {2, 3}}}, [](ir::Builder& b, auto& p) {
    return b.reshape(p[0], {3, 2});
  });
  Array x = Array::from_doubles(DType::u32, {2, 3}, ramp(6));
  auto out = run_all(f, {x});
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  expect_values(out[0], ramp(6));
  auto g = one_op({{DType::f32, {2, 3}}, {DType::f32, {6}}}, [](ir::Builder& b, auto& p) {
    auto n = b.unary(Op::negate, p[0]);
    return b.binary(Op::add, b.reshape(n, {6}), p[1]);
  });
  expect_values(run_all(g, {Array::from_doubles(DType::f32, {2, 3}, ramp(6)),
                            Array::from_doubles(DType::f32, {6}, ramp(6, 10))})[0],
                {10, 10, 10, 10, 10, 10});
}

KERNEL_TEST(transpose, rank3) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::s32, DType::i1}) {
    auto f = one_op({{dt, {2, 3, 4}}}, [](ir::Builder& b, auto& p) {
      return b.transpose(p[0], {2, 0, 1});
    });
    std::vector<double> xs = ramp(24);
    if (dt == DType::i1)
      for (auto& v : xs) v = int(v) % 3 == 0;
    std::vector<double> want;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k) want.push_back(xs[size_t(j * 12 + k * 4 + i)]);
    auto out = run_all(f, {Array::from_doubles(dt, {2, 3, 4}, xs)});
    EXPECT_EQ(out[0].shape(), (Shape{4, 2, 3}));
    expect_values(out[0], want);
  }
}

// Long flat copies (a fill, a strided and a contiguous 1-D slice) split over threads in pieces.
KERNEL_TEST(broadcast_in_dim, long_flat_fill_and_copies) {
  auto f = one_op({{DType::f32, {}}}, [](ir::Builder& b, auto& p) {
    return b.broadcast_in_dim(p[0], {256, 128}, {});
  });
  expect_values(run_all(f, {Array::scalar(-0.5f)})[0], std::vector<double>(256 * 128, -0.5));
  const int64_t n = 30000;
  for (int64_t stride : {1, 3}) {
    auto g = one_op({{DType::s32, {n}}},
                    [&](ir::Builder& b, auto& p) { return b.slice(p[0], {1}, {n - 1}, {stride}); });
    std::vector<double> want;
    for (int64_t i = 1; i < n - 1; i += stride) want.push_back(double(i));
    expect_values(run_all(g, {Array::from_doubles(DType::s32, {n}, ramp(n))})[0], want);
  }
}

KERNEL_TEST(slice, with_strides) {
  auto f = one_op({{DType::f32, {4, 5}}}, [](ir::Builder& b, auto& p) {
    return b.slice(p[0], {1, 0}, {4, 5}, {2, 2});
  });
  // rows 1, 3; columns 0, 2, 4
  expect_values(run_all(f, {Array::from_doubles(DType::f32, {4, 5}, ramp(20))})[0],
                {5, 7, 9, 15, 17, 19});
}

KERNEL_TEST(concatenate, along_dims) {
  auto f = one_op({{DType::s32, {2, 2}}, {DType::s32, {2, 1}}}, [](ir::Builder& b, auto& p) {
    return b.concatenate({p[0], p[1]}, 1);
  });
  expect_values(run_all(f, {Array::from<int32_t>({2, 2}, {1, 2, 3, 4}),
                            Array::from<int32_t>({2, 1}, {8, 9})})[0],
                {1, 2, 8, 3, 4, 9});
  auto g = one_op({{DType::f16, {1, 2}}, {DType::f16, {2, 2}}}, [](ir::Builder& b, auto& p) {
    return b.concatenate({p[0], p[1], p[0]}, 0);
  });
  expect_values(run_all(g, {Array::from_doubles(DType::f16, {1, 2}, {1, 2}),
                            Array::from_doubles(DType::f16, {2, 2}, {3, 4, 5, 6})})[0],
                {1, 2, 3, 4, 5, 6, 1, 2});
}

KERNEL_TEST(pad, edge_and_interior) {
  auto f = one_op({{DType::f32, {2, 2}}, {DType::f32, {}}}, [](ir::Builder& b, auto& p) {
    return b.pad(p[0], p[1], {1, 0}, {0, 1}, {1, 1});
  });
  // [2,2] -> rows 1 + 2 + 1 = 4, cols 2 + 1 + 1 = 4
  auto out = run_all(f, {Array::from<float>({2, 2}, {1, 2, 3, 4}), Array::scalar(9.0f)});
  EXPECT_EQ(out[0].shape(), (Shape{4, 4}));
  expect_values(out[0], {9, 9, 9, 9, 1, 9, 2, 9, 9, 9, 9, 9, 3, 9, 4, 9});
}

KERNEL_TEST(dynamic_slice, clamps_starts) {
  auto f = one_op({{DType::f32, {4, 4}}, {DType::s32, {}}, {DType::s32, {}}},
                  [](ir::Builder& b, auto& p) {
                    return b.dynamic_slice(p[0], {p[1], p[2]}, {2, 2});
                  });
  Array x = Array::from_doubles(DType::f32, {4, 4}, ramp(16));
  // (3, -1) clamps to (2, 0).
  expect_values(run_all(f, {x, Array::scalar<int32_t>(3), Array::scalar<int32_t>(-1)})[0],
                {8, 9, 12, 13});
  expect_values(run_all(f, {x, Array::scalar<int32_t>(1), Array::scalar<int32_t>(1)})[0],
                {5, 6, 9, 10});
  auto g = one_op({{DType::s32, {5}}, {DType::u32, {}}},
                  [](ir::Builder& b, auto& p) { return b.dynamic_slice(p[0], {p[1]}, {2}); });
  expect_values(
      run_all(g, {Array::from_doubles(DType::s32, {5}, ramp(5)), Array::scalar<uint32_t>(9)})[0],
      {3, 4});
}

KERNEL_TEST(dynamic_update_slice, clamps_starts) {
  auto f = one_op({{DType::f32, {3, 3}}, {DType::f32, {2, 1}}, {DType::s32, {}}, {DType::s32, {}}},
                  [](ir::Builder& b, auto& p) {
                    return b.dynamic_update_slice(p[0], p[1], {p[2], p[3]});
                  });
  Array x = Array::from_doubles(DType::f32, {3, 3}, ramp(9)),
        u = Array::from<float>({2, 1}, {-1, -2});
  // (5, 1) clamps to (1, 1).
  expect_values(run_all(f, {x, u, Array::scalar<int32_t>(5), Array::scalar<int32_t>(1)})[0],
                {0, 1, 2, 3, -1, 5, 6, -2, 8});
}

KERNEL_TEST(gather, clamps_rows) {
  auto f = one_op({{DType::f32, {4, 2}}, {DType::s32, {3}}},
                  [](ir::Builder& b, auto& p) { return b.gather(p[0], p[1]); });
  auto out = run_all(
      f, {Array::from_doubles(DType::f32, {4, 2}, ramp(8)), Array::from<int32_t>({3}, {3, -1, 7})});
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  expect_values(out[0], {6, 7, 0, 1, 6, 7});
  auto g = one_op({{DType::s32, {3}}, {DType::u32, {2, 2}}},
                  [](ir::Builder& b, auto& p) { return b.gather(p[0], p[1]); });
  expect_values(run_all(g, {Array::from<int32_t>({3}, {10, 20, 30}),
                            Array::from<uint32_t>({2, 2}, {2, 0, 1, 99})})[0],
                {30, 10, 20, 30});
}

KERNEL_TEST(scatter, adds_rows_skips_out_of_range) {
  auto f = one_op({{DType::f32, {3, 2}}, {DType::s32, {4}}, {DType::f32, {4, 2}}},
                  [](ir::Builder& b, auto& p) { return b.scatter(p[0], p[1], p[2]); });
  auto out = run_all(
      f, {Array::from<float>({3, 2}, {1, 1, 1, 1, 1, 1}), Array::from<int32_t>({4}, {0, 5, 0, -1}),
          Array::from<float>({4, 2}, {1, 2, 10, 20, 3, 4, 30, 40})});
  expect_values(out[0], {5, 7, 1, 1, 1, 1});
  auto g = one_op({{DType::s32, {2}}, {DType::s32, {3}}, {DType::s32, {3}}},
                  [](ir::Builder& b, auto& p) { return b.scatter(p[0], p[1], p[2]); });
  expect_values(run_all(g, {Array::from<int32_t>({2}, {0, 0}), Array::from<int32_t>({3}, {1, 1, 0}),
                            Array::from<int32_t>({3}, {5, 6, 7})})[0],
                {7, 11});
}

}  // namespace
}  // namespace tlaloc::host_test
