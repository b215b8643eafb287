#include "tlaloc/runtime/executable.h"

#include "tlaloc/runtime/pjrt/client.h"

namespace tlaloc::runtime {

Buffer::Buffer() = default;
Buffer::Buffer(Array a) : v_(std::move(a)) {}
Buffer::Buffer(pjrt::Buffer b) : v_(std::make_unique<pjrt::Buffer>(std::move(b))) {}
Buffer::Buffer(Buffer&&) noexcept = default;
Buffer& Buffer::operator=(Buffer&&) noexcept = default;
Buffer::~Buffer() = default;

bool Buffer::empty() const {
  if (const Array* a = std::get_if<Array>(&v_)) return a->raw() == nullptr;
  if (const auto* d = std::get_if<std::unique_ptr<pjrt::Buffer>>(&v_)) return !*d || (*d)->empty();
  return true;
}

bool Buffer::on_host() const {
  const Array* a = std::get_if<Array>(&v_);
  return a && a->raw() != nullptr;
}

ir::TensorType Buffer::type() const {
  if (empty()) fail("runtime::Buffer: the buffer is empty (never set, or donated)");
  if (on_host()) return {array().dtype(), array().shape()};
  return device().type();
}

bool Buffer::has_type(const ir::TensorType& t) const {
  if (empty()) return false;
  if (on_host()) return array().dtype() == t.dtype && array().shape() == t.shape;
  return device().type() == t;
}

const Array& Buffer::array() const {
  if (!on_host()) fail("runtime::Buffer: not a host buffer");
  return std::get<Array>(v_);
}

Array Buffer::take_array() {
  if (!on_host()) fail("runtime::Buffer: not a host buffer");
  Array a = std::move(std::get<Array>(v_));
  v_ = std::monostate{};
  return a;
}

pjrt::Buffer& Buffer::device() {
  auto* d = std::get_if<std::unique_ptr<pjrt::Buffer>>(&v_);
  if (!d || !*d) fail("runtime::Buffer: not a device buffer");
  return **d;
}

const pjrt::Buffer& Buffer::device() const { return const_cast<Buffer*>(this)->device(); }

bool Event::ready() const { return !e_ || e_->ready(); }

void Event::wait() const {
  if (e_) e_->wait();
}

Event Buffer::done() const {
  const auto* d = std::get_if<std::unique_ptr<pjrt::Buffer>>(&v_);
  return d && *d ? Event((*d)->done()) : Event();
}

std::string Executable::input_label(int i) const {
  const auto& names = fn_.input_names;
  return size_t(i) < names.size() && !names[size_t(i)].empty() ? " (" + names[size_t(i)] + ")" : "";
}

void Executable::check_count(size_t n) const {
  if (int64_t(n) != fn_.num_inputs())
    fail("{}: expected {} inputs, got {}", fn_.name, fn_.num_inputs(), n);
}

void Executable::input_error(int i, bool empty, const ir::TensorType& got, bool donating) const {
  // An empty input (moved from, or donated to an earlier run) would read a null pointer.
  if (empty) {
    bool donated = false;
    for (const ir::Alias& a : fn_.aliases) donated = donated || (donating && a.input == i);
    fail("{}: {}input {}{} is empty (already donated?)", fn_.name, donated ? "donated " : "", i,
         input_label(i));
  }
  fail("{}: input {}{} is {} but the function takes {}", fn_.name, i, input_label(i),
       ir::to_string(got), ir::to_string(fn_.input_type(i)));
}

Buffer Executable::upload(Array a) {
  if (a.raw() == nullptr) fail("{}: uploading an empty array", fn_.name);
  return to_lane(std::move(a));
}

Array Executable::download(const Buffer& b) {
  if (b.empty()) fail("{}: downloading an empty buffer (never set, or donated)", fn_.name);
  return b.on_host() ? b.array() : from_lane(b);
}

Array Executable::download(Buffer&& b) {
  if (b.on_host()) return b.take_array();
  return download(static_cast<const Buffer&>(b));
}

std::vector<Buffer> Executable::run(std::span<Buffer> args, bool donate) {
  check_count(args.size());
  for (int i = 0; i < fn_.num_inputs(); ++i) {
    const Buffer& b = args[size_t(i)];
    if (!b.has_type(fn_.input_type(i)))
      input_error(i, b.empty(), b.empty() ? ir::TensorType{} : b.type(), donate);
  }
  return execute_buffers(args, donate);
}

// Checks count, storage, dtypes and shapes of host inputs against the function's parameters.
void Executable::check_arrays(std::span<const Array> inputs, bool donating) const {
  check_count(inputs.size());
  for (int i = 0; i < fn_.num_inputs(); ++i) {
    const Array& a = inputs[size_t(i)];
    const ir::TensorType& t = fn_.input_type(i);
    if (a.raw() == nullptr || a.dtype() != t.dtype || a.shape() != t.shape)
      input_error(i, a.raw() == nullptr, {a.dtype(), a.shape()}, donating);
  }
}

std::vector<Array> Executable::run(std::span<const Array> inputs) {
  check_arrays(inputs, false);
  return execute_arrays(inputs);
}

std::vector<Array> Executable::run_donated(std::span<Array> inputs) {
  check_arrays(inputs, true);
  return execute_donated(inputs);
}

std::vector<Array> Executable::execute_arrays(std::span<const Array> inputs) {
  std::vector<Buffer> args;
  args.reserve(inputs.size());
  for (const Array& a : inputs) args.push_back(to_lane(a));
  std::vector<Buffer> out = execute_buffers(args, false);
  std::vector<Array> res;
  res.reserve(out.size());
  for (Buffer& b : out) res.push_back(download(std::move(b)));
  return res;
}

std::vector<Array> Executable::execute_donated(std::span<Array> inputs) {
  // The inputs travel as host buffers: lent (and given back) unless donated.
  std::vector<Buffer> args;
  args.reserve(inputs.size());
  for (Array& a : inputs) args.emplace_back(std::move(a));
  std::vector<Buffer> out;
  try {
    out = execute_buffers(args, true);
  } catch (...) {
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].on_host()) inputs[i] = args[i].take_array();
    throw;
  }
  for (size_t i = 0; i < args.size(); ++i)
    inputs[i] = args[i].on_host() ? args[i].take_array() : Array();
  std::vector<Array> res;
  res.reserve(out.size());
  for (Buffer& b : out) res.push_back(download(std::move(b)));
  return res;
}

}  // namespace tlaloc::runtime
