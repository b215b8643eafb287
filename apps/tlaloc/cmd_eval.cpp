// tlaloc eval CKPT: test accuracy and confusion matrix of a saved Fashion-MNIST model.
#include <fmt/format.h>

#include "apps/tlaloc/commands.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/fmnist.h"

namespace tlaloc::app {

namespace {

std::vector<int64_t> hidden_of(const io::Checkpoint& c) {
  auto it = c.user.find("hidden");
  if (c.user.count("recipe") == 0 || c.user.at("recipe") != "fmnist" || it == c.user.end())
    fail("{}: not a `tlaloc train fmnist` checkpoint (no recipe=fmnist / hidden metadata)",
         c.source);
  return train::fmnist::parse_sizes(it->second, c.source + ": metadata user.hidden");
}

void run_eval(const std::string& path, const std::string& data) {
  using namespace tlaloc::train;
  io::Checkpoint c = io::load_checkpoint(path);
  auto model = fmnist::make_model(hidden_of(c));
  restore_model(*model, c);
  io::ImageSet test = io::load_fashion_mnist(data, false);
  auto named = model->named_parameters();
  std::vector<ir::TensorType> types{{DType::f32, test.images.shape()}};
  for (auto& p : named) types.push_back({p.param->value.dtype(), p.param->value.shape()});
  ir::Function f = trace::capture(
      [&](std::span<const trace::Tensor> in) {
        model->bind(in.subspan(1));
        return std::vector<trace::Tensor>{(*model)(in[0])};
      },
      types);
  auto exe = runtime::host::compile(f);
  std::vector<Array> inputs;
  inputs.push_back(std::move(test.images));
  for (auto& p : named) inputs.push_back(p.param->value);
  auto m = fmnist::evaluate(exe->run(inputs)[0], test.labels);
  fmt::print("{}: step {}, {} parameters\n", path, c.step, model->num_parameters());
  fmt::print("test loss {:.4f}  test accuracy {:.2f}% on {} images\n\n", m.loss, 100 * m.accuracy,
             test.labels.numel());
  fmt::print("{}", fmnist::format_confusion(m));
}

}  // namespace

void register_eval(CLI::App& app) {
  static std::string path, data = io::kFashionMnistDir;
  auto* cmd =
      app.add_subcommand("eval", "test accuracy and confusion matrix of a fmnist checkpoint");
  cmd->add_option("CKPT", path, "checkpoint written by `tlaloc train fmnist`")->required();
  cmd->add_option("--data", data, "folder with the idx .gz files")->capture_default_str();
  cmd->callback([] { run_eval(path, data); });
}

}  // namespace tlaloc::app
