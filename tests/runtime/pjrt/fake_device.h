// Internal to the fake PJRT plugins (fake_plugin.cc, fake_device.cc): the plugin-side objects.
#pragma once

#include <string>

#include "fake_executor.h"
#include "tlaloc/runtime/pjrt/c_api.h"

namespace c = tlaloc::runtime::pjrt::capi;

struct tlaloc::runtime::pjrt::capi::Error {
  std::string message;
  c::ErrorCode code;
};
struct tlaloc::runtime::pjrt::capi::Client {
  int unused;
};
struct tlaloc::runtime::pjrt::capi::Device {
  int id;
};
struct tlaloc::runtime::pjrt::capi::Event {
  std::string error;  // Await fails with it when not empty
};
struct tlaloc::runtime::pjrt::capi::Buffer {
  fake_pjrt::Tensor t;
  bool donated = false;
};
struct tlaloc::runtime::pjrt::capi::LoadedExecutable {
  void* program = nullptr;
  size_t num_outputs = 0;
  std::vector<int> aliased_inputs;
};
struct tlaloc::runtime::pjrt::capi::Executable {
  size_t num_outputs;
};

namespace fake_pjrt {
inline c::Error* make_error(std::string m, c::ErrorCode code) {
  return new c::Error{std::move(m), code};
}
void set_executor(CompileFn c, RunFn r);
// Puts the device functions (buffers, events, compile, execute) into the API table.
void install(void** functions);
}  // namespace fake_pjrt
