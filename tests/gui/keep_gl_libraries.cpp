// Under AddressSanitizer only: the X, GL and Mesa libraries that GLFW and
// the GL loader open at run time stay loaded until the process exits.
// glfwTerminate otherwise unloads them while they still hold allocations
// for the life of the process (per-display and per-driver state): once the
// library that pointed at them is gone, LeakSanitizer reports them as leaks
// at exit, with stacks into unloaded code that name no library, so they
// could be neither told apart from TokenScope's leaks nor suppressed by
// library name. Kept loaded, that memory stays reachable and is not
// reported; a real leak, TokenScope's or a library's, still is.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling
#define TS_KEEP_GL_LIBRARIES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(TS_KEEP_GL_LIBRARIES)
#include <GLFW/glfw3.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include "app/render/window.h"

namespace {

int keep_loaded(dl_phdr_info* info, size_t, void*) {
  // RTLD_NOLOAD: only a library already loaded; RTLD_NODELETE: never unloaded.
  if (info->dlpi_name && *info->dlpi_name)
    dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  return 0;
}

// Opens one hidden window as the app's (GL 3.3 core) so that the GL driver
// is loaded, then marks every library loaded by then as never unloaded.
class KeepGlLibraries : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!ts::app::display_available() || !glfwInit()) return;
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
    if (GLFWwindow* w = glfwCreateWindow(64, 64, "", nullptr, nullptr)) {
      glfwMakeContextCurrent(w);
      dl_iterate_phdr(keep_loaded, nullptr);
      glfwMakeContextCurrent(nullptr);
      glfwDestroyWindow(w);
    }
    glfwDefaultWindowHints();
    glfwTerminate();
  }
};

const ::testing::Environment* const kKeep =
    ::testing::AddGlobalTestEnvironment(new KeepGlLibraries);

}  // namespace
#endif
