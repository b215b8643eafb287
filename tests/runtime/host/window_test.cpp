// reduce_window and select_and_scatter: the spec's examples by hand, and the host kernels
// (2-D and general paths) against the evaluator's plain f64 loops (passes/evaluate.cpp) on
// windows of every kind: 3-D windows, padding, strides, base and window dilations.
// run_all checks the outputs are bitwise equal at 1 and 2 threads.
#include <fmt/ranges.h>

#include <bit>
#include <cmath>
#include <cstdlib>

#include "kernel_test_util.h"

#include "tlaloc/passes/evaluate.h"

namespace tlaloc::host_test {
namespace {

using ir::Comparison;
using ir::ReduceKind;
using Dims = std::vector<int64_t>;

struct Win {
  Dims window, strides, lo, hi, base, wdil;
};

// f's host outputs (all four modes equal) against the evaluator's, within tol.
void check_vs_evaluator(const ir::Function& f, const std::vector<Array>& in, double tol) {
  std::vector<Array> got = run_all(f, in);
  std::vector<Array> want = passes::interpret(f, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE(fmt::format("output {}", k));
    ASSERT_EQ(got[k].shape(), want[k].shape());
    expect_values(got[k], want[k].to_doubles(), tol);
  }
}

void check_reduce_window(DType t, const Shape& s, const Win& w, double sum_tol) {
  for (ReduceKind k : {ReduceKind::sum, ReduceKind::max, ReduceKind::min}) {
    SCOPED_TRACE(fmt::format("{} {}{} window {}", ir::name(k), name(t), to_string(s), w.window));
    auto f = one_op({{t, s}}, [&](ir::Builder& b, auto& p) {
      return b.reduce_window(p[0], k, w.window, w.strides, w.lo, w.hi, w.base, w.wdil);
    });
    check_vs_evaluator(f, {lcg_array(t, s, uint64_t(s.numel()) + int(k))},
                       k == ReduceKind::sum ? sum_tol : 0);
  }
}

void check_select_and_scatter(DType t, const Shape& s, const Win& w, double tol) {
  for (Comparison c : {Comparison::GE, Comparison::LE, Comparison::GT, Comparison::LT}) {
    SCOPED_TRACE(fmt::format("{} {}{} window {}", ir::name(c), name(t), to_string(s), w.window));
    ir::Function f = one_op({{t, s}}, [&](ir::Builder& b, auto& p) {
      ir::ValueId counts = b.reduce_window(p[0], ReduceKind::sum, w.window, w.strides, w.lo, w.hi);
      ir::ValueId src = b.binary(ir::Op::add, counts, counts);  // a source of the right shape
      return b.select_and_scatter(p[0], src, c, w.window, w.strides, w.lo, w.hi);
    });
    // Coarse values: ties within windows (the first pick wins).
    Array x = lcg_array(t, s, 7);
    std::vector<double> v = x.to_doubles();
    for (double& e : v) e = std::round(e * 3);
    check_vs_evaluator(f, {Array::from_doubles(t, s, v)}, tol);
  }
}

KERNEL_TEST(reduce_window, spec_example) {
  // StableHLO spec: [[1, 2], [3, 4], [5, 6]], window [2, 1], strides [4, 1], base dilations
  // [2, 1], window dilations [3, 1], padding [[2, 1], [0, 0]] -> [[0, 0], [3, 4]].
  auto f = one_op({{DType::f32, {3, 2}}}, [](ir::Builder& b, auto& p) {
    return b.reduce_window(p[0], ReduceKind::sum, {2, 1}, {4, 1}, {2, 0}, {1, 0}, {2, 1}, {3, 1});
  });
  Array x = Array::from_doubles(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6});
  expect_values(run_all(f, {x})[0], {0, 0, 3, 4});
}

KERNEL_TEST(reduce_window, pooling_by_hand) {
  // 2x2 max / sum, stride 2, over [[1, 5, 2, 0], [3, -1, 7, 7], [0, 0, 1, 2]] with one row of
  // padding below: windows [1 5 3 -1] [2 0 7 7] [0 0 pad pad] [1 2 pad pad].
  Array x = Array::from_doubles(DType::f32, {3, 4}, {1, 5, 2, 0, 3, -1, 7, 7, 0, 0, 1, 2});
  for (ReduceKind k : {ReduceKind::max, ReduceKind::sum}) {
    auto f = one_op({{DType::f32, {3, 4}}}, [&](ir::Builder& b, auto& p) {
      return b.reduce_window(p[0], k, {2, 2}, {2, 2}, {0, 0}, {1, 0});
    });
    expect_values(run_all(f, {x})[0], k == ReduceKind::max ? std::vector<double>{5, 7, 0, 2}
                                                           : std::vector<double>{8, 16, 0, 3});
  }
}

KERNEL_TEST(reduce_window, matches_evaluator) {
  const DType f32 = DType::f32;
  // Pooling shapes (2-D path): 2x2 stride 2; 3x3 stride 2 padding 1; window dilation.
  check_reduce_window(f32, {2, 3, 8, 8}, {{1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {}, {}}, 1e-6);
  check_reduce_window(f32, {2, 3, 7, 9},
                      {{1, 1, 3, 3}, {1, 1, 2, 2}, {0, 0, 1, 1}, {0, 0, 1, 1}, {}, {}}, 1e-6);
  check_reduce_window(f32, {2, 5, 9}, {{1, 3, 2}, {1, 1, 3}, {0, 2, 0}, {0, 1, 3}, {}, {1, 2, 3}},
                      1e-6);
  check_reduce_window(f32, {11}, {{4}, {3}, {2}, {2}, {}, {}}, 1e-6);  // 1-D as [1, n]
  // General path: 3-D windows, base dilations, a window over the leading dim.
  check_reduce_window(f32, {3, 4, 5, 6},
                      {{1, 2, 3, 2}, {1, 1, 2, 3}, {0, 1, 1, 0}, {0, 0, 2, 1}, {}, {}}, 1e-6);
  check_reduce_window(f32, {4, 5, 6},
                      {{2, 2, 3}, {1, 2, 2}, {1, 0, 2}, {0, 3, 1}, {2, 1, 3}, {1, 2, 1}}, 1e-6);
  check_reduce_window(f32, {2, 3}, {{2, 1}, {1, 1}, {}, {}, {}, {}}, 1e-6);
  check_reduce_window(
      DType::f64, {2, 3, 6, 5},
      {{1, 2, 2, 3}, {1, 1, 1, 2}, {0, 1, 1, 1}, {0, 0, 1, 2}, {1, 1, 2, 1}, {1, 1, 1, 2}}, 1e-13);
  check_reduce_window(DType::bf16, {2, 4, 6}, {{1, 3, 3}, {1, 1, 2}, {0, 1, 1}, {0, 1, 1}, {}, {}},
                      1e-2);
  check_reduce_window(DType::f16, {3, 5}, {{2, 2}, {1, 1}, {1, 0}, {0, 1}, {2, 1}, {}}, 2e-3);
  // Windows wholly in padding give the init; an empty operand dim gives only padding windows.
  check_reduce_window(f32, {2, 3}, {{1, 2}, {1, 1}, {0, 4}, {0, 0}, {}, {}}, 0);
  check_reduce_window(f32, {2, 0}, {{1, 1}, {1, 1}, {0, 2}, {0, 0}, {}, {}}, 0);
  check_reduce_window(f32, {}, {{}, {}, {}, {}, {}, {}}, 0);  // rank 0
}

KERNEL_TEST(reduce_window, nan_propagates) {
  Array x = Array::from_doubles(DType::f32, {1, 4}, {1, kNaN, 3, 4});
  for (ReduceKind k : {ReduceKind::max, ReduceKind::min}) {
    auto f = one_op({{DType::f32, {1, 4}}}, [&](ir::Builder& b, auto& p) {
      return b.reduce_window(p[0], k, {1, 2}, {1, 2});
    });
    expect_values(run_all(f, {x})[0], {kNaN, k == ReduceKind::max ? 4.0 : 3.0});
  }
}

// f32 2x2 max pooling with stride 2 (its own vector loop): the first maximum in window order
// a b / c d, so +0 / -0 ties keep the first, -inf windows stay -inf, and any NaN gives NaN; the
// same bits as the 2-D path's generic loop (the windows of a plane padded on the left).
KERNEL_TEST(reduce_window, max_pool2x2_bits) {
  const double inf = kInf;
  // Windows: [-0 +0 / +0 -0] [+0 -0 / 1 1] [-inf -inf / -inf -inf] [2 NaN / 3 1] [5 -1 / 5 4]
  // [-2 -3 / -inf -1], along one row of 6 windows (the last two rows of the plane).
  const std::vector<double> top = {-0.0, 0.0, 0.0, -0.0, -inf, -inf, 2, kNaN, 5, -1, -2, -3};
  const std::vector<double> bot = {0.0, -0.0, 1, 1, -inf, -inf, 3, 1, 5, 4, -inf, -1};
  std::vector<double> v = top;
  v.insert(v.end(), bot.begin(), bot.end());
  const Array x = Array::from_doubles(DType::f32, {1, 1, 2, 12}, v);
  auto pool = [](Dims lo) {
    return one_op({{DType::f32, {1, 1, 2, 12}}}, [lo](ir::Builder& b, auto& p) {
      return b.reduce_window(p[0], ReduceKind::max, {1, 1, 2, 2}, {1, 1, 2, 2}, lo, {0, 0, 0, 0});
    });
  };
  const Array got = run_all(pool({0, 0, 0, 0}), {x})[0];
  expect_values(got, {-0.0, 1, -inf, kNaN, 5, -1});  // tol 0: -0 and +0 told apart
  // Two columns of padding on the left make the windows go through the generic 2-D loop: after
  // a window of padding alone, the same six windows, bit for bit.
  const Array generic = run_all(pool({0, 0, 0, 2}), {x})[0];
  ASSERT_EQ(generic.numel(), 7);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got.data<float>()[i]),
              std::bit_cast<uint32_t>(generic.data<float>()[i + 1]))
        << "window " << i;
}

