// reduce and dot_general against naive f64 loops written here.
#include <numeric>

#include "kernel_test_util.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/rewrite.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;

std::vector<double> pseudo(int64_t n, uint32_t seed) {
  std::vector<double> v;
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v.push_back(double(int32_t(s >> 8) % 2001 - 1000) / 256.0);  // exact in bf16? no; in f32 yes
  }
  return v;
}

// Naive reduce over `dims` of a row-major array with shape s.
std::vector<double> naive_reduce(const std::vector<double>& x, const Shape& s,
                                 const std::vector<int64_t>& dims, ir::ReduceKind k, double init) {
  Shape os;
  for (int64_t d = 0; d < s.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) os.dims.push_back(s[d]);
  std::vector<double> out(size_t(os.numel()), init);
  auto st = s.strides();
  auto ost = os.strides();
  for (int64_t i = 0; i < s.numel(); ++i) {
    int64_t o = 0, od = 0;
    for (int64_t d = 0; d < s.rank(); ++d) {
      int64_t c = (i / st[size_t(d)]) % s[d];
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) o += c * ost[size_t(od++)];
    }
    double& a = out[size_t(o)];
    double v = x[size_t(i)];
    if (k == ir::ReduceKind::sum) a += v;
    if (k == ir::ReduceKind::max) a = std::isnan(a) || std::isnan(v) ? kNaN : std::max(a, v);
    if (k == ir::ReduceKind::min) a = std::isnan(a) || std::isnan(v) ? kNaN : std::min(a, v);
  }
  return out;
}

void check_reduce(DType dt, const Shape& s, const std::vector<int64_t>& dims, ir::ReduceKind k,
                  double tol) {
  SCOPED_TRACE(
      fmt::format("reduce {} {}{} over {}", ir::name(k), name(dt), to_string(s), dims.size()));
  Array x = Array::from_doubles(dt, s, pseudo(s.numel(), uint32_t(s.numel() + dims.size())));
  double init = k == ir::ReduceKind::sum ? 0 : k == ir::ReduceKind::max ? -kInf : kInf;
  if (is_integer(dt) && k == ir::ReduceKind::max) init = dt == DType::s32 ? INT32_MIN : 0;
  if (is_integer(dt) && k == ir::ReduceKind::min)
    init = dt == DType::s32 ? INT32_MAX : 4294967295.0;
  auto want = naive_reduce(x.to_doubles(), s, dims, k, init);
  for (auto& w : want) w = round_to(dt, w);
  auto f = one_op({{dt, s}}, [&](ir::Builder& b, auto& p) { return b.reduce(p[0], k, dims); });
  expect_values(run_all(f, {x})[0], want, tol);
}

KERNEL_TEST(reduce, kinds_layouts_dtypes) {
  using K = ir::ReduceKind;
  for (K k : {K::sum, K::max, K::min}) {
    double tol = k == K::sum ? 1e-5 : 0;
    check_reduce(DType::f32, {4, 6}, {1}, k, tol);        // rows
    check_reduce(DType::f32, {4, 6}, {0}, k, tol);        // columns
    check_reduce(DType::f32, {3, 4, 5}, {0, 2}, k, tol);  // non-adjacent: transposed first
    check_reduce(DType::f64, {2, 3, 4}, {1}, k, k == K::sum ? 1e-12 : 0);
    check_reduce(DType::f32, {20000}, {0}, k, tol);     // chunked full reduction
    check_reduce(DType::f32, {3, 20001}, {1}, k, tol);  // chunked rows
    check_reduce(DType::bf16, {5, 7}, {1}, k, k == K::sum ? 1e-2 : 0);
    check_reduce(DType::f16, {5, 7}, {0, 1}, k, k == K::sum ? 2e-3 : 0);
  }
  // Integers: exact; sums wrap.
  Array xi = Array::from<int32_t>({2, 3}, {1, -5, 7, 2147483647, 1, 0});
  auto fs = one_op({{DType::s32, {2, 3}}},
                   [](ir::Builder& b, auto& p) { return b.reduce(p[0], K::sum, {1}); });
  expect_values(run_all(fs, {xi})[0], {3, double(INT32_MIN)});
  auto fm = one_op({{DType::s32, {2, 3}}},
                   [](ir::Builder& b, auto& p) { return b.reduce(p[0], K::max, {0}); });
  expect_values(run_all(fm, {xi})[0], {2147483647, 1, 7});
  auto fu = one_op({{DType::u32, {3}}},
                   [](ir::Builder& b, auto& p) { return b.reduce(p[0], K::min, {0}); });
  expect_values(run_all(fu, {Array::from<uint32_t>({3}, {9, 4, 4000000000u})})[0], {4});
  // NaN propagates through max / min; empty reductions give the init.
  auto fn = one_op({{DType::f32, {3}}},
                   [](ir::Builder& b, auto& p) { return b.reduce(p[0], K::max, {0}); });
  expect_values(run_all(fn, {Array::from<float>({3}, {1, float(kNaN), 2})})[0], {kNaN});
  for (K k : {K::sum, K::max, K::min}) {
    auto fe = one_op({{DType::f32, {2, 0}}},
                     [&](ir::Builder& b, auto& p) { return b.reduce(p[0], k, {1}); });
    double init = k == K::sum ? 0 : k == K::max ? -kInf : kInf;
    expect_values(run_all(fe, {Array(DType::f32, {2, 0})})[0], {init, init});
  }
}

