#include "tlaloc/runtime/pjrt/client.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

namespace tlaloc::runtime::pjrt {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

capi::BufferType buffer_type(DType t) {
  switch (t) {
    case DType::f32:
      return capi::kF32;
    case DType::f64:
      return capi::kF64;
    case DType::bf16:
      return capi::kBF16;
    case DType::f16:
      return capi::kF16;
    case DType::s32:
      return capi::kS32;
    case DType::u32:
      return capi::kU32;
    case DType::i1:
      return capi::kPred;  // one byte per element, as tlaloc stores i1
  }
  fail("pjrt: unknown dtype");
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    plugin_ = o.plugin_;
    handle_ = o.handle_;
    type_ = std::move(o.type_);
    done_ = std::move(o.done_);
    o.handle_ = nullptr;
  }
  return *this;
}

void Buffer::reset() {
  done_.reset();
  if (!handle_) return;
  capi::BufferArgs a{sizeof(a), nullptr, handle_};
  handle_ = nullptr;
  try {
    plugin_->call(capi::kBufferDestroy, &a, "PJRT_Buffer_Destroy");
  } catch (const Error&) {
    // Destroy only fails for a plugin bug; nothing to recover in a destructor.
  }
}

Event::~Event() {
  capi::EventArgs a{sizeof(a), nullptr, handle_};
  try {
    plugin_->call(capi::kEventDestroy, &a, "PJRT_Event_Destroy");
  } catch (const Error&) {
  }
}

bool Event::ready() const {
  if (done_) return true;
  capi::EventIsReadyArgs a{sizeof(a), nullptr, handle_, false};
  plugin_->call(capi::kEventIsReady, &a, "PJRT_Event_IsReady");
  return a.is_ready;
}

void Event::wait() const {
  if (!done_) {
    const int64_t t0 = now_ns();
    capi::EventArgs a{sizeof(a), nullptr, handle_};
    try {
      plugin_->call(capi::kEventAwait, &a, "PJRT execution");
    } catch (const Error& e) {
      error_ = e.what();
    }
    done_ = true;
    ++counter_->waits;
    counter_->ns += now_ns() - t0;
  }
  if (!error_.empty()) fail("{}", error_);
}

LoadedExecutable::~LoadedExecutable() {
  capi::LoadedExecutableArgs a{sizeof(a), nullptr, handle_};
  try {
    plugin_->call(capi::kLoadedExecutableDestroy, &a, "PJRT_LoadedExecutable_Destroy");
  } catch (const Error&) {
  }
}

std::unique_ptr<Client> Client::create(const Plugin& plugin, const ClientOptions& options) {
  std::vector<capi::NamedValue> nv;
  auto named = [&](const char* name, capi::NamedValueType type) -> capi::NamedValue& {
    capi::NamedValue v{};
    v.struct_size = sizeof(v);
    v.name = name;
    v.name_size = std::strlen(name);
    v.type = type;
    v.value_size = 1;
    return nv.emplace_back(v);
  };
  if (options.memory_fraction) {
    float f = *options.memory_fraction;
    if (!(f > 0.0f && f <= 1.0f)) fail("pjrt: memory_fraction {} is not in (0, 1]", f);
    named("memory_fraction", capi::kFloat).float_value = f;
  }
  if (options.preallocate) named("preallocate", capi::kBool).bool_value = *options.preallocate;
  if (!options.allocator.empty()) {
    auto& v = named("allocator", capi::kString);
    v.string_value = options.allocator.c_str();
    v.value_size = options.allocator.size();
  }
  capi::ClientCreateArgs a{};
  a.struct_size = sizeof(a);
  a.create_options = nv.data();
  a.num_options = nv.size();
  plugin.call(capi::kClientCreate, &a, "PJRT_Client_Create");
  std::unique_ptr<Client> c(new Client(&plugin, a.client));
  capi::ClientAddressableDevicesArgs d{};
  d.struct_size = sizeof(d);
  d.client = a.client;
  plugin.call(capi::kClientAddressableDevices, &d, "PJRT_Client_AddressableDevices");
  c->devices_.assign(d.devices, d.devices + d.num_devices);
  return c;
}

Client::~Client() {
  cache_.clear();
  capi::ClientDestroyArgs a{sizeof(a), nullptr, handle_};
  try {
    plugin_->call(capi::kClientDestroy, &a, "PJRT_Client_Destroy");
  } catch (const Error&) {
  }
}

std::string Client::platform_name() const {
  capi::ClientStringArgs a{sizeof(a), nullptr, handle_, nullptr, 0};
  plugin_->call(capi::kClientPlatformName, &a, "PJRT_Client_PlatformName");
  return std::string(a.value, a.value_size);
}

