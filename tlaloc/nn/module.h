// Modules in the PyTorch style: a module owns named parameters (host Arrays) and child modules;
// forward() runs on symbolic trace::Tensors during a capture. Parameters enter a captured
// program as inputs: bind() attaches one symbolic input per parameter before forward runs.
// Names are PyTorch's dotted state_dict names ("0.weight", "blocks.1.attn.q_proj.bias").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/random/random.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::nn {

struct Parameter {
  std::string name;     // local name within its module ("weight")
  Array value;          // host value; the Trainer keeps the live copy on the lane
  trace::Tensor bound;  // the symbolic input during a capture
  // torch.nn.Parameter.requires_grad: false freezes it (a Trainer input with no gradient and no
  // optimizer state, never donated; see train/trainer.h).
  bool requires_grad = true;
};

// A parameter seen from the root: its dotted name and the slot holding it.
struct NamedParameter {
  std::string name;
  Parameter* param;
};

// A buffer (torch.nn.Module.register_buffer): state that is not trained, e.g. BatchNorm's
// running statistics. It enters a captured program as an input (bind_buffers); a
// training-mode forward may give it a new value (Module::set_buffer), which the Trainer's step
// returns as an output and keeps for the next step. Checkpoints hold buffers beside the
// parameters under their dotted names, as PyTorch's state_dict does.
struct Buffer {
  std::string name;       // local name within its module ("running_mean")
  Array value;            // host value; the Trainer keeps the live copy on the lane
  trace::Tensor bound;    // the symbolic input during a capture
  trace::Tensor updated;  // the new value a forward set during this capture, else empty
};

struct NamedBuffer {
  std::string name;
  Buffer* buffer;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Symbolic forward pass; parameters read through param().
  virtual trace::Tensor forward(const trace::Tensor& x) = 0;
  trace::Tensor operator()(const trace::Tensor& x) { return forward(x); }
  // One line describing this module ("Linear(in_features=2, out_features=16, bias=True)").
  virtual std::string repr() const = 0;
  // (Re)initialises this module's own parameters from `key`; children are initialised by
  // init(). Modules without parameters do nothing.
  virtual void reset_parameters(const random::Key& key) { (void)key; }
  // False for modules left out of init()'s key split (Dropout), so that adding them to a model
  // leaves every other module's initial values unchanged.
  virtual bool takes_init_key() const { return true; }

  // Initialises every parameter of the tree: `key` is split into one key per module
  // (pre-order), so a model is a pure function of the seed.
  void init(const random::Key& key);
  // Every parameter of the tree, pre-order, in registration order, with dotted names.
  std::vector<NamedParameter> named_parameters();
  // Every module of the tree, pre-order, with dotted names ("" for this one), as
  // torch.nn.Module.named_modules.
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t num_parameters();  // total element count
  // Every buffer of the tree, pre-order, in registration order, with dotted names.
  std::vector<NamedBuffer> named_buffers();
  // Training mode of the whole tree (torch.nn.Module.train / eval; modules start in training
  // mode). Read at capture time: Dropout is active only in training mode.
  void train(bool mode = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  // Binds a random key for a capture: `key` is a symbolic u32[2] (random/program.h), normally a
  // per-step input so one compiled step serves every key. Module i of the tree (pre-order)
  // draws from fold_in(key, i) through key(). Throws tlaloc::Error when key is not u32[2].
  void bind_key(const trace::Tensor& key);
  // Binds one symbolic tensor per parameter (in named_parameters() order) for a capture.
  void bind(std::span<const trace::Tensor> params);
  // Binds one symbolic tensor per buffer (in named_buffers() order) and clears every buffer's
  // update. Throws tlaloc::Error on a count, dtype or shape mismatch.
  void bind_buffers(std::span<const trace::Tensor> buffers);
  // PyTorch-style multi-line printout of the module tree.
  std::string to_string() const;
  // The direct child registered as `name` ("blocks", "0"). Throws tlaloc::Error naming this
  // module and the children it has when there is none.
  Module& child(const std::string& name) const;

 protected:
  Parameter& register_parameter(std::string name, Array value);
  template <typename M>
  M& register_module(std::string name, std::shared_ptr<M> m) {
    M& ref = *m;
    children_.push_back({std::move(name), std::move(m)});
    return ref;
  }
  // The parameter's symbolic value; throws tlaloc::Error when called outside a bound capture.
  const trace::Tensor& param(const std::string& name) const;
  Parameter& parameter(const std::string& name);
  Buffer& register_buffer(std::string name, Array value);
  Buffer& buffer_slot(const std::string& name);
  // The buffer's symbolic value; throws tlaloc::Error naming it when it is not bound.
  const trace::Tensor& buffer(const std::string& name) const;
  // Gives the buffer its new value for this capture (same dtype and shape, else tlaloc::Error).
  void set_buffer(const std::string& name, const trace::Tensor& value);
  // This module's random key for the capture (see bind_key); throws tlaloc::Error naming the
  // module when none is bound.
  trace::Tensor key() const;
  // Direct children in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

 private:
  void collect(const std::string& prefix, std::vector<NamedParameter>& out);
  void collect_modules(std::vector<Module*>& out);
  void collect_named(const std::string& name, std::vector<std::pair<std::string, Module*>>& out);
  void print_tree(std::string& out, const std::string& name, int indent) const;

  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out);

  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  bool training_ = true;
  trace::Tensor root_key_;  // bound by bind_key; key() folds in key_index_
  uint32_t key_index_ = 0;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Freezes (requires_grad = false) every parameter of `m` whose dotted name matches one of the
// glob patterns (fnmatch: `*` and `?` match any characters, dots included; "model.embed_tokens.*",
// "*.mlp.*"). Returns how many were frozen. Throws tlaloc::Error naming a pattern that matches
// no parameter (nothing is frozen then).
int freeze(Module& m, const std::vector<std::string>& patterns);

}  // namespace tlaloc::nn
