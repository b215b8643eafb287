// Helpers for tests/optim: the PyTorch fixtures (tests/optim/make_fixtures.py) and comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tlaloc/optim/optimizer.h"

namespace tlaloc::optim::testing {

using nlohmann::json;

inline const json& torch_fixtures() {
  static const json j = [] {
    std::string path = std::string(TLALOC_SOURCE_DIR) + "/tests/optim/fixtures/torch_optim.json";
    std::ifstream f(path);
    if (!f) throw Error("cannot open " + path);
    return json::parse(f);
  }();
  return j;
}

inline Optimizer optimizer_from(const json& c) {
  const json& h = c.at("hyper");
  const std::string n = c.at("optimizer");
  if (n == "SGD")
    return SGD{h.at("lr"),
               h.value("momentum", 0.0),
               h.value("dampening", 0.0),
               h.value("weight_decay", 0.0),
               h.value("nesterov", false),
               h.value("maximize", false)};
  std::array<double, 2> betas{0.9, 0.999};
  if (h.contains("betas")) betas = {h["betas"][0], h["betas"][1]};
  if (n == "Adam")
    return Adam{h.at("lr"),
                betas,
                h.value("eps", 1e-8),
                h.value("weight_decay", 0.0),
                h.value("amsgrad", false),
                h.value("maximize", false)};
  return AdamW{h.at("lr"),
               betas,
               h.value("eps", 1e-8),
               h.value("weight_decay", 1e-2),
               h.value("amsgrad", false),
               h.value("maximize", false)};
}

inline UpdateOptions options_from(const json& c) {
  UpdateOptions o;
  if (c.contains("groups"))
    for (const json& g : c["groups"]) {
      ParamGroup pg{g.at("name"), g.at("params").get<std::vector<int>>(), std::nullopt,
                    std::nullopt};
      if (g["hyper"].contains("lr")) pg.lr = g["hyper"]["lr"].get<double>();
      if (g["hyper"].contains("weight_decay"))
        pg.weight_decay = g["hyper"]["weight_decay"].get<double>();
      o.groups.push_back(pg);
    }
  if (c.contains("max_norm")) o.max_norm = c["max_norm"].get<double>();
  return o;
}

inline std::vector<Shape> shapes_from(const json& c) {
  std::vector<Shape> s;
  for (const json& d : c.at("shapes")) s.emplace_back(d.get<std::vector<int64_t>>());
  return s;
}

inline std::vector<Array> arrays_from(const json& values, const std::vector<Shape>& shapes,
                                      DType dt = DType::f32) {
  std::vector<Array> out;
  for (size_t i = 0; i < shapes.size(); ++i)
    out.push_back(Array::from_doubles(dt, shapes[i], values.at(i).get<std::vector<double>>()));
  return out;
}

// Relative error of a tensor: max_i |a_i − b_i| / max_i |b_i| (0 when equal). Relative to the
// tensor's magnitude, not each element's: an element that cancels to near zero (p − lr·d)
// carries the f32 rounding of its operands, so per-element ratios there measure nothing.
inline double max_rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  if (diff == 0) return 0;
  return scale == 0 ? INFINITY : diff / scale;
}

inline bool bitwise_equal_all(const std::vector<Array>& a, const std::vector<Array>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].bitwise_equal(b[i])) return false;
  return true;
}

inline StateKind kind_from(const std::string& torch_key) {
  for (StateKind k : {StateKind::momentum_buffer, StateKind::exp_avg, StateKind::exp_avg_sq,
                      StateKind::max_exp_avg_sq})
    if (name(k) == torch_key) return k;
  throw Error("unknown torch state key " + torch_key);
}

}  // namespace tlaloc::optim::testing
