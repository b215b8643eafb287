// Training curves (plot/curves.h) drawn from fixed rows: the picture's size from its PNG header,
// straight lines whose pixels are computed here from the axes' ranges and the frame (linear and
// log scale), one colour per run, markers at the evaluations, the accuracy panel, the same bytes
// for the same input, and the refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "plot/plot_test_util.h"
#include "support/error_of.h"
#include "tlaloc/plot/curves.h"

using namespace tlaloc;
using namespace tlaloc::plot_test;
using tlaloc::testing::error_of;

namespace {

io::MetricsRow step_row(int64_t step, double loss) {
  io::MetricsRow r;
  r.step = step;
  r.train_loss = loss;
  r.line = step / 10 + 2;
  return r;
}

io::MetricsRow eval_row(int64_t step, double loss, double accuracy = NAN) {
  io::MetricsRow r;
  r.kind = "epoch";
  r.step = step;
  r.val_loss = loss;
  r.val_accuracy = accuracy;
  return r;
}

// Steps 0, 10, ..., 100 with train_loss f(step).
plot::Run line_run(const std::string& label, double (*f)(double)) {
  plot::Run r{label, label + ".csv", {}};
  for (int s = 0; s <= 100; s += 10) r.rows.push_back(step_row(s, f(double(s))));
  return r;
}

// Pixel coordinates of (step, value) in the frame, computed here from the axes' ranges.
double px(const plot::Frame& f, double step) {
  return f.left + (step - f.x.lo) / (f.x.hi - f.x.lo) * (f.right - f.left);
}
double py(const plot::Frame& f, double v) {
  if (f.y.log)
    return f.bottom - (std::log10(v) - std::log10(f.y.lo)) /
                          (std::log10(f.y.hi) - std::log10(f.y.lo)) * (f.bottom - f.top);
  return f.bottom - (v - f.y.lo) / (f.y.hi - f.y.lo) * (f.bottom - f.top);
}

constexpr uint32_t kBlue = 0x1f77b4, kOrange = 0xff7f0e;

}  // namespace

TEST(Curves, AStraightLineCrossesThePixelsTheAxesMapItTo) {
  const std::vector<plot::Run> runs = {
      line_run("a", [](double s) { return 1 + 0.02 * s; }),   // 1 -> 3
      line_run("b", [](double s) { return 2.5 - 0.01 * s; })  // 2.5 -> 1.5
  };
  plot::CurveOptions o;
  const std::string png = plot::render_curves(runs, o);
  const Size size = png_size(png);
  EXPECT_EQ(size.width, 900);
  EXPECT_EQ(size.height, 600);
  const plot::Image img = plot::decode_png(png);
  ASSERT_EQ(img.width, 900);
  const plot::CurvesLayout l = plot::layout_curves(runs, o);
  EXPECT_FALSE(l.accuracy);
  const plot::Frame& f = l.loss;
  // The axes cover the data and tick at multiples of their spacing.
  EXPECT_LE(f.x.lo, 0);
  EXPECT_GE(f.x.hi, 100);
  EXPECT_LE(f.y.lo, 1);
  EXPECT_GE(f.y.hi, 3);
  for (double t : f.y.ticks) EXPECT_NEAR(std::remainder(t, f.y.step), 0, 1e-9) << t;
  // Between the data points too: the segments are straight.
  for (double s : {5.0, 25.0, 47.0, 63.0, 95.0}) {
    EXPECT_LE(nearest(img, px(f, s), py(f, 1 + 0.02 * s), kBlue), 40) << "run a, step " << s;
    EXPECT_LE(nearest(img, px(f, s), py(f, 2.5 - 0.01 * s), kOrange), 40) << "run b, step " << s;
    // 12 pixels below run a's line: not its colour (its curve is a thin line there).
    EXPECT_GT(nearest(img, px(f, s), py(f, 1 + 0.02 * s) + 12, kBlue, 0), 100) << s;
  }
  // The frame's outline is drawn where the layout says the frame is.
  const int mid = int((f.top + f.bottom) / 2);
  EXPECT_LT(luminance(img.at(int(f.left), mid)), 80);
  EXPECT_LT(luminance(img.at(int(f.right), mid)), 80);
  // Outside the frame, left of the tick labels: white.
  EXPECT_EQ(img.at(2, mid), 0xffffffu);
}

