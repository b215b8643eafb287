// Internal to passes (and the host runtime's rewrites, runtime/host/rewrite.cpp): rebuilding a
// function node by node with renumbered ids.
#pragma once

#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::passes::detail {

// Takes f (its nodes are moved out as they are processed); nodes are appended with emit() in
// topological order (operands already renumbered), map[old id] records each old value's new id.
struct Rebuild {
  ir::Function f;
  ir::Function out;
  std::vector<ir::ValueId> map;

  explicit Rebuild(ir::Function src);
  // Appends n (operands are new ids); returns its new id.
  ir::ValueId emit(ir::Node n);
  // Moves old node `id` over with its operands renumbered; records and returns the new id.
  ir::ValueId copy(ir::ValueId id);
  // Renumbers inputs and results through map (no verification: see verified()).
  ir::Function finish();
};

// f after ir::verify; a failure is a tlaloc::Error naming the pass and the function.
ir::Function verified(ir::Function f, const char* pass);

// Pass bodies that also report whether they changed anything.
ir::Function dce(ir::Function f, bool* changed);
ir::Function cse(ir::Function f, bool* changed);
ir::Function fold(ir::Function f, bool* changed);
ir::Function merge(ir::Function f, bool* changed);

}  // namespace tlaloc::passes::detail
