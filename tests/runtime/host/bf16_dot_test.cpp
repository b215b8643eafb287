// The dot_general kernel on bf16 operands with an f32 result (preferred_element_type: what
// --precision bf16 emits): values against f64 sums on the rounded operands, every layout the
// kernel reads (plain, transposed, permuted, batched); a convert from f32 folded into the GEMM
// (read as f32, rounded while packed) gives the bits of the stored bf16 operand; the bits do not
// depend on the thread count; a bf16 result is the f32 one rounded, also when converted back to
// f32 inside the GEMM.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/runtime/host/compile.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;

double bf16(double v) { return bf16_to_f32(f32_to_bf16(float(v))); }

struct Case {
  Shape xs, ws;
  ir::DotDims dims;
};

// f(x, w) = dot(bf16(x), bf16(w)) -> `preferred`; with `bf16_inputs`, x and w are bf16 inputs
// (no convert to fold).
ir::Function program(const Case& c, bool bf16_inputs, std::optional<DType> preferred = DType::f32) {
  ir::Builder b("bf16_dot");
  const DType in = bf16_inputs ? DType::bf16 : DType::f32;
  auto x = b.parameter({in, c.xs}, "x"), w = b.parameter({in, c.ws}, "w");
  if (!bf16_inputs) {
    x = b.convert(x, DType::bf16);
    w = b.convert(w, DType::bf16);
  }
  return b.build({b.dot_general(x, w, c.dims, preferred)});
}

Array to_bf16_array(const Array& a) {
  Array r(DType::bf16, a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) r.data<uint16_t>()[i] = f32_to_bf16(float(a.at(i)));
  return r;
}

std::vector<Array> run(const ir::Function& f, const std::vector<Array>& in, int threads) {
  runtime::host::Options o;
  o.num_threads = threads;
  auto exe = runtime::host::compile(f, o);
  return exe->run(in);
}

TEST(HostBf16Dot, MatchesF64OnRoundedOperandsInEveryLayout) {
  const Case cases[] = {
      {Shape{70, 130}, Shape{130, 45}, {{}, {}, {1}, {0}}},        // x w
      {Shape{130, 70}, Shape{130, 45}, {{}, {}, {0}, {0}}},        // xᵀ w
      {Shape{70, 130}, Shape{45, 130}, {{}, {}, {1}, {1}}},        // x wᵀ
      {Shape{3, 33, 65}, Shape{3, 65, 17}, {{0}, {0}, {2}, {1}}},  // batched
      {Shape{33, 3, 65}, Shape{65, 3, 17}, {{1}, {1}, {2}, {0}}},  // permuted
      // Split over threads (2: pieces of rows with w packed once, or of columns with x).
      {Shape{4, 300, 64}, Shape{64, 1000}, {{}, {}, {2}, {0}}},  // a layer: rows
      {Shape{1200, 64}, Shape{1000, 64}, {{}, {}, {1}, {1}}},    // x wᵀ: rows
      {Shape{2, 100, 64}, Shape{64, 3000}, {{}, {}, {2}, {0}}},  // columns
      {Shape{64, 200}, Shape{64, 3000}, {{}, {}, {0}, {0}}},     // xᵀ w: columns
  };
  for (const Case& c : cases) {
    const Array x = lcg_array(DType::f32, c.xs, 7, -2, 2), w = lcg_array(DType::f32, c.ws, 8);
    const ir::Function folded = program(c, false), unfolded = program(c, true);
    const Array got = run(folded, {x, w}, 1)[0];
    const ir::Function plain = [&] {
      ir::Builder b("f64");
      auto xv = b.parameter({DType::f64, c.xs}), wv = b.parameter({DType::f64, c.ws});
      return b.build({b.dot_general(xv, wv, c.dims)});
    }();
    Array xr(DType::f64, c.xs), wr(DType::f64, c.ws), xa(DType::f64, c.xs), wa(DType::f64, c.ws);
    for (int64_t i = 0; i < x.numel(); ++i) {
      xr.data<double>()[i] = bf16(x.at(i));
      xa.data<double>()[i] = std::abs(bf16(x.at(i)));
    }
    for (int64_t i = 0; i < w.numel(); ++i) {
      wr.data<double>()[i] = bf16(w.at(i));
      wa.data<double>()[i] = std::abs(bf16(w.at(i)));
    }
    const Array want = run_all(plain, {xr, wr})[0], mag = run_all(plain, {xa, wa})[0];
    const int64_t K = c.xs[c.dims.lhs_contract[0]];
    ASSERT_EQ(got.dtype(), DType::f32);
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_NEAR(got.at(i), want.at(i), double(K) * 0x1p-24 * mag.at(i) + 1e-30) << i;
    // The folded convert reads as the stored bf16 operand; two threads give the same bits.
    EXPECT_TRUE(run(unfolded, {to_bf16_array(x), to_bf16_array(w)}, 1)[0].bitwise_equal(got));
    EXPECT_TRUE(run(folded, {x, w}, 2)[0].bitwise_equal(got));
    // A bf16 result (the VJP's dots) is the f32 one rounded to nearest even.
    const Array r16 = run(program(c, false, std::nullopt), {x, w}, 2)[0];
    ASSERT_EQ(r16.dtype(), DType::bf16);
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(r16.at(i), bf16(got.at(i))) << i;
    // Converted back to f32 (autocast's VJP): the same values whether the GEMM writes the convert
    // (the bf16 result's only reader: dot_round_epilogue), the bf16 result is also an output, or
    // an add follows (after the rounding); fused or not, 1 or 2 threads (run_all).
    for (int form = 0; form < 3; ++form) {
      SCOPED_TRACE(form);
      ir::Builder b("bf16_dot_f32");
      auto xv = b.convert(b.parameter({DType::f32, c.xs}), DType::bf16);
      auto wv = b.convert(b.parameter({DType::f32, c.ws}), DType::bf16);
      auto d = b.dot_general(xv, wv, c.dims);
      auto up = b.convert(d, DType::f32);
      auto one = b.constant(Array::filled(DType::f32, b.type(up).shape, 1.0));
      const ir::Function fn = form == 0   ? b.build({up})
                              : form == 1 ? b.build({up, d})
                                          : b.build({b.binary(Op::add, up, one)});
      const Array r32 = run_all(fn, {x, w})[0];
      ASSERT_EQ(r32.dtype(), DType::f32);
      for (int64_t i = 0; i < got.numel(); ++i)
        ASSERT_EQ(r32.at(i), double(float(bf16(got.at(i)) + (form == 2 ? 1.0f : 0.0f)))) << i;
    }
  }
}

