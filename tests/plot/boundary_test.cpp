// The boundary picture (plot/boundary.h) from fixed fields, the canvas's PNG bytes and the atomic
// write of a picture.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "plot/plot_test_util.h"
#include "support/error_of.h"
#include "tlaloc/plot/boundary.h"

using namespace tlaloc;
using namespace tlaloc::plot_test;
using tlaloc::testing::error_of;

namespace {

// 4 x 4 cells: the true field is inside in its upper-left 2 x 2 block; the learned one also
// claims cell (row 3, col 3) and misses cell (0, 0).
plot::Field truth_field() {
  plot::Field f{4, 4, std::vector<float>(16, -1)};
  for (int r : {0, 1})
    for (int c : {0, 1}) f.values[size_t(r * 4 + c)] = 1;
  return f;
}
plot::Field learned_field() {
  plot::Field f = truth_field();
  f.values[0] = -0.5f;
  f.values[15] = 0.0f;  // >= 0: inside
  return f;
}

}  // namespace

TEST(Boundary, EachCellIsColouredByItsSideAndTheDisagreementsAreRed) {
  const plot::Field learned = learned_field(), truth = truth_field();
  const std::string png = plot::render_boundary(learned, truth);
  const plot::BoundaryLayout l = plot::layout_boundary(learned, truth);
  EXPECT_EQ(png_size(png).width, l.width);
  EXPECT_EQ(png_size(png).height, l.height);
  EXPECT_EQ(l.disagreeing, 2);
  const plot::Image img = plot::decode_png(png);
  const uint32_t in = rgb_of(plot::kInside), out = rgb_of(plot::kOutside),
                 wrong = rgb_of(plot::kWrong);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      // The cell's centre in the region's units, mapped to each panel here.
      const double x = -1 + (c + 0.5) * 0.5, y = 1 - (r + 0.5) * 0.5;
      const bool want = truth.values[size_t(r * 4 + c)] >= 0;
      const bool got = learned.values[size_t(r * 4 + c)] >= 0;
      for (const plot::Frame* f : {&l.learned, &l.truth}) {
        const double px = f->left + (x + 1) / 2 * (f->right - f->left);
        const double py = f->bottom - (y + 1) / 2 * (f->bottom - f->top);
        const uint32_t expect = f == &l.truth ? (want ? in : out)
                                              : (got != want ? wrong
                                                 : got       ? in
                                                             : out);
        EXPECT_EQ(img.at(int(px), int(py)), expect) << r << "," << c;
      }
    }
  EXPECT_EQ(plot::render_boundary(learned, truth), png);  // the same bytes
}

TEST(Boundary, Refusals) {
  plot::Field small{2, 2, {1, 1, 1, 1}};
  EXPECT_EQ(error_of([&] { plot::render_boundary(small, truth_field()); }),
            "plot: the learned field is 2 x 2 cells, the true one 4 x 4");
  plot::Field holey{2, 2, {1, 1, 1}};
  EXPECT_EQ(error_of([&] { plot::render_boundary(holey, holey); }),
            "plot: the learned field is 2 x 2 cells with 3 values");
  plot::BoundaryOptions o;
  o.x1 = -1;
  EXPECT_EQ(error_of([&] { plot::render_boundary(small, small, o); }),
            "plot: the region [-1, -1] x [-1, 1] is empty or not finite");
}

TEST(Canvas, PngBytesAreDecodedAndWrittenAtomically) {
  plot::Canvas c(40, 30);
  c.fill_rect(10, 5, 20, 10, plot::Color::hex(0x336699));
  const std::string png = c.png();
  EXPECT_EQ(png_size(png).width, 40);
  EXPECT_EQ(png_size(png).height, 30);
  const plot::Image img = plot::decode_png(png);
  EXPECT_EQ(img.at(0, 0), 0xffffffu);  // the canvas starts white
  EXPECT_EQ(img.at(15, 10), 0x336699u);
  EXPECT_EQ(img.at(30, 10), 0xffffffu);  // [10, 30) is filled
  EXPECT_EQ(error_of([] { plot::decode_png("not a png", "x.png"); }).rfind("x.png: not a PNG", 0),
            0u);
  EXPECT_EQ(error_of([] { plot::Canvas(0, 10); }),
            "plot: a picture of 0 x 10 pixels (each side must be 1 to 8192)");

  const auto dir =
      std::filesystem::temp_directory_path() / ("tlaloc_canvas_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "p.png").string();
  plot::write_file(path, png);
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_EQ(s.str(), png);
  size_t entries = 0;  // no temporary left beside it
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}