// Row sums of f32 / f64 in the reduce kernel's documented order, computed here in the dtype's
// own arithmetic: element r of each kReduceChunk-element chunk of a row is added to lane r % 16,
// the 16 lanes fold pairwise (l += l + 8, then + 4, + 2, + 1), chunk partials fold in order.
template <class T>
std::vector<double> ordered_row_sums(const std::vector<double>& x, int64_t rows, int64_t len) {
  constexpr int64_t kChunkElems = 8192;
  std::vector<double> out;
  for (int64_t a = 0; a < rows; ++a) {
    T total = 0;
    for (int64_t c0 = 0; c0 < std::max<int64_t>(len, 1); c0 += kChunkElems) {
      T lane[16] = {};
      for (int64_t r = c0; r < std::min(len, c0 + kChunkElems); ++r)
        lane[(r - c0) % 16] += T(x[size_t(a * len + r)]);
      for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
      total = c0 == 0 ? lane[0] : total + lane[0];
    }
    out.push_back(double(total));
  }
  return out;
}

// Row reductions read several chunks of a thread's range at once (reduce.cpp); the ranges here
// split into parts of unequal sizes, mix rows with chunk tails, and span both threads. Sums must
// equal the documented order bitwise (values of mixed magnitude, so another order would
// round differently); integer sums, max and min are exact.
TEST(HostReduce, RowReductionsReadingChunksAtOnceKeepTheOrder) {
  using K = ir::ReduceKind;
  for (Shape s :
       {Shape{3, 5 * 8192 + 37}, Shape{1, 13 * 8192 + 5}, Shape{7, 8192}, Shape{2, 100}}) {
    SCOPED_TRACE(to_string(s));
    std::vector<double> xv = pseudo(s.numel(), uint32_t(s.numel()));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] *= double(int64_t(1) << (i * 7 % 23));
    for (DType dt : {DType::f32, DType::f64}) {
      Array x = Array::from_doubles(dt, s, xv);
      auto f =
          one_op({{dt, s}}, [](ir::Builder& b, auto& p) { return b.reduce(p[0], K::sum, {1}); });
      auto want = dt == DType::f32 ? ordered_row_sums<float>(x.to_doubles(), s[0], s[1])
                                   : ordered_row_sums<double>(x.to_doubles(), s[0], s[1]);
      expect_values(run_all(f, {x})[0], want);
    }
    std::vector<double> iv(xv.size());
    for (size_t i = 0; i < iv.size(); ++i)
      iv[i] = double(int64_t(i * 2654435761u % 2000001) - 1000000);
    iv.back() = 2147483647;  // the last row's sum wraps past INT32_MAX when positive
    Array xi = Array::from_doubles(DType::s32, s, iv);
    std::vector<double> sums, maxs, mins;
    for (int64_t a = 0; a < s[0]; ++a) {
      int64_t sum = 0;
      double mx = -kInf, mn = kInf;
      for (int64_t r = 0; r < s[1]; ++r) {
        double v = iv[size_t(a * s[1] + r)];
        sum += int64_t(v);
        mx = std::max(mx, v);
        mn = std::min(mn, v);
      }
      sums.push_back(double(int32_t(uint32_t(uint64_t(sum)))));
      maxs.push_back(mx);
      mins.push_back(mn);
    }
    for (auto [k, want] : {std::pair{K::sum, sums}, {K::max, maxs}, {K::min, mins}}) {
      auto f = one_op({{DType::s32, s}},
                      [k](ir::Builder& b, auto& p) { return b.reduce(p[0], k, {1}); });
      expect_values(run_all(f, {xi})[0], want);
    }
  }
}

