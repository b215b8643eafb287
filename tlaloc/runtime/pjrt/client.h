// A PJRT client on a loaded plugin: device buffers, compilation with a cache keyed by program
// text, and asynchronous execution with donation. Every handle is owned by an RAII object
// (Buffer, LoadedExecutable, Event; errors never escape client.cpp), and every PJRT_Error becomes
// a tlaloc::Error carrying the plugin's message.
//
// Execution is asynchronous, as PJRT's is: execute() returns the output buffers as soon as the
// plugin has queued the program; each output holds the execution's completion Event. Reading an
// output (to_host) waits for it; Event::wait() waits without reading and reports a failure of
// the device run.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/pjrt/compile_options.h"
#include "tlaloc/runtime/pjrt/plugin.h"

namespace tlaloc::runtime::pjrt {

// PJRT_Client_Create options, as the CUDA plugin names them (unset: the plugin's default, which
// is the BFC allocator preallocating 75% of device memory).
struct ClientOptions {
  std::optional<float> memory_fraction;  // (0, 1]: share of device memory the allocator may use
  std::optional<bool> preallocate;       // reserve that share when the client starts
  std::string allocator;                 // "" (default), "platform", "bfc", "cuda_async"
};

// Waits on events and the time spent, shared by a client and its events (their counters).
struct WaitCounter {
  std::atomic<int64_t> waits{0}, ns{0};
};

// A PJRT event, owned (PJRT_Event_Destroy when the last holder lets go). Its outcome is kept
// once known, so it is awaited at most once; not thread-safe.
class Event {
 public:
  Event(const Plugin* plugin, capi::Event* handle, std::shared_ptr<WaitCounter> counter)
      : plugin_(plugin), handle_(handle), counter_(std::move(counter)) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  // Whether it is done (PJRT_Event_IsReady), without blocking.
  bool ready() const;
  // Blocks until done (PJRT_Event_Await, counted by the client's call_times().waits). Throws
  // tlaloc::Error "PJRT execution: <plugin message> (<code>)" when the event carries an error,
  // at this and every later call.
  void wait() const;

 private:
  const Plugin* plugin_;
  capi::Event* handle_;
  std::shared_ptr<WaitCounter> counter_;
  mutable bool done_ = false;
  mutable std::string error_;  // the failure, once known ("" = success)
};

// A buffer on the device, move-only. Empty after it was donated. An execution's output holds
// that execution's completion event (done()); an uploaded buffer holds none.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Plugin* plugin, capi::Buffer* handle, ir::TensorType type,
         std::shared_ptr<Event> done = nullptr)
      : plugin_(plugin), handle_(handle), type_(std::move(type)), done_(std::move(done)) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  bool empty() const { return handle_ == nullptr; }
  const ir::TensorType& type() const { return type_; }
  capi::Buffer* handle() const { return handle_; }
  // The completion event of the execution that produced it (null: an upload, or empty).
  const std::shared_ptr<Event>& done() const { return done_; }
  void reset();  // PJRT_Buffer_Destroy

 private:
  const Plugin* plugin_ = nullptr;
  capi::Buffer* handle_ = nullptr;
  ir::TensorType type_;
  std::shared_ptr<Event> done_;
  friend class Client;  // sets done_ once the execution's event is known
};

// A compiled program loaded on the client's devices.
class LoadedExecutable {
 public:
  LoadedExecutable(const Plugin* plugin, capi::LoadedExecutable* handle, size_t num_outputs)
      : plugin_(plugin), handle_(handle), num_outputs_(num_outputs) {}
  LoadedExecutable(const LoadedExecutable&) = delete;
  LoadedExecutable& operator=(const LoadedExecutable&) = delete;
  ~LoadedExecutable();
  capi::LoadedExecutable* handle() const { return handle_; }
  size_t num_outputs() const { return num_outputs_; }

 private:
  friend class Client;
  const Plugin* plugin_;
  capi::LoadedExecutable* handle_;
  size_t num_outputs_;
};

