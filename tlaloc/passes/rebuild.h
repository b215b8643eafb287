// Internal to passes: rebuilding a function node by node with renumbered ids.
#pragma once

#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::passes::detail {

// Copies f's metadata; nodes are appended with emit() in topological order (operands already
// renumbered), map[old id] records each old value's new id.
struct Rebuild {
  const ir::Function& f;
  ir::Function out;
  std::vector<ir::ValueId> map;

  explicit Rebuild(const ir::Function& src);
  // Appends n (operands are new ids); returns its new id.
  ir::ValueId emit(ir::Node n);
  // Copies old node `id` with its operands renumbered; records and returns the new id.
  ir::ValueId copy(ir::ValueId id);
  // Renumbers inputs and results through map and verifies.
  ir::Function finish();
};

// Pass bodies that also report whether they changed anything.
ir::Function dce(const ir::Function& f, bool* changed);
ir::Function cse(const ir::Function& f, bool* changed);
ir::Function fold(const ir::Function& f, bool* changed);

}  // namespace tlaloc::passes::detail