KERNEL_TEST(select_and_scatter, spec_example) {
  // StableHLO spec: operand [[1, 5], [2, 5], [3, 6], [4, 4]], source [[5, 6], [7, 8]],
  // window [3, 1], strides [2, 1], padding [[0, 1], [0, 0]] -> [[0, 0], [0, 0], [5, 14], [7, 0]].
  auto f = one_op({{DType::f32, {4, 2}}, {DType::f32, {2, 2}}}, [](ir::Builder& b, auto& p) {
    return b.select_and_scatter(p[0], p[1], Comparison::GE, {3, 1}, {2, 1}, {0, 0}, {1, 0});
  });
  Array x = Array::from_doubles(DType::f32, {4, 2}, {1, 5, 2, 5, 3, 6, 4, 4});
  Array s = Array::from_doubles(DType::f32, {2, 2}, {5, 6, 7, 8});
  expect_values(run_all(f, {x, s})[0], {0, 0, 0, 0, 5, 14, 7, 0});
}

KERNEL_TEST(select_and_scatter, ties_pick_the_first) {
  // One 2x2 window of equal values: GE and LE pick the first, GT and LT the last.
  Array x = Array::filled(DType::f32, {2, 2}, 1.0);
  Array s = Array::from_doubles(DType::f32, {1, 1}, {3});
  for (Comparison c : {Comparison::GE, Comparison::LE, Comparison::GT, Comparison::LT}) {
    auto f = one_op({{DType::f32, {2, 2}}, {DType::f32, {1, 1}}}, [&](ir::Builder& b, auto& p) {
      return b.select_and_scatter(p[0], p[1], c, {2, 2});
    });
    bool first = c == Comparison::GE || c == Comparison::LE;
    expect_values(run_all(f, {x, s})[0],
                  first ? std::vector<double>{3, 0, 0, 0} : std::vector<double>{0, 0, 0, 3});
  }
}