TEST(Curves, OnALogScaleAnExponentialDecayIsAStraightLine) {
  const std::vector<plot::Run> runs = {
      line_run("decay", [](double s) { return std::pow(10.0, -s / 50); })};  // 1 -> 0.01
  plot::CurveOptions o;
  o.log_y = true;
  o.width = 640;
  o.height = 480;
  o.title = "decay";
  const std::string png = plot::render_curves(runs, o);
  EXPECT_EQ(png_size(png).width, 640);
  EXPECT_EQ(png_size(png).height, 480);
  const plot::Image img = plot::decode_png(png);
  const plot::Frame& f = plot::layout_curves(runs, o).loss;
  ASSERT_TRUE(f.y.log);
  EXPECT_LE(f.y.lo, 0.01);
  EXPECT_GE(f.y.hi, 1);
  // Midway between data points the line in log space passes 10^(-s/50).
  for (double s : {5.0, 35.0, 72.0})
    EXPECT_LE(nearest(img, px(f, s), py(f, std::pow(10.0, -s / 50)), kBlue), 40) << s;
}

TEST(Curves, ValidationIsDashedWithMarkersAndAccuracyGetsAPanel) {
  plot::Run r = line_run("a", [](double s) { return 2 - 0.01 * s; });
  r.rows.push_back(eval_row(50, 1.8, 0.6));
  r.rows.push_back(eval_row(100, 1.6, 0.9));
  const std::vector<plot::Run> runs = {r};
  const plot::CurvesLayout l = plot::layout_curves(runs, {});
  ASSERT_TRUE(l.accuracy);
  EXPECT_LT(l.loss.bottom, l.accuracy->top);  // the accuracy panel is below the loss panel
  EXPECT_EQ(l.accuracy->x.lo, l.loss.x.lo);   // sharing the step axis
  EXPECT_EQ(l.accuracy->x.hi, l.loss.x.hi);
  EXPECT_LE(l.accuracy->y.lo, 60);  // accuracy in percent
  EXPECT_GE(l.accuracy->y.hi, 90);
  EXPECT_LE(l.accuracy->y.hi, 100);
  const plot::Image img = plot::decode_png(plot::render_curves(runs, {}));
  // Markers (filled discs) at the evaluations, in both panels.
  for (const auto& [step, loss, acc] : {std::tuple{50.0, 1.8, 60.0}, {100.0, 1.6, 90.0}}) {
    EXPECT_LE(nearest(img, px(l.loss, step), py(l.loss, loss), kBlue, 0), 30) << step;
    EXPECT_LE(nearest(img, px(*l.accuracy, step), py(*l.accuracy, acc), kBlue, 0), 30) << step;
  }
  // The dashed validation line between the markers: some pixels along it have the colour,
  // some (the gaps) do not.
  int on = 0, off = 0;
  for (double s = 55; s <= 95; s += 0.5) {
    const int d = nearest(img, px(l.loss, s), py(l.loss, 1.8 - 0.004 * (s - 50)), kBlue, 0);
    on += d <= 40;
    off += d > 150;
  }
  EXPECT_GT(on, 20);
  EXPECT_GT(off, 10);
}

// A run of one logged step (a one-epoch run) has no line to draw: its point is a disc.
TEST(Curves, ASingleTrainingPointIsDrawn) {
  plot::Run r{"a", "a.csv", {step_row(1, 2.31)}};
  r.rows.push_back(eval_row(1, 2.0));
  const std::vector<plot::Run> runs = {r};
  const plot::CurvesLayout l = plot::layout_curves(runs, {});
  const plot::Image img = plot::decode_png(plot::render_curves(runs, {}));
  EXPECT_LE(nearest(img, px(l.loss, 1), py(l.loss, 2.31), kBlue, 0), 30);
}

