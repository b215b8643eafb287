// The confusion heat map (plot/heatmap.h) from a fixed matrix: its size from the PNG header,
// each cell's colour the colour of its count and darker the larger the count, the counts
// written in the cells, the same bytes for the same input, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "plot/plot_test_util.h"
#include "support/error_of.h"
#include "tlaloc/plot/heatmap.h"

using namespace tlaloc;
using namespace tlaloc::plot_test;
using tlaloc::testing::error_of;

namespace {

const std::vector<std::vector<int64_t>> kMatrix = {
    {950, 3, 16, 0}, {13, 700, 80, 5}, {41, 240, 500, 2}, {0, 9, 1, 820}};
const std::vector<std::string> kNames = {"T-shirt/top", "Trouser", "Pullover", "Dress"};

}  // namespace

TEST(Confusion, CellsAreDarkerTheLargerTheirCount) {
  const std::string png = plot::render_confusion(kMatrix, kNames);
  const plot::ConfusionLayout l = plot::layout_confusion(kMatrix, kNames);
  EXPECT_EQ(png_size(png).width, l.width);
  EXPECT_EQ(png_size(png).height, l.height);
  EXPECT_EQ(l.cell, 52);
  const plot::Image img = plot::decode_png(png);
  // A pixel near each cell's corner (away from its count's digits).
  struct Cell {
    int64_t count;
    uint32_t rgb;
  };
  std::vector<Cell> cells;
  for (int t = 0; t < 4; ++t)
    for (int p = 0; p < 4; ++p) {
      const uint32_t rgb = img.at(l.left + p * l.cell + 3, l.top + t * l.cell + 3);
      const int64_t v = kMatrix[size_t(t)][size_t(p)];
      cells.push_back({v, rgb});
      EXPECT_LE(distance(rgb, rgb_of(plot::heat_color(double(v) / 950))), 1) << t << "," << p;
    }
  std::sort(cells.begin(), cells.end(),
            [](const Cell& a, const Cell& b) { return a.count < b.count; });
  // Never lighter for a larger count; darker once the counts differ by a 50th of the largest
  // (counts closer than that may round to one 8-bit colour).
  for (size_t i = 1; i < cells.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      EXPECT_LE(luminance(cells[i].rgb), luminance(cells[j].rgb)) << cells[i].count;
      if (cells[i].count - cells[j].count >= 950 / 50) {
        EXPECT_LT(luminance(cells[i].rgb), luminance(cells[j].rgb)) << cells[i].count;
      }
      if (cells[i].count == cells[j].count) {
        EXPECT_EQ(cells[i].rgb, cells[j].rgb);
      }
    }
  EXPECT_EQ(cells.front().rgb, 0xf7fbffu);  // 0: the lightest colour
  EXPECT_EQ(cells.back().rgb, 0x08306bu);   // the largest count: the darkest
  // The largest count's digits are written light on its dark cell.
  int light = 0;
  for (int y = l.top + 10; y < l.top + l.cell - 10; ++y)
    for (int x = l.left + 10; x < l.left + l.cell - 10; ++x) light += luminance(img.at(x, y)) > 200;
  EXPECT_GT(light, 20);
}

TEST(Confusion, HeatColoursGrowDarkerStepByStep) {
  double before = 256;
  for (int i = 0; i <= 100; ++i) {
    const double now = luminance(rgb_of(plot::heat_color(i / 100.0)));
    EXPECT_LT(now, before) << i;
    before = now;
  }
}

TEST(Confusion, TheSameInputGivesTheSameBytes) {
  const std::string a = plot::render_confusion(kMatrix, kNames);
  EXPECT_EQ(plot::render_confusion(kMatrix, kNames), a);
  auto other = kMatrix;
  other[0][1] = 4;
  EXPECT_NE(plot::render_confusion(other, kNames), a);
  // Without names, the class numbers; a larger cell gives a larger picture.
  plot::ConfusionOptions o;
  o.cell = 80;
  o.title = "";
  const plot::ConfusionLayout big = plot::layout_confusion(kMatrix, {}, o);
  EXPECT_EQ(png_size(plot::render_confusion(kMatrix, {}, o)).width, big.width);
  EXPECT_EQ(big.cell, 80);
}

TEST(Confusion, Refusals) {
  EXPECT_EQ(error_of([] { plot::render_confusion({}, {}); }),
            "plot: a confusion matrix of 0 classes (1 to 100)");
  EXPECT_EQ(error_of([] {
              plot::render_confusion({{1, 2}, {3}}, {});
            }),
            "plot: confusion matrix row 1 has 1 counts; it needs 2 (square)");
  EXPECT_EQ(error_of([] {
              plot::render_confusion({{1, -2}, {3, 4}}, {});
            }),
            "plot: confusion matrix count [0][1] is -2 (< 0)");
  EXPECT_EQ(error_of([] {
              plot::render_confusion({{1, 2}, {3, 4}}, {"a"});
            }),
            "plot: 1 class names for a confusion matrix of 2 classes");
}