// Column sums and maxima over the leading rows of [64, 520] and [4, 16, 520] (a bias gradient's
// shape; 2 threads split the 520 columns in runs of 16, the last run 8 wide): each column folded
// over its rows in order in f32, computed here in float, so every bit must match.
KERNEL_TEST(reduce, column_folds_split_over_threads) {
  const int64_t R = 64, C = 520;
  const std::vector<double> x = pseudo(R * C, 5);
  std::vector<double> sums, maxs;
  for (int64_t c = 0; c < C; ++c) {
    float s = 0, m = -INFINITY;
    for (int64_t r = 0; r < R; ++r) {
      s += float(x[size_t(r * C + c)]);
      m = std::max(m, float(x[size_t(r * C + c)]));
    }
    sums.push_back(s);
    maxs.push_back(m);
  }
  for (const Shape& s : {Shape{R, C}, Shape{4, 16, C}}) {
    const std::vector<int64_t> dims =
        s.rank() == 2 ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 1};
    Array a = Array::from_doubles(DType::f32, s, x);
    for (auto [k, want] : {std::pair{ir::ReduceKind::sum, sums}, {ir::ReduceKind::max, maxs}}) {
      auto f = one_op({{DType::f32, s}},
                      [&](ir::Builder& b, auto& p) { return b.reduce(p[0], k, dims); });
      expect_values(run_all(f, {a})[0], want);
    }
  }
}

// A full reduction fused into the group of an empty operand (sum, max and min of exponential over
// [0, 5]) is its init value (0, -inf, inf), not what an earlier reduction left in the scratch: the
// program first sums a non-empty input.
KERNEL_TEST(reduce, fused_over_an_empty_operand_is_its_init) {
  const std::vector<ir::TensorType> types = {{DType::f32, {1000}}, {DType::f32, {0, 5}}};
  ir::Builder b("empty_reduce");
  auto x = b.parameter(types[0]), y = b.parameter(types[1]);
  std::vector<ir::ValueId> out = {b.reduce(b.unary(Op::exponential, x), ir::ReduceKind::sum, {0})};
  for (auto k : {ir::ReduceKind::sum, ir::ReduceKind::max, ir::ReduceKind::min})
    out.push_back(b.reduce(b.unary(Op::exponential, y), k, {0, 1}));
  const std::vector<Array> got =
      run_all(b.build(out), {lcg_array(DType::f32, {1000}, 3), Array(DType::f32, {0, 5})});
  expect_values(got[1], {0.0});
  expect_values(got[2], {-kInf});
  expect_values(got[3], {kInf});
}

