// Axes of a chart: ranges rounded out to tick values (1, 2 and 5 times a power of ten), linear
// or logarithmic, and a Frame, the rectangle of pixels a chart's data is drawn in with the
// mapping from data to pixels. draw_frame draws its grid, outline, ticks and titles.
#pragma once

#include <string>
#include <vector>

#include "tlaloc/plot/canvas.h"

namespace tlaloc::plot {

struct Axis {
  double lo = 0, hi = 1;      // the range shown: lo at the frame's left / bottom edge
  bool log = false;           // log10 scale (lo > 0)
  std::vector<double> ticks;  // values with a labelled tick, ascending, within [lo, hi]
  double step = 0;            // linear: the tick spacing

  // Where v falls along the axis: 0 at lo, 1 at hi (log: of log10 v).
  double fraction(double v) const;
  // A tick's label ("0.25", "2000", "1e-05").
  std::string label(double v) const;
};

// A linear axis over [lo, hi] (lo <= hi, finite) with about `ticks` ticks: the range is extended
// to the nearest multiples of the tick spacing, a 1, 2 or 5 times a power of ten. A range of one
// value is widened around it.
Axis linear_axis(double lo, double hi, int ticks = 6);
// A log axis over [lo, hi] (0 < lo <= hi, finite): the range is extended to the nearest values
// 1, 2 or 5 times a power of ten; ticks at those values when the range spans at most about two
// decades, else at the powers of ten.
Axis log_axis(double lo, double hi);

// A chart's plotting area in pixels (left < right, top < bottom) and its axes.
struct Frame {
  double left = 0, top = 0, right = 0, bottom = 0;
  Axis x, y;
  double px(double v) const { return left + x.fraction(v) * (right - left); }
  double py(double v) const { return bottom - y.fraction(v) * (bottom - top); }
  Point at(double vx, double vy) const { return {px(vx), py(vy)}; }
};

// The frame's grid lines at the ticks (when `grid`), its outline, tick marks with labels (x
// labels only when x_labels) and the axis titles (x below, y turned along the left side).
void draw_frame(Canvas& c, const Frame& f, const std::string& x_title, const std::string& y_title,
                bool x_labels = true, bool grid = true);

}  // namespace tlaloc::plot
