// The pjrt lane's runtime::Executable: an ir::Function emitted as StableHLO
// (stablehlo::emit), compiled by the client's plugin (cached by program text) and run on
// device 0. Its lane buffers are device buffers: upload() copies an array to the device,
// run(buffers) keeps everything there (the Trainer's path: parameters and moments stay
// resident between steps, donated so XLA updates them in place), download() copies back.
// run(arrays) / run_donated(arrays) copy the inputs to the device and the outputs back.
#pragma once

#include <memory>

#include "tlaloc/runtime/executable.h"
#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/stablehlo/emit.h"

namespace tlaloc::runtime::pjrt {

struct Options {
  stablehlo::EmitOptions emit;  // e.g. precision HIGHEST for full-f32 dots
  CompileOptions compile;       // e.g. {"xla_gpu_deterministic_ops", true}
};

class PjrtExecutable : public runtime::Executable {
 public:
  PjrtExecutable(ir::Function f, Client& client, Options options);

  // On the client's own buffers: args in the function's input order and types; with donate,
  // the aliased arguments are consumed (left empty) and their storage reused for the outputs.
  // Throws tlaloc::Error naming the device input whose type differs.
  std::vector<Buffer> run_buffers(std::span<Buffer> args, bool donate);

  const std::string& program() const { return mlir_; }  // the emitted StableHLO
  Client& client() const { return client_; }

 protected:
  runtime::Buffer to_lane(Array a) override;
  Array from_lane(const runtime::Buffer& device) override;
  // Host buffers among `args` are copied to the device for this run; a donated one is
  // consumed like a device buffer.
  std::vector<runtime::Buffer> execute_buffers(std::span<runtime::Buffer> args,
                                               bool donate) override;

 private:
  std::vector<bool> donation(bool donate) const;

  Client& client_;
  std::string mlir_;
  std::shared_ptr<LoadedExecutable> exe_;
  std::vector<ir::TensorType> out_types_;
};

// Emits, compiles (through the client's cache) and wraps `f`. Throws tlaloc::Error if f fails
// verification or XLA rejects the program (with XLA's message).
std::unique_ptr<PjrtExecutable> compile(const ir::Function& f, Client& client,
                                        const Options& options = {});

}  // namespace tlaloc::runtime::pjrt
