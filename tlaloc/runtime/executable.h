// Executable: a compiled ir::Function on some lane. Inputs and outputs are in the function's
// order and must match its types exactly (tlaloc::Error names the input and both types).
#pragma once

#include <span>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/ir/ir.h"

namespace tlaloc::runtime {

class Executable {
 public:
  virtual ~Executable() = default;
  const ir::Function& function() const { return fn_; }

  // Reads the inputs, returns fresh outputs. Same inputs give bitwise the same outputs.
  virtual std::vector<Array> run(std::span<const Array> inputs) = 0;
  // Like run, but every input named by an alias of the function (output i <- input j) is
  // consumed: its storage becomes output i, updated in place, and inputs[j] is left empty.
  // Inputs that no alias names are only read. Throws tlaloc::Error if a donated input is
  // empty (already donated) or if two donated inputs share storage.
  virtual std::vector<Array> run_donated(std::span<Array> inputs) = 0;

 protected:
  explicit Executable(ir::Function fn) : fn_(std::move(fn)) {}
  // Checks count, dtypes and shapes of inputs against the function's parameters.
  void check_inputs(std::span<const Array> inputs) const;

 private:
  ir::Function fn_;
};

}  // namespace tlaloc::runtime
