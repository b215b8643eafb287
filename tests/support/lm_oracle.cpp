#include "support/lm_oracle.h"

#include <algorithm>

#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/compile.h"

namespace tlaloc::testing {

std::vector<float> RecomputeOracle::last_logits(std::span<const int32_t> tokens) {
  const int64_t n = int64_t(tokens.size()), V = model_.config().vocab;
  auto named = model_.named_parameters();
  auto& exe = by_length_[tokens.size()];
  if (!exe) {
    std::vector<ir::TensorType> types{{DType::s32, Shape{1, n}}};
    for (auto& p : named) types.push_back({p.param->value.dtype(), p.param->value.shape()});
    ir::Function f = trace::capture(
        [&](std::span<const trace::Tensor> in) {
          model_.bind(in.subspan(1));
          return std::vector<trace::Tensor>{model_(in[0])};
        },
        types);
    exe = runtime::host::compile(passes::expand_composites(f), {.num_threads = 1});
  }
  std::vector<Array> in{
      Array::from(Shape{1, n}, std::vector<int32_t>(tokens.begin(), tokens.end()))};
  for (auto& p : named) in.push_back(p.param->value);
  Array out = exe->run(in)[0];  // [1, n, V]
  const float* l = out.data<float>() + (n - 1) * V;
  return std::vector<float>(l, l + V);
}

std::vector<float> RecomputeOracle::next_logits(std::span<const int32_t> history) {
  const size_t ctx = size_t(model_.config().context);
  return last_logits(history.subspan(history.size() - std::min(history.size(), ctx)));
}

}  // namespace tlaloc::testing