class Client {
 public:
  // PJRT_Client_Create with `options`. Throws tlaloc::Error with the plugin's message (e.g. no
  // CUDA device, an option the plugin does not accept).
  static std::unique_ptr<Client> create(const Plugin& plugin, const ClientOptions& options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  const Plugin& plugin() const { return *plugin_; }
  std::string platform_name() const;                        // "cuda"
  std::string platform_version() const;                     // plugin's platform version string
  int num_devices() const { return int(devices_.size()); }  // addressable devices

  // Compiles StableHLO text (format "mlir") for device 0. Cached by (text, options): a second
  // call with the same program returns the same executable. Adds the override
  // xla_gpu_cuda_data_dir = plugin().cuda_data_dir() unless options set it. Throws with XLA's
  // message.
  std::shared_ptr<LoadedExecutable> compile(const std::string& mlir,
                                            const CompileOptions& options = {});
  size_t cache_size() const;

  // Copies a host array to device 0 (waits until the copy is done).
  Buffer to_device(const Array& a);
  // Copies a device buffer back (waits for it).
  Array to_host(const Buffer& b);
  // Host-to-device and device-to-host copies made by this client so far (to_device / to_host
  // calls): lets tests and reports check that resident state is not re-uploaded every step.
  int64_t uploads() const { return uploads_.load(); }
  int64_t downloads() const { return downloads_.load(); }
  // Calls so far and the wall time spent in them (milliseconds), for reports that split a step
  // into its uploads, execution and downloads. Uploads and downloads include their transfer
  // waits (a download also waits for the execution that produces its buffer). execute_ms is
  // dispatch time only (PJRT_LoadedExecutable_Execute queueing the program), not device time;
  // waits / wait_ms count the Event::wait() calls on executions and the time blocked in them.
  struct CallTimes {
    int64_t uploads = 0, executes = 0, downloads = 0, waits = 0;
    double upload_ms = 0, execute_ms = 0, download_ms = 0, wait_ms = 0;
  };
  CallTimes call_times() const;

  // Queues `exe` on device 0 and returns its outputs without waiting for the device; each
  // output's done() is the execution's completion event (from a plugin that gives none, the first
  // output's PJRT_Buffer_ReadyEvent). `output_types` are the program's result types. Arguments
  // with donate[i] set are consumed (left empty): XLA reuses those that the program aliases
  // (tf.aliasing_output) for outputs; the others are read only, and may be destroyed at once
  // (PJRT keeps what a queued execution reads). Throws tlaloc::Error if an
  // argument is empty or the plugin refuses the call; a failure of the device run itself comes
  // from the completion event (Event::wait) or from reading an output.
  std::vector<Buffer> execute(LoadedExecutable& exe, std::span<Buffer> args,
                              std::span<const ir::TensorType> output_types,
                              const std::vector<bool>& donate);

 private:
  Client(const Plugin* plugin, capi::Client* handle) : plugin_(plugin), handle_(handle) {}
  void await(capi::Event* e, std::string_view what) const;

  const Plugin* plugin_;
  capi::Client* handle_;
  std::vector<capi::Device*> devices_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<LoadedExecutable>> cache_;
  std::atomic<int64_t> uploads_{0}, downloads_{0}, executes_{0};
  std::atomic<int64_t> upload_ns_{0}, download_ns_{0}, execute_ns_{0};
  std::shared_ptr<WaitCounter> waits_ = std::make_shared<WaitCounter>();
};

// Whether the pjrt lane can start: ok, or a one-line reason ("no PJRT plugin: set
// TLALOC_PJRT_PLUGIN or install jax-cuda13-pjrt", "PJRT plugin X has PJRT API 0.N, tlaloc
// needs ...", "no device: ...").
struct Status {
  bool ok = false;
  std::string reason;  // empty when ok; else one line
  explicit operator bool() const { return ok; }
};

// Finds the plugin on `paths`, loads it, creates a client with `options` and checks that it
// sees a device; the client goes to *client when ok and client is not null. Never throws:
// every failure is the reason.
Status probe_at(const SearchPaths& paths, const ClientOptions& options,
                std::unique_ptr<Client>* client = nullptr);
// Finds and loads the plugin from the environment (SearchPaths::from_environment), creates the
// process-wide client with `options` on first success and checks it has a device. Later calls
// return the first result.
Status probe(const ClientOptions& options = {});
// The client that probe() created; throws tlaloc::Error with probe's reason if there is none.
Client& default_client();

// PJRT_Buffer_Type of a dtype.
capi::BufferType buffer_type(DType t);

}  // namespace tlaloc::runtime::pjrt
