#include "tlaloc/plot/curves.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "tlaloc/core/error.h"

namespace tlaloc::plot {

namespace {

// One point per step, the last row's value of each step, in step order.
std::vector<SeriesPoint> by_step(const std::vector<SeriesPoint>& in) {
  std::map<double, SeriesPoint> last;
  for (const auto& p : in) last[p.step] = p;
  std::vector<SeriesPoint> out;
  for (auto& [step, p] : last) out.push_back(p);
  return out;
}

constexpr double kTrainWidth = 1.8, kValWidth = 1.6, kMarker = 3.2;
const std::vector<double> kDashes = {6, 4};
constexpr size_t kMostMarkers = 60;  // more evaluations than this: a dashed line only

struct LegendEntry {
  Color color;
  bool dashed;
  std::string text;
};

void draw_series(Canvas& c, const Frame& f, const std::vector<SeriesPoint>& s, Color color,
                 bool dashed) {
  std::vector<Point> pts;
  for (const auto& p : s) pts.push_back(f.at(p.step, p.value));
  c.stroke_style(color, dashed ? kValWidth : kTrainWidth, dashed ? kDashes : std::vector<double>{});
  c.polyline(pts);
  if (dashed && s.size() <= kMostMarkers)
    for (const Point& p : pts) c.fill_circle(p, kMarker, color);
  if (!dashed && pts.size() == 1) c.fill_circle(pts[0], kMarker, color);  // no line to see
}

void draw_legend(Canvas& c, const Frame& f, const std::vector<LegendEntry>& entries) {
  if (entries.empty()) return;
  constexpr double kFont = 12, kRow = 18, kSample = 28, kPad = 8;
  double widest = 0;
  for (const auto& e : entries) widest = std::max(widest, c.text_width(e.text, kFont));
  const double w = kPad * 3 + kSample + widest, h = kPad * 2 + kRow * double(entries.size()) - 4;
  const double x = std::round(f.right - w - 8), y = std::round(f.top + 8);
  c.fill_rect(x, y, w, h, Color::hex(0xffffff, 0.88));
  c.stroke_style(Color::hex(0xb0b0b0), 1);
  c.stroke_rect(x + 0.5, y + 0.5, w, h);
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const double cy = y + kPad + kRow * double(i) + 7;
    c.stroke_style(e.color, e.dashed ? kValWidth : kTrainWidth,
                   e.dashed ? kDashes : std::vector<double>{});
    c.line({x + kPad, cy}, {x + kPad + kSample, cy});
    if (e.dashed) c.fill_circle({x + kPad + kSample / 2, cy}, kMarker, e.color);
    c.text(x + kPad * 2 + kSample, cy, e.text, kFont, kInk, HAlign::left, VAlign::middle);
  }
}

}  // namespace

RunSeries series_of(const Run& r) {
  RunSeries s;
  std::vector<SeriesPoint> train_steps, train_other, val, acc;
  for (const auto& row : r.rows) {
    const double step = double(row.step);
    if (!std::isnan(row.train_loss))
      (row.kind == "step" ? train_steps : train_other).push_back({step, row.train_loss, row.line});
    if (!std::isnan(row.val_loss)) val.push_back({step, row.val_loss, row.line});
    if (!std::isnan(row.val_accuracy)) acc.push_back({step, 100 * row.val_accuracy, row.line});
  }
  s.train = by_step(train_steps.empty() ? train_other : train_steps);
  s.val = by_step(val);
  s.accuracy = by_step(acc);
  return s;
}

