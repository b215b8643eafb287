#include "tlaloc/plot/boundary.h"

#include <fmt/format.h>

#include <cmath>

#include "tlaloc/core/error.h"

namespace tlaloc::plot {

namespace {

constexpr double kLeft = 70, kGap = 70, kRight = 24, kBottom = 92;

uint32_t rgb(Color c) {
  auto byte = [](double v) { return uint32_t(std::lround(v * 255)); };
  return byte(c.r) << 16 | byte(c.g) << 8 | byte(c.b);
}

void check(const Field& f, const char* what) {
  if (f.rows < 1 || f.cols < 1 || f.values.size() != size_t(f.rows) * size_t(f.cols))
    fail("plot: the {} field is {} x {} cells with {} values", what, f.rows, f.cols,
         f.values.size());
}

}  // namespace

BoundaryLayout layout_boundary(const Field& learned, const Field& truth, const BoundaryOptions& o) {
  check(learned, "learned");
  check(truth, "true");
  if (learned.rows != truth.rows || learned.cols != truth.cols)
    fail("plot: the learned field is {} x {} cells, the true one {} x {}", learned.rows,
         learned.cols, truth.rows, truth.cols);
  if (!(o.x0 < o.x1) || !(o.y0 < o.y1) || !std::isfinite(o.x1 - o.x0) ||
      !std::isfinite(o.y1 - o.y0))
    fail("plot: the region [{}, {}] x [{}, {}] is empty or not finite", o.x0, o.x1, o.y0, o.y1);
  if (o.panel < 64 || o.panel > 2048) fail("plot: a panel of {} pixels (64 to 2048)", o.panel);
  BoundaryLayout l;
  const double top = o.title.empty() ? 40 : 70, side = o.panel;
  l.width = int(kLeft + 2 * side + kGap + kRight);
  l.height = int(top + side + kBottom);
  const Axis x = linear_axis(o.x0, o.x1, 5), y = linear_axis(o.y0, o.y1, 5);
  // The region itself fills each panel (its ticks fall inside it).
  auto exact = [](Axis a, double lo, double hi) {
    std::vector<double> inside;
    for (double t : a.ticks)
      if (t >= lo - 1e-9 * (hi - lo) && t <= hi + 1e-9 * (hi - lo)) inside.push_back(t);
    a.lo = lo, a.hi = hi, a.ticks = inside;
    return a;
  };
  l.learned =
      Frame{kLeft, top, kLeft + side, top + side, exact(x, o.x0, o.x1), exact(y, o.y0, o.y1)};
  l.truth = l.learned;
  l.truth.left += side + kGap;
  l.truth.right += side + kGap;
  for (size_t i = 0; i < learned.values.size(); ++i)
    l.disagreeing += (learned.values[i] >= 0) != (truth.values[i] >= 0);
  return l;
}

std::string render_boundary(const Field& learned, const Field& truth, const BoundaryOptions& o) {
  const BoundaryLayout l = layout_boundary(learned, truth, o);
  Canvas c(l.width, l.height);
  if (!o.title.empty())
    c.text(l.width / 2.0, 14, o.title, 16, kInk, HAlign::center, VAlign::top, 0, true);
  Image left{learned.cols, learned.rows, {}}, right{truth.cols, truth.rows, {}};
  for (size_t i = 0; i < truth.values.size(); ++i) {
    const bool in = learned.values[i] >= 0, want = truth.values[i] >= 0;
    left.rgb.push_back(rgb(in != want ? kWrong : in ? kInside : kOutside));
    right.rgb.push_back(rgb(want ? kInside : kOutside));
  }
  const std::string counted = fmt::format("{} ({} of {} cells disagree)", o.learned_title,
                                          l.disagreeing, truth.values.size());
  const std::pair<const Frame*, const Image*> panels[] = {{&l.learned, &left}, {&l.truth, &right}};
  for (const auto& [f, img] : panels) {
    c.image(f->left, f->top, f->right - f->left, f->bottom - f->top, *img);
    draw_frame(c, *f, "x", "y", true, false);
    c.text((f->left + f->right) / 2, f->top - 8, f == &l.learned ? counted : o.truth_title,
           kTitleFont, kInk, HAlign::center, VAlign::bottom);
  }
  // The key, under the panels.
  const double ky = l.height - 22.0;
  double kx = kLeft;
  const std::pair<Color, const char*> key[] = {
      {kInside, "inside (>= 0)"}, {kOutside, "outside (< 0)"}, {kWrong, "learned wrong"}};
  for (const auto& [color, text] : key) {
    c.fill_rect(kx, ky - 7, 14, 14, color);
    c.stroke_style(kInk, 1);
    c.stroke_rect(kx + 0.5, ky - 6.5, 13, 13);
    c.text(kx + 20, ky, text, kTickFont, kInk, HAlign::left, VAlign::middle);
    kx += 40 + c.text_width(text, kTickFont);
  }
  return c.png();
}

}  // namespace tlaloc::plot
