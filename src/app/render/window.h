#pragma once
// The platform: a GLFW window with a GL 3.3 core context, Dear ImGui with its
// GLFW and OpenGL3 backends, DejaVu Sans at a normal and a projector size,
// the theme, and reading the finished frame back for screenshots.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "app/render/gl.h"

struct GLFWwindow;
struct ImFont;
struct ImFontAtlas;

namespace ts::app {

struct WindowOptions {
  int width = 1600;
  int height = 900;
  bool visible = true;
  bool vsync = true;
  std::string title = "TokenScope";
  std::filesystem::path ini_path;  // empty: layout is neither loaded nor saved
  std::filesystem::path font_path;
};

// True when a display can be opened (DISPLAY or WAYLAND_DISPLAY is set).
bool display_available();

class Window {
 public:
  // Throws ts::Error when GLFW, the GL context or the ImGui backends fail.
  explicit Window(const WindowOptions& options);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  bool should_close() const;
  void request_close();
  // Events, then a new ImGui frame. Applies a pending presentation / theme change.
  void begin_frame();
  // Renders the ImGui frame into the window (or into the capture target when
  // capture is true) and swaps.
  void end_frame(bool swap = true);
  // Benchmarks: finish the GL work before timing each part of end_frame().
  void set_timed(bool on) { timed_ = on; }
  double last_render_seconds() const { return render_seconds_; }
  double last_swap_seconds() const { return swap_seconds_; }
  // Renders the last finished frame again, off screen at the framebuffer's
  // size, and returns its pixels top row first (RGBA). For screenshots.
  std::vector<uint8_t> capture(int& width, int& height);

  // Key presses (and auto-repeats) since the last call, in order, as GLFW
  // reported them. A press and its release can fall within one frame (a
  // presentation clicker's tap); ImGui 1.86 then never sees the key down, so
  // the step keys read this queue instead.
  struct KeyPress {
    int key = 0;          // GLFW_KEY_*
    bool repeat = false;  // an auto-repeat of a held key
  };
  std::vector<KeyPress> take_key_presses();
  // Characters beyond U+FFFF typed since the last call (emoji). This ImGui
  // stores characters in 16 bits and would insert U+FFFD for each; the
  // window takes them out of ImGui's input instead and counts them here.
  int take_refused_characters();

  void set_presentation(bool on) { want_presentation_ = on; }
  void set_light_theme(bool on) { want_light_ = on; }
  bool presentation() const { return presentation_; }
  bool light_theme() const { return light_; }
  // The scale of fonts and lines now: 1, or in presentation mode the
  // projector scale for the window's height (presentation_scale_for()),
  // times the render scale.
  float ui_scale() const { return (presentation_ ? scale_ : 1.0f) * render_scale_; }
  // Frames at `scale` times the window's size, for a sharp panel PNG at 2x:
  // from the next begin_frame() the display is that much larger, every
  // ImGui size is scaled, and the fonts come from a second atlas rasterised
  // at that size (not magnified); such frames are drawn only off screen
  // (capture() reads them), never into the window, and take no mouse input.
  // 1 goes back to normal and frees that atlas.
  void set_render_scale(float scale);
  float render_scale() const { return render_scale_; }
  const std::string& font_notice() const { return font_notice_; }
  void framebuffer_size(int& w, int& h) const;
  GLFWwindow* handle() { return window_; }
  const std::string& renderer() const { return renderer_; }  // GL_RENDERER, GL_VERSION

  static constexpr float kBaseFontSize = 16.0f;
  static constexpr float kPresentationScale = 1.625f;
  // A short window (a 1280 x 720 or 1024 x 768 projector) gets a smaller
  // projector scale: its pixels are larger on the wall, so 21-pixel text
  // there is as tall on the screen as 28-pixel text at 1080 lines, and four
  // panels keep room for their contents.
  static constexpr float kCompactPresentationScale = 1.3f;
  static constexpr float kCompactBelowHeight = 800.0f;
  static float presentation_scale_for(float window_height) {
    return window_height < kCompactBelowHeight ? kCompactPresentationScale : kPresentationScale;
  }

 private:
  void apply_style();
  static void on_key(GLFWwindow* window, int key, int scancode, int action, int mods);
  static void on_char(GLFWwindow* window, unsigned int codepoint);

  GLFWwindow* window_ = nullptr;
  std::string ini_path_;
  ImFont* font_normal_ = nullptr;
  ImFont* font_large_ = nullptr;
  ImFont* font_compact_ = nullptr;    // presentation mode in a short window
  float scale_ = kPresentationScale;  // presentation scale in use (presentation_scale_for)
  std::string font_notice_;
  bool presentation_ = false, want_presentation_ = false;
  bool light_ = false, want_light_ = false;
  bool style_dirty_ = true;
  bool timed_ = false;
  double render_seconds_ = 0, swap_seconds_ = 0;
  std::string renderer_;
  gl::Framebuffer capture_fbo_;
  // The fonts at the render scale (same order as the normal atlas's) and
  // their texture, while render_scale_ != 1.
  void build_scaled_fonts();
  std::filesystem::path font_path_;
  bool font_from_file_ = false;
  float render_scale_ = 1.0f, want_render_scale_ = 1.0f;
  ImFontAtlas* normal_atlas_ = nullptr;
  std::unique_ptr<ImFontAtlas> scaled_atlas_;
  gl::Texture scaled_font_texture_;
  std::vector<KeyPress> key_presses_;
  int refused_chars_ = 0;   // since the last take_refused_characters()
  int refused_queued_ = 0;  // of those, still to take out of ImGui's input queue
};

}  // namespace ts::app
