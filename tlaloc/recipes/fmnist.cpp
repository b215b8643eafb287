#include "tlaloc/train/fmnist.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "tlaloc/nn/losses.h"
#include "tlaloc/random/random.h"

namespace tlaloc::train::fmnist {

std::vector<int64_t> parse_sizes(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string tok = s.substr(pos, end - pos);
    char* rest = nullptr;
    long long v = std::strtoll(tok.c_str(), &rest, 10);
    if (tok.empty() || *rest != '\0' || v <= 0)
      fail("{} '{}': expected positive sizes separated by commas, e.g. 512,256", what, s);
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

std::shared_ptr<nn::Sequential> make_model(const std::vector<int64_t>& hidden) {
  std::vector<int64_t> sizes{kPixels};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(kClasses);
  return nn::mlp(sizes);
}

std::vector<DataInput> data_inputs(int64_t n, int64_t batch) {
  return {{"images", {DType::f32, Shape{n, kPixels}}, true},
          {"labels", {DType::s32, Shape{n}}, true},
          {"idx", {DType::s32, Shape{batch}}, false},
          {"weight", {DType::f32, Shape{batch}}, false}};
}

LossFn loss_fn() {
  return [](nn::Module& m, std::span<const trace::Tensor> d) {
    trace::Tensor x = trace::take_rows(d[0], d[2]);
    trace::Tensor y = trace::take_rows(d[1], d[2]);
    return std::vector<trace::Tensor>{nn::cross_entropy(m(x), y, d[3])};
  };
}

LossFn logits_fn() {
  return [](nn::Module& m, std::span<const trace::Tensor> d) {
    return std::vector<trace::Tensor>{m(d[0])};
  };
}

optim::TrainStep train_step(int64_t rows, int64_t batch, const std::vector<int64_t>& hidden) {
  auto model = make_model(hidden);
  model->init(random::key(20260921));
  return build_train_step(*model, loss_fn(), data_inputs(rows, batch),
                          optim::AdamW{.lr = 1e-3, .weight_decay = 1e-2});
}

std::vector<int32_t> epoch_order(random::Key key, int64_t epoch, int64_t n) {
  return random::permutation_indices(random::fold_in(key, uint32_t(epoch)), n);
}

int64_t steps_per_epoch(int64_t n, int64_t batch) { return (n + batch - 1) / batch; }

std::pair<Array, Array> make_batch(const std::vector<int32_t>& order, int64_t b, int64_t batch) {
  int64_t n = int64_t(order.size());
  if (b < 0 || b >= steps_per_epoch(n, batch))
    fail("fmnist: batch {} out of range for {} rows in batches of {}", b, n, batch);
  Array idx(DType::s32, Shape{batch});
  Array w(DType::f32, Shape{batch});
  int32_t* ip = idx.data<int32_t>();
  float* wp = w.data<float>();
  for (int64_t i = 0; i < batch; ++i) {
    int64_t r = b * batch + i;
    bool real = r < n;
    ip[i] = real ? order[size_t(r)] : 0;
    wp[i] = real ? 1.0f : 0.0f;
  }
  return {std::move(idx), std::move(w)};
}

Metrics evaluate(const Array& logits, const Array& labels) {
  if (logits.shape().rank() != 2 || logits.shape()[1] != kClasses ||
      labels.numel() != logits.shape()[0])
    fail("fmnist::evaluate: logits {} and labels {} disagree", describe(logits), describe(labels));
  Metrics m;
  m.confusion.assign(kClasses, std::vector<int64_t>(kClasses, 0));
  const float* z = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  int64_t n = labels.numel(), correct = 0;
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * kClasses;
    int best = 0;
    double mx = row[0];
    for (int c = 1; c < kClasses; ++c)
      if (row[c] > mx) mx = row[c], best = c;
    double s = 0;
    for (int c = 0; c < kClasses; ++c) s += std::exp(double(row[c]) - mx);
    loss += std::log(s) + mx - row[y[i]];
    correct += best == y[i];
    m.confusion[size_t(y[i])][size_t(best)]++;
  }
  m.loss = loss / double(n);
  m.accuracy = double(correct) / double(n);
  return m;
}

std::string format_confusion(const Metrics& m) {
  std::string out = fmt::format("{:>14} |", "true \\ pred");
  for (int c = 0; c < kClasses; ++c) out += fmt::format(" {:>5}", c);
  out += " | accuracy\n" + std::string(15, '-') + "+" + std::string(6 * kClasses, '-') +
         "-+---------\n";
  for (int t = 0; t < kClasses; ++t) {
    int64_t total = 0;
    for (int64_t v : m.confusion[size_t(t)]) total += v;
    out += fmt::format("{:>11} {:>2} |", io::kFashionMnistClasses[size_t(t)], t);
    for (int c = 0; c < kClasses; ++c)
      out += fmt::format(" {:>5}", m.confusion[size_t(t)][size_t(c)]);
    double acc = total ? double(m.confusion[size_t(t)][size_t(t)]) / double(total) : 0;
    out += fmt::format(" | {:6.2f}%\n", 100 * acc);
  }
  return out;
}

}  // namespace tlaloc::train::fmnist
