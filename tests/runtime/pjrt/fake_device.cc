// The device half of the fake PJRT plugin (FAKE_MODE 3, see fake_plugin.cc): one device whose
// buffers live in host memory; compilation and execution go through the executor the test
// installs (fake_executor.h). Donation follows PJRT: an aliased argument that is not listed in
// non_donatable_input_indices is marked donated, and using it again is an error. Executions
// are asynchronous as PJRT's are: queued in order, run at once or, under Control::hold, when
// released or waited on.
#include "fake_device.h"

#include <algorithm>
#include <deque>

namespace fake_pjrt {
namespace {

CompileFn compile_fn = nullptr;
RunFn run_fn = nullptr;
std::deque<std::shared_ptr<Job>> queue;  // pending executions, oldest first

size_t pending() { return queue.size(); }

// Runs an execution: fails with the first failed input, the injected failure or the runner's
// error, each reaching its outputs.
void run(Job& j) {
  std::vector<const Tensor*> args;
  for (const auto& v : j.args) {
    if (!v->error.empty() && j.error.empty()) j.error = v->error;
    args.push_back(&v->t);
  }
  Control& k = *control();
  if (j.error.empty() && j.id == k.fail_execution) j.error = k.fail_message;
  std::vector<Tensor> outs;
  if (j.error.empty() && !run_fn(j.program, args, &outs, &j.error) && j.error.empty())
    j.error = "fake: the run failed";
  for (size_t i = 0; i < j.outs.size(); ++i) {
    if (j.error.empty())
      j.outs[i]->t = std::move(outs[i]);
    else
      j.outs[i]->error = j.error;
    j.outs[i]->producer.reset();  // ready
  }
  j.args.clear();
  j.done = true;
}

int release(int n) {
  int ran = 0;
  for (; !queue.empty() && (n < 0 || ran < n); ++ran) {
    std::shared_ptr<Job> j = queue.front();
    queue.pop_front();
    run(*j);
  }
  return ran;
}

// Something waits on `j`: it runs, with every older pending execution.
void run_until(std::shared_ptr<Job> j) {
  while (j && !j->done && !queue.empty()) {
    ++control()->forced;
    release(1);
  }
}

size_t element_size(int type) {
  switch (type) {
    case c::kPred:
      return 1;
    case c::kF16:
    case c::kBF16:
      return 2;
    case c::kF64:
      return 8;
    default:
      return 4;
  }
}

c::Device the_device{0};
c::Device* devices[] = {&the_device};

}  // namespace

Control* control() {
  static Control k{.pending = &pending, .release = &release};
  return &k;
}

void set_executor(CompileFn c, RunFn r) {
  compile_fn = c;
  run_fn = r;
}

c::Error* addressable_devices(c::ClientAddressableDevicesArgs* a) {
  a->devices = devices;
  a->num_devices = 1;
  return nullptr;
}

c::Error* event_await(c::EventArgs* a) {
  const auto& j = a->event->job;
  run_until(j);
  const std::string& error = j ? j->error : a->event->error;
  if (!error.empty()) return make_error(error, c::kInternal);
  return nullptr;
}
c::Error* event_is_ready(c::EventIsReadyArgs* a) {
  a->is_ready = !a->event->job || a->event->job->done;
  return nullptr;
}
c::Error* event_destroy(c::EventArgs* a) {
  delete a->event;
  return nullptr;
}

c::Error* buffer_from_host(c::ClientBufferFromHostBufferArgs* a) {
  if (a->struct_size < sizeof(c::ClientBufferFromHostBufferArgs))
    return make_error("Unexpected PJRT_Client_BufferFromHostBuffer_Args size", c::kInvalidArgument);
  if (a->device != &the_device) return make_error("unknown device", c::kInvalidArgument);
  if (a->byte_strides) return make_error("fake: strides unsupported", c::kUnimplemented);
  auto* b = new c::Buffer{std::make_shared<Value>()};
  Tensor& t = b->v->t;
  t.type = a->type;
  t.dims.assign(a->dims, a->dims + a->num_dims);
  size_t n = element_size(a->type);
  for (int64_t d : t.dims) n *= size_t(d);
  t.bytes.assign(static_cast<const char*>(a->data), n);
  a->buffer = b;
  a->done_with_host_buffer = new c::Event{};
  return nullptr;
}

c::Error* buffer_to_host(c::BufferToHostBufferArgs* a) {
  if (a->src->donated) return make_error("Buffer has been deleted or donated", c::kInvalidArgument);
  Value& v = *a->src->v;
  run_until(v.producer);   // the copy waits for the value
  if (!v.error.empty()) {  // as PJRT: the transfer's event carries the producer's error
    a->event = new c::Event{v.error, nullptr};
    return nullptr;
  }
  if (!a->dst) {
    a->dst_size = v.t.bytes.size();
    return nullptr;
  }
  if (a->dst_size < v.t.bytes.size())
    return make_error("fake: destination too small", c::kInvalidArgument);
  std::copy(v.t.bytes.begin(), v.t.bytes.end(), static_cast<char*>(a->dst));
  a->event = new c::Event{};
  return nullptr;
}

c::Error* buffer_ready_event(c::BufferReadyEventArgs* a) {
  if (a->buffer->donated)
    return make_error("Buffer has been deleted or donated", c::kInvalidArgument);
  a->event = new c::Event{a->buffer->v->error, a->buffer->v->producer};  // no producer: ready
  return nullptr;
}

c::Error* buffer_destroy(c::BufferArgs* a) {
  delete a->buffer;
  return nullptr;
}

c::Error* compile(c::ClientCompileArgs* a) {
  std::string format(a->program->format, a->program->format_size);
  if (format != "mlir")
    return make_error("Unknown program format '" + format + "'", c::kInvalidArgument);
  if (!compile_fn) return make_error("fake: no executor installed", c::kFailedPrecondition);
  std::string error;
  auto* e = new c::LoadedExecutable{};
  e->program = compile_fn(std::string(a->program->code, a->program->code_size),
                          std::string(a->compile_options, a->compile_options_size), &error,
                          &e->num_outputs, &e->aliased_inputs);
  if (!e->program) {
    delete e;
    return make_error(error, c::kInvalidArgument);
  }
  a->executable = e;
  return nullptr;
}

c::Error* loaded_destroy(c::LoadedExecutableArgs* a) {
  delete a->executable;
  return nullptr;
}
c::Error* get_executable(c::LoadedExecutableGetExecutableArgs* a) {
  a->executable = new c::Executable{a->loaded_executable->num_outputs};
  return nullptr;
}
c::Error* executable_destroy(c::ExecutableArgs* a) {
  delete a->executable;
  return nullptr;
}
c::Error* num_outputs(c::ExecutableNumOutputsArgs* a) {
  a->num_outputs = a->executable->num_outputs;
  return nullptr;
}

c::Error* execute(c::LoadedExecutableExecuteArgs* a) {
  if (a->struct_size < sizeof(c::LoadedExecutableExecuteArgs) ||
      a->options->struct_size < sizeof(c::ExecuteOptions))
    return make_error("Unexpected PJRT_LoadedExecutable_Execute_Args size", c::kInvalidArgument);
  if (a->num_devices != 1) return make_error("fake: one device", c::kInvalidArgument);
  auto job = std::make_shared<Job>();
  for (size_t i = 0; i < a->num_args; ++i) {
    c::Buffer* b = a->argument_lists[0][i];
    if (b->donated) return make_error("Buffer has been deleted or donated", c::kInvalidArgument);
    job->args.push_back(b->v);
  }
  Control& k = *control();
  job->id = ++k.executions;
  job->program = a->executable->program;
  for (size_t i = 0; i < a->executable->num_outputs; ++i)
    job->outs.push_back(std::make_shared<Value>(Value{{}, job, {}}));
  const c::ExecuteOptions& o = *a->options;
  for (int i : a->executable->aliased_inputs) {
    bool keep =
        std::find(o.non_donatable_input_indices,
                  o.non_donatable_input_indices + o.num_non_donatable_input_indices,
                  int64_t(i)) != o.non_donatable_input_indices + o.num_non_donatable_input_indices;
    if (!keep) a->argument_lists[0][i]->donated = true;
  }
  for (size_t i = 0; i < job->outs.size(); ++i)
    a->output_lists[0][i] = new c::Buffer{job->outs[i], false};
  if (a->device_complete_events && !k.no_complete_events)
    a->device_complete_events[0] = new c::Event{{}, job};
  queue.push_back(job);
  k.max_pending = std::max(k.max_pending, queue.size());
  if (!k.hold) release(-1);
  return nullptr;
}

void install(void** f) {
  f[c::kClientAddressableDevices] = reinterpret_cast<void*>(&addressable_devices);
  f[c::kEventAwait] = reinterpret_cast<void*>(&event_await);
  f[c::kEventIsReady] = reinterpret_cast<void*>(&event_is_ready);
  f[c::kEventDestroy] = reinterpret_cast<void*>(&event_destroy);
  f[c::kClientBufferFromHostBuffer] = reinterpret_cast<void*>(&buffer_from_host);
  f[c::kBufferToHostBuffer] = reinterpret_cast<void*>(&buffer_to_host);
  f[c::kBufferDestroy] = reinterpret_cast<void*>(&buffer_destroy);
  f[c::kBufferReadyEvent] = reinterpret_cast<void*>(&buffer_ready_event);
  f[c::kClientCompile] = reinterpret_cast<void*>(&compile);
  f[c::kLoadedExecutableDestroy] = reinterpret_cast<void*>(&loaded_destroy);
  f[c::kLoadedExecutableGetExecutable] = reinterpret_cast<void*>(&get_executable);
  f[c::kExecutableDestroy] = reinterpret_cast<void*>(&executable_destroy);
  f[c::kExecutableNumOutputs] = reinterpret_cast<void*>(&num_outputs);
  f[c::kLoadedExecutableExecute] = reinterpret_cast<void*>(&execute);
}

}  // namespace fake_pjrt
