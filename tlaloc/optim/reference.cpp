// The host reference step: the formulas of optimizer.h, element by element in f64. This is the
// oracle the in-program update is tested against, so it shares no code with update.cpp.
#include <cmath>
#include <cstdint>
#include <limits>

#include "tlaloc/optim/optimizer.h"

namespace tlaloc::optim {

namespace {
using Vec = std::vector<double>;

void store(Array& a, const Vec& v) { a = Array::from_doubles(a.dtype(), a.shape(), v); }

void check_state(const StateLayout& layout, std::span<Array> state) {
  if (int(state.size()) != layout.size())
    fail("reference_step: {} state tensors, the optimizer keeps {}", state.size(), layout.size());
  for (int i = 0; i < layout.size(); ++i) {
    const StateSlot& s = layout.slots[size_t(i)];
    const Array& a = state[size_t(i)];
    if (a.dtype() != s.type.dtype || a.shape() != s.type.shape)
      fail("reference_step: state '{}' is {}, expected {}", s.name, describe(a), to_string(s.type));
  }
}

struct Hyper {
  double lr, wd;
};

void sgd_update(const SGD& o, Hyper h, bool first, Vec& p, Vec g, Vec* buf) {
  for (size_t i = 0; i < p.size(); ++i) {
    double d = (o.maximize ? -g[i] : g[i]) + h.wd * p[i];
    if (buf) {
      double& b = (*buf)[i];
      b = first ? d : o.momentum * b + (1 - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * b : b;
    }
    p[i] -= h.lr * d;
  }
}

template <class A>
void adam_update(const A& o, bool decoupled, Hyper h, int64_t t, Vec& p, const Vec& g, Vec& m,
                 Vec& v, Vec* vmax) {
  const double b1 = o.betas[0], b2 = o.betas[1];
  const double bc1 = 1 - std::pow(b1, double(t)), bc2 = 1 - std::pow(b2, double(t));
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = o.maximize ? -g[i] : g[i];
    if (decoupled)
      p[i] *= 1 - h.lr * h.wd;
    else
      gi += h.wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    double vi = v[i];
    if (vmax) vi = (*vmax)[i] = std::max((*vmax)[i], v[i]);
    double m_hat = m[i] / bc1, v_hat = vi / bc2;
    p[i] -= h.lr * m_hat / (std::sqrt(v_hat) + o.eps);
  }
}
}  // namespace

StepInfo reference_step(const Optimizer& opt, const UpdateOptions& options, std::span<Array> params,
                        std::span<const Array> grads, std::span<Array> state,
                        std::span<const double> lr, double grad_scale) {
  validate(opt);
  const int n = int(params.size());
  if (int(grads.size()) != n)
    fail("reference_step: {} gradients for {} parameters", grads.size(), n);
  std::vector<ir::TensorType> types;
  for (int i = 0; i < n; ++i) {
    const Array& p = params[size_t(i)];
    const Array& g = grads[size_t(i)];
    if (p.dtype() != DType::f32 && p.dtype() != DType::f64)
      fail("reference_step: parameter {} is {}; master parameters are f32 or f64", i, describe(p));
    if (!is_floating(g.dtype()) || g.shape() != p.shape())
      fail("reference_step: gradient {} is {}, parameter is {}", i, describe(g), describe(p));
    types.push_back({p.dtype(), p.shape()});
  }
  const std::vector<ParamGroup> groups = resolve_groups(opt, options.groups, n);
  if (lr.size() != groups.size())
    fail("reference_step: {} learning rates for {} parameter groups", lr.size(), groups.size());
  const StateLayout layout = state_layout(opt, types);
  check_state(layout, state);
  if (!(grad_scale > 0)) fail("reference_step: grad_scale {} must be > 0", grad_scale);

  // Unscale, check, measure, clip.
  StepInfo info;
  std::vector<Vec> g(static_cast<size_t>(n));
  double sumsq = 0;
  for (int i = 0; i < n; ++i) {
    g[size_t(i)] = grads[size_t(i)].to_doubles();
    for (double& x : g[size_t(i)]) {
      x /= grad_scale;
      if (!std::isfinite(x)) info.found_inf = true;
      sumsq += x * x;
    }
  }
  info.grad_norm = std::sqrt(sumsq);
  if (!options.check_finite) info.found_inf = false;
  if (info.found_inf) return info;
  if (options.max_norm) {
    double coef = std::min(1.0, *options.max_norm / (info.grad_norm + 1e-6));
    for (Vec& gi : g)
      for (double& x : gi) x *= coef;
  }

  Array& step_arr = state[size_t(layout.step_index())];
  const int64_t step = step_arr.data<int32_t>()[0];
  if (step < 0 || step >= std::numeric_limits<int32_t>::max())
    fail("reference_step: step count {} out of range [0, 2^31 - 1)", step);
  const int64_t t = step + 1;

  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Hyper h{lr[gi], *groups[gi].weight_decay};
    for (int i : groups[gi].params) {
      Array& pa = params[size_t(i)];
      Vec p = pa.to_doubles();
      auto slot = [&](StateKind k) -> Array* {
        int s = layout.find(i, k);
        return s < 0 ? nullptr : &state[size_t(s)];
      };
      if (const SGD* o = std::get_if<SGD>(&opt)) {
        Array* ba = slot(StateKind::momentum_buffer);
        Vec b = ba ? ba->to_doubles() : Vec{};
        sgd_update(*o, h, step == 0, p, g[size_t(i)], ba ? &b : nullptr);
        if (ba) store(*ba, b);
      } else {
        Array* ma = slot(StateKind::exp_avg);
        Array* va = slot(StateKind::exp_avg_sq);
        Array* xa = slot(StateKind::max_exp_avg_sq);
        Vec m = ma->to_doubles(), v = va->to_doubles(), x = xa ? xa->to_doubles() : Vec{};
        if (const Adam* a = std::get_if<Adam>(&opt))
          adam_update(*a, false, h, t, p, g[size_t(i)], m, v, xa ? &x : nullptr);
        else
          adam_update(std::get<AdamW>(opt), true, h, t, p, g[size_t(i)], m, v, xa ? &x : nullptr);
        store(*ma, m);
        store(*va, v);
        if (xa) store(*xa, x);
      }
      store(pa, p);
    }
  }
  step_arr.data<int32_t>()[0] = int32_t(t);
  return info;
}

}  // namespace tlaloc::optim
