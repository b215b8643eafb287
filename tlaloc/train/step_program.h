// Internal to tlaloc/train: the capture the Trainer's programs share (step_program.cpp).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// "a, b, c", or "none".
std::string join_names(std::span<const std::string> names);

// Captures (data..., buffers..., frozen params..., trainable params...) -> the outputs of `fn`
// applied to `model` (parameter_order's order), dots under the autocast compute type
// `compute`. With `updated`, the inputs the step gives new values follow as extra outputs: the
// buffers a forward gave a new value (Module::set_buffer), then each step_index input plus
// one, their input positions going to *updated; without it such updates are dropped
// (evaluation). With `seed`, an f32 scalar input "loss_scale" comes just
// before the trainable parameters, and the first output is the loss times it, the unscaled loss
// last (build_gradient moves it back).
ir::Function capture_model(nn::Module& model, const LossFn& fn, const std::vector<DataInput>& data,
                           const char* name, DType compute, std::vector<size_t>* updated = nullptr,
                           bool seed = false);

}  // namespace tlaloc::train