// A full reduction of a concatenation (the train step's found-inf over every gradient) is
// reduced piece by piece inside each piece's producer (rewrite.h): sum, max and min of
// exp(x) ++ [] ++ 2·y ++ z by hand, an inf and a NaN piece, and the concatenation also read
// elsewhere.
KERNEL_TEST(reduce, of_a_concatenation_piece_by_piece) {
  const std::vector<ir::TensorType> types = {
      {DType::f32, {2, 2}}, {DType::f32, {0}}, {DType::f32, {3}}, {DType::f32, {1}}};
  ir::Builder b("found_inf_like");
  std::vector<ir::ValueId> p;
  for (const auto& t : types) p.push_back(b.parameter(t));
  auto two = b.broadcast_in_dim(b.scalar(DType::f32, 2.0), {3}, {});
  auto all = b.concatenate({b.reshape(b.unary(Op::exponential, p[0]), {4}), p[1],
                            b.binary(Op::multiply, p[2], two), p[3]},
                           0);
  std::vector<ir::ValueId> out;
  for (auto k : {ir::ReduceKind::sum, ir::ReduceKind::max, ir::ReduceKind::min})
    out.push_back(b.reduce(all, k, {0}));
  const ir::Function f = b.build(out);
  int reduces = 0;  // 4 pieces for each of the 3 reductions
  for (const ir::Node& n : runtime::host::split_reductions_of_concatenations(f).nodes)
    reduces += n.op == Op::reduce;
  EXPECT_EQ(reduces, 12);
  auto inputs = [](float last) {
    return std::vector<Array>{Array::from<float>({2, 2}, {0, 0, 0, 0}), Array(DType::f32, {0}),
                              Array::from<float>({3}, {1, -3, 4}), Array::from<float>({1}, {last})};
  };
  // exp(0) x 4 = 1, 1, 1, 1; 2, -6, 8; 0.5: sum 8.5, max 8, min -6.
  std::vector<Array> got = run_all(f, inputs(0.5f));
  expect_values(got[0], {8.5});
  expect_values(got[1], {8});
  expect_values(got[2], {-6});
  got = run_all(f, inputs(kInf));
  expect_values(got[0], {kInf});
  expect_values(got[1], {kInf});
  got = run_all(f, inputs(std::nanf("")));
  expect_values(got[0], {kNaN});
  // The concatenation itself as an output too.
  const ir::Function g = b.build({out[0], all});
  got = run_all(g, inputs(0.5f));
  expect_values(got[0], {8.5});
  expect_values(got[1], {1, 1, 1, 1, 2, -6, 8, 0.5});
}

// A 16-bit reduction of a concatenation keeps its one rounding: the reduce kernel sums bf16 /
// f16 in f32 and rounds once, so pieces reduced (and rounded) apart, then added in bf16, would
// differ. bf16 [256, 1] ++ [1]: 258 exactly (256 + 1 alone rounds to 256, then + 1 to 256 again).
KERNEL_TEST(reduce, of_a_16_bit_concatenation_rounds_once) {
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(name(dt));
    const double big = dt == DType::bf16 ? 256 : 2048;  // where the spacing is 2
    ir::Builder b("sum16");
    auto x = b.parameter({dt, {2}});
    auto y = b.parameter({dt, {1}});
    auto all = b.concatenate({x, y}, 0);
    const ir::Function f = b.build({b.reduce(all, ir::ReduceKind::sum, {0})});
    const std::vector<Array> in = {Array::from_doubles(dt, {2}, {big, 1}),
                                   Array::from_doubles(dt, {1}, {1})};
    expect_values(passes::interpret(f, in)[0], {big + 2});
    expect_values(run_all(f, in)[0], {big + 2});
  }
}

std::vector<double> naive_dot(const Array& l, const Array& r, const ir::DotDims& d,
                              const Shape& os);

// A Linear's -(x·Wᵀ + b) (the bias an input broadcast along the rows): the GEMM adds the bias to
// each tile (dot_add_bias), bitwise what the unfused dot then add give (run_all: fuse on / off,
// 1 / 2 threads), and near the f64 sum; f32 with tlaloc's GEMM ([64, 128] x [512, 128]ᵀ split
// over threads; 45 columns, a masked edge panel, and K 300, two K blocks), OpenBLAS's (K > 512),
// K = 0, f64, and b + x·Wᵀ with the operands swapped.
KERNEL_TEST(dot_general, bias_epilogue) {
  struct Case {
    DType dt;
    int64_t M, N, K;
    bool bias_first;
  };
  for (const Case& c : {Case{DType::f32, 64, 512, 128, false}, Case{DType::f32, 37, 45, 300, true},
                        Case{DType::f32, 7, 20, 600, true}, Case{DType::f32, 6, 33, 0, false},
                        Case{DType::f64, 5, 9, 13, false}}) {
    SCOPED_TRACE(fmt::format("{} [{}, {}] x [{}, {}]ᵀ", name(c.dt), c.M, c.K, c.N, c.K));
    Array x = Array::from_doubles(c.dt, {c.M, c.K}, pseudo(c.M * c.K, 21));
    Array w = Array::from_doubles(c.dt, {c.N, c.K}, pseudo(c.N * c.K, 22));
    Array b = Array::from_doubles(c.dt, {c.N}, pseudo(c.N, 23));
    auto f = one_op({{c.dt, {c.M, c.K}}, {c.dt, {c.N, c.K}}, {c.dt, {c.N}}},
                    [&](ir::Builder& bl, auto& p) {
                      auto y = bl.dot_general(p[0], p[1], {{}, {}, {1}, {1}});
                      auto bb = bl.broadcast_in_dim(p[2], {c.M, c.N}, {1});
                      auto s = c.bias_first ? bl.binary(Op::add, bb, y) : bl.binary(Op::add, y, bb);
                      return bl.unary(Op::negate, s);  // the add not a result: fusable
                    });
    std::vector<double> want = naive_dot(x, w, {{}, {}, {1}, {1}}, Shape{c.M, c.N});
    for (int64_t i = 0; i < c.M * c.N; ++i) want[size_t(i)] = -(want[size_t(i)] + b.at(i % c.N));
    expect_values(run_all(f, {x, w, b})[0], want, c.dt == DType::f64 ? 1e-12 : 1e-4);
  }
}