Color run_color(size_t i) {
  static constexpr uint32_t kPalette[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                          0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
  return Color::hex(kPalette[i % std::size(kPalette)]);
}

constexpr double kMaxDrawn = 1e300, kMinLogDrawn = 1e-300;

CurvesLayout layout_curves(const std::vector<Run>& runs, const CurveOptions& o) {
  if (runs.empty()) fail("plot: no runs to draw");
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  double alo = INFINITY, ahi = -INFINITY;
  for (const auto& r : runs) {
    const RunSeries s = series_of(r);
    if (s.train.empty() && s.val.empty())
      fail("plot: {}: no train_loss or val_loss values to draw", r.source);
    for (const auto* series : {&s.train, &s.val})
      for (const auto& p : *series) {
        const char* col = series == &s.train ? "train_loss" : "val_loss";
        if (o.log_y && !(p.value > 0))
          fail("plot: {} line {}: {} {} cannot go on a log scale (--log-y needs losses > 0)",
               r.source, p.line, col, p.value);
        // Beyond these an axis's ticks and 1-2-5 rounding leave the doubles (0 or inf).
        if (std::fabs(p.value) > kMaxDrawn || (o.log_y && p.value < kMinLogDrawn))
          fail("plot: {} line {}: {} {} is too {} to draw (|values| <= {:g}{})", r.source, p.line,
               col, p.value, std::fabs(p.value) > kMaxDrawn ? "large" : "small", kMaxDrawn,
               o.log_y ? fmt::format(", >= {:g} on a log scale", kMinLogDrawn) : "");
        xlo = std::min(xlo, p.step), xhi = std::max(xhi, p.step);
        ylo = std::min(ylo, p.value), yhi = std::max(yhi, p.value);
      }
    for (const auto& p : s.accuracy) {
      if (!(p.value >= 0 && p.value <= 100))  // percent here
        fail("plot: {} line {}: val_accuracy {} is not a fraction in [0, 1]", r.source, p.line,
             p.value / 100);
      xlo = std::min(xlo, p.step), xhi = std::max(xhi, p.step);
      alo = std::min(alo, p.value), ahi = std::max(ahi, p.value);
    }
  }
  CurvesLayout l;
  l.width = o.width;
  l.height = o.height;
  const double top = o.title.empty() ? 16 : 44, bottom = o.height - 50.0;
  const double left = 86, right = o.width - 20.0;
  if (right - left < 100 || bottom - top < 100)
    fail("plot: a chart of {} x {} pixels is too small (at least 210 x 200)", o.width, o.height);
  const Axis x = linear_axis(xlo, xhi, 8);
  Axis y;
  if (o.log_y) {
    y = log_axis(ylo, yhi);
  } else {  // a little room above and below the curves, not below 0 for losses >= 0
    const double pad = 0.03 * (yhi - ylo);
    y = linear_axis(ylo >= 0 ? std::max(0.0, ylo - pad) : ylo - pad, yhi + pad);
  }
  constexpr double kGap = 14;
  if (std::isfinite(alo)) {
    const double acc_h = std::round(0.32 * (bottom - top - kGap));
    l.loss = Frame{left, top, right, bottom - acc_h - kGap, x, y};
    const double pad = 0.03 * (ahi - alo);
    Axis a = linear_axis(std::max(0.0, alo - pad), std::min(100.0, ahi + pad), 4);
    if (alo >= 0 && ahi <= 100) {  // percentages: the axis stays within [0, 100]
      a.lo = std::max(a.lo, 0.0), a.hi = std::min(a.hi, 100.0);
      std::erase_if(a.ticks, [&](double t) { return t < a.lo || t > a.hi; });
    }
    l.accuracy = Frame{left, bottom - acc_h, right, bottom, x, a};
  } else {
    l.loss = Frame{left, top, right, bottom, x, y};
  }
  return l;
}

std::string render_curves(const std::vector<Run>& runs, const CurveOptions& o) {
  const CurvesLayout l = layout_curves(runs, o);
  Canvas c(l.width, l.height);
  if (!o.title.empty())
    c.text(l.width / 2.0, 14, o.title, 16, kInk, HAlign::center, VAlign::top, 0, true);
  draw_frame(c, l.loss, "step", o.log_y ? "loss (log scale)" : "loss", !l.accuracy);
  if (l.accuracy) draw_frame(c, *l.accuracy, "step", "val accuracy (%)");
  std::vector<LegendEntry> legend;
  const bool several = runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSeries s = series_of(runs[i]);
    const Color color = run_color(i);
    const Frame& f = l.loss;
    // The axes cover every point; the clip only keeps strokes off the margins (markers at the
    // frame's edge are drawn whole).
    constexpr double kEdge = kMarker + 1;
    c.clip(f.left - kEdge, f.top - kEdge, f.right - f.left + 2 * kEdge,
           f.bottom - f.top + 2 * kEdge);
    draw_series(c, f, s.train, color, false);
    draw_series(c, f, s.val, color, true);
    if (l.accuracy) {
      const Frame& a = *l.accuracy;
      c.clip(a.left - kEdge, a.top - kEdge, a.right - a.left + 2 * kEdge,
             a.bottom - a.top + 2 * kEdge);
      draw_series(c, a, s.accuracy, color, true);
    }
    c.reset_clip();
    const std::string prefix = several ? runs[i].label + ": " : "";
    if (!s.train.empty()) legend.push_back({color, false, prefix + "train loss"});
    if (!s.val.empty()) legend.push_back({color, true, prefix + "val loss"});
  }
  draw_legend(c, l.loss, legend);
  return c.png();
}

std::vector<std::string> labels_for(const std::vector<std::string>& paths) {
  auto strip = [](std::string s) {
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".csv") == 0) s.resize(s.size() - 4);
    return s;
  };
  std::vector<std::string> names;
  std::multiset<std::string> seen;
  for (const auto& p : paths) {
    const size_t slash = p.find_last_of('/');
    names.push_back(strip(slash == std::string::npos ? p : p.substr(slash + 1)));
    seen.insert(names.back());
  }
  for (size_t i = 0; i < paths.size(); ++i)
    if (seen.count(names[i]) > 1) names[i] = strip(paths[i]);
  return names;
}

}  // namespace tlaloc::plot