std::string Client::platform_version() const {
  capi::ClientStringArgs a{sizeof(a), nullptr, handle_, nullptr, 0};
  plugin_->call(capi::kClientPlatformVersion, &a, "PJRT_Client_PlatformVersion");
  return std::string(a.value, a.value_size);
}

void Client::await(capi::Event* e, std::string_view what) const {
  if (!e) return;
  capi::EventArgs a{sizeof(a), nullptr, e};
  struct Destroy {  // events are destroyed whether or not they carry an error
    const Plugin* p;
    capi::EventArgs a;
    ~Destroy() {
      try {
        p->call(capi::kEventDestroy, &a, "PJRT_Event_Destroy");
      } catch (const Error&) {
      }
    }
  } guard{plugin_, a};
  plugin_->call(capi::kEventAwait, &a, what);
}

std::shared_ptr<LoadedExecutable> Client::compile(const std::string& mlir,
                                                  const CompileOptions& options) {
  CompileOptions o = options;
  bool has_dir = false;
  for (const OptionOverride& ov : o.overrides)
    has_dir = has_dir || ov.name == "xla_gpu_cuda_data_dir";
  if (!has_dir && !plugin_->cuda_data_dir().empty())
    o.overrides.push_back({"xla_gpu_cuda_data_dir", plugin_->cuda_data_dir()});
  std::string opts = serialize(o);
  std::string key = opts + '\0' + mlir;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  capi::Program prog{sizeof(prog), nullptr, const_cast<char*>(mlir.data()), mlir.size(), "mlir", 4};
  capi::ClientCompileArgs a{};
  a.struct_size = sizeof(a);
  a.client = handle_;
  a.program = &prog;
  a.compile_options = opts.data();
  a.compile_options_size = opts.size();
  plugin_->call(capi::kClientCompile, &a, "PJRT_Client_Compile");
  // Own the loaded executable before asking it anything.
  auto exe = std::make_shared<LoadedExecutable>(plugin_, a.executable, 0);
  capi::LoadedExecutableGetExecutableArgs g{sizeof(g), nullptr, a.executable, nullptr};
  plugin_->call(capi::kLoadedExecutableGetExecutable, &g, "PJRT_LoadedExecutable_GetExecutable");
  capi::ExecutableNumOutputsArgs n{sizeof(n), nullptr, g.executable, 0};
  capi::ExecutableArgs d{sizeof(d), nullptr, g.executable};
  try {
    plugin_->call(capi::kExecutableNumOutputs, &n, "PJRT_Executable_NumOutputs");
  } catch (...) {
    plugin_->call(capi::kExecutableDestroy, &d, "PJRT_Executable_Destroy");
    throw;
  }
  plugin_->call(capi::kExecutableDestroy, &d, "PJRT_Executable_Destroy");
  exe->num_outputs_ = n.num_outputs;
  return cache_[key] = exe;
}

size_t Client::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

Client::CallTimes Client::call_times() const {
  CallTimes t;
  t.uploads = uploads_.load();
  t.executes = executes_.load();
  t.downloads = downloads_.load();
  t.upload_ms = double(upload_ns_.load()) * 1e-6;
  t.execute_ms = double(execute_ns_.load()) * 1e-6;
  t.download_ms = double(download_ns_.load()) * 1e-6;
  t.waits = waits_->waits.load();
  t.wait_ms = double(waits_->ns.load()) * 1e-6;
  return t;
}

