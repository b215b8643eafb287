#include "tlaloc/train/disc.h"

#include "tlaloc/nn/losses.h"
#include "tlaloc/random/random.h"

namespace tlaloc::train::disc {

float label(double x, double y) {
  double dx = x - kCenterX, dy = y - kCenterY;
  return dx * dx + dy * dy <= kRadius * kRadius ? 1.0f : -1.0f;
}

Data make_data(random::Key key, int64_t n) {
  Data d;
  d.x = random::uniform(key, Shape{n, 2}, DType::f32, -1.0, 1.0);
  d.y = Array(DType::f32, Shape{n, 1});
  const float* x = d.x.data<float>();
  float* y = d.y.data<float>();
  for (int64_t i = 0; i < n; ++i) y[i] = label(x[2 * i], x[2 * i + 1]);
  return d;
}

std::shared_ptr<nn::Sequential> make_model() { return nn::mlp({2, 16, 16, 1}); }

LossFn mse_loss_fn() {
  return [](nn::Module& m, std::span<const trace::Tensor> d) {
    return std::vector<trace::Tensor>{nn::mse_loss(m(d[0]), d[1])};
  };
}

std::vector<DataInput> data_inputs(int64_t n) {
  return {{"x", {DType::f32, Shape{n, 2}}, true}, {"y", {DType::f32, Shape{n, 1}}, true}};
}

optim::TrainStep train_step(int64_t points) {
  auto model = make_model();
  model->init(random::key(20260921));
  return build_train_step(*model, mse_loss_fn(), data_inputs(points), optim::Adam{.lr = 0.02});
}

double accuracy(const Array& pred, const Array& y) {
  if (pred.numel() != y.numel() || pred.numel() == 0)
    fail("disc::accuracy: {} predictions for {} labels", pred.numel(), y.numel());
  const float* p = pred.data<float>();
  const float* t = y.data<float>();
  int64_t ok = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) ok += (p[i] >= 0) == (t[i] > 0);
  return double(ok) / double(pred.numel());
}

Array grid_points(int rows, int cols) {
  Array g(DType::f32, Shape{int64_t(rows) * cols, 2});
  float* p = g.data<float>();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      size_t i = size_t(r) * size_t(cols) + size_t(c);
      p[2 * i] = float(-1.0 + (c + 0.5) * 2.0 / cols);
      p[2 * i + 1] = float(1.0 - (r + 0.5) * 2.0 / rows);
    }
  return g;
}

std::string ascii_boundary(const Array& pred, int rows, int cols, int* disagreeing) {
  Array g = grid_points(rows, cols);
  const float* p = pred.data<float>();
  const float* xy = g.data<float>();
  std::string out = std::string("  learned") + std::string(size_t(cols) - 5, ' ') + "true\n";
  int bad = 0;
  for (int r = 0; r < rows; ++r) {
    std::string left = "  ", right;
    for (int c = 0; c < cols; ++c) {
      size_t i = size_t(r) * size_t(cols) + size_t(c);
      bool truth = label(xy[2 * i], xy[2 * i + 1]) > 0;
      bool learned = p[i] >= 0;
      if (truth != learned) ++bad;
      left += truth != learned ? 'X' : (learned ? '#' : '.');
      right += truth ? '#' : '.';
    }
    out += left + "   " + right + "\n";
  }
  if (disagreeing) *disagreeing = bad;
  return out;
}

}  // namespace tlaloc::train::disc
