// qwen3-bpf-exec-prompt: loads and attaches the example kernel client
// (exec_prompt.bpf.c) against a running qwen3-bpfd's pinned maps (the kernel
// path: kd_requests, kd_bell, kd_state), pins its link and exits: the program
// then stays attached with no process of ours, and every exec is answered by
// the kernel alone.
//
//   qwen3-bpf-exec-prompt attach DIR COMM SESSION [MAX_TOKENS] [--broker]
//                                    --broker: through the daemon's ring instead (to compare)
//   qwen3-bpf-exec-prompt read   DIR SESSION     the session's kd_results slot, as text
//   qwen3-bpf-exec-prompt detach DIR             unpins the link (detaches)
//
// DIR is the daemon's kernel_client_pin_dir. Needs root (the pins are 0600).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <algorithm>

#include "exec_prompt.skel.h"
#include "kclient_abi.h"

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "qwen3-bpf-exec-prompt: %s\n", what.c_str());
  return 1;
}

int attach(const std::string& dir, const std::string& comm, const std::string& session, int max_tokens, bool broker) {
  if (comm.empty() || comm.size() > 15) return fail("COMM must be 1..15 bytes (the kernel's task name)");
  if (session.empty() || session.size() > QK_SESSION_BYTES) return fail("SESSION must be 1..32 bytes");
  int fds[4];
  const char* names[4] = {"kd_requests", "kd_bell", "kd_state", "qk_submit"};
  for (int i = 0; i < 4; i++) {
    fds[i] = bpf_obj_get((dir + "/" + names[i]).c_str());
    if (fds[i] < 0)
      return fail("cannot open " + dir + "/" + names[i] + ": " + std::strerror(errno) +
                  " (is qwen3-bpfd running with kernel_client_pin_dir = " + dir + " and driver = auto or kernel?)");
  }
  exec_prompt* skel = exec_prompt__open();
  if (!skel) return fail("cannot open the BPF object");
  std::memcpy(const_cast<char*>(skel->rodata->TARGET), comm.data(), comm.size());
  std::memcpy(const_cast<char*>(skel->rodata->SESSION), session.data(), session.size());
  skel->rodata->MAX_TOKENS = static_cast<__u16>(max_tokens);
  skel->rodata->REQUEST_BASE = static_cast<__u32>(time(nullptr)) | 1;
  skel->rodata->BROKER = broker ? 1 : 0;
  bpf_map* maps[4] = {skel->maps.kd_requests, skel->maps.kd_bell, skel->maps.kd_state, skel->maps.qk_submit};
  for (int i = 0; i < 4; i++)
    if (int err = bpf_map__reuse_fd(maps[i], fds[i]))
      return fail(std::string("reuse ") + names[i] + ": " + std::strerror(-err));
  if (int err = exec_prompt__load(skel)) return fail("load: " + std::string(std::strerror(-err)));
  bpf_link* link = bpf_program__attach_trace(skel->progs.on_exec);
  if (!link) return fail("attach to sched_process_exec: " + std::string(std::strerror(errno)));
  const std::string pin = dir + (broker ? "/exec_prompt_link_broker" : "/exec_prompt_link");
  if (int err = bpf_link__pin(link, pin.c_str())) return fail("pin " + pin + ": " + std::strerror(-err));
  std::printf("attached: every exec of '%s' asks session %s; link pinned at %s\n", comm.c_str(), session.c_str(),
              pin.c_str());
  return 0;  // the pinned link keeps the program attached after we exit
}

int read_slot(const std::string& dir, const std::string& session) {
  const int sessions = bpf_obj_get((dir + "/kd_sessions").c_str());
  const int results = bpf_obj_get((dir + "/kd_results").c_str());
  if (sessions < 0 || results < 0) return fail("cannot open the pinned maps in " + dir + ": " + std::strerror(errno));
  for (__u32 k = 0; k < QK_KD_SESSIONS; ++k) {
    qk_kd_session s{};
    if (bpf_map_lookup_elem(sessions, &k, &s) != 0 || !s.state) continue;
    if (std::string(s.session, strnlen(s.session, sizeof s.session)) != session) continue;
    static qk_result_slot slot;
    if (bpf_map_lookup_elem(results, &k, &slot) != 0) return fail("cannot read kd_results " + std::to_string(k));
    std::string text;
    for (__u32 seq = 0; seq < slot.produced && seq < QK_RING; ++seq)
      text.append(slot.ring[seq].text, std::min<size_t>(slot.ring[seq].text_len, QK_TOK_TEXT_BYTES));
    std::printf("request %u finish %u error %u tokens %u prompt %u positions %u\n%s\n", slot.request_id, slot.finish,
                slot.error, slot.tokens, slot.prompt_tokens, slot.positions, text.c_str());
    return 0;
  }
  return fail("no kernel-path session " + session);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  const bool broker = argc > 2 && std::string(argv[argc - 1]) == "--broker";
  if (broker) argc--;
  if (cmd == "attach" && (argc == 5 || argc == 6))
    return attach(argv[2], argv[3], argv[4], argc == 6 ? std::atoi(argv[5]) : 16, broker);
  if (cmd == "read" && argc == 4) return read_slot(argv[2], argv[3]);
  if (cmd == "detach" && argc == 3) {
    const std::string pin = std::string(argv[2]) + "/exec_prompt_link";
    ::unlink((pin + "_broker").c_str());
    if (::unlink(pin.c_str()) != 0 && errno != ENOENT) return fail("unlink " + pin + ": " + std::strerror(errno));
    return 0;
  }
  std::fprintf(stderr,
               "usage: qwen3-bpf-exec-prompt attach DIR COMM SESSION [MAX_TOKENS] [--broker]\n"
               "       qwen3-bpf-exec-prompt read DIR SESSION\n"
               "       qwen3-bpf-exec-prompt detach DIR\n");
  return 2;
}