// Matrix addends folded into GEMMs (dot_add_epilogue): -(((x·Wᵀ + b) + r)) with r an input,
// -((x·Wᵀ + r) + b) (the bias after the matrix: only the first add folds), and a gradient-sum
// shape, -(x·Wᵀ + y·Vᵀ + r): bitwise the unfused adds (run_all) and near the f64 sums, f32 on
// tlaloc's GEMM (split over threads, masked edge panel) and f64.
KERNEL_TEST(dot_general, addend_epilogue) {
  for (auto [dt, M, N, K] : {std::tuple{DType::f32, int64_t(64), int64_t(128), int64_t(128)},
                             std::tuple{DType::f32, int64_t(37), int64_t(45), int64_t(300)},
                             std::tuple{DType::f64, int64_t(5), int64_t(9), int64_t(13)}}) {
    SCOPED_TRACE(fmt::format("{} [{}, {}] x [{}, {}]ᵀ", name(dt), M, K, N, K));
    Array x = Array::from_doubles(dt, {M, K}, pseudo(M * K, 31));
    Array w = Array::from_doubles(dt, {N, K}, pseudo(N * K, 32));
    Array y = Array::from_doubles(dt, {M, K}, pseudo(M * K, 33));
    Array v = Array::from_doubles(dt, {N, K}, pseudo(N * K, 34));
    Array b = Array::from_doubles(dt, {N}, pseudo(N, 35));
    Array r = Array::from_doubles(dt, {M, N}, pseudo(M * N, 36));
    const ir::DotDims nt{{}, {}, {1}, {1}};
    const std::vector<double> xw = naive_dot(x, w, nt, Shape{M, N}),
                              yv = naive_dot(y, v, nt, Shape{M, N});
    std::vector<ir::TensorType> types{{dt, {M, K}}, {dt, {N, K}}, {dt, {M, K}},
                                      {dt, {N, K}}, {dt, {N}},    {dt, {M, N}}};
    for (int form = 0; form < 3; ++form) {
      SCOPED_TRACE(form);
      auto f = one_op(types, [&](ir::Builder& bl, auto& p) {
        auto add = [&](ir::ValueId a, ir::ValueId c) { return bl.binary(Op::add, a, c); };
        auto bb = bl.broadcast_in_dim(p[4], {M, N}, {1});
        auto d = bl.dot_general(p[0], p[1], nt);
        ir::ValueId s = form == 0   ? add(add(d, bb), p[5])
                        : form == 1 ? add(add(d, p[5]), bb)
                                    : add(add(d, bl.dot_general(p[2], p[3], nt)), p[5]);
        return bl.unary(Op::negate, s);
      });
      std::vector<double> want;
      for (int64_t i = 0; i < M * N; ++i)
        want.push_back(-(xw[size_t(i)] + (form == 2 ? yv[size_t(i)] : b.at(i % N)) + r.at(i)));
      expect_values(run_all(f, {x, w, y, v, b, r})[0], want, dt == DType::f64 ? 1e-12 : 1e-4);
    }
  }
}

