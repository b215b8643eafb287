#include "tlaloc/runtime/pjrt/executable.h"

namespace tlaloc::runtime::pjrt {

PjrtExecutable::PjrtExecutable(ir::Function f, Client& client, Options options)
    : runtime::Executable(std::move(f)), client_(client) {
  mlir_ = stablehlo::emit(function(), options.emit);
  exe_ = client_.compile(mlir_, options.compile);
  for (int i = 0; i < function().num_outputs(); ++i)
    out_types_.push_back(function().output_type(i));
}

std::vector<bool> PjrtExecutable::donation(bool donate) const {
  std::vector<bool> d(size_t(function().num_inputs()), false);
  if (donate)
    for (const ir::Alias& a : function().aliases) d[size_t(a.input)] = true;
  return d;
}

std::vector<Buffer> PjrtExecutable::run_buffers(std::span<Buffer> args, bool donate) {
  if (int(args.size()) != function().num_inputs())
    fail("{}: expected {} device inputs, got {}", function().name, function().num_inputs(),
         args.size());
  for (int i = 0; i < function().num_inputs(); ++i)
    if (args[size_t(i)].type() != function().input_type(i))
      fail("{}: device input {} is {} but the function takes {}", function().name, i,
           ir::to_string(args[size_t(i)].type()), ir::to_string(function().input_type(i)));
  return client_.execute(*exe_, args, out_types_, donation(donate));
}

std::vector<Array> PjrtExecutable::run(std::span<const Array> inputs) {
  check_inputs(inputs);
  std::vector<Buffer> args;
  for (const Array& a : inputs) args.push_back(client_.to_device(a));
  std::vector<Buffer> out = run_buffers(args, false);
  std::vector<Array> res;
  for (const Buffer& b : out) res.push_back(client_.to_host(b));
  return res;
}

std::vector<Array> PjrtExecutable::run_donated(std::span<Array> inputs) {
  std::vector<bool> d = donation(true);
  for (size_t i = 0; i < inputs.size() && i < d.size(); ++i)
    if (d[i] && inputs[i].empty())
      fail("{}: donated input {} is empty (already donated)", function().name, i);
  check_inputs(inputs);
  std::vector<Buffer> args;
  for (const Array& a : inputs) args.push_back(client_.to_device(a));
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i]) inputs[i] = Array();  // the caller gave this input up
  std::vector<Buffer> out = run_buffers(args, true);
  std::vector<Array> res;
  for (const Buffer& b : out) res.push_back(client_.to_host(b));
  return res;
}

std::unique_ptr<PjrtExecutable> compile(const ir::Function& f, Client& client,
                                        const Options& options) {
  return std::make_unique<PjrtExecutable>(f, client, options);
}

}  // namespace tlaloc::runtime::pjrt
