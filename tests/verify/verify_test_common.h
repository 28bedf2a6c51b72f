// What the pipeline's unit tests share (verify_pipeline_test, verify_policy_test,
// verify_sandbox_test, verify_generate_test: one binary, one file per concern):
// sample programs, fixtures, pipeline and sandbox options, a planted secret file.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <random>
#include <sstream>
#include "common/error.h"
#include <bpf/bpf.h>
#include "verify/bpf_loader.h"
#include "verify/fixtures.h"
#include "verify/generate.h"
#include "verify/include_tree.h"
#include "verify/pipeline.h"
#include "verify/policy.h"
#include "verify/result_json.h"
#include "verify/sandbox_compiler.h"
#include "verify/verifier_log.h"
using namespace qwen3::verify;

namespace verify_test {

inline const char* kGoodProgram = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int drop_arp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
)";

// The same program without the bounds check: the verifier rejects line 12.
inline const char* kBrokenProgram = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int drop_arp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_DROP;
	return data_end ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
)";

inline std::vector<Fixture> arp_fixtures() {
  const std::string macs = "020000000002020000000001";
  return {{"arp", macs + "0806" + std::string(56, '0'), "XDP_DROP", ""},
          {"ipv4", macs + "0800" + "4500001c000000004011" + std::string(36, '0'), "XDP_PASS", ""}};
}

inline PipelineOptions test_options() {
  PipelineOptions o;
  o.data_dir = QWEN3_VERIFY_TEST_DATA_DIR;
  o.compile_timeout_ms = 10000;
  return o;
}

inline SandboxConfig sandbox_config(SandboxMode mode = SandboxMode::namespaces) {
  SandboxConfig c;
  c.mode = mode;
  c.include_dir = prepare_include_tree(QWEN3_VERIFY_TEST_DATA_DIR);
  c.timeout_ms = 10000;
  return c;
}

struct SecretFile {
  std::string path, marker;
  SecretFile() {
    std::random_device rd;
    std::ostringstream m;
    m << "SANDBOX-SECRET-" << std::hex << rd() << rd();
    marker = m.str();
    char tmpl[] = "/tmp/qwen3-sandbox-secret-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    std::string content = "int x = 1; // " + marker + "\n";
    EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    fchmod(fd, 0644);  // world-readable: only the sandbox can hide it
    close(fd);
  }
  ~SecretFile() { unlink(path.c_str()); }
};

inline std::string program_with(const std::string& extra) {
  return "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n" + extra +
         "\nSEC(\"xdp\") int p(struct xdp_md *ctx) { return XDP_PASS; }\nchar LICENSE[] SEC(\"license\") = \"GPL\";\n";
}

}  // namespace verify_test

using namespace verify_test;
