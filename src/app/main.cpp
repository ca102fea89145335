// tokenscope: the visualizer window.
#include <cstdio>
#include <iostream>

#include "app/app.h"
#include "util/error.h"

int main(int argc, char** argv) {
  try {
    const ts::app::AppOptions o = ts::app::parse_app_options(argc, argv);
    if (o.help) {
      std::cout << ts::app::app_help();
      return 0;
    }
    if (!o.layout.empty() && !ts::app::is_layout_name(o.layout))
      throw ts::Error("--layout: unknown layout '" + o.layout + "' (see --help)");
    if (o.bench_frames > 0) return ts::app::run_frame_benchmark(o);
    ts::app::check_lanes_for_model(o);  // before any window opens, headless ones too
    if (!o.screenshot.empty()) return ts::app::run_screenshot(o);
    ts::app::install_signal_handlers();
    ts::app::App app(o);
    if (!o.open.empty())
      app.open_session(o.open, o.lane);  // a file it cannot read: one line, exit 2
    else
      app.load_model_async();
    const int status = app.run();
    // A model that never loaded (a broken file: NaN weights, a bad config)
    // was shown in the window; it is bad input all the same: said, exit 2.
    ts::app::Controller& ctl = app.controller();
    if (status == 0 && o.open.empty() && ctl.worker() == nullptr && !ctl.loading() &&
        !ctl.error().empty()) {
      std::fprintf(stderr, "tokenscope: %s\n", ctl.error().c_str());
      return 2;
    }
    return status;
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "tokenscope: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenscope: internal error: %s\n", e.what());
    return 3;
  }
}
