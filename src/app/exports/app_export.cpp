// File > Export for slides: SVG and CSV of what a panel shows (built from
// its data, app/exports/exports.h) and any panel as a PNG at twice its size.
//
// The 2x PNG is drawn again, not magnified: for a few frames the window
// renders off screen at twice its size with every ImGui size doubled and
// the fonts rasterised at 32 px instead of 16 (a second font atlas:
// Window::set_render_scale). The panels lay themselves out as they do on a
// screen twice as large, so lines, text and heatmap cells are sharp. Dear
// ImGui 1.86 has no per-viewport DPI scaling, and magnifying the 1x frame
// (DisplayFramebufferScale = 2 with the 1x atlas) would blur every glyph.
#include <cstdint>
#include <filesystem>
#include <vector>

#include <imgui.h>
#include <stb_image_write.h>

#include "app/app.h"
#include "app/menus.h"
#include "app/render/gl.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ts::app {

bool App::export_to(ExportKind kind, const std::string& path) {
  ExportSources src;
  src.snap = snap_.get();
  src.view = &view_;
  src.state = &state_;
  src.attention = &attention_panel().matrix();
  try {
    state_.notice = write_export(kind, src, path);
    state_.error_text.clear();
    return true;
  } catch (const Error& e) {
    state_.error_text = e.what();
    return false;
  }
}

App::PanelCapture App::write_panel_png_scaled(PanelId id, const std::string& path, int scale) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error("no file name given");
  if (scale < 1 || scale > 4) throw Error("PNG scale must be 1 to 4");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(path + ": is a directory");
  const int index = static_cast<int>(id);
  if (!record_.drawn[index])
    throw Error(std::string("the ") + panel_title(id) + " panel is not on screen");
  // The off-screen target must fit the GPU's limits (a 4K window at 2x is
  // 7680 x 4320).
  int fb_w = 0, fb_h = 0;
  window_->framebuffer_size(fb_w, fb_h);
  const int limit = gl::max_render_side();
  if (fb_w * scale > limit || fb_h * scale > limit)
    throw Error("the window is too large for a " + std::to_string(scale) +
                "x picture on this GPU (at most " + std::to_string(limit) +
                " pixels a side): make the window smaller");
  PanelCapture out;
  out.panel_1x = record_.boxes[index];
  std::vector<uint8_t> pixels;
  int w = 0, h = 0;
  PanelBox box;
  bool drawn = false;
  // On a high-DPI screen the 1x picture already has more pixels than window
  // units (DisplayFramebufferScale): twice that picture is drawn.
  window_->set_render_scale(static_cast<float>(scale) * ImGui::GetIO().DisplayFramebufferScale.x);
  // Three frames: the first places the panels at the new size, the next
  // lay out their contents in it (ImGui sizes some things from the
  // previous frame), the last is the one captured.
  for (int i = 0; i < 3; ++i) frame();
  drawn = record_.drawn[index];
  if (drawn) {
    pixels = window_->capture(w, h);
    box = record_.boxes[index];
    if (id == PanelId::kAttention) out.heatmap = attention_panel().heatmap_box();
  }
  window_->set_render_scale(1.0f);
  frame();  // back to the window's own size
  if (!drawn) throw Error(std::string("the ") + panel_title(id) + " panel could not be drawn");
  const int x0 = std::clamp(static_cast<int>(box.x), 0, w);
  const int y0 = std::clamp(static_cast<int>(box.y), 0, h);
  const int x1 = std::clamp(static_cast<int>(box.x + box.w), x0, w);
  const int y1 = std::clamp(static_cast<int>(box.y + box.h), y0, h);
  if (x1 <= x0 || y1 <= y0) throw Error("the panel has no pixels");
  std::vector<uint8_t> crop;
  crop.reserve(static_cast<size_t>(x1 - x0) * (y1 - y0) * 4);
  for (int y = y0; y < y1; ++y) {
    const auto row = pixels.begin() + (static_cast<long>(y) * w + x0) * 4;
    crop.insert(crop.end(), row, row + static_cast<long>(x1 - x0) * 4);
  }
  std::string png;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size);
  };
  if (!stbi_write_png_to_func(append, &png, x1 - x0, y1 - y0, 4, crop.data(), (x1 - x0) * 4))
    throw Error(path + ": cannot encode the PNG");
  write_file_atomically(path, png);
  out.width = x1 - x0;
  out.height = y1 - y0;
  if (id == PanelId::kAttention) {
    out.heatmap.x -= static_cast<float>(x0);
    out.heatmap.y -= static_cast<float>(y0);
  }
  return out;
}

void App::run_pending_capture() {
  if (capture_panel_ < 0) return;
  const PanelId id = static_cast<PanelId>(capture_panel_);
  capture_panel_ = -1;
  try {
    const PanelCapture c = write_panel_png_scaled(id, capture_path_, 2);
    state_.notice = "wrote " + capture_path_ + " (" + std::to_string(c.width) + " x " +
                    std::to_string(c.height) + ")";
    state_.error_text.clear();
  } catch (const Error& e) {
    state_.error_text = e.what();
  }
}

void App::draw_slides_export_popup() {
  const bool png = slides_choice_ >= kNumExportKinds;
  if (open_slides_popup_) {
    const int step = std::max(0, view_.step);
    slides_path_ = png ? std::string("tokenscope-") +
                             panel_key(static_cast<PanelId>(slides_choice_ - kNumExportKinds)) +
                             "-step" + std::to_string(step) + "@2x.png"
                       : default_export_name(static_cast<ExportKind>(slides_choice_), step);
  }
  const auto explain = [&] {
    if (png)
      ImGui::TextWrapped(
          "The %s panel as PNG at twice its size on screen (drawn again at 2x, not magnified).",
          panel_title(static_cast<PanelId>(slides_choice_ - kNumExportKinds)));
    else if (slides_choice_ >= 0)
      ImGui::TextWrapped("%s, from the step on show.",
                         export_label(static_cast<ExportKind>(slides_choice_)));
    // Every cell is one rectangle: a long context makes a file slide tools
    // struggle with (1024 positions: about 66 MB, a few seconds to write).
    const int n = attention_panel().matrix().n;
    if (slides_choice_ == static_cast<int>(ExportKind::kAttentionSvg) && n > 256)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette(window_->light_theme()).warning),
                         "%d x %d cells: about %s of SVG. For a slide, the 2x PNG or a shorter "
                         "prompt may serve better.",
                         n, n, format_bytes(static_cast<double>(n) * n * 63.0).c_str());
  };
  if (!path_popup("Export for slides", open_slides_popup_, slides_path_, "Export", explain)) return;
  if (png) {
    capture_panel_ = slides_choice_ - kNumExportKinds;  // after this frame
    capture_path_ = slides_path_;
  } else if (slides_choice_ >= 0) {
    export_to(static_cast<ExportKind>(slides_choice_), slides_path_);
  }
}

}  // namespace ts::app
