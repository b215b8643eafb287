#include "tlaloc/trace/special.h"

#include <numbers>

namespace tlaloc::trace {
namespace {

// Sign split for odd / even extensions: s = -1 where x < 0, else 1 (no gradient flows
// through s), and a = s·x = |x| whose derivative is s, also at x = 0.
std::pair<Tensor, Tensor> sign_and_abs(const Tensor& x) {
  Tensor s = where(x < 0.0, full_like(x, -1.0), full_like(x, 1.0));
  return {s, s * x};
}

// The A&S 7.1.26 tail term (a1·t + … + a5·t⁵)·exp(−a²) ≈ 1 − erf(a) for a >= 0, divided by
// a1 + … + a5 (= 1 − 1e-9) so that it is exactly 1 at a = 0: erf(0) = 0 and erf is continuous
// there (the published sum leaves a 2e-9 jump at 0); the error bound is unchanged.
Tensor tail(const Tensor& a) {
  constexpr double p = 0.3275911, a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741,
                   a4 = -1.453152027, a5 = 1.061405429, sum = a1 + a2 + a3 + a4 + a5;
  Tensor t = 1.0 / (1.0 + p * a);
  Tensor poly = t * (a1 / sum + t * (a2 / sum + t * (a3 / sum + t * (a4 / sum + t * (a5 / sum)))));
  return poly * exp(-(a * a));
}

}  // namespace

Tensor erf(const Tensor& x) {
  if (!is_floating(x.dtype())) fail("erf: x must be floating, got {}", ir::to_string(x.type()));
  auto [s, a] = sign_and_abs(x);
  return s * (1.0 - tail(a));
}

Tensor gelu_erf(const Tensor& x) {
  if (!is_floating(x.dtype()))
    fail("gelu_erf: x must be floating, got {}", ir::to_string(x.type()));
  Tensor z = x * (1 / std::numbers::sqrt2);
  auto [s, a] = sign_and_abs(z);
  Tensor q = tail(a);                                // 1 - erf(|z|)
  Tensor one_plus_erf = where(z < 0.0, q, 2.0 - q);  // 1 + erf(z)
  return 0.5 * x * one_plus_erf;
}

}  // namespace tlaloc::trace
