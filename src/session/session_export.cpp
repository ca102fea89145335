#include "session/session_export.h"

#include <fstream>

#include "util/error.h"

namespace ts {

using nlohmann::json;

json session_to_json(const Session& session, const JsonExportOptions& options) {
  const Tokenizer& tok = session.tokenizer();
  const ModelConfig& cfg = session.engine().config();
  json prompt_tokens = json::array();
  for (const TokenSpan& t : session.prompt_tokens())
    prompt_tokens.push_back({{"id", t.id},
                             {"text", tok.token_bytes(t.id)},
                             {"byte_begin", t.byte_begin},
                             {"byte_end", t.byte_end}});
  json lanes = json::array();
  for (const Lane& lane : session.lanes())
    lanes.push_back({{"id", lane.id},
                     {"strategy", format_strategy(lane.params)},
                     {"generated", lane.generated},
                     {"text", tok.decode(lane.generated)},
                     {"stop_reason", lane.stop_reason},
                     {"parent", lane.parent},
                     {"branch_step", lane.branch_step},
                     {"first_step", lane.first_step},
                     {"closed", lane.closed}});
  json steps = json::array();
  for (const StepTracePtr& s : session.history()) steps.push_back(step_to_json(*s, options));
  return {{"format", "tokenscope-session/1"},
          {"model",
           {{"vocab_size", cfg.vocab_size},
            {"n_ctx", cfg.n_ctx},
            {"n_embd", cfg.n_embd},
            {"n_head", cfg.n_head},
            {"n_layer", cfg.n_layer},
            {"parameters", cfg.parameter_count()},
            {"source", session.engine().weights().source}}},
          {"backend", session.engine().backend().name()},
          {"device", session.engine().backend().device_name()},
          {"kv_cache", session.options().kv_cache},
          {"prompt", session.prompt_text()},
          {"prompt_tokens", prompt_tokens},
          {"lanes", lanes},
          {"state", state_name(session.state())},
          {"steps", steps}};
}

void write_session_json(const Session& session, const std::filesystem::path& file,
                        const JsonExportOptions& options) {
  std::ofstream out(file);
  if (!out) throw Error(file.string() + ": cannot open for writing");
  // Token pieces can be partial UTF-8: replace rather than throw while dumping.
  out << session_to_json(session, options).dump(1, ' ', false, json::error_handler_t::replace)
      << "\n";
  if (!out) throw Error(file.string() + ": write failed");
}

}  // namespace ts
