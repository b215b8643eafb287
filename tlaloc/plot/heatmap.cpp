#include "tlaloc/plot/heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tlaloc/core/error.h"

namespace tlaloc::plot {

namespace {

constexpr double kNameFont = 13, kHeadFont = 13, kTitleSize = 16;
constexpr int kAccuracyWidth = 84, kMargin = 16;

std::vector<std::string> class_names(const std::vector<std::string>& names, size_t n) {
  if (!names.empty()) return names;
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

void check(const std::vector<std::vector<int64_t>>& m, const std::vector<std::string>& names,
           const ConfusionOptions& o) {
  const size_t n = m.size();
  if (n == 0 || n > 100) fail("plot: a confusion matrix of {} classes (1 to 100)", n);
  for (size_t t = 0; t < n; ++t) {
    if (m[t].size() != n)
      fail("plot: confusion matrix row {} has {} counts; it needs {} (square)", t, m[t].size(), n);
    for (size_t p = 0; p < n; ++p)
      if (m[t][p] < 0) fail("plot: confusion matrix count [{}][{}] is {} (< 0)", t, p, m[t][p]);
  }
  if (!names.empty() && names.size() != n)
    fail("plot: {} class names for a confusion matrix of {} classes", names.size(), n);
  if (o.cell < 16 || o.cell > 200) fail("plot: a confusion cell of {} pixels (16 to 200)", o.cell);
}

}  // namespace

Color heat_color(double t) {
  static constexpr uint32_t kBlues[] = {0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6,
                                        0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
  constexpr int kLast = int(std::size(kBlues)) - 1;
  t = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0) * kLast;
  const int i = std::min(int(t), kLast - 1);
  const double f = t - i;
  const Color a = Color::hex(kBlues[i]), b = Color::hex(kBlues[i + 1]);
  return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f, 1};
}

ConfusionLayout layout_confusion(const std::vector<std::vector<int64_t>>& m,
                                 const std::vector<std::string>& names, const ConfusionOptions& o) {
  check(m, names, o);
  const std::vector<std::string> labels = class_names(names, m.size());
  Canvas measure(1, 1);
  double widest = 0;
  for (const auto& s : labels) widest = std::max(widest, measure.text_width(s, kNameFont));
  const int n = int(m.size());
  ConfusionLayout l;
  l.cell = o.cell;
  l.left = kMargin + 24 + int(std::ceil(widest)) + 10;
  l.top = kMargin + (o.title.empty() ? 0 : 30) + 24;  // the title, then the accuracy header
  const int below = int(std::ceil(widest * std::sqrt(0.5))) + 24 + 26;  // names at 45°, title
  l.width = l.left + n * l.cell + 12 + kAccuracyWidth + kMargin;
  l.height = l.top + n * l.cell + below + kMargin;
  return l;
}

std::string render_confusion(const std::vector<std::vector<int64_t>>& m,
                             const std::vector<std::string>& names, const ConfusionOptions& o) {
  const ConfusionLayout l = layout_confusion(m, names, o);
  const std::vector<std::string> labels = class_names(names, m.size());
  const int n = int(m.size());
  Canvas c(l.width, l.height);
  int64_t most = 0;
  for (const auto& row : m) most = std::max(most, *std::max_element(row.begin(), row.end()));
  // One font size for every count: the widest count fits its cell with room to spare.
  double count_font = l.cell * 0.27;
  for (const auto& row : m)
    for (int64_t v : row) {
      const double w = c.text_width(std::to_string(v), count_font);
      if (w > l.cell - 8) count_font *= (l.cell - 8) / w;
    }
  if (!o.title.empty())
    c.text(l.width / 2.0, kMargin, o.title, kTitleSize, kInk, HAlign::center, VAlign::top, 0, true);
  const double right = l.left + double(n * l.cell), bottom = l.top + double(n * l.cell);
  for (int t = 0; t < n; ++t) {
    int64_t total = 0;
    for (int p = 0; p < n; ++p) {
      const int64_t v = m[size_t(t)][size_t(p)];
      total += v;
      const double frac = most > 0 ? double(v) / double(most) : 0;
      const double x = l.left + p * l.cell, y = l.top + t * l.cell;
      c.fill_rect(x, y, l.cell, l.cell, heat_color(frac));
      c.text(x + l.cell / 2.0, y + l.cell / 2.0, std::to_string(v), count_font,
             frac > 0.45 ? kWhite : kInk, HAlign::center, VAlign::middle);
    }
    const double cy = l.top + (t + 0.5) * l.cell;
    c.text(l.left - 8, cy, labels[size_t(t)], kNameFont, kInk, HAlign::right, VAlign::middle);
    const double acc = total ? 100.0 * double(m[size_t(t)][size_t(t)]) / double(total) : 0;
    c.text(right + 12 + kAccuracyWidth / 2.0, cy, total ? fmt::format("{:.2f}%", acc) : "-",
           kNameFont, kInk, HAlign::center, VAlign::middle);
  }
  c.text(right + 12 + kAccuracyWidth / 2.0, l.top - 6, "accuracy", kHeadFont, kInk, HAlign::center,
         VAlign::bottom);
  for (int p = 0; p < n; ++p)  // column names turned 45°, ending under their column
    c.text(l.left + (p + 0.5) * l.cell + 4, bottom + 8, labels[size_t(p)], kNameFont, kInk,
           HAlign::right, VAlign::top, 45);
  c.stroke_style(kInk, 1);
  c.stroke_rect(l.left - 0.5, l.top - 0.5, n * l.cell + 1.0, n * l.cell + 1.0);
  c.text(l.left + n * l.cell / 2.0, l.height - kMargin, "predicted class", kTitleFont, kInk,
         HAlign::center, VAlign::bottom);
  c.text(kMargin, l.top + n * l.cell / 2.0, "true class", kTitleFont, kInk, HAlign::center,
         VAlign::top, 90);
  return c.png();
}

}  // namespace tlaloc::plot
