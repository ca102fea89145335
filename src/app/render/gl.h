#pragma once
// The thin OpenGL layer the panels use (in the spirit of Tracy's TracyTexture):
// a texture, a shader program, a framebuffer that renders into a texture, and
// an error counter. Everything is RAII and move-only; every call expects the
// window's GL 3.3 core context to be current. GL types stay inside src/app/;
// GL calls stay inside src/app/render/ (the rest of the window calls these).
#define GL_GLEXT_PROTOTYPES 1
#include <GL/gl.h>
#include <GL/glext.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ts::app::gl {

// Drains glGetError(); returns how many errors were pending and adds them to
// the process-wide count (tests check that it stays at zero).
int check_errors(const char* where);
int64_t error_count();
const std::string& last_error_text();

// The largest width or height an off-screen picture may have on this GPU:
// the smaller of its largest texture and its largest viewport.
int max_render_side();
// Waits until the GPU has done everything submitted so far (glFinish).
void finish();

class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(Texture&& other) noexcept;
  Texture& operator=(Texture&& other) noexcept;
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;

  // One float per texel (GL_R32F), row 0 first; reallocates when the size changes.
  void upload_r32f(const float* data, int width, int height);
  // Four bytes per texel (GL_RGBA8), row 0 first.
  void upload_rgba8(const uint8_t* data, int width, int height);
  // Uninitialised GL_RGBA8 storage (a render target).
  void allocate_rgba8(int width, int height);

  // Filtering when shown smaller / larger than one texel per pixel. With
  // mipmaps, call generate_mipmaps() after every change of the contents.
  void set_filter(bool linear_min, bool linear_mag, bool mipmaps);
  void generate_mipmaps();

  std::vector<uint8_t> read_rgba8() const;  // glGetTexImage, row 0 first
  std::vector<float> read_r32f() const;

  GLuint id() const { return id_; }
  int width() const { return width_; }
  int height() const { return height_; }
  bool valid() const { return id_ != 0; }
  // What ImGui::Image takes.
  void* imgui_id() const { return reinterpret_cast<void*>(static_cast<intptr_t>(id_)); }

 private:
  void ensure(GLenum internal_format, int width, int height);
  void release();
  GLuint id_ = 0;
  int width_ = 0;
  int height_ = 0;
  GLenum format_ = 0;
  bool mipmaps_ = false;
};

class ShaderProgram {
 public:
  ShaderProgram() = default;
  ~ShaderProgram();
  ShaderProgram(ShaderProgram&& other) noexcept;
  ShaderProgram& operator=(ShaderProgram&& other) noexcept;
  ShaderProgram(const ShaderProgram&) = delete;
  ShaderProgram& operator=(const ShaderProgram&) = delete;

  // Compiles and links; throws ts::Error with the file name and the driver's log.
  static ShaderProgram from_source(const std::string& vertex, const std::string& fragment,
                                   const std::string& label);
  static ShaderProgram from_files(const std::filesystem::path& vertex,
                                  const std::filesystem::path& fragment);

  void use() const;
  GLint uniform(const char* name) const;  // -1 when the shader does not use it
  void set(const char* name, int v) const;
  void set(const char* name, float v) const;
  void set(const char* name, int x, int y) const;
  void set(const char* name, float x, float y, float z, float w) const;
  GLuint id() const { return id_; }
  bool valid() const { return id_ != 0; }

 private:
  GLuint id_ = 0;
};

// A framebuffer object drawing into one RGBA8 texture.
class Framebuffer {
 public:
  Framebuffer() = default;
  ~Framebuffer();
  Framebuffer(Framebuffer&& other) noexcept;
  Framebuffer& operator=(Framebuffer&& other) noexcept;
  Framebuffer(const Framebuffer&) = delete;
  Framebuffer& operator=(const Framebuffer&) = delete;

  // (Re)allocates the colour texture when the size changes.
  void resize(int width, int height);
  void bind() const;     // binds it and sets the viewport to its size
  static void unbind();  // back to the window's framebuffer
  Texture& color() { return color_; }
  const Texture& color() const { return color_; }
  int width() const { return color_.width(); }
  int height() const { return color_.height(); }
  // Pixels of the colour attachment, bottom row first (GL order).
  std::vector<uint8_t> read_pixels_rgba8() const;

 private:
  GLuint fbo_ = 0;
  Texture color_;
};

// Binds `texture` to texture unit `unit` (a sampler uniform set to `unit`
// reads it); unit 0 is the active one afterwards.
void bind_texture(int unit, const Texture& texture);

// An empty vertex array: the shaders in shaders/ generate a full-screen
// triangle from gl_VertexID, so there is no vertex buffer.
class FullscreenPass {
 public:
  FullscreenPass() = default;
  ~FullscreenPass();
  FullscreenPass(const FullscreenPass&) = delete;
  FullscreenPass& operator=(const FullscreenPass&) = delete;
  void draw();

 private:
  GLuint vao_ = 0;
};

// Saves and restores the GL state an off-screen pass changes (framebuffer,
// viewport, program, texture bindings, blend, scissor), so a pass can run in
// the middle of a frame.
class StateGuard {
 public:
  StateGuard();
  ~StateGuard();
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  GLint fbo_ = 0, program_ = 0, vao_ = 0, active_texture_ = 0, tex0_ = 0, tex1_ = 0;
  GLint viewport_[4] = {0, 0, 0, 0};
  GLboolean blend_ = GL_FALSE, scissor_ = GL_FALSE, depth_ = GL_FALSE;
};

}  // namespace ts::app::gl
