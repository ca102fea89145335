#include "app/render/window.h"

#include <cfloat>
#include <chrono>
#include <cstdlib>

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "util/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling
#define TS_ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(TS_ASAN_BUILD)
#include <dlfcn.h>
#include <link.h>
#define TS_KEEP_GL_LIBRARIES_LOADED 1
#endif

namespace ts::app {

namespace {

int g_glfw_users = 0;
std::string g_glfw_error;

void glfw_error(int code, const char* text) {
  g_glfw_error = "GLFW error " + std::to_string(code) + ": " + (text ? text : "");
}

// Glyphs token pieces need beyond ASCII: Latin-1 and Latin Extended, Greek,
// Cyrillic, general punctuation, arrows (the visible newline), mathematical
// operators, technical symbols, control pictures (the visible space \u2423),
// box drawing and shapes.
const ImWchar kGlyphRanges[] = {
    0x0020, 0x00FF, 0x0100, 0x024F, 0x0370, 0x03FF, 0x0400, 0x04FF, 0x2000, 0x206F, 0x20A0,
    0x20CF, 0x2100, 0x214F, 0x2190, 0x21FF, 0x2200, 0x22FF, 0x2300, 0x23FF, 0x2400, 0x243F,
    0x2500, 0x25FF, 0x2600, 0x26FF, 0x2700, 0x27BF, 0xFFFD, 0xFFFD, 0,
};

}  // namespace

bool display_available() {
  const char* x = std::getenv("DISPLAY");
  const char* w = std::getenv("WAYLAND_DISPLAY");
  return (x && *x) || (w && *w);
}

Window::Window(const WindowOptions& o) {
  glfwSetErrorCallback(glfw_error);
  if (g_glfw_users == 0 && !glfwInit())
    throw Error(
        "cannot open a window: " + (g_glfw_error.empty() ? "glfwInit failed" : g_glfw_error) +
        (display_available() ? "" : " (no DISPLAY; run under xvfb-run -a)"));
  ++g_glfw_users;
  glfwDefaultWindowHints();
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_VISIBLE, o.visible ? GLFW_TRUE : GLFW_FALSE);
  window_ = glfwCreateWindow(o.width, o.height, o.title.c_str(), nullptr, nullptr);
  if (!window_) {
    if (--g_glfw_users == 0) glfwTerminate();
    throw Error("cannot create an OpenGL 3.3 window: " + g_glfw_error);
  }
  glfwMakeContextCurrent(window_);
#ifdef TS_KEEP_GL_LIBRARIES_LOADED
  // Under AddressSanitizer only: the X, GL and Mesa libraries loaded by now
  // stay loaded until exit. glfwTerminate would unload them while they still
  // hold per-process allocations, which LeakSanitizer then reports at exit
  // with stacks into unloaded code that name no library (neither told apart
  // from TokenScope's leaks nor suppressible by name).
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        if (info->dlpi_name && *info->dlpi_name)
          dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        return 0;
      },
      nullptr);
#endif
  glfwSwapInterval(o.vsync ? 1 : 0);
  renderer_ = std::string(reinterpret_cast<const char*>(glGetString(GL_RENDERER))) + ", OpenGL " +
              reinterpret_cast<const char*>(glGetString(GL_VERSION));

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  ini_path_ = o.ini_path.string();
  io.IniFilename = ini_path_.empty() ? nullptr : ini_path_.c_str();
  // No keyboard navigation: Space and the arrows belong to the step controls.
  io.ConfigWindowsMoveFromTitleBarOnly = true;

  std::error_code ec;
  bool font_loaded = false;
  if (!o.font_path.empty() && std::filesystem::exists(o.font_path, ec)) {
    ImFontConfig cfg;
    cfg.OversampleH = 2;
    cfg.OversampleV = 1;
    font_normal_ = io.Fonts->AddFontFromFileTTF(o.font_path.string().c_str(), kBaseFontSize, &cfg,
                                                kGlyphRanges);
    font_large_ = io.Fonts->AddFontFromFileTTF(
        o.font_path.string().c_str(), kBaseFontSize * kPresentationScale, &cfg, kGlyphRanges);
    font_compact_ =
        io.Fonts->AddFontFromFileTTF(o.font_path.string().c_str(),
                                     kBaseFontSize * kCompactPresentationScale, &cfg, kGlyphRanges);
    font_loaded = font_normal_ && font_large_ && font_compact_;
  }
  if (!font_loaded) {
    font_notice_ = "font " + o.font_path.string() +
                   " not found (install fonts-dejavu-core); non-ASCII token pieces may show as '?'";
    ImFontConfig cfg;
    cfg.SizePixels = 13.0f;
    font_normal_ = io.Fonts->AddFontDefault(&cfg);
    cfg.SizePixels = 13.0f * kPresentationScale;
    font_large_ = io.Fonts->AddFontDefault(&cfg);
    cfg.SizePixels = 13.0f * kCompactPresentationScale;
    font_compact_ = io.Fonts->AddFontDefault(&cfg);
  }
  io.FontDefault = font_normal_;
  font_path_ = o.font_path;
  font_from_file_ = font_loaded;
  normal_atlas_ = io.Fonts;

  // Installed before the ImGui backend, which keeps it and calls it from its own.
  glfwSetWindowUserPointer(window_, this);
  glfwSetKeyCallback(window_, &Window::on_key);
  glfwSetCharCallback(window_, &Window::on_char);
  if (!ImGui_ImplGlfw_InitForOpenGL(window_, true) ||
      !ImGui_ImplOpenGL3_Init("#version 330 core")) {
    ImGui::DestroyContext();
    glfwDestroyWindow(window_);
    if (--g_glfw_users == 0) glfwTerminate();
    throw Error("cannot start the Dear ImGui GLFW/OpenGL3 backends");
  }
  gl::check_errors("window init");
}

