// A confusion matrix as a heat map: one cell per (true class, predicted class), its colour
// darker the larger its count (white at 0, dark blue at the largest count), the count written in
// it; class names along the rows (true) and the columns (predicted), each row's accuracy (its
// diagonal count over its total) at the right. `tlaloc train fmnist --confusion` and `tlaloc
// eval --confusion` draw with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tlaloc/plot/canvas.h"

namespace tlaloc::plot {

struct ConfusionOptions {
  std::string title = "confusion matrix";
  int cell = 52;  // pixels per cell side (16 to 200)
};

// The colour of a count that is the fraction t (in [0, 1]) of the largest: light to dark blue,
// each step darker than the one before (ColorBrewer's "Blues").
Color heat_color(double t);

// Where the cells are: cell (true t, predicted p) covers [left + p·cell, +cell) x [top + t·cell,
// +cell) in pixels.
struct ConfusionLayout {
  int width = 0, height = 0;
  int left = 0, top = 0, cell = 0;
};
// Throws one tlaloc::Error line for a matrix that is empty, not square, has a negative count or
// more than 100 classes, or `names` not one per class (empty names: the class numbers).
ConfusionLayout layout_confusion(const std::vector<std::vector<int64_t>>& m,
                                 const std::vector<std::string>& names,
                                 const ConfusionOptions& o = {});
// m[true][predicted]; the picture as PNG bytes (same input, same bytes).
std::string render_confusion(const std::vector<std::vector<int64_t>>& m,
                             const std::vector<std::string>& names, const ConfusionOptions& o = {});

}  // namespace tlaloc::plot
