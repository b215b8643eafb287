// The programs a Trainer compiles, captured from a model and a loss function: the forward
// (capture_model), its gradient and the whole train step (trainer.h's build_gradient and
// build_train_step), and the parameter order they share.
#include "tlaloc/train/step_program.h"

#include <fmt/format.h>

#include <algorithm>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/trace/autocast.h"

namespace tlaloc::train {

std::vector<size_t> parameter_order(nn::Module& model) {
  auto named = model.named_parameters();
  std::vector<size_t> order;
  for (bool trainable : {false, true})
    for (size_t i = 0; i < named.size(); ++i)
      if (named[i].param->requires_grad == trainable) order.push_back(i);
  return order;
}

int num_trainable(nn::Module& model) {
  int n = 0;
  for (auto& p : model.named_parameters()) n += p.param->requires_grad;
  return n;
}

std::string join_names(std::span<const std::string> names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// Captures (data..., buffers..., frozen params..., trainable params...) -> the outputs of `fn`
// applied to `model` (parameter_order's order), dots under the autocast compute type
// `compute`. With `updated`, the buffers a forward gave a new value (Module::set_buffer) follow
// as extra outputs, their indices into named_buffers() going to *updated; without it such
// updates are dropped (evaluation). With `seed`, an f32 scalar input "loss_scale" comes just
// before the trainable parameters, and the first output is the loss times it, the unscaled loss
// last (build_gradient moves it back).
ir::Function capture_model(nn::Module& model, const LossFn& fn, const std::vector<DataInput>& data,
                           const char* name, DType compute, std::vector<size_t>* updated,
                           bool seed) {
  auto named = model.named_parameters();
  auto buffers = model.named_buffers();
  const std::vector<size_t> order = parameter_order(model);
  std::vector<ir::TensorType> types;
  std::vector<std::string> names;
  for (const auto& d : data) {
    for (const auto& n : names)
      if (n == d.name) fail("{}: two data inputs are named '{}'", name, d.name);
    types.push_back(d.type);
    names.push_back(d.name);
  }
  const size_t nd = data.size(), nb = buffers.size();
  const std::vector<std::string> data_names = names;
  for (const auto& b : buffers) {
    types.push_back({b.buffer->value.dtype(), b.buffer->value.shape()});
    names.push_back(b.name);
  }
  const size_t nfrozen = order.size() - size_t(num_trainable(model));
  for (size_t k = 0; k < order.size(); ++k) {
    if (seed && k == nfrozen) {
      types.push_back({DType::f32, Shape{}});
      names.push_back("loss_scale");
    }
    types.push_back({named[order[k]].param->value.dtype(), named[order[k]].param->value.shape()});
    names.push_back(named[order[k]].name);
  }
  if (updated) updated->clear();
  trace::Autocast autocast(compute);
  ir::Function f = trace::capture(
      [&](std::span<const trace::Tensor> in) {
        std::vector<trace::Tensor> bound(named.size());
        for (size_t k = 0; k < order.size(); ++k)
          bound[order[k]] = in[nd + nb + k + size_t(seed && k >= nfrozen)];
        model.bind(bound);
        model.bind_buffers(in.subspan(nd, nb));
        auto outs = fn(model, Inputs(in.subspan(0, nd), data_names));
        if (outs.empty()) fail("{}: the loss function returned no outputs", name);

        for (size_t i = 0; updated && i < nb; ++i)
          if (buffers[i].buffer->updated.valid()) {
            outs.push_back(buffers[i].buffer->updated);
            updated->push_back(nd + i);
          }
        for (size_t i = 0; updated && i < nd; ++i)
          if (data[i].step_index) {
            outs.push_back(
                in[i] + trace::Tensor(&in[i].builder(), in[i].builder().scalar(DType::s32, 1.0)));
            updated->push_back(i);
          }
        if (seed) {
          outs.push_back(outs[0]);
          outs[0] = outs[0] * trace::astype(in[nd + nb + nfrozen], outs[0].dtype());
        }
        return outs;
      },
      types, names, {}, name);
  // Unbind so a stale capture is never used.
  for (auto& p : named) p.param->bound = {};
  for (auto& b : buffers) b.buffer->bound = b.buffer->updated = {};
  return passes::simplify(f);
}

const trace::Tensor& Inputs::operator[](std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return tensors_[i];
  fail("loss function: no data input is named '{}' (the inputs are {})", name, join_names(names_));
}

bool Inputs::contains(std::string_view name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

ir::Function build_gradient(nn::Module& model, const LossFn& loss,
                            const std::vector<DataInput>& data, int64_t* forward_ops,
                            std::vector<size_t>* input_updates, DType compute, bool loss_seed) {
  std::vector<size_t> updated;
  ir::Function fwd = capture_model(model, loss, data, "forward", compute, &updated, loss_seed);
  if (input_updates) *input_updates = updated;
  const ir::TensorType& lt = fwd.output_type(0);
  if (lt.shape.rank() != 0 || !is_floating(lt.dtype))
    fail("train step: the loss must be a floating scalar, got {}", ir::to_string(lt));
  if (forward_ops) *forward_ops = fwd.num_ops();
  const int num_params = num_trainable(model);
  if (num_params == 0)
    fail(
        "train step: every parameter of the model is frozen (requires_grad false): nothing to "
        "train");
  const int first = fwd.num_inputs() - num_params;
  std::vector<int> wrt;
  for (int i = 0; i < num_params; ++i) wrt.push_back(first + i);
  ir::Function g = autodiff::value_and_grad(fwd, wrt);
  if (loss_seed) {  // (S·loss, aux..., loss, grads...) -> (loss, aux..., grads...)
    const size_t at = size_t(fwd.num_outputs()) - 1;
    g.results[0] = g.results[at];
    g.results.erase(g.results.begin() + std::ptrdiff_t(at));
    if (g.output_names.size() > at) {
      g.output_names[0] = fwd.output_names.empty() ? "loss" : fwd.output_names[0];
      g.output_names.erase(g.output_names.begin() + std::ptrdiff_t(at));
    }
  }
  return passes::simplify(g);
}

optim::TrainStep build_train_step(nn::Module& model, const LossFn& loss,
                                  const std::vector<DataInput>& data, const optim::Optimizer& opt,
                                  const optim::UpdateOptions& update, int64_t* forward_ops,
                                  int64_t* gradient_ops, std::vector<size_t>* input_updates,
                                  DType compute, ir::Function* gradient) {
  optim::validate(opt);
  optim::UpdateOptions u = update;
  if (compute == DType::f16 && !u.loss_scaling) u.loss_scaling.emplace();  // GradScaler's
  // The next step indices, the last aux outputs, are the same on every rank.
  u.replicated_aux =
      int(std::count_if(data.begin(), data.end(), [](const DataInput& d) { return d.step_index; }));
  ir::Function grad = build_gradient(model, loss, data, forward_ops, input_updates, compute,
                                     u.loss_scaling.has_value());
  if (gradient_ops) *gradient_ops = grad.num_ops();
  const int num_params = num_trainable(model);
  optim::TrainStep step = optim::append_update(opt, grad, num_params, u);
  step.fn = passes::simplify(step.fn);
  if (gradient) *gradient = std::move(grad);
  return step;
}

}  // namespace tlaloc::train
