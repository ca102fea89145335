#include "app/render/gl.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "util/error.h"

namespace ts::app::gl {

namespace {
int64_t g_error_count = 0;
std::string g_last_error;

const char* error_name(GLenum e) {
  switch (e) {
    case GL_INVALID_ENUM:
      return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE:
      return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION:
      return "GL_INVALID_OPERATION";
    case GL_OUT_OF_MEMORY:
      return "GL_OUT_OF_MEMORY";
    case GL_INVALID_FRAMEBUFFER_OPERATION:
      return "GL_INVALID_FRAMEBUFFER_OPERATION";
    default:
      return "GL error";
  }
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open shader");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

GLuint compile(GLenum type, const std::string& source, const std::string& label) {
  GLuint shader = glCreateShader(type);
  const char* src = source.c_str();
  glShaderSource(shader, 1, &src, nullptr);
  glCompileShader(shader);
  GLint ok = 0;
  glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    GLint len = 0;
    glGetShaderiv(shader, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetShaderInfoLog(shader, len, nullptr, log.data());
    glDeleteShader(shader);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    for (char& c : log)
      if (c == '\n') c = ' ';
    throw Error(label + ": shader does not compile: " + log);
  }
  return shader;
}
}  // namespace

int check_errors(const char* where) {
  int n = 0;
  for (GLenum e = glGetError(); e != GL_NO_ERROR; e = glGetError()) {
    ++n;
    g_last_error = std::string(error_name(e)) + " at " + where;
    if (n > 32) break;  // a lost context reports forever
  }
  g_error_count += n;
  return n;
}
int64_t error_count() { return g_error_count; }
const std::string& last_error_text() { return g_last_error; }

// ---- Texture ----

Texture::~Texture() { release(); }
Texture::Texture(Texture&& o) noexcept
    : id_(std::exchange(o.id_, 0)),
      width_(o.width_),
      height_(o.height_),
      format_(o.format_),
      mipmaps_(o.mipmaps_) {}
Texture& Texture::operator=(Texture&& o) noexcept {
  if (this != &o) {
    release();
    id_ = std::exchange(o.id_, 0);
    width_ = o.width_;
    height_ = o.height_;
    format_ = o.format_;
    mipmaps_ = o.mipmaps_;
  }
  return *this;
}
void Texture::release() {
  if (id_) glDeleteTextures(1, &id_);
  id_ = 0;
  width_ = height_ = 0;
}

void Texture::ensure(GLenum internal_format, int width, int height) {
  if (!id_) {
    glGenTextures(1, &id_);
    glBindTexture(GL_TEXTURE_2D, id_);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  }
  glBindTexture(GL_TEXTURE_2D, id_);
  if (width != width_ || height != height_ || internal_format != format_) {
    const GLenum fmt = internal_format == GL_R32F ? GL_RED : GL_RGBA;
    const GLenum type = internal_format == GL_R32F ? GL_FLOAT : GL_UNSIGNED_BYTE;
    glTexImage2D(GL_TEXTURE_2D, 0, static_cast<GLint>(internal_format), width, height, 0, fmt, type,
                 nullptr);
    width_ = width;
    height_ = height;
    format_ = internal_format;
  }
}

void Texture::upload_r32f(const float* data, int width, int height) {
  ensure(GL_R32F, width, height);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width, height, GL_RED, GL_FLOAT, data);
  check_errors("upload_r32f");
}

void Texture::upload_rgba8(const uint8_t* data, int width, int height) {
  ensure(GL_RGBA8, width, height);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, data);
  check_errors("upload_rgba8");
}

void Texture::allocate_rgba8(int width, int height) { ensure(GL_RGBA8, width, height); }

void Texture::set_filter(bool linear_min, bool linear_mag, bool mipmaps) {
  if (!id_) return;
  mipmaps_ = mipmaps;
  glBindTexture(GL_TEXTURE_2D, id_);
  const GLint min = mipmaps ? (linear_min ? GL_LINEAR_MIPMAP_LINEAR : GL_NEAREST_MIPMAP_NEAREST)
                            : (linear_min ? GL_LINEAR : GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, min);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, linear_mag ? GL_LINEAR : GL_NEAREST);
}

