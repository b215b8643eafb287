// Special functions written as compositions of elementwise ops (StableHLO's core op set has
// no erf), so autodiff, every lane and StableHLO emission handle them without new ops. Their
// gradients are the derivatives of the approximation, from autodiff of the composition.
#pragma once

#include "tlaloc/trace/tensor.h"

namespace tlaloc::trace {

// The error function, elementwise, any float dtype. Abramowitz & Stegun, Handbook of
// Mathematical Functions (1964), formula 7.1.26: for a = |x|, t = 1 / (1 + p·a),
// erf(a) ≈ 1 − (a1·t + a2·t² + a3·t³ + a4·t⁴ + a5·t⁵)·exp(−a²), |error| <= 1.5e-7 (absolute;
// measured 1.4e-7 in f64), with the coefficients divided by their sum (1 − 1e-9) so that
// erf(0) = 0 exactly, extended to x < 0 by oddness. Its derivative (via autodiff) is
// within 7.2e-6 of 2/√π·exp(−x²), largest at x = 0. Finite for every finite x; ±1 at ±inf.
Tensor erf(const Tensor& x);

// GELU, exact (erf) form: x·Φ(x) = 0.5·x·(1 + erf(x/√2)) (Hendrycks & Gimpel 2016;
// torch.nn.GELU(approximate="none")), with erf as above. For x < 0, 1 + erf(x/√2) is formed
// without cancellation (as the A&S tail term). |error| <= 0.75e-7·|x|.
Tensor gelu_erf(const Tensor& x);

}  // namespace tlaloc::trace
