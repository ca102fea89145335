#pragma once
// Large matrices (attention maps, thumbnail atlases, colour legends) become a
// GL float texture that shaders/heatmap.frag colours into an RGBA texture,
// rendered once when the data or the view options change and then shown with
// ImGui::Image: never one ImGui rectangle per cell.
#include <filesystem>
#include <vector>

#include "app/render/colormap.h"
#include "app/render/gl.h"

namespace ts::app {

struct HeatmapTheme {
  float grid[4] = {0.08f, 0.08f, 0.10f, 1.0f};    // lines between large cells
  float mask_a[4] = {0.20f, 0.20f, 0.23f, 1.0f};  // hatching of masked cells
  float mask_b[4] = {0.29f, 0.29f, 0.33f, 1.0f};
};

struct HeatmapStyle {
  Colormap colormap = Colormap::kViridis;
  HeatRange range;
  bool grid = true;
};

// One rendered heatmap: the values texture and the coloured result.
class HeatmapImage {
 public:
  int cols() const { return cols_; }
  int rows() const { return rows_; }
  int px_per_cell() const { return px_; }
  int cells_per_px() const { return down_; }
  bool valid() const { return cols_ > 0 && rows_ > 0; }
  const gl::Texture& color() const { return target_.color(); }
  const gl::Texture& values() const { return values_; }
  void* imgui_id() const { return target_.color().imgui_id(); }

 private:
  friend class HeatmapRenderer;
  gl::Texture values_;
  gl::Framebuffer target_;
  int cols_ = 0, rows_ = 0, px_ = 1, down_ = 1;
};

class HeatmapRenderer {
 public:
  // Loads fullscreen.vert + heatmap.frag from shader_dir; throws ts::Error.
  explicit HeatmapRenderer(const std::filesystem::path& shader_dir);

  // values: rows x cols, row-major (kMaskedValue / kBackgroundValue allowed).
  // The result is (cols * px) x (rows * px) pixels; with down > 1 (and px 1)
  // it is ceil(cols / down) x ceil(rows / down), each pixel the largest value
  // of its down x down block (see max_pool() for the CPU twin).
  void render(const float* values, int cols, int rows, int px, const HeatmapStyle& style,
              HeatmapImage& image, int down = 1);

  void set_theme(const HeatmapTheme& theme) { theme_ = theme; }
  const HeatmapTheme& theme() const { return theme_; }

  // Largest side of a rendered image, in pixels.
  static constexpr int kMaxSide = 4096;

 private:
  gl::ShaderProgram program_;
  gl::Texture luts_[kNumColormaps];
  gl::FullscreenPass pass_;
  HeatmapTheme theme_;
};

// Pixels per cell for n cells shown in `side` pixels: at least 1, at most 48,
// and never making the image larger than HeatmapRenderer::kMaxSide.
int pixels_per_cell(int n, float side);
// Cells per pixel when n cells do not fit in `side` pixels (else 1).
int cells_per_pixel(int n, float side);
// What the shader shows with down > 1: the largest value of each block
// (kMaskedValue when the whole block is masked). Row-major, ceil(cols/down) wide.
std::vector<float> max_pool(const std::vector<float>& values, int cols, int rows, int down);

}  // namespace ts::app