void Texture::generate_mipmaps() {
  if (!id_ || !mipmaps_) return;
  glBindTexture(GL_TEXTURE_2D, id_);
  glGenerateMipmap(GL_TEXTURE_2D);
}

std::vector<uint8_t> Texture::read_rgba8() const {
  std::vector<uint8_t> out(static_cast<size_t>(width_) * height_ * 4);
  if (!id_) return out;
  glBindTexture(GL_TEXTURE_2D, id_);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glGetTexImage(GL_TEXTURE_2D, 0, GL_RGBA, GL_UNSIGNED_BYTE, out.data());
  check_errors("read_rgba8");
  return out;
}

std::vector<float> Texture::read_r32f() const {
  std::vector<float> out(static_cast<size_t>(width_) * height_);
  if (!id_) return out;
  glBindTexture(GL_TEXTURE_2D, id_);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glGetTexImage(GL_TEXTURE_2D, 0, GL_RED, GL_FLOAT, out.data());
  check_errors("read_r32f");
  return out;
}

// ---- ShaderProgram ----

ShaderProgram::~ShaderProgram() {
  if (id_) glDeleteProgram(id_);
}
ShaderProgram::ShaderProgram(ShaderProgram&& o) noexcept : id_(std::exchange(o.id_, 0)) {}
ShaderProgram& ShaderProgram::operator=(ShaderProgram&& o) noexcept {
  if (this != &o) {
    if (id_) glDeleteProgram(id_);
    id_ = std::exchange(o.id_, 0);
  }
  return *this;
}

ShaderProgram ShaderProgram::from_source(const std::string& vertex, const std::string& fragment,
                                         const std::string& label) {
  GLuint vs = compile(GL_VERTEX_SHADER, vertex, label + " (vertex)");
  GLuint fs = 0;
  try {
    fs = compile(GL_FRAGMENT_SHADER, fragment, label + " (fragment)");
  } catch (...) {
    glDeleteShader(vs);
    throw;
  }
  GLuint prog = glCreateProgram();
  glAttachShader(prog, vs);
  glAttachShader(prog, fs);
  glLinkProgram(prog);
  glDeleteShader(vs);
  glDeleteShader(fs);
  GLint ok = 0;
  glGetProgramiv(prog, GL_LINK_STATUS, &ok);
  if (!ok) {
    char log[1024] = {0};
    glGetProgramInfoLog(prog, sizeof(log) - 1, nullptr, log);
    glDeleteProgram(prog);
    throw Error(label + ": shader program does not link: " + log);
  }
  check_errors("shader link");
  ShaderProgram p;
  p.id_ = prog;
  return p;
}

ShaderProgram ShaderProgram::from_files(const std::filesystem::path& vertex,
                                        const std::filesystem::path& fragment) {
  return from_source(read_text(vertex), read_text(fragment),
                     vertex.filename().string() + " + " + fragment.filename().string());
}

void ShaderProgram::use() const { glUseProgram(id_); }
GLint ShaderProgram::uniform(const char* name) const { return glGetUniformLocation(id_, name); }
void ShaderProgram::set(const char* name, int v) const { glUniform1i(uniform(name), v); }
void ShaderProgram::set(const char* name, float v) const { glUniform1f(uniform(name), v); }
void ShaderProgram::set(const char* name, int x, int y) const { glUniform2i(uniform(name), x, y); }
void ShaderProgram::set(const char* name, float x, float y, float z, float w) const {
  glUniform4f(uniform(name), x, y, z, w);
}

// ---- Framebuffer ----

Framebuffer::~Framebuffer() {
  if (fbo_) glDeleteFramebuffers(1, &fbo_);
}
Framebuffer::Framebuffer(Framebuffer&& o) noexcept
    : fbo_(std::exchange(o.fbo_, 0)), color_(std::move(o.color_)) {}
Framebuffer& Framebuffer::operator=(Framebuffer&& o) noexcept {
  if (this != &o) {
    if (fbo_) glDeleteFramebuffers(1, &fbo_);
    fbo_ = std::exchange(o.fbo_, 0);
    color_ = std::move(o.color_);
  }
  return *this;
}