// Naive dot_general: result dims = batch, lhs free (ascending), rhs free (ascending).
std::vector<double> naive_dot(const Array& l, const Array& r, const ir::DotDims& d,
                              const Shape& os) {
  const Shape &ls = l.shape(), &rs = r.shape();
  auto free_dims = [](const Shape& s, const std::vector<int64_t>& b,
                      const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < s.rank(); ++i)
      if (std::find(b.begin(), b.end(), i) == b.end() &&
          std::find(c.begin(), c.end(), i) == c.end())
        f.push_back(i);
    return f;
  };
  auto lf = free_dims(ls, d.lhs_batch, d.lhs_contract),
       rf = free_dims(rs, d.rhs_batch, d.rhs_contract);
  int64_t K = 1;
  for (int64_t c : d.lhs_contract) K *= ls[c];
  auto lv = l.to_doubles(), rv = r.to_doubles();
  auto lst = ls.strides(), rst = rs.strides(), ost = os.strides();
  std::vector<double> out;
  for (int64_t o = 0; o < os.numel(); ++o) {
    std::vector<int64_t> oc;
    for (int64_t i = 0; i < os.rank(); ++i) oc.push_back((o / ost[size_t(i)]) % os[i]);
    int64_t lo = 0, ro = 0;
    size_t at = 0;
    for (size_t i = 0; i < d.lhs_batch.size(); ++i, ++at) {
      lo += oc[at] * lst[size_t(d.lhs_batch[i])];
      ro += oc[at] * rst[size_t(d.rhs_batch[i])];
    }
    for (int64_t f : lf) lo += oc[at++] * lst[size_t(f)];
    for (int64_t f : rf) ro += oc[at++] * rst[size_t(f)];
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      int64_t rem = k, lk = 0, rk = 0;
      for (size_t c = d.lhs_contract.size(); c-- > 0;) {
        int64_t n = ls[d.lhs_contract[c]], ci = rem % n;
        rem /= n;
        lk += ci * lst[size_t(d.lhs_contract[c])];
        rk += ci * rst[size_t(d.rhs_contract[c])];
      }
      acc += lv[size_t(lo + lk)] * rv[size_t(ro + rk)];
    }
    out.push_back(acc);
  }
  return out;
}

void check_dot(DType dt, const Shape& ls, const Shape& rs, const ir::DotDims& d, double tol) {
  SCOPED_TRACE(fmt::format("dot {} {} x {}", name(dt), to_string(ls), to_string(rs)));
  Array l = Array::from_doubles(dt, ls, pseudo(ls.numel(), 7)),
        r = Array::from_doubles(dt, rs, pseudo(rs.numel(), 11));
  auto f = one_op({{dt, ls}, {dt, rs}},
                  [&](ir::Builder& b, auto& p) { return b.dot_general(p[0], p[1], d); });
  auto out = run_all(f, {l, r});
  auto want = naive_dot(l, r, d, out[0].shape());
  for (auto& w : want) w = round_to(dt, w);
  expect_values(out[0], want, tol);
}

