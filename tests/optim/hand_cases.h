// Hand-computed cases that separate the conventions an optimizer could get wrong. Each case
// lists what the rival convention would give, so a mix-up cannot pass. Used against the host
// reference (reference_test.cpp) and the in-program update (update_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "tlaloc/optim/optimizer.h"

namespace tlaloc::optim::testing {

struct HandCase {
  std::string name;
  Optimizer opt;
  UpdateOptions options;
  std::vector<std::vector<double>> init;                // per parameter (1-D)
  std::vector<std::vector<std::vector<double>>> grads;  // per step, per parameter
  double grad_scale = 1;
  std::vector<std::vector<double>> expect;  // parameters after the last step
};

inline UpdateOptions clip_options(double max_norm) {
  UpdateOptions o;
  o.max_norm = max_norm;
  return o;
}
inline UpdateOptions group_options(std::vector<ParamGroup> groups) {
  UpdateOptions o;
  o.groups = std::move(groups);
  return o;
}

inline std::vector<HandCase> hand_cases() {
  std::vector<HandCase> c;
  // AdamW step 1, eps 0: m̂/√v̂ = sign(g) = 1. Decoupled, lr-scaled, before the update:
  // 2·(1 − 0.1·0.5) − 0.1 = 1.8. Rivals: decay after the update (2 − 0.1)·0.95 = 1.805; decay
  // not scaled by lr 2·(1 − 0.5) − 0.1 = 0.9; L2 (Adam) 2 − 0.1 = 1.9.
  c.push_back({"adamw_decoupled_decay_before_update",
               AdamW{.lr = 0.1, .eps = 0, .weight_decay = 0.5},
               {},
               {{2.0}},
               {{{0.5}}},
               1,
               {{1.8}}});
  // Adam's weight_decay is L2 in the gradient: at step 1 the update is still lr·sign(g + wd·p).
  // g + wd·p = −0.5 + 0.5·2 = 0.5 > 0, so p = 2 − 0.1 = 1.9 (decoupled would give 1.7).
  c.push_back({"adam_l2_in_gradient",
               Adam{.lr = 0.1, .eps = 0, .weight_decay = 0.5},
               {},
               {{2.0}},
               {{{-0.5}}},
               1,
               {{1.9}}});
  // eps outside the root: g = 1e-3, eps = 1e-3 at step 1: m̂ = 1e-3, √v̂ = 1e-3,
  // p = 1 − 0.1·1e-3/(1e-3 + 1e-3) = 0.95. Inside the root: 1 − 0.1·1e-3/√(1e-6 + 1e-3) ≈ 0.99684.
  c.push_back({"adam_eps_outside_root",
               Adam{.lr = 0.1, .eps = 1e-3},
               {},
               {{1.0}},
               {{{1e-3}}},
               1,
               {{0.95}}});
  // AMSGrad keeps the max of the UNcorrected v. β1 = 0, β2 = 0.5, eps 0, lr 0.1, g = 2 then 1:
  // step 1: v = 2, v̂ = 4, p = 1 − 0.1·2/2 = 0.9. Step 2: v = 1.5, vmax = 2, bc2 = 0.75,
  // p = 0.9 − 0.1·1/√(2/0.75) = 0.83876275... Max of corrected (4 vs 2) would give 0.85.
  c.push_back({"amsgrad_max_of_uncorrected",
               Adam{.lr = 0.1, .betas = {0.0, 0.5}, .eps = 0, .amsgrad = true},
               {},
               {{1.0}},
               {{{2.0}}, {{1.0}}},
               1,
               {{0.9 - 0.1 / std::sqrt(2.0 / 0.75)}}});
  // SGD: L2 decay added before momentum; first buffer = d undamped; later μ·b + (1 − τ)·d.
  // p=1, g=0.5, wd=0.1, lr=0.1, μ=0.9, τ=0.5: d=0.6, b=0.6, p=0.94; d=0.594,
  // b=0.54+0.297=0.837, p=0.94−0.0837=0.8563. (Damping the first step: 0.97 − ... ≠.)
  c.push_back({"sgd_decay_momentum_dampening",
               SGD{.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .weight_decay = 0.1},
               {},
               {{1.0}},
               {{{0.5}}, {{0.5}}},
               1,
               {{0.8563}}});
  // Nesterov: b = 0.5, d = 0.5 + 0.9·0.5 = 0.95, p = 1 − 0.095 = 0.905 (classic: 0.95).
  c.push_back({"sgd_nesterov",
               SGD{.lr = 0.1, .momentum = 0.9, .nesterov = true},
               {},
               {{1.0}},
               {{{0.5}}},
               1,
               {{0.905}}});
  // maximize negates the gradient before the decay is added: d = −0.5 + 0.1·1 = −0.4,
  // p = 1.04 (negating after: −0.6, p = 1.06).
  c.push_back({"sgd_maximize_then_decay",
               SGD{.lr = 0.1, .weight_decay = 0.1, .maximize = true},
               {},
               {{1.0}},
               {{{0.5}}},
               1,
               {{1.04}}});
  // grad_scale: g = 2 / 4 = 0.5, p = 1 − 0.1·0.5 = 0.95.
  c.push_back({"sgd_unscale", SGD{.lr = 0.1}, {}, {{1.0}}, {{{2.0}}}, 4, {{0.95}}});
  // Global-norm clipping over two parameters: g = (3), (4): norm 5, coef 1/(5 + 1e-6);
  // lr 1, p 0: p = −3/(5 + 1e-6), −4/(5 + 1e-6) (per-parameter clipping would give −1, −1).
  c.push_back({"clip_global_norm",
               SGD{.lr = 1.0},
               clip_options(1.0),
               {{0.0}, {0.0}},
               {{{3.0}, {4.0}}},
               1,
               {{-3 / (5 + 1e-6)}, {-4 / (5 + 1e-6)}}});
  // Parameter groups: group "a" lr 0.1 wd 0.5 (decoupled), group "b" lr 0.2 no decay;
  // p_a = 2·(1 − 0.1·0.5) − 0.1 = 1.8, p_b = 1 − 0.2 = 0.8.
  c.push_back({"adamw_groups",
               AdamW{.lr = 0.1, .eps = 0, .weight_decay = 0.5},
               group_options({{"a", {0}, std::nullopt, std::nullopt}, {"b", {1}, 0.2, 0.0}}),
               {{2.0}, {1.0}},
               {{{0.5}, {0.5}}},
               1,
               {{1.8}, {0.8}}});
  return c;
}

}  // namespace tlaloc::optim::testing