KERNEL_TEST(select_and_scatter, matches_evaluator) {
  const DType f32 = DType::f32;
  check_select_and_scatter(f32, {2, 3, 8, 8}, {{1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {}, {}}, 1e-6);
  check_select_and_scatter(f32, {2, 3, 7, 9},
                           {{1, 1, 3, 3}, {1, 1, 2, 2}, {0, 0, 1, 1}, {0, 0, 1, 1}, {}, {}}, 1e-6);
  check_select_and_scatter(f32, {3, 4, 5, 6},
                           {{1, 2, 3, 2}, {1, 1, 2, 3}, {0, 1, 1, 0}, {0, 0, 2, 1}, {}, {}}, 1e-6);
  check_select_and_scatter(f32, {5, 7}, {{3, 2}, {1, 1}, {2, 0}, {1, 3}, {}, {}},
                           1e-6);  // overlaps
  check_select_and_scatter(DType::f64, {2, 6, 5},
                           {{2, 3, 3}, {1, 2, 1}, {1, 1, 0}, {0, 1, 2}, {}, {}}, 1e-13);
  check_select_and_scatter(DType::bf16, {2, 5, 6},
                           {{1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, {}, {}}, 1e-2);
  check_select_and_scatter(DType::f16, {4, 4}, {{2, 2}, {1, 1}, {}, {}, {}, {}}, 2e-3);
  // Max pooling's gradient, 2x2 stride 2 tiling the plane (its own f32 path), with NaN, -0 / +0
  // and ties in windows: the picks are the general path's.
  const double nan = std::nan("");
  for (Comparison c : {Comparison::GE, Comparison::GT}) {
    auto f = one_op({{f32, {1, 2, 2, 4}}, {f32, {1, 2, 1, 2}}}, [&](ir::Builder& b, auto& p) {
      return b.select_and_scatter(p[0], p[1], c, {1, 1, 2, 2}, {1, 1, 2, 2});
    });
    Array x = Array::from_doubles(
        f32, {1, 2, 2, 4}, {nan, 1, 2, 2, 3, nan, 2, 5, -0.0, 0.0, 7, 7, 0.0, -0.0, nan, nan});
    Array src = Array::from_doubles(f32, {1, 2, 1, 2}, {10, 20, 30, 40});
    check_vs_evaluator(f, {x, src}, 0);
  }
  // Windows wholly in padding pick nothing.
  check_select_and_scatter(f32, {2, 3}, {{1, 2}, {1, 1}, {0, 4}, {0, 0}, {}, {}}, 0);
}

// Max pooling's gradient on rows of 7, 11, 14 and 17 windows (the AVX-512 path takes 8 windows at
// a time under masks), with ties, signed zeros, NaN and infinities: the evaluator's picks, and
// the bits of the scalar loop (TLALOC_HOST_ISA=avx2 keeps to it).
KERNEL_TEST(select_and_scatter, pool2x2_wide_rows) {
  for (int64_t ow : {7, 11, 14, 17}) {
    SCOPED_TRACE(fmt::format("{} windows a row", ow));
    const Shape xs{2, 3, 4, 2 * ow}, ss{2, 3, 2, ow};
    std::vector<double> v = lcg_array(DType::f32, xs, uint64_t(ow)).to_doubles();
    const double specials[] = {kNaN, -0.0, 0.0, kInf, -kInf};
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = std::round(v[i] * 2);  // ties
      if (i % 13 == 5) v[i] = specials[(i / 13) % 5];
    }
    const Array x = Array::from_doubles(DType::f32, xs, v), src = lcg_array(DType::f32, ss, 3);
    auto f = one_op({{DType::f32, xs}, {DType::f32, ss}}, [](ir::Builder& b, auto& p) {
      return b.select_and_scatter(p[0], p[1], Comparison::GE, {1, 1, 2, 2}, {1, 1, 2, 2});
    });
    check_vs_evaluator(f, {x, src}, 0);
    const Array fast = run_all(f, {x, src})[0];
    setenv("TLALOC_HOST_ISA", "avx2", 1);
    const Array scalar = run_all(f, {x, src})[0];
    unsetenv("TLALOC_HOST_ISA");
    EXPECT_TRUE(fast.bitwise_equal(scalar));
  }
}

}  // namespace
}  // namespace tlaloc::host_test