void Framebuffer::resize(int width, int height) {
  if (fbo_ && width == color_.width() && height == color_.height()) return;
  color_.allocate_rgba8(width, height);
  if (!fbo_) glGenFramebuffers(1, &fbo_);
  GLint previous = 0;
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &previous);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, color_.id(), 0);
  const GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  glBindFramebuffer(GL_FRAMEBUFFER, static_cast<GLuint>(previous));
  check_errors("framebuffer resize");
  if (status != GL_FRAMEBUFFER_COMPLETE)
    throw Error("off-screen framebuffer " + std::to_string(width) + "x" + std::to_string(height) +
                " is incomplete");
}

void Framebuffer::bind() const {
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
  glViewport(0, 0, color_.width(), color_.height());
}

void Framebuffer::unbind() { glBindFramebuffer(GL_FRAMEBUFFER, 0); }

std::vector<uint8_t> Framebuffer::read_pixels_rgba8() const {
  std::vector<uint8_t> out(static_cast<size_t>(width()) * height() * 4);
  GLint previous = 0;
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &previous);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width(), height(), GL_RGBA, GL_UNSIGNED_BYTE, out.data());
  glBindFramebuffer(GL_FRAMEBUFFER, static_cast<GLuint>(previous));
  check_errors("read_pixels");
  return out;
}

// ---- FullscreenPass ----

FullscreenPass::~FullscreenPass() {
  if (vao_) glDeleteVertexArrays(1, &vao_);
}
void FullscreenPass::draw() {
  if (!vao_) glGenVertexArrays(1, &vao_);
  glBindVertexArray(vao_);
  glDrawArrays(GL_TRIANGLES, 0, 3);
}

// ---- StateGuard ----

StateGuard::StateGuard() {
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &fbo_);
  glGetIntegerv(GL_CURRENT_PROGRAM, &program_);
  glGetIntegerv(GL_VERTEX_ARRAY_BINDING, &vao_);
  glGetIntegerv(GL_ACTIVE_TEXTURE, &active_texture_);
  glActiveTexture(GL_TEXTURE0);
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &tex0_);
  glActiveTexture(GL_TEXTURE1);
  glGetIntegerv(GL_TEXTURE_BINDING_2D, &tex1_);
  glActiveTexture(static_cast<GLenum>(active_texture_));
  glGetIntegerv(GL_VIEWPORT, viewport_);
  blend_ = glIsEnabled(GL_BLEND);
  scissor_ = glIsEnabled(GL_SCISSOR_TEST);
  depth_ = glIsEnabled(GL_DEPTH_TEST);
  glDisable(GL_BLEND);
  glDisable(GL_SCISSOR_TEST);
  glDisable(GL_DEPTH_TEST);
}

StateGuard::~StateGuard() {
  glBindFramebuffer(GL_FRAMEBUFFER, static_cast<GLuint>(fbo_));
  glUseProgram(static_cast<GLuint>(program_));
  glBindVertexArray(static_cast<GLuint>(vao_));
  glActiveTexture(GL_TEXTURE1);
  glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(tex1_));
  glActiveTexture(GL_TEXTURE0);
  glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(tex0_));
  glActiveTexture(static_cast<GLenum>(active_texture_));
  glViewport(viewport_[0], viewport_[1], viewport_[2], viewport_[3]);
  if (blend_)
    glEnable(GL_BLEND);
  else
    glDisable(GL_BLEND);
  if (scissor_)
    glEnable(GL_SCISSOR_TEST);
  else
    glDisable(GL_SCISSOR_TEST);
  if (depth_)
    glEnable(GL_DEPTH_TEST);
  else
    glDisable(GL_DEPTH_TEST);
}

int max_render_side() {
  GLint max_tex = 0, max_view[2] = {0, 0};
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_tex);
  glGetIntegerv(GL_MAX_VIEWPORT_DIMS, max_view);
  return std::min<int>(max_tex, std::min(max_view[0], max_view[1]));
}

void finish() { glFinish(); }

void bind_texture(int unit, const Texture& texture) {
  glActiveTexture(GL_TEXTURE0 + unit);
  glBindTexture(GL_TEXTURE_2D, texture.id());
  glActiveTexture(GL_TEXTURE0);
}

}  // namespace ts::app::gl
