#include "tlaloc/runtime/pjrt/executable.h"

namespace tlaloc::runtime::pjrt {

PjrtExecutable::PjrtExecutable(ir::Function f, Client& client, Options options)
    : runtime::Executable(std::move(f)), client_(client) {
  mlir_ = stablehlo::emit(function(), options.emit);
  // A program with collectives runs on as many replicas as its module says (XLA wants the
  // executable built for them: ExecutableBuildOptions.num_replicas).
  CompileOptions co = options.compile;
  if (co.num_replicas == 1) co.num_replicas = stablehlo::num_replicas(function());
  exe_ = client_.compile(mlir_, co);
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

runtime::Buffer PjrtExecutable::to_lane(Array a) { return runtime::Buffer(client_.to_device(a)); }

Array PjrtExecutable::from_lane(const runtime::Buffer& device) {
  return client_.to_host(device.device());
}

std::vector<runtime::Buffer> PjrtExecutable::execute_buffers(std::span<runtime::Buffer> args,
                                                             bool donate) {
  const std::vector<bool> d = donation(donate);
  // The client runs on its own buffers: device arguments are moved out for the call and moved
  // back unless donated; host arguments are copied in.
  std::vector<Buffer> dev(args.size());
  auto give_back = [&] {  // what was moved out and not consumed
    for (size_t i = 0; i < args.size(); ++i)
      if (!args[i].on_host() && !dev[i].empty()) args[i].device() = std::move(dev[i]);
  };
  std::vector<Buffer> out;
  try {
    for (size_t i = 0; i < args.size(); ++i)
      dev[i] = args[i].on_host() ? client_.to_device(args[i].array()) : std::move(args[i].device());
    out = run_buffers(dev, donate);
  } catch (...) {
    give_back();
    throw;
  }
  give_back();  // donated device buffers come back empty
  for (size_t i = 0; i < args.size(); ++i)
    if (d[i]) args[i] = runtime::Buffer();
  std::vector<runtime::Buffer> res;
  res.reserve(out.size());
  for (Buffer& b : out) res.emplace_back(std::move(b));
  return res;
}

std::unique_ptr<PjrtExecutable> compile(const ir::Function& f, Client& client,
                                        const Options& options) {
  return std::make_unique<PjrtExecutable>(f, client, options);
}

}  // namespace tlaloc::runtime::pjrt
