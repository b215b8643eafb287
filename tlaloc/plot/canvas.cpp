#include "tlaloc/plot/canvas.h"

#include <cairo.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <span>

#include "tlaloc/core/error.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/safetensors.h"  // is_utf8

namespace tlaloc::plot {

struct Canvas::Impl {
  cairo_surface_t* surface = nullptr;
  cairo_t* cr = nullptr;
  ~Impl() {
    if (cr) cairo_destroy(cr);
    if (surface) cairo_surface_destroy(surface);
  }
};

namespace {

void set_color(cairo_t* cr, Color c) { cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a); }

void select_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

struct Reader {
  std::string_view bytes;
  size_t pos = 0;
};

cairo_status_t read_bytes(void* closure, unsigned char* data, unsigned int length) {
  auto* r = static_cast<Reader*>(closure);
  if (r->bytes.size() - r->pos < length) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, r->bytes.data() + r->pos, length);
  r->pos += length;
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

Canvas::Canvas(int width, int height)
    : impl_(std::make_unique<Impl>()), width_(width), height_(height) {
  constexpr int kMax = 8192;
  if (width < 1 || height < 1 || width > kMax || height > kMax)
    fail("plot: a picture of {} x {} pixels (each side must be 1 to {})", width, height, kMax);
  impl_->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  impl_->cr = cairo_create(impl_->surface);
  if (cairo_status(impl_->cr) != CAIRO_STATUS_SUCCESS)
    fail("plot: cannot make a {} x {} picture: {}", width, height,
         cairo_status_to_string(cairo_status(impl_->cr)));
  cairo_t* cr = impl_->cr;
  // Glyph shapes and advances that do not depend on the desktop's font settings.
  cairo_font_options_t* fo = cairo_font_options_create();
  cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
  cairo_set_font_options(cr, fo);
  cairo_font_options_destroy(fo);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  set_color(cr, kWhite);
  cairo_paint(cr);
  stroke_style(kBlack, 1);
}

Canvas::~Canvas() = default;

void Canvas::stroke_style(Color c, double line_width, std::vector<double> dashes) {
  cairo_t* cr = impl_->cr;
  set_color(cr, c);
  cairo_set_line_width(cr, line_width);
  cairo_set_dash(cr, dashes.data(), int(dashes.size()), 0);
}

void Canvas::fill_rect(double x, double y, double w, double h, Color c) {
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  set_color(cr, c);
  cairo_rectangle(cr, x, y, w, h);
  cairo_fill(cr);
  cairo_restore(cr);
}

void Canvas::stroke_rect(double x, double y, double w, double h) {
  cairo_rectangle(impl_->cr, x, y, w, h);
  cairo_stroke(impl_->cr);
}

void Canvas::line(Point a, Point b) { polyline({a, b}); }

void Canvas::polyline(const std::vector<Point>& points) {
  if (points.size() < 2) return;
  cairo_t* cr = impl_->cr;
  cairo_move_to(cr, points[0].x, points[0].y);
  for (size_t i = 1; i < points.size(); ++i) cairo_line_to(cr, points[i].x, points[i].y);
  cairo_stroke(cr);
}

void Canvas::fill_circle(Point centre, double radius, Color c) {
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  set_color(cr, c);
  cairo_new_sub_path(cr);
  cairo_arc(cr, centre.x, centre.y, radius, 0, 2 * std::numbers::pi);
  cairo_fill(cr);
  cairo_restore(cr);
}

void Canvas::stroke_circle(Point centre, double radius) {
  cairo_t* cr = impl_->cr;
  cairo_new_sub_path(cr);
  cairo_arc(cr, centre.x, centre.y, radius, 0, 2 * std::numbers::pi);
  cairo_stroke(cr);
}

void Canvas::image(double x, double y, double w, double h, const Image& img) {
  if (img.width < 1 || img.height < 1 || img.rgb.size() != size_t(img.width) * size_t(img.height))
    fail("plot: an image of {} x {} pixels holds {} values", img.width, img.height, img.rgb.size());
  const int stride = cairo_format_stride_for_width(CAIRO_FORMAT_RGB24, img.width);
  std::vector<unsigned char> data(size_t(stride) * size_t(img.height));
  for (int r = 0; r < img.height; ++r)
    std::memcpy(data.data() + size_t(r) * size_t(stride), &img.rgb[size_t(r) * size_t(img.width)],
                size_t(img.width) * 4);
  cairo_surface_t* s = cairo_image_surface_create_for_data(data.data(), CAIRO_FORMAT_RGB24,
                                                           img.width, img.height, stride);
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  cairo_rectangle(cr, x, y, w, h);
  cairo_clip(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, w / img.width, h / img.height);
  cairo_set_source_surface(cr, s, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(s);
}

namespace {
// `s` as cairo can draw it: bytes that are not UTF-8 (a file name in Latin-1, say) and control
// characters become U+FFFD; cairo would otherwise stop drawing everything after them.
std::string drawable(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 1 && b >= 0x20 && b != 0x7f) {
      out += char(b);
      ++i;
    } else if (n > 1 && i + n <= s.size() && io::is_utf8(s.substr(i, n))) {
      out += s.substr(i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}
}  // namespace

void Canvas::clip(double x, double y, double w, double h) {
  cairo_reset_clip(impl_->cr);
  cairo_rectangle(impl_->cr, x, y, w, h);
  cairo_clip(impl_->cr);
}

void Canvas::reset_clip() { cairo_reset_clip(impl_->cr); }

void Canvas::text(double x, double y, std::string_view s, double size, Color c, HAlign h, VAlign v,
                  double degrees, bool bold) {
  cairo_t* cr = impl_->cr;
  const std::string str = drawable(s);
  cairo_save(cr);
  select_font(cr, size, bold);
  cairo_text_extents_t te;
  cairo_text_extents(cr, str.c_str(), &te);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  double dx = 0, dy = 0;
  if (h == HAlign::center) dx = -te.x_advance / 2;
  if (h == HAlign::right) dx = -te.x_advance;
  if (v == VAlign::top) dy = fe.ascent;
  if (v == VAlign::middle) dy = (fe.ascent - fe.descent) / 2;
  if (v == VAlign::bottom) dy = -fe.descent;
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -degrees * std::numbers::pi / 180);
  set_color(cr, c);
  cairo_move_to(cr, dx, dy);
  cairo_show_text(cr, str.c_str());
  cairo_restore(cr);
}

double Canvas::text_width(std::string_view s, double size, bool bold) {
  cairo_t* cr = impl_->cr;
  const std::string str = drawable(s);
  cairo_save(cr);
  select_font(cr, size, bold);
  cairo_text_extents_t te;
  cairo_text_extents(cr, str.c_str(), &te);
  cairo_restore(cr);
  return te.x_advance;
}

std::string Canvas::png() const {
  cairo_surface_flush(impl_->surface);
  std::string bytes;
  cairo_status_t st = cairo_surface_write_to_png_stream(impl_->surface, append_bytes, &bytes);
  if (st != CAIRO_STATUS_SUCCESS)
    fail("plot: cannot encode the PNG: {}", cairo_status_to_string(st));
  return bytes;
}

Image decode_png(std::string_view bytes, const std::string& what) {
  Reader r{bytes};
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(read_bytes, &r);
  const cairo_status_t st = cairo_surface_status(s);
  if (st != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    fail("{}: not a PNG picture cairo can read: {}", what, cairo_status_to_string(st));
  }
  Image img;
  img.width = cairo_image_surface_get_width(s);
  img.height = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  img.rgb.resize(size_t(img.width) * size_t(img.height));
  for (int y = 0; y < img.height; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + size_t(y) * size_t(stride));
    for (int x = 0; x < img.width; ++x)
      img.rgb[size_t(y) * size_t(img.width) + size_t(x)] = row[x] & 0xffffffu;
  }
  cairo_surface_destroy(s);
  return img;
}

void write_file(const std::string& path, std::string_view bytes) {
  io::AtomicFile f(path);
  f.write(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
  f.commit();
}

}  // namespace tlaloc::plot
