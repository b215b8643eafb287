// A picture being drawn, and PNG bytes in and out: the only code of tlaloc that calls cairo
// (Debian's libcairo2: an image surface, its PNG writer and reader, the "toy" text API).
// cairo stays out of this header, so a program including tlaloc's headers needs none of it.
//
// Determinism: the same drawing calls give the same PNG bytes. The surface has a fixed size and
// starts white; text is DejaVu Sans through fontconfig, with grey antialiasing and without
// hinting, so glyph placement does not depend on a desktop's settings; cairo's PNG writer puts
// no time stamp or other varying chunk in the file. Another machine with other cairo, pixman,
// FreeType or font versions may draw the antialiased edges a little differently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tlaloc::plot {

struct Color {
  double r = 0, g = 0, b = 0, a = 1;  // each in [0, 1]
  // 0xRRGGBB.
  static constexpr Color hex(uint32_t rgb, double alpha = 1) {
    return {double((rgb >> 16) & 255) / 255, double((rgb >> 8) & 255) / 255,
            double(rgb & 255) / 255, alpha};
  }
};

inline constexpr Color kBlack = Color::hex(0x000000), kWhite = Color::hex(0xffffff);
// The pictures' text and lines, grid lines, and font sizes (pixels): tick labels, axis titles.
inline constexpr Color kInk = Color::hex(0x222222), kGrid = Color::hex(0xe3e3e3);
inline constexpr double kTickFont = 12, kTitleFont = 14;

// Horizontal and vertical anchor of a text: the point given is its left / centre / right, and
// its top / middle / baseline / bottom.
enum class HAlign { left, center, right };
enum class VAlign { top, middle, baseline, bottom };

struct Point {
  double x = 0, y = 0;
};

// A decoded picture: pixel (x, y) is rgb[y * width + x], 0xRRGGBB.
struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> rgb;
  uint32_t at(int x, int y) const { return rgb[size_t(y) * size_t(width) + size_t(x)]; }
};

class Canvas {
 public:
  // A white width x height picture (pixels, 1 to 8192 each; else tlaloc::Error).
  Canvas(int width, int height);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }

  // Stroke style for lines and outlines: colour, width (pixels), dashes (on, off, ... lengths;
  // empty: solid).
  void stroke_style(Color c, double line_width, std::vector<double> dashes = {});
  void fill_rect(double x, double y, double w, double h, Color c);
  void stroke_rect(double x, double y, double w, double h);  // in the stroke style
  void line(Point a, Point b);                               // in the stroke style
  void polyline(const std::vector<Point>& points);           // in the stroke style
  void fill_circle(Point centre, double radius, Color c);
  void stroke_circle(Point centre, double radius);  // in the stroke style
  // `img` (below) scaled to cover the rectangle, each of its pixels a sharp-edged block.
  void image(double x, double y, double w, double h, const Image& img);
  // Drawing outside the rectangle is cut off until reset_clip().
  void clip(double x, double y, double w, double h);
  void reset_clip();

  // Text of `size` pixels anchored at (x, y), turned by `degrees` (counter-clockwise) about the
  // anchor.
  void text(double x, double y, std::string_view s, double size, Color c, HAlign h = HAlign::left,
            VAlign v = VAlign::baseline, double degrees = 0, bool bold = false);
  // The advance width of the text at `size` pixels.
  double text_width(std::string_view s, double size, bool bold = false);

  // The picture as PNG bytes (8-bit RGB).
  std::string png() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int width_, height_;
};

// Decodes PNG bytes (cairo's reader). Throws tlaloc::Error naming `what` for bytes that are not
// a PNG.
Image decode_png(std::string_view bytes, const std::string& what = "PNG");

// Writes PNG bytes to `path` atomically (io::AtomicFile: a temporary beside it, fsynced and
// renamed over it), so a reader never sees a cut picture.
void write_file(const std::string& path, std::string_view bytes);

}  // namespace tlaloc::plot
