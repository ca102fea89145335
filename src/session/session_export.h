#pragma once
// The whole session as one JSON document: model, prompt, lanes, every step.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "session/session.h"
#include "trace/json_export.h"

namespace ts {

nlohmann::json session_to_json(const Session& session, const JsonExportOptions& options = {});
// Throws ts::Error when the file cannot be written.
void write_session_json(const Session& session, const std::filesystem::path& file,
                        const JsonExportOptions& options = {});

}  // namespace ts