KERNEL_TEST(dot_general, layouts_batches_dtypes) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    double tol = dt == DType::f64   ? 1e-12
                 : dt == DType::f32 ? 1e-5
                 : dt == DType::f16 ? 2e-3
                                    : 1e-2;
    check_dot(dt, {2, 3}, {3, 4}, {{}, {}, {1}, {0}}, tol);              // [M,K] x [K,N]
    check_dot(dt, {3, 2}, {3, 4}, {{}, {}, {0}, {0}}, tol);              // lhs transposed
    check_dot(dt, {2, 3}, {4, 3}, {{}, {}, {1}, {1}}, tol);              // rhs transposed
    check_dot(dt, {3, 2}, {4, 3}, {{}, {}, {0}, {1}}, tol);              // both
    check_dot(dt, {2, 3, 4}, {2, 4, 5}, {{0}, {0}, {2}, {1}}, tol);      // batched
    check_dot(dt, {3, 2, 4}, {4, 5, 2}, {{1}, {2}, {2}, {0}}, tol);      // batch dims elsewhere
    check_dot(dt, {2, 3, 4}, {3, 4, 5}, {{}, {}, {1, 2}, {0, 1}}, tol);  // two contracting dims
    check_dot(dt, {2, 3, 4}, {4, 5, 3}, {{}, {}, {2, 1}, {0, 2}}, tol);  // permuted contracting
    check_dot(dt, {2, 2, 3, 4}, {2, 2, 5, 4}, {{0, 1}, {0, 1}, {3}, {3}}, tol);  // attention q.k^T
    check_dot(dt, {5}, {5}, {{}, {}, {0}, {0}}, tol);                            // inner product
    check_dot(dt, {2}, {3}, {{}, {}, {}, {}}, tol);                              // outer product
  }
  check_dot(DType::f32, {2, 0}, {0, 3}, {{}, {}, {1}, {0}}, 0);  // K = 0 gives zeros
  check_dot(DType::f32, {64, 96}, {96, 80}, {{}, {}, {1}, {0}}, 1e-5);
  // From 2^20 multiply-adds a GEMM is split into tiles (2, then up to 8 from 2^24 on), run
  // on both threads: the benchmark LM's MLP shapes (x W^T, dW = dY^T X) and a 3-tile one.
  check_dot(DType::f32, {64, 128}, {512, 128}, {{}, {}, {1}, {1}}, 1e-5);
  check_dot(DType::f32, {64, 128}, {64, 512}, {{}, {}, {0}, {0}}, 1e-5);
  check_dot(DType::f32, {400, 400}, {400, 400}, {{}, {}, {1}, {0}}, 1e-5);
  // tlaloc's packed GEMM past its blocks: K over two 256-deep blocks (rhs [N, K]), and N over
  // two 256-column blocks split by columns over threads.
  check_dot(DType::f32, {37, 300}, {45, 300}, {{}, {}, {1}, {1}}, 1e-5);
  check_dot(DType::f32, {64, 64}, {64, 600}, {{}, {}, {1}, {0}}, 1e-5);
}

// Full reductions of an elementwise expression run inside the fused loop (chunked lanes); the
// result must equal the unfused reduce kernel bitwise (run_all) and the naive f64 value.
TEST(HostReduce, FusedWithElementwiseProducer) {
  using K = ir::ReduceKind;
  for (int64_t n : {int64_t(5), int64_t(8192), int64_t(20001), int64_t(70000)}) {
    for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::s32}) {
      SCOPED_TRACE(fmt::format("n={} {}", n, name(dt)));
      auto f = one_op({{dt, {n}}, {dt, {n}}}, [&](ir::Builder& b, auto& p) {
        auto sq = b.binary(Op::multiply, p[0], p[0]);
        auto s = b.reduce(sq, K::sum, {0});
        auto mx = b.reduce(b.binary(Op::subtract, sq, p[1]), K::max, {0});
        auto mn = b.reduce(p[1], K::min, {0});  // a reduce of a stored input: not fused
        return b.binary(Op::add, b.binary(Op::add, s, mx), mn);
      });
      auto xv = pseudo(n, uint32_t(n)), yv = pseudo(n, uint32_t(n + 1));
      if (dt == DType::s32)
        for (auto* v : {&xv, &yv})
          for (auto& e : *v) e = std::round(e * 4);
      Array x = Array::from_doubles(dt, {n}, xv), y = Array::from_doubles(dt, {n}, yv);
      auto xs = x.to_doubles(), ys = y.to_doubles();
      double s = 0, mx = -kInf, mn = kInf;
      for (int64_t i = 0; i < n; ++i) {
        double sq = round_to(dt, xs[size_t(i)] * xs[size_t(i)]);
        s += sq;
        mx = std::max(mx, round_to(dt, sq - ys[size_t(i)]));
        mn = std::min(mn, ys[size_t(i)]);
      }
      double want = round_to(dt, round_to(dt, round_to(dt, s) + mx) + mn);
      expect_values(run_all(f, {x, y})[0], {want}, dt == DType::bf16 ? 2e-2 : 1e-5);
    }
  }
  // One-element loops: the reduce's result is used by an op of the same size (and reduced again).
  auto h = one_op({{DType::f32, {1}}}, [](ir::Builder& b, auto& p) {
    auto y = b.binary(Op::multiply, p[0], p[0]);
    auto s = b.reduce(y, K::sum, {0});
    auto s2 = b.reduce(s, K::max, {});
    auto t = b.binary(Op::add, b.reshape(y, {}), s);
    return b.binary(Op::add, t, s2);
  });
  expect_values(run_all(h, {Array::from<float>({1}, {3})})[0], {27});
  // A fused reduce whose result feeds the same expression again (softmax-style): the loop must
  // close before the broadcast reads it.
  auto g = one_op({{DType::f32, {3000}}}, [](ir::Builder& b, auto& p) {
    auto e = b.unary(Op::exponential, p[0]);
    auto z = b.reduce(e, K::sum, {0});
    return b.binary(Op::divide, e, b.broadcast_in_dim(z, {3000}, {}));
  });
  auto xv = pseudo(3000, 21);
  double z = 0;
  for (double v : xv) z += std::exp(v);
  std::vector<double> want;
  for (double v : xv) want.push_back(std::exp(v) / z);
  expect_values(run_all(g, {Array::from_doubles(DType::f32, {3000}, xv)})[0], want, 1e-5);
}

