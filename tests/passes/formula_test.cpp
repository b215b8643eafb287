// Constant folding and the host lane apply the same scalar formula (ops.def's formula column,
// ir/scalar.h): for every elementwise op with one, on every dtype it accepts, the reference
// evaluator and the host kernel give the same bits on random values and edge values (±0, ±inf,
// NaN, subnormals, integer extremes), and so does a program whose operands are constants that
// fold_constants evaluates. Values against an independent oracle are evaluate_test.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/formula.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using ir::Op;

namespace {

// Values of dtype t: edges first, then a spread of ordinary ones.
std::vector<double> sample(DType t, uint64_t seed) {
  std::vector<double> v;
  if (is_floating(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    v = {0.0,    -0.0, 1.0,    -1.0, 0.5,   2.0,  inf,  -inf, std::nan(""), 1e-40,
         -3e-39, 88.7, -103.9, 9.1,  0.625, 1e30, 1e-8, 3.5,  -2.25};
  } else if (t == DType::s32) {
    v = {0, 1, -1, 2, 31, 32, 33, -2147483648.0, 2147483647.0, 7, -7, 100000};
  } else if (t == DType::u32) {
    v = {0, 1, 2, 31, 32, 4294967295.0, 2147483648.0, 7, 100000};
  } else {
    v = {0, 1};
  }
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  while (v.size() < 64) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double u = double(x >> 11) / double(uint64_t(1) << 53);
    v.push_back(is_floating(t)   ? (u - 0.5) * 20
                : t == DType::i1 ? double(u < 0.5)
                                 : std::floor(u * 200) - (t == DType::s32 ? 100 : 0));
  }
  return v;
}

std::vector<DType> accepted(Op op) {
  std::vector<DType> out;
  const int types = ir::op_record(op).dtypes;
  using namespace ir::scalar;
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16})
    if (types & kF) out.push_back(t);
  if (types & kS) out.push_back(DType::s32);
  if (types & kU) out.push_back(DType::u32);
  if (types & kB) out.push_back(DType::i1);
  return out;
}

TEST(Formula, EvaluatorAndHostLaneAgreeBitwise) {
  int checked = 0;
  for (Op op : ir::kAllOps) {
    if (!ir::op_record(op).formula) continue;
    const bool unary = ir::op_kind(op) == ir::OpKind::Unary;
    for (DType t : accepted(op)) {
      SCOPED_TRACE(fmt::format("{} on {}", ir::op_name(op), name(t)));
      const Shape s{64};
      const Array a = Array::from_doubles(t, s, sample(t, 1));
      std::vector<double> bv = sample(t, 2);
      std::rotate(bv.begin(), bv.begin() + 5, bv.end());  // pair edges with other values
      const Array b = Array::from_doubles(t, s, bv);
      ir::Builder fb("f");
      auto x = fb.parameter({t, s}), y = fb.parameter({t, s});
      const ir::Function f = fb.build({unary ? fb.unary(op, x) : fb.binary(op, x, y)});
      const std::vector<Array> in{a, b};
      const Array want = passes::interpret(f, in)[0];
      const Array got = runtime::host::compile(f)->run(in)[0];
      EXPECT_TRUE(got.bitwise_equal(want)) << "host " << describe(got);
      // The same op on constants, folded away.
      ir::Builder cb("folded");
      auto ca = cb.constant(a), cbv = cb.constant(b);
      const ir::Function g =
          passes::simplify(cb.build({unary ? cb.unary(op, ca) : cb.binary(op, ca, cbv)}));
      ASSERT_EQ(g.nodes[size_t(g.results[0])].op, Op::constant);
      EXPECT_TRUE(g.nodes[size_t(g.results[0])].attrs.value->bitwise_equal(got)) << "folded";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