// A bf16 result with NaNs (a NaN operand, inf - inf), infinities and values that round up to
// inf converted back to f32: the GEMM's in-place rounding gives the separate convert's bits
// (run_all: fused and not), a quiet NaN where the result is NaN.
TEST(HostBf16Dot, ConvertedResultKeepsNonFiniteBits) {
  const int64_t M = 6, K = 4, N = 40;
  std::vector<double> xv = lcg_doubles(M * K, 41), wv = lcg_doubles(K * N, 42);
  xv[0] = kNaN;      // row 0: NaN
  xv[K] = kInf;      // row 1: ±inf, or NaN where w has both signs
  xv[2 * K] = 3e38;  // row 2: beyond bf16's largest finite once summed
  xv[2 * K + 1] = 3e38;
  ir::Builder b("bf16_dot_nonfinite");
  auto x = b.convert(b.parameter({DType::f32, Shape{M, K}}), DType::bf16);
  auto w = b.convert(b.parameter({DType::f32, Shape{K, N}}), DType::bf16);
  auto up = b.convert(b.dot_general(x, w, {{}, {}, {1}, {0}}), DType::f32);
  const Array r = run_all(b.build({up}), {Array::from_doubles(DType::f32, {M, K}, xv),
                                          Array::from_doubles(DType::f32, {K, N}, wv)})[0];
  for (int64_t j = 0; j < N; ++j) {
    EXPECT_TRUE(std::isnan(r.at(j))) << j;
    EXPECT_FALSE(std::isfinite(r.at(N + j))) << j;
  }
}

TEST(HostBf16Dot, PreferredElementTypeIsCheckedByTheVerifier) {
  ir::Builder b("bad");
  auto x = b.parameter({DType::f32, Shape{2, 3}}), w = b.parameter({DType::f32, Shape{3, 4}});
  EXPECT_THROW(b.dot_general(x, w, {{}, {}, {1}, {0}}, DType::bf16), Error);
  auto xh = b.convert(x, DType::bf16), wh = b.convert(w, DType::bf16);
  EXPECT_THROW(b.dot_general(xh, wh, {{}, {}, {1}, {0}}, DType::f64), Error);
  EXPECT_EQ(b.type(b.dot_general(xh, wh, {{}, {}, {1}, {0}}, DType::f32)).dtype, DType::f32);
}

}  // namespace
}  // namespace tlaloc::host_test