TEST(Curves, ResumedRowsReplaceTheStepsTheyRepeat) {
  plot::Run r{"a", "a.csv", {step_row(10, 3), step_row(20, 2), step_row(30, 9)}};
  r.rows.push_back(step_row(30, 1));  // a resumed run wrote step 30 again
  r.rows.push_back(step_row(25, 1.5));
  const plot::RunSeries s = plot::series_of(r);
  ASSERT_EQ(s.train.size(), 4u);
  EXPECT_EQ(s.train[2].step, 25);
  EXPECT_EQ(s.train[3].value, 1);
  EXPECT_TRUE(s.val.empty() && s.accuracy.empty());
  // Without step rows, the epoch rows' train loss is the training curve.
  plot::Run e{"e", "e.csv", {eval_row(5, 1)}};
  e.rows[0].train_loss = 2;
  EXPECT_EQ(plot::series_of(e).train.size(), 1u);
}

TEST(Curves, TheSameInputGivesTheSameBytes) {
  const std::vector<plot::Run> runs = {line_run("a", [](double s) { return 1 + s; }),
                                       line_run("b", [](double s) { return 2 + s; })};
  plot::CurveOptions o;
  o.title = "two runs";
  const std::string first = plot::render_curves(runs, o);
  EXPECT_EQ(plot::render_curves(runs, o), first);
  o.log_y = true;
  EXPECT_NE(plot::render_curves(runs, o), first);
}

TEST(Curves, Refusals) {
  EXPECT_EQ(error_of([] { plot::render_curves({}, {}); }), "plot: no runs to draw");
  plot::Run none{"a", "runs/a.csv", {eval_row(10, NAN, 0.5)}};
  EXPECT_EQ(error_of([&] { plot::render_curves({none}, {}); }),
            "plot: runs/a.csv: no train_loss or val_loss values to draw");
  plot::Run zero{"z", "runs/z.csv", {step_row(10, 1), step_row(20, 0)}};
  plot::CurveOptions o;
  o.log_y = true;
  EXPECT_EQ(error_of([&] { plot::render_curves({zero}, o); }),
            "plot: runs/z.csv line 4: train_loss 0 cannot go on a log scale (--log-y needs "
            "losses > 0)");
  o.log_y = false;
  o.width = 100;
  EXPECT_EQ(error_of([&] { plot::render_curves({zero}, o); }),
            "plot: a chart of 100 x 600 pixels is too small (at least 210 x 200)");
}

TEST(Curves, LegendLabelsAreFileNamesUnlessTwoShareOne) {
  EXPECT_EQ(plot::labels_for({"runs/lr1e-3.csv", "b.csv", "c.txt"}),
            (std::vector<std::string>{"lr1e-3", "b", "c.txt"}));
  EXPECT_EQ(plot::labels_for({"a/m.csv", "b/m.csv", "n.csv"}),
            (std::vector<std::string>{"a/m", "b/m", "n"}));
}

TEST(Axes, TicksAreOneTwoOrFiveTimesAPowerOfTen) {
  const plot::Axis a = plot::linear_axis(0.13, 2.07);
  EXPECT_EQ(a.step, 0.5);
  EXPECT_EQ(a.lo, 0);
  EXPECT_EQ(a.hi, 2.5);
  ASSERT_EQ(a.ticks.size(), 6u);
  EXPECT_EQ(a.label(a.ticks[3]), "1.5");
  const plot::Axis steps = plot::linear_axis(20, 2345, 8);
  EXPECT_EQ(steps.step, 500);
  EXPECT_EQ(steps.label(2000), "2000");
  const plot::Axis one = plot::linear_axis(3, 3);  // one value: widened around it
  EXPECT_LT(one.lo, 3);
  EXPECT_GT(one.hi, 3);
  const plot::Axis fine = plot::log_axis(0.03, 0.7);
  EXPECT_EQ(fine.lo, 0.02);
  EXPECT_EQ(fine.hi, 1);
  EXPECT_EQ(fine.ticks, (std::vector<double>{0.02, 0.05, 0.1, 0.2, 0.5, 1}));
  const plot::Axis decades = plot::log_axis(2e-4, 3);
  EXPECT_EQ(decades.ticks.size(), 4u);  // 1e-3, 1e-2, 1e-1, 1
  EXPECT_EQ(decades.label(1e-3), "0.001");
  EXPECT_NEAR(decades.fraction(decades.lo), 0, 1e-12);
  EXPECT_NEAR(decades.fraction(decades.hi), 1, 1e-12);
  EXPECT_EQ(error_of([] { plot::log_axis(0, 1); }),
            "plot: a log axis over [0, 1] (it needs 0 < lo <= hi)");
}
