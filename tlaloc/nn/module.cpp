#include "tlaloc/nn/module.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include "tlaloc/random/program.h"

namespace tlaloc::nn {

Parameter& Module::register_parameter(std::string name, Array value) {
  for (auto& p : params_)
    if (p->name == name) fail("{}: parameter '{}' registered twice", repr(), name);
  params_.push_back(
      std::make_unique<Parameter>(Parameter{std::move(name), std::move(value), {}, true}));
  return *params_.back();
}

Parameter& Module::parameter(const std::string& name) {
  for (auto& p : params_)
    if (p->name == name) return *p;
  fail("{}: no parameter '{}'", repr(), name);
}

const trace::Tensor& Module::param(const std::string& name) const {
  for (auto& p : params_)
    if (p->name == name) {
      if (!p->bound.valid())
        fail("{}: parameter '{}' is not bound: run the model inside a capture after bind()", repr(),
             name);
      return p->bound;
    }
  fail("{}: no parameter '{}'", repr(), name);
}

Buffer& Module::register_buffer(std::string name, Array value) {
  for (auto& b : buffers_)
    if (b->name == name) fail("{}: buffer '{}' registered twice", repr(), name);
  for (auto& p : params_)
    if (p->name == name) fail("{}: buffer '{}' has the name of a parameter", repr(), name);
  buffers_.push_back(std::make_unique<Buffer>(Buffer{std::move(name), std::move(value), {}, {}}));
  return *buffers_.back();
}

Buffer& Module::buffer_slot(const std::string& name) {
  for (auto& b : buffers_)
    if (b->name == name) return *b;
  fail("{}: no buffer '{}'", repr(), name);
}

const trace::Tensor& Module::buffer(const std::string& name) const {
  for (auto& b : buffers_)
    if (b->name == name) {
      if (!b->bound.valid())
        fail("{}: buffer '{}' is not bound: run the model inside a capture after bind_buffers()",
             repr(), name);
      return b->bound;
    }
  fail("{}: no buffer '{}'", repr(), name);
}

void Module::set_buffer(const std::string& name, const trace::Tensor& value) {
  Buffer& b = buffer_slot(name);
  if (value.dtype() != b.value.dtype() || value.shape() != b.value.shape())
    fail("{}: buffer '{}' is {} but its new value is {}", repr(), name, describe(b.value),
         ir::to_string(value.type()));
  b.updated = value;
}

void Module::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  for (auto& b : buffers_) out.push_back({prefix + b->name, b.get()});
  for (auto& [n, m] : children_) m->collect_buffers(prefix + n + ".", out);
}

std::vector<NamedBuffer> Module::named_buffers() {
  std::vector<NamedBuffer> out;
  collect_buffers("", out);
  return out;
}

void Module::bind_buffers(std::span<const trace::Tensor> buffers) {
  auto named = named_buffers();
  if (named.size() != buffers.size())
    fail("{}: bind_buffers got {} tensors for {} buffers", repr(), buffers.size(), named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    const Array& v = named[i].buffer->value;
    const auto& t = buffers[i];
    if (t.dtype() != v.dtype() || t.shape() != v.shape())
      fail("bind_buffers: buffer '{}' is {} but the tensor is {}", named[i].name, describe(v),
           ir::to_string(t.type()));
    named[i].buffer->bound = t;
    named[i].buffer->updated = {};
  }
}

void Module::collect(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (auto& p : params_) out.push_back({prefix + p->name, p.get()});
  for (auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

void Module::collect_modules(std::vector<Module*>& out) {
  out.push_back(this);
  for (auto& c : children_) c.second->collect_modules(out);
}

void Module::collect_named(const std::string& name,
                           std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(name, this);
  for (auto& [n, m] : children_) m->collect_named(name.empty() ? n : name + "." + n, out);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_named("", out);
  return out;
}

std::vector<NamedParameter> Module::named_parameters() {
  std::vector<NamedParameter> out;
  collect("", out);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (auto& p : named_parameters()) n += p.param->value.numel();
  return n;
}

void Module::bind(std::span<const trace::Tensor> params) {
  auto named = named_parameters();
  if (named.size() != params.size())
    fail("{}: bind got {} tensors for {} parameters", repr(), params.size(), named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    const Array& v = named[i].param->value;
    const auto& t = params[i];
    if (t.dtype() != v.dtype() || t.shape() != v.shape())
      fail("bind: parameter '{}' is {} but the tensor is {}", named[i].name, describe(v),
           ir::to_string(t.type()));
    named[i].param->bound = t;
  }
}

void Module::init(const random::Key& key) {
  std::vector<Module*> all, mods;
  collect_modules(all);
  for (Module* m : all)
    if (m->takes_init_key()) mods.push_back(m);
  auto keys = random::split(key, int(mods.size()));
  for (size_t i = 0; i < mods.size(); ++i) mods[i]->reset_parameters(keys[i]);
}

void Module::train(bool mode) {
  std::vector<Module*> mods;
  collect_modules(mods);
  for (Module* m : mods) m->training_ = mode;
}

void Module::bind_key(const trace::Tensor& key) {
  if (key.dtype() != DType::u32 || key.shape() != Shape{2})
    fail("{}: bind_key needs a u32[2] key, got {}", repr(), ir::to_string(key.type()));
  std::vector<Module*> mods;
  collect_modules(mods);
  for (size_t i = 0; i < mods.size(); ++i) {
    mods[i]->root_key_ = key;
    mods[i]->key_index_ = uint32_t(i);
  }
}

trace::Tensor Module::key() const {
  if (!root_key_.valid())
    fail("{}: no random key bound: call bind_key() on the model inside the capture, or eval()",
         repr());
  ir::Builder& b = root_key_.builder();
  return random::fold_in(root_key_, {&b, b.scalar(DType::u32, double(key_index_))});
}

void Module::print_tree(std::string& out, const std::string& name, int indent) const {
  std::string pad(size_t(indent), ' ');
  out += pad + (name.empty() ? "" : "(" + name + "): ") + repr();
  if (!children_.empty()) {
    out += "(\n";
    for (auto& [n, m] : children_) {
      m->print_tree(out, n, indent + 2);
      out += "\n";
    }
    out += pad + ")";
  }
}

Module& Module::child(const std::string& name) const {
  std::string have;
  for (auto& [n, m] : children_) {
    if (n == name) return *m;
    have += (have.empty() ? "" : ", ") + n;
  }
  fail("{}: no child module '{}' (children: {})", repr(), name, have.empty() ? "none" : have);
}

std::string Module::to_string() const {
  std::string out;
  print_tree(out, "", 0);
  return out;
}

int freeze(Module& m, const std::vector<std::string>& patterns) {
  auto named = m.named_parameters();
  std::vector<Parameter*> hit;
  for (const auto& pat : patterns) {
    bool any = false;
    for (auto& p : named)
      if (fnmatch(pat.c_str(), p.name.c_str(), 0) == 0) {
        hit.push_back(p.param);
        any = true;
      }
    if (!any) fail("freeze: the pattern '{}' matches no parameter of the model", pat);
  }
  int n = 0;
  for (Parameter* p : hit) {
    n += p->requires_grad;
    p->requires_grad = false;
  }
  return n;
}

}  // namespace tlaloc::nn
