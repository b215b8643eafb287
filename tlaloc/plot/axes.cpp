#include "tlaloc/plot/axes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tlaloc/core/error.h"

namespace tlaloc::plot {

namespace {

constexpr double kMantissas[] = {1, 2, 5};

// The largest value m · 10^k (m in 1, 2, 5) <= v (below: false) or the smallest >= v (true).
double round_125(double v, bool up) {
  const double p = std::pow(10.0, std::floor(std::log10(v) + 1e-9));
  const double tol = 1e-9;
  if (up) {
    for (double m : kMantissas)
      if (m * p >= v * (1 - tol)) return m * p;
    return 10 * p;
  }
  for (int i = 2; i >= 0; --i)
    if (kMantissas[i] * p <= v * (1 + tol)) return kMantissas[i] * p;
  return p / 2;  // not reached: p <= v
}

// The 1-2-5 value after v (a 1-2-5 value).
double next_125(double v) {
  const double p = std::pow(10.0, std::floor(std::log10(v) + 1e-9));
  const double m = std::round(v / p);
  return m < 1.5 ? 2 * p : m < 3.5 ? 5 * p : 10 * p;
}

double prev_125(double v) {
  const double p = std::pow(10.0, std::floor(std::log10(v) + 1e-9));
  const double m = std::round(v / p);
  return m < 1.5 ? 0.5 * p : m < 3.5 ? p : 2 * p;
}

}  // namespace

double Axis::fraction(double v) const {
  if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  return (v - lo) / (hi - lo);
}

std::string Axis::label(double v) const {
  if (log) return fmt::format("{:g}", v);
  if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0"
  const double big = std::max(std::fabs(lo), std::fabs(hi));
  if (big >= 1e6 || step < 1e-4) return fmt::format("{:g}", v);
  const int decimals = std::max(0, int(-std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

Axis linear_axis(double lo, double hi, int ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi || ticks < 2)
    fail("plot: an axis over [{}, {}] with {} ticks", lo, hi, ticks);
  if (hi - lo <= 1e-12 * std::max(1.0, std::fabs(lo))) {  // one value: widened around it
    const double w = lo != 0 ? std::fabs(lo) * 0.1 : 1;
    lo -= w;
    hi += w;
  }
  Axis a;
  a.step = round_125((hi - lo) / (ticks - 1), true);
  const double first = std::floor(lo / a.step + 1e-9), last = std::ceil(hi / a.step - 1e-9);
  a.lo = first * a.step;
  a.hi = last * a.step;
  for (double k = first; k <= last + 0.5; ++k) a.ticks.push_back(k * a.step);
  return a;
}

Axis log_axis(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(hi) || lo > hi)
    fail("plot: a log axis over [{}, {}] (it needs 0 < lo <= hi)", lo, hi);
  Axis a;
  a.log = true;
  a.lo = round_125(lo, false);
  a.hi = round_125(hi, true);
  if (a.hi <= a.lo * (1 + 1e-9)) {  // one value: the 1-2-5 values either side
    a.lo = prev_125(a.lo);
    a.hi = next_125(a.hi);
  }
  const bool fine = std::log10(a.hi / a.lo) <= 2.01;
  if (fine) {
    for (double v = a.lo; v <= a.hi * (1 + 1e-9); v = next_125(v)) a.ticks.push_back(v);
  } else {
    // Powers of ten, every `step`-th one so that at most ~10 are labelled.
    const double k0 = std::ceil(std::log10(a.lo) - 1e-9), k1 = std::log10(a.hi) + 1e-9;
    const double step = std::max(1.0, std::ceil((k1 - k0) / 10));
    for (double k = k0; k <= k1; k += step) a.ticks.push_back(std::pow(10.0, k));
  }
  return a;
}

void draw_frame(Canvas& c, const Frame& f, const std::string& x_title, const std::string& y_title,
                bool x_labels, bool grid) {
  const double w = f.right - f.left, h = f.bottom - f.top;
  c.stroke_style(kGrid, 1);
  for (double t : grid ? f.x.ticks : std::vector<double>{}) {
    const double x = std::round(f.px(t)) + 0.5;
    c.line({x, f.top}, {x, f.bottom});
  }
  for (double t : grid ? f.y.ticks : std::vector<double>{}) {
    const double y = std::round(f.py(t)) + 0.5;
    c.line({f.left, y}, {f.right, y});
  }
  c.stroke_style(kInk, 1);
  c.stroke_rect(f.left + 0.5, f.top + 0.5, w, h);
  constexpr double kTick = 5;
  for (double t : f.x.ticks) {
    const double x = std::round(f.px(t)) + 0.5;
    c.line({x, f.bottom}, {x, f.bottom + kTick});
    if (x_labels)
      c.text(x, f.bottom + kTick + 3, f.x.label(t), kTickFont, kInk, HAlign::center, VAlign::top);
  }
  double widest = 0;
  for (double t : f.y.ticks) {
    const double y = std::round(f.py(t)) + 0.5;
    c.line({f.left - kTick, y}, {f.left, y});
    const std::string s = f.y.label(t);
    widest = std::max(widest, c.text_width(s, kTickFont));
    c.text(f.left - kTick - 3, y, s, kTickFont, kInk, HAlign::right, VAlign::middle);
  }
  if (x_labels && !x_title.empty())
    c.text((f.left + f.right) / 2, f.bottom + kTick + 22, x_title, kTitleFont, kInk, HAlign::center,
           VAlign::top);
  if (!y_title.empty())
    c.text(f.left - kTick - 10 - widest, (f.top + f.bottom) / 2, y_title, kTitleFont, kInk,
           HAlign::center, VAlign::bottom, 90);
}

}  // namespace tlaloc::plot
