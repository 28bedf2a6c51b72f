// SIGHUP: re-read the configuration, apply the keys the table marks
// OnReload::apply, keep the others and say which of them need a restart (the
// log, and GetStatus through `restart_needed`).
#pragma once

#include "app/flags.h"
#include "service/config.h"
#include "service/config_reload.h"
#include "service/inference.h"
#include "listener/listener.h"
#include "service/model_host.h"

namespace qwen3 {

void reload(const Flags& flags, DaemonConfig& current, ModelHost& host, Listener& listener, InferenceCore& core,
            RestartNeeded& restart_needed);

}  // namespace qwen3