Buffer Client::to_device(const Array& x) {
  if (devices_.empty()) fail("pjrt: the client has no device");
  const int64_t t0 = now_ns();
  std::vector<int64_t> dims = x.shape().dims;
  capi::ClientBufferFromHostBufferArgs a{};
  a.struct_size = sizeof(a);
  a.client = handle_;
  a.data = x.raw();
  a.type = buffer_type(x.dtype());
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = 0;  // kImmutableOnlyDuringCall: the call copies or waits
  a.device = devices_[0];
  plugin_->call(capi::kClientBufferFromHostBuffer, &a, "PJRT_Client_BufferFromHostBuffer");
  Buffer b(plugin_, a.buffer, {x.dtype(), x.shape()});
  await(a.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer (transfer)");
  ++uploads_;
  upload_ns_ += now_ns() - t0;
  return b;
}

Array Client::to_host(const Buffer& b) {
  if (b.empty()) fail("pjrt: reading a buffer that was donated or never set");
  const int64_t t0 = now_ns();
  Array out(b.type().dtype, b.type().shape);
  capi::BufferToHostBufferArgs a{};
  a.struct_size = sizeof(a);
  a.src = b.handle();
  a.dst = out.raw();
  a.dst_size = out.nbytes();
  plugin_->call(capi::kBufferToHostBuffer, &a, "PJRT_Buffer_ToHostBuffer");
  await(a.event, "PJRT_Buffer_ToHostBuffer (transfer)");
  ++downloads_;
  download_ns_ += now_ns() - t0;
  return out;
}

std::vector<Buffer> Client::execute(LoadedExecutable& exe, std::span<Buffer> args,
                                    std::span<const ir::TensorType> output_types,
                                    const std::vector<bool>& donate) {
  if (output_types.size() != exe.num_outputs())
    fail("pjrt: the executable has {} outputs, {} types given", exe.num_outputs(),
         output_types.size());
  if (donate.size() != args.size())
    fail("pjrt: {} donation flags for {} arguments", donate.size(), args.size());
  std::vector<capi::Buffer*> in;
  std::vector<int64_t> keep;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].empty()) fail("pjrt: argument {} is empty (already donated?)", i);
    in.push_back(args[i].handle());
    if (!donate[i]) keep.push_back(int64_t(i));
  }
  const int64_t t0 = now_ns();
  capi::ExecuteOptions opts{};
  opts.struct_size = sizeof(opts);
  opts.non_donatable_input_indices = keep.data();
  opts.num_non_donatable_input_indices = keep.size();
  capi::Buffer* const* arg_list = in.data();
  std::vector<capi::Buffer*> out(exe.num_outputs(), nullptr);
  capi::Buffer** out_list = out.data();
  capi::Event* done = nullptr;
  capi::LoadedExecutableExecuteArgs a{};
  a.struct_size = sizeof(a);
  a.executable = exe.handle();
  a.options = &opts;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = in.size();
  a.output_lists = &out_list;
  a.device_complete_events = &done;
  plugin_->call(capi::kLoadedExecutableExecute, &a, "PJRT_LoadedExecutable_Execute");
  // Owned before anything else can throw; the device may still be running the program.
  auto event = done ? std::make_shared<Event>(plugin_, done, waits_) : nullptr;
  std::vector<Buffer> results;
  for (size_t i = 0; i < out.size(); ++i)
    results.emplace_back(plugin_, out[i], output_types[i], event);
  for (size_t i = 0; i < args.size(); ++i)
    if (donate[i]) args[i].reset();  // donated: the handle is dead either way
  if (!event && !results.empty()) {
    // A plugin that gave no completion event: the first output's ready event stands for it
    // (an execution's outputs are defined together).
    capi::BufferReadyEventArgs r{sizeof(r), nullptr, results[0].handle(), nullptr};
    plugin_->call(capi::kBufferReadyEvent, &r, "PJRT_Buffer_ReadyEvent");
    event = std::make_shared<Event>(plugin_, r.event, waits_);
    for (Buffer& b : results) b.done_ = event;
  }
  ++executes_;
  execute_ns_ += now_ns() - t0;
  return results;
}

Status probe_at(const SearchPaths& paths, const ClientOptions& options,
                std::unique_ptr<Client>* client) {
  Status st;
  std::optional<std::string> path = find_plugin(paths);
  if (!path) {
    st.reason = kNoPluginReason;
    return st;
  }
  std::unique_ptr<Client> c;
  try {
    c = Client::create(Plugin::load(*path), options);
    if (c->num_devices() == 0)
      st.reason =
          fmt::format("no device: PJRT plugin {} ({}) sees no device", *path, c->platform_name());
  } catch (const Error& e) {
    st.reason = e.what();
  }
  for (char& ch : st.reason)
    if (ch == '\n') ch = ' ';  // one line
  st.ok = st.reason.empty();
  if (st.ok && client) *client = std::move(c);
  return st;
}

namespace {

struct Probe {
  Status status;
  std::unique_ptr<Client> client;
};

Probe& the_probe(const ClientOptions* options) {
  static std::once_flag once;
  static Probe probe;
  std::call_once(once, [&] {
    probe.status = probe_at(SearchPaths::from_environment(), options ? *options : ClientOptions{},
                            &probe.client);
    // The CUDA runtime the plugin loaded tears itself down in an exit handler registered while
    // the client was created; this one, registered after it, runs first, so the client (its
    // streams, events and device memory) is destroyed while CUDA still works.
    if (probe.client) std::atexit([] { the_probe(nullptr).client.reset(); });
  });
  return probe;
}

}  // namespace

Status probe(const ClientOptions& options) { return the_probe(&options).status; }

Client& default_client() {
  Probe& p = the_probe(nullptr);
  if (!p.client) fail("pjrt lane unavailable: {}", p.status.reason);
  return *p.client;
}

}  // namespace tlaloc::runtime::pjrt
