#include "tlaloc/runtime/executable.h"

namespace tlaloc::runtime {

void Executable::check_inputs(std::span<const Array> inputs) const {
  if (int(inputs.size()) != fn_.num_inputs())
    fail("{}: expected {} inputs, got {}", fn_.name, fn_.num_inputs(), inputs.size());
  for (int i = 0; i < fn_.num_inputs(); ++i) {
    const auto& t = fn_.input_type(i);
    const Array& a = inputs[size_t(i)];
    if (a.dtype() != t.dtype || a.shape() != t.shape) {
      std::string nm = size_t(i) < fn_.input_names.size() ? fn_.input_names[size_t(i)] : "";
      fail("{}: input {}{} is {} but the function takes {}", fn_.name, i,
           nm.empty() ? "" : " (" + nm + ")", describe(a), ir::to_string(t));
    }
  }
}

}  // namespace tlaloc::runtime
