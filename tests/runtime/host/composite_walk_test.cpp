// Walks the composite records (ir/composite.h): on every instance a record gives, the host lane
// (the record's kernel, or the decomposition where it has none) equals the reference evaluation
// of the decomposition, with every result compared, and is bitwise the same fused or not, on 1
// or 2 threads. A new composite is covered here without a test of its own.
#include "kernel_test_util.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;

// Every composite and the result op are covered here (the op walk of executable_test.cpp).
const bool kRegistered = [] {
  for (Op op : ir::kAllOps)
    if (ir::is_composite(op) || op == Op::result) tested_ops().insert(op);
  return true;
}();

// Inputs for an instance: floats in the example's ranges, integers in [int_lo, int_hi), i1
// alternating, starting with !flip (so a scalar predicate is tried both ways).
std::vector<Array> inputs(const ir::CompositeExample& e, uint64_t seed, bool flip) {
  std::vector<Array> in;
  for (size_t k = 0; k < e.operands.size(); ++k) {
    const ir::TensorType& t = e.operands[k];
    if (is_floating(t.dtype)) {
      in.push_back(lcg_array(t.dtype, t.shape, seed++, e.range(k)[0], e.range(k)[1]));
      continue;
    }
    std::vector<double> v = lcg_doubles(t.shape.numel(), seed++, 0, 1);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = t.dtype == DType::i1
                 ? double((i % 3 != 1) != flip)
                 : std::floor(double(e.int_lo) + v[i] * double(e.int_hi - e.int_lo));
    in.push_back(Array::from_doubles(t.dtype, t.shape, v));
  }
  return in;
}

TEST(HostKernel, composites_match_their_decompositions) {
  for (Op op : ir::kAllOps) {
    if (!ir::is_composite(op)) continue;
    const ir::Composite& c = ir::composite(op);
    ASSERT_TRUE(c.examples) << c.name << " gives no instances for the walking tests";
    uint64_t seed = 1;
    for (const ir::CompositeExample& e : c.examples()) {
      ir::Builder b("instance");
      std::vector<ir::ValueId> p;
      for (const ir::TensorType& t : e.operands) p.push_back(b.parameter(t));
      const ir::Function f = b.build(b.composite(op, p, e.attrs.params));
      for (bool flip : {false, true}) {
        SCOPED_TRACE(std::string(c.name) + (flip ? " (i1 inputs flipped)" : ""));
        const std::vector<Array> in = inputs(e, seed, flip);
        const std::vector<Array> got = run_all(f, in);
        const std::vector<Array> want = passes::interpret(passes::expand_composites(f), in);
        ASSERT_EQ(got.size(), want.size());
        for (size_t r = 0; r < got.size(); ++r) {
          const double tol = got[r].dtype() == DType::f64 ? 1e-11 : 2e-5;
          expect_values(got[r], want[r].to_doubles(), tol);
        }
      }
      seed += 10;
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