// Transposes around dots are folded into CBLAS flags / operand swaps at compile time; the
// results must equal the naive evaluation of the unfolded program.
TEST(HostDot, TransposesFoldedIntoDots) {
  Array x = Array::from_doubles(DType::f32, {5, 3}, pseudo(15, 3)),
        y = Array::from_doubles(DType::f32, {5, 4}, pseudo(20, 5));
  // dot(transpose(x), y): [3,5] x [5,4]
  auto f = one_op({{DType::f32, {5, 3}}, {DType::f32, {5, 4}}}, [](ir::Builder& b, auto& p) {
    return b.dot_general(b.transpose(p[0], {1, 0}), p[1], {{}, {}, {1}, {0}});
  });
  auto want = naive_dot(x, y, {{}, {}, {0}, {0}}, {3, 4});
  expect_values(run_all(f, {x, y})[0], want, 1e-5);
  // transpose(dot(x^T, y)) = y^T x: [4,3].
  auto g = one_op({{DType::f32, {5, 3}}, {DType::f32, {5, 4}}}, [](ir::Builder& b, auto& p) {
    auto d = b.dot_general(p[0], p[1], {{}, {}, {0}, {0}});
    return b.transpose(d, {1, 0});
  });
  auto want_t = naive_dot(y, x, {{}, {}, {0}, {0}}, {4, 3});
  expect_values(run_all(g, {x, y})[0], want_t, 1e-5);
  // Batched: transpose(dot) with batch dims kept in front; operand transpose that reorders
  // free dims is not folded (still correct).
  Array a = Array::from_doubles(DType::f64, {2, 3, 4}, pseudo(24, 9)),
        c = Array::from_doubles(DType::f64, {2, 4, 5}, pseudo(40, 13));
  auto h = one_op({{DType::f64, {2, 3, 4}}, {DType::f64, {2, 4, 5}}}, [](ir::Builder& b, auto& p) {
    auto d = b.dot_general(p[0], p[1], {{0}, {0}, {2}, {1}});
    return b.transpose(d, {0, 2, 1});
  });
  auto wd = naive_dot(c, a, {{0}, {0}, {1}, {2}}, {2, 5, 3});
  expect_values(run_all(h, {a, c})[0], wd, 1e-12);
  Array q = Array::from_doubles(DType::f32, {2, 3, 4}, pseudo(24, 17));
  auto k = one_op({{DType::f32, {2, 3, 4}}, {DType::f32, {4, 2}}}, [](ir::Builder& b, auto& p) {
    return b.dot_general(b.transpose(p[0], {1, 0, 2}), p[1], {{}, {}, {2}, {0}});  // [3,2,2]
  });
  Array w = Array::from_doubles(DType::f32, {4, 2}, pseudo(8, 19));
  auto qt = q.to_doubles();
  std::vector<double> tq;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int l = 0; l < 4; ++l) tq.push_back(qt[size_t(j * 12 + i * 4 + l)]);
  auto wk =
      naive_dot(Array::from_doubles(DType::f32, {3, 2, 4}, tq), w, {{}, {}, {2}, {0}}, {3, 2, 2});
  expect_values(run_all(k, {q, w})[0], wk, 1e-5);
}

}  // namespace
}  // namespace tlaloc::host_test