Window::~Window() {
  ImGui::GetIO().Fonts = normal_atlas_;
  scaled_atlas_.reset();
  scaled_font_texture_ = gl::Texture();
  capture_fbo_ = gl::Framebuffer();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  if (--g_glfw_users == 0) glfwTerminate();
}

void Window::on_key(GLFWwindow* window, int key, int, int action, int) {
  auto* self = static_cast<Window*>(glfwGetWindowUserPointer(window));
  if (!self || (action != GLFW_PRESS && action != GLFW_REPEAT)) return;
  // Bounded: a stalled frame does not let a held key pile up steps.
  if (self->key_presses_.size() < 64) self->key_presses_.push_back({key, action == GLFW_REPEAT});
}

void Window::on_char(GLFWwindow* window, unsigned int codepoint) {
  auto* self = static_cast<Window*>(glfwGetWindowUserPointer(window));
  if (!self || codepoint <= 0xFFFF) return;
  ++self->refused_chars_;
  ++self->refused_queued_;
}

int Window::take_refused_characters() {
  const int n = refused_chars_;
  refused_chars_ = 0;
  return n;
}

std::vector<Window::KeyPress> Window::take_key_presses() {
  std::vector<KeyPress> out;
  out.swap(key_presses_);
  return out;
}

bool Window::should_close() const { return glfwWindowShouldClose(window_); }
void Window::request_close() { glfwSetWindowShouldClose(window_, GLFW_TRUE); }

void Window::framebuffer_size(int& w, int& h) const { glfwGetFramebufferSize(window_, &w, &h); }

void Window::apply_style() {
  ImGuiStyle style;
  if (light_)
    ImGui::StyleColorsLight(&style);
  else
    ImGui::StyleColorsDark(&style);
  style.WindowRounding = 4.0f;
  style.FrameRounding = 3.0f;
  style.GrabRounding = 3.0f;
  style.WindowPadding = ImVec2(10, 8);
  style.ItemSpacing = ImVec2(8, 6);
  style.WindowTitleAlign = ImVec2(0.02f, 0.5f);
  if (!light_) {
    style.Colors[ImGuiCol_WindowBg] = ImVec4(0.09f, 0.09f, 0.11f, 1.0f);
    style.Colors[ImGuiCol_TitleBgActive] = ImVec4(0.14f, 0.22f, 0.36f, 1.0f);
    style.Colors[ImGuiCol_TitleBg] = ImVec4(0.12f, 0.14f, 0.19f, 1.0f);
  }
  // A slider's value is written over its grab: an opaque grab hides the
  // digits under it ("1.0" and a block where the last digit should be) on a
  // projector. A narrow, translucent grab keeps every digit readable and still
  // shows where the value sits.
  style.GrabMinSize = 6.0f;
  for (const ImGuiCol_ col : {ImGuiCol_SliderGrab, ImGuiCol_SliderGrabActive})
    style.Colors[col].w = light_ ? 0.35f : 0.45f;
  if (ui_scale() != 1.0f) style.ScaleAllSizes(ui_scale());
  ImGui::GetStyle() = style;
  // The same font of whichever atlas is in use (the scaled one holds the
  // three sizes in the same order).
  const int font = !presentation_ ? 0 : scale_ == kPresentationScale ? 1 : 2;
  ImFontAtlas* atlas = ImGui::GetIO().Fonts;
  ImGui::GetIO().FontDefault = atlas->Fonts.Size > 2 ? atlas->Fonts[font] : font_normal_;
}

void Window::set_render_scale(float scale) { want_render_scale_ = scale > 0 ? scale : 1.0f; }

