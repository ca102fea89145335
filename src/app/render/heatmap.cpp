#include "app/render/heatmap.h"

#include <algorithm>
#include <cmath>

namespace ts::app {

HeatmapRenderer::HeatmapRenderer(const std::filesystem::path& shader_dir)
    : program_(gl::ShaderProgram::from_files(shader_dir / "fullscreen.vert",
                                             shader_dir / "heatmap.frag")) {
  for (int m = 0; m < kNumColormaps; ++m) {
    const ColormapTable& table = colormap_table(static_cast<Colormap>(m));
    std::vector<uint8_t> rgba(256 * 4);
    for (int i = 0; i < 256; ++i) {
      rgba[i * 4 + 0] = table[i].r;
      rgba[i * 4 + 1] = table[i].g;
      rgba[i * 4 + 2] = table[i].b;
      rgba[i * 4 + 3] = 255;
    }
    luts_[m].upload_rgba8(rgba.data(), 256, 1);
  }
  gl::check_errors("heatmap renderer init");
}

void HeatmapRenderer::render(const float* values, int cols, int rows, int px,
                             const HeatmapStyle& style, HeatmapImage& image, int down) {
  if (cols <= 0 || rows <= 0) return;
  px = std::max(1, px);
  down = std::max(1, down);
  if (down > 1) px = 1;
  while (px > 1 && (cols * px > kMaxSide || rows * px > kMaxSide)) --px;
  gl::StateGuard guard;
  image.values_.upload_r32f(values, cols, rows);
  const int w = down > 1 ? (cols + down - 1) / down : cols * px;
  const int h = down > 1 ? (rows + down - 1) / down : rows * px;
  image.target_.resize(w, h);
  image.cols_ = cols;
  image.rows_ = rows;
  image.px_ = px;
  image.down_ = down;

  image.target_.bind();
  program_.use();
  gl::bind_texture(0, image.values_);
  gl::bind_texture(1, luts_[static_cast<int>(style.colormap)]);
  program_.set("u_values", 0);
  program_.set("u_lut", 1);
  program_.set("u_px", px);
  program_.set("u_down", down);
  program_.set("u_scale", static_cast<int>(style.range.scale));
  program_.set("u_vmax", style.range.vmax);
  program_.set("u_log_floor", style.range.log_floor);
  program_.set("u_grid", style.grid ? 1 : 0);
  const HeatmapTheme& t = theme_;
  program_.set("u_grid_color", t.grid[0], t.grid[1], t.grid[2], t.grid[3]);
  program_.set("u_mask_a", t.mask_a[0], t.mask_a[1], t.mask_a[2], t.mask_a[3]);
  program_.set("u_mask_b", t.mask_b[0], t.mask_b[1], t.mask_b[2], t.mask_b[3]);
  pass_.draw();

  // Drawn at its own size (large maps were max-pooled above), so plain
  // nearest sampling: one texel per pixel, crisp cells.
  image.target_.color().set_filter(false, false, false);
  gl::check_errors("heatmap render");
}

int cells_per_pixel(int n, float side) {
  if (n <= 0 || side < 1 || static_cast<float>(n) <= side) return 1;
  return std::min(16, static_cast<int>(std::ceil(static_cast<float>(n) / side)));
}

std::vector<float> max_pool(const std::vector<float>& values, int cols, int rows, int down) {
  const int w = (cols + down - 1) / down, h = (rows + down - 1) / down;
  std::vector<float> out(static_cast<size_t>(w) * h, kBackgroundValue);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float& o = out[static_cast<size_t>(r / down) * w + c / down];
      o = std::max(o, values[static_cast<size_t>(r) * cols + c]);
    }
  return out;
}

int pixels_per_cell(int n, float side) {
  if (n <= 0) return 1;
  int px = static_cast<int>(std::floor(side / static_cast<float>(n)));
  px = std::clamp(px, 1, 48);
  while (px > 1 && n * px > HeatmapRenderer::kMaxSide) --px;
  return px;
}

}  // namespace ts::app
