// A learned decision boundary beside the true one: two square panels over the same 2-D region,
// each a grid of cells coloured by the side of the boundary they are on (a value >= 0: inside);
// in the learned panel the cells where the two disagree are red. `tlaloc train disc --boundary`
// draws the disc demo's model with it.
#pragma once

#include <string>
#include <vector>

#include "tlaloc/plot/axes.h"

namespace tlaloc::plot {

// Values on a rows x cols grid of cells over a region, row-major from the top row (largest y)
// and the left column (smallest x).
struct Field {
  int rows = 0, cols = 0;
  std::vector<float> values;
};

struct BoundaryOptions {
  double x0 = -1, x1 = 1, y0 = -1, y1 = 1;  // the region
  std::string title;                        // above the panels; empty: none
  std::string learned_title = "learned", truth_title = "true";
  int panel = 360;  // each panel's side in pixels (64 to 2048)
};

inline constexpr Color kInside = Color::hex(0x4c72b0), kOutside = Color::hex(0xf0f0f0),
                       kWrong = Color::hex(0xd62728);

struct BoundaryLayout {
  int width = 0, height = 0;
  Frame learned, truth;  // x, y in the region's units
  int disagreeing = 0;   // cells on different sides in the two fields
};
// Throws one tlaloc::Error line when the fields' sizes differ or do not match their values, the
// region is empty or not finite, or the panel size is out of range.
BoundaryLayout layout_boundary(const Field& learned, const Field& truth,
                               const BoundaryOptions& o = {});
// The picture as PNG bytes (same input, same bytes).
std::string render_boundary(const Field& learned, const Field& truth,
                            const BoundaryOptions& o = {});

}  // namespace tlaloc::plot