void Window::build_scaled_fonts() {
  // Rasterised at the scaled size: text in a 2x picture is as sharp as at
  // 1x, not a magnified 1x glyph. Same sizes, order and ranges as the
  // window's own atlas.
  auto atlas = std::make_unique<ImFontAtlas>();
  const float sizes[3] = {kBaseFontSize, kBaseFontSize * kPresentationScale,
                          kBaseFontSize * kCompactPresentationScale};
  for (float size : sizes) {
    ImFontConfig cfg;
    if (font_from_file_) {
      cfg.OversampleH = 2;
      cfg.OversampleV = 1;
      atlas->AddFontFromFileTTF(font_path_.string().c_str(), size * render_scale_, &cfg,
                                kGlyphRanges);
    } else {
      cfg.SizePixels = 13.0f * size / kBaseFontSize * render_scale_;
      atlas->AddFontDefault(&cfg);
    }
  }
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  atlas->GetTexDataAsRGBA32(&pixels, &w, &h);
  scaled_font_texture_.upload_rgba8(pixels, w, h);
  scaled_font_texture_.set_filter(true, true, false);
  atlas->SetTexID(scaled_font_texture_.imgui_id());
  atlas->ClearTexData();  // the GPU has it
  scaled_atlas_ = std::move(atlas);
}

void Window::begin_frame() {
  glfwPollEvents();
  // Each character beyond U+FFFF reached ImGui as U+FFFD (after on_char
  // counted it): take those out, newest first, so no edit turns an emoji
  // into a replacement character.
  ImVector<ImWchar>& queue = ImGui::GetIO().InputQueueCharacters;
  for (int i = queue.Size - 1; i >= 0 && refused_queued_ > 0; --i)
    if (queue[i] == 0xFFFD) {
      queue.erase(queue.Data + i);
      --refused_queued_;
    }
  refused_queued_ = 0;
  if (want_render_scale_ != render_scale_) {
    render_scale_ = want_render_scale_;
    if (render_scale_ != 1.0f) {
      build_scaled_fonts();
      ImGui::GetIO().Fonts = scaled_atlas_.get();
    } else {
      ImGui::GetIO().Fonts = normal_atlas_;
      scaled_atlas_.reset();
      scaled_font_texture_ = gl::Texture();
    }
    style_dirty_ = true;
  }
  int win_w = 0, win_h = 0;
  glfwGetWindowSize(window_, &win_w, &win_h);
  const float scale = presentation_scale_for(static_cast<float>(win_h));
  if (want_presentation_ != presentation_ || want_light_ != light_ || style_dirty_ ||
      (want_presentation_ && scale != scale_)) {
    scale_ = scale;
    presentation_ = want_presentation_;
    light_ = want_light_;
    style_dirty_ = false;
    apply_style();
  }
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (render_scale_ != 1.0f) {
    // A larger display than the window, drawn off screen: the mouse is
    // not over it (no hover, no click lands on a scaled frame).
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(io.DisplaySize.x * render_scale_, io.DisplaySize.y * render_scale_);
    io.DisplayFramebufferScale = ImVec2(1.0f, 1.0f);
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    for (bool& down : io.MouseDown) down = false;
    io.MouseWheel = io.MouseWheelH = 0;
  }
  ImGui::NewFrame();
}

void Window::end_frame(bool swap) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  ImGui::Render();
  if (render_scale_ != 1.0f) return;  // only capture() draws a scaled frame
  int w = 0, h = 0;
  framebuffer_size(w, h);
  glViewport(0, 0, w, h);
  const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  glClearColor(bg.x * 0.8f, bg.y * 0.8f, bg.z * 0.8f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (timed_) glFinish();
  const auto t1 = clock::now();
  if (swap) glfwSwapBuffers(window_);
  if (timed_) glFinish();
  render_seconds_ = std::chrono::duration<double>(t1 - t0).count();
  swap_seconds_ = std::chrono::duration<double>(clock::now() - t1).count();
}

std::vector<uint8_t> Window::capture(int& width, int& height) {
  framebuffer_size(width, height);
  if (render_scale_ != 1.0f) {  // the display ImGui drew, whole pixels
    const ImVec2 d = ImGui::GetIO().DisplaySize;
    width = static_cast<int>(d.x);
    height = static_cast<int>(d.y);
  }
  {
    gl::StateGuard guard;
    capture_fbo_.resize(width, height);
    capture_fbo_.bind();
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x * 0.8f, bg.y * 0.8f, bg.z * 0.8f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  }
  std::vector<uint8_t> bottom_up = capture_fbo_.read_pixels_rgba8();
  std::vector<uint8_t> out(bottom_up.size());
  const size_t row = static_cast<size_t>(width) * 4;
  for (int y = 0; y < height; ++y)
    std::copy(bottom_up.begin() + static_cast<long>((height - 1 - y) * row),
              bottom_up.begin() + static_cast<long>((height - y) * row),
              out.begin() + static_cast<long>(y * row));
  for (size_t i = 3; i < out.size(); i += 4) out[i] = 255;  // opaque PNG
  return out;
}

}  // namespace ts::app
