// Fake PJRT plugins for the CPU tests of tlaloc's plugin loading (built as shared libraries
// by fake_plugins.cmake; not a test binary). FAKE_MODE 0: no GetPjrtApi symbol; 1: an old
// API version (0.40); 2: API 0.105 with errors, initialize and a client with no device whose
// create options are checked the way the CUDA plugin checks them; 3: as 2 with one device
// that computes through an executor the test installs (fake_device.cc).
#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_device.h"

using fake_pjrt::make_error;

#if FAKE_MODE == 0
extern "C" __attribute__((visibility("default"))) int not_a_pjrt_plugin() { return 1; }
#else
namespace {

void error_destroy(c::ErrorDestroyArgs* a) { delete a->error; }
void error_message(c::ErrorMessageArgs* a) {
  a->message = a->error->message.data();
  a->message_size = a->error->message.size();
}
c::Error* error_get_code(c::ErrorGetCodeArgs* a) {
  a->code = a->error->code;
  return nullptr;
}
int initialized = 0;
c::Error* plugin_initialize(c::PluginInitializeArgs* a) {
  if (a->struct_size < sizeof(c::PluginInitializeArgs))
    return make_error("Unexpected PJRT_Plugin_Initialize_Args size", c::kInvalidArgument);
  ++initialized;
  return nullptr;
}
c::Error* client_create(c::ClientCreateArgs* a) {
  if (a->struct_size < sizeof(c::ClientCreateArgs))
    return make_error("Unexpected PJRT_Client_Create_Args size", c::kInvalidArgument);
  for (size_t i = 0; i < a->num_options; ++i) {
    const c::NamedValue& v = a->create_options[i];
    std::string name(v.name, v.name_size);
    if (name == "memory_fraction") {
      if (v.type != c::kFloat)
        return make_error("memory_fraction must be a float", c::kInvalidArgument);
      if (!(v.float_value > 0 && v.float_value <= 1))
        return make_error("fake: memory_fraction out of range", c::kInvalidArgument);
    } else if (name == "preallocate") {
      if (v.type != c::kBool) return make_error("preallocate must be a bool", c::kInvalidArgument);
    } else if (name == "allocator") {
      if (v.type != c::kString || std::string(v.string_value, v.value_size) == "bogus")
        return make_error("fake: unknown allocator", c::kInvalidArgument);
    } else {
      return make_error("Unexpected option name passed to PJRT_Client_Create: " + name,
                        c::kInvalidArgument);
    }
  }
  a->client = new c::Client{0};
  return nullptr;
}
c::Error* client_destroy(c::ClientDestroyArgs* a) {
  delete a->client;
  return nullptr;
}
c::Error* client_platform_name(c::ClientStringArgs* a) {
  a->value = "fake";
  a->value_size = 4;
  return nullptr;
}
c::Error* client_devices(c::ClientAddressableDevicesArgs* a) {
  a->devices = nullptr;
  a->num_devices = 0;
  return nullptr;
}
c::Error* client_compile(c::ClientCompileArgs* a) {
  return make_error("fake plugin cannot compile " + std::to_string(a->program->code_size) +
                        " bytes of " + std::string(a->program->format, a->program->format_size) +
                        " with " + std::to_string(a->compile_options_size) + " bytes of options",
                    c::kUnimplemented);
}

struct ApiStorage {
  c::Api head;
  void* more[200];
};

ApiStorage make_api() {
  ApiStorage s{};
  s.head.struct_size = c::kApiFunctionsOffset + 8 * 136;
  s.head.pjrt_api_version = {sizeof(c::Version), nullptr, 0, FAKE_MODE == 1 ? 40 : 105};
  void** f = s.head.functions;
  f[c::kErrorDestroy] = reinterpret_cast<void*>(&error_destroy);
  f[c::kErrorMessage] = reinterpret_cast<void*>(&error_message);
  f[c::kErrorGetCode] = reinterpret_cast<void*>(&error_get_code);
  f[c::kPluginInitialize] = reinterpret_cast<void*>(&plugin_initialize);
  f[c::kClientCreate] = reinterpret_cast<void*>(&client_create);
  f[c::kClientDestroy] = reinterpret_cast<void*>(&client_destroy);
  f[c::kClientPlatformName] = reinterpret_cast<void*>(&client_platform_name);
  f[c::kClientAddressableDevices] = reinterpret_cast<void*>(&client_devices);
  f[c::kClientCompile] = reinterpret_cast<void*>(&client_compile);
#if FAKE_MODE == 3
  fake_pjrt::install(f);
#endif
  return s;
}

ApiStorage api = make_api();

}  // namespace

extern "C" __attribute__((visibility("default"))) const c::Api* GetPjrtApi() { return &api.head; }
extern "C" __attribute__((visibility("default"))) int fake_pjrt_initialize_count() {
  return initialized;
}
#if FAKE_MODE == 3
extern "C" __attribute__((visibility("default"))) void fake_pjrt_set_executor(
    fake_pjrt::CompileFn c, fake_pjrt::RunFn r) {
  fake_pjrt::set_executor(c, r);
}
extern "C" __attribute__((visibility("default"))) fake_pjrt::Control* fake_pjrt_control() {
  return fake_pjrt::control();
}
#endif
#endif
